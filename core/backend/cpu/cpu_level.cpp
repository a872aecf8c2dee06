#include "core/backend/cpu/cpu_level.h"

#include <cstdlib>
#include <mutex>

#include "core/errors.h"

namespace dtrain::cpu {

Features detectFeatures() {
  Features f;
#if defined(__x86_64__)
  // libgcc's checks include the operating system's (XGETBV): a kernel that
  // does not save the 512-bit registers reports no AVX-512 here.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::Avx2: return "avx2";
    case Level::Avx512: return "avx512";
    case Level::Avx512Bf16: return "avx512_bf16";
  }
  return "?";
}

std::optional<Level> parseLevel(std::string_view name) {
  for (Level l : {Level::Avx2, Level::Avx512, Level::Avx512Bf16})
    if (name == levelName(l)) return l;
  return std::nullopt;
}

Level bestLevel(const Features& have) {
  if (have.avx512_bf16) return Level::Avx512Bf16;
  if (have.avx512) return Level::Avx512;
  return Level::Avx2;
}

Level chooseLevel(const Features& have, const char* requested) {
  const Level best = bestLevel(have);
  if (!requested || !*requested) return best;
  const std::optional<Level> asked = parseLevel(requested);
  if (!asked)
    throw ConfigError(std::string("DTRAIN_CPU=") + requested +
                      ": not a CPU kernel level; use avx2, avx512 or avx512_bf16, or unset it for the best this "
                      "CPU runs (" + levelName(best) + ")");
  if (static_cast<int>(*asked) > static_cast<int>(best))
    throw ConfigError(std::string("DTRAIN_CPU=") + requested + ": this CPU runs at most " + levelName(best) +
                      "; a level can be lowered, not raised");
  return *asked;
}

namespace {

struct Chosen {
  Level level = Level::Avx2;
  Level best = Level::Avx2;
  std::string error;  // set when DTRAIN_CPU could not be honoured
};

const Chosen& chosen() {
  static const Chosen c = [] {
    Chosen out;
    const Features have = detectFeatures();
    out.best = bestLevel(have);
    try {
      out.level = chooseLevel(have, std::getenv("DTRAIN_CPU"));
    } catch (const ConfigError& e) {
      out.error = e.what();
    }
    return out;
  }();
  return c;
}

}  // namespace

Level activeLevel() {
  const Chosen& c = chosen();
  if (!c.error.empty()) throw ConfigError(c.error);
  return c.level;
}

std::string describeActiveLevel() {
  const Level level = activeLevel();
  std::string s = levelName(level);
  switch (level) {
    case Level::Avx2:
      s += " (fp32 kernels on 256-bit vectors; matrix products by OpenBLAS's Haswell kernels)";
      break;
    case Level::Avx512:
    case Level::Avx512Bf16:
      s += " (fp32 kernels on 512-bit vectors; matrix products by oneDNN)";
      break;
  }
  const Level best = chosen().best;
  if (level != best) s += std::string("; lowered by DTRAIN_CPU from ") + levelName(best);
  return s;
}

}  // namespace dtrain::cpu
