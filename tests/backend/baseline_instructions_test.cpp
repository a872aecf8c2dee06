// One binary for a whole cluster: outside the functions compiled for the
// AVX-512 levels (namespaces named avx512...), the dtrain binary holds no
// instruction an AVX2-only host lacks. The danger this guards against is
// silent: an inline function that both a baseline file and an *_avx512.cpp
// file instantiate is kept once, and the linker may keep the AVX-512 copy,
// which would then die with SIGILL on an older host and pass every test here.
#include <doctest/doctest.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>

#include "tests/train/run_helpers.h"

namespace dtrain {
namespace {

// Registers and mnemonics only EVEX (AVX-512) encodes: 512-bit and mask
// registers, the upper sixteen vector registers, embedded broadcasts, and
// AVX-512-only instructions that can work on xmm/ymm registers.
const std::regex kAvx512Only(
    R"(%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|\{1to|\bvpternlog|\bvperm[ti]2|\bvalign[dq]|\bvdpbf16|)"
    R"(\bvcvtne2?ps2bf16|\bvrndscale|\bvscalef|\bvgetexp|\bvgetmant|\bvp?compress|\bvp?expand|\bvpmullq|\bvpsraq|)"
    R"(\bvpro[lr]v?[dq]|\bvshuf[if](32x4|64x2)|\bv(insert|extract)[if](32x4|32x8|64x2|64x4)|)"
    R"(\bvbroadcast[if](32x2|32x4|32x8|64x2|64x4)|\bvpbroadcastm|\bvpmovm2|\bvpmov[a-z0-9]*2m\b|\bk(mov|or|and|xor|not|shift|test|add|unpck)[bwdq]?\b)");

TEST_CASE("no AVX-512 instruction outside the AVX-512 levels' functions") {
  const std::string cmd = std::string("objdump -d -C --no-show-raw-insn '") + DTRAIN_BINARY + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  const std::regex header(R"(^[0-9a-f]+ <(.*)>:$)");
  std::set<std::string> leaked;
  std::string function, line;
  int lines = 0, inside = 0;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) {
    line = buf;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    ++lines;
    std::smatch m;
    if (line.size() > 2 && line[0] != ' ' && std::regex_match(line, m, header)) {
      function = m[1];
      continue;
    }
    // Vector and mask instructions start with v or k: the regex runs on those only.
    if (function.empty() || (line.find("\tv") == std::string::npos && line.find("\tk") == std::string::npos))
      continue;
    if (!std::regex_search(line, kAvx512Only)) continue;
    if (function.find("avx512") != std::string::npos) {
      ++inside;
      continue;
    }
    if (leaked.size() < 20) leaked.insert(function + ": " + line);
  }
  const int status = ::pclose(p);
  if (lines == 0) {
    MESSAGE("objdump is not installed (binutils): the binary's instructions were not checked");
    return;
  }
  CHECK(status == 0);
  for (const std::string& l : leaked) FAIL_CHECK("an AVX-512 instruction outside an avx512 function: ", l);
  CHECK(leaked.empty());
  CHECK(inside > 0);  // the AVX-512 kernels are there, and the scan sees them
}

}  // namespace
}  // namespace dtrain
