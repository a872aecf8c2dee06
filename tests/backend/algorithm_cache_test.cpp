// The run directory's record of timed GPU algorithms: what is saved reads
// back equal on the same GPU and libraries, another GPU or library version
// starts empty, a corrupt or truncated file is named in one note and
// ignored, and a failed save leaves the previous file whole.
#include "core/backend/algorithm_cache.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "core/backend/algorithm_keys.h"
#include "core/errors.h"
#include "core/io/file_source.h"
#include "tests/common/temp_dir.h"

using namespace dtrain;
using dtrain::testing::TempDir;

namespace {

AlgorithmSource h200() { return AlgorithmSource{"NVIDIA H200", 91900, 130100}; }

AlgorithmChoice convChoice() {
  AlgorithmChoice c;
  c.algo = 5;
  c.math = 1;
  c.workspace_bytes = 123456789;
  c.time_ms = 0.1 + 0.2;  // not a short decimal: must read back exactly
  return c;
}

AlgorithmChoice gemmChoice() {
  AlgorithmChoice c;
  c.algo = 21;
  c.workspace_bytes = 4 << 20;
  c.time_ms = 0.0417;
  c.config = {21, 18, 4, 2, 0, 0, 11, 0, 0};
  return c;
}

const std::string kConvKey = "conv bwd-filter n1024 c32x14x14 f64 k3x3 s1x1 p1x1 g1 fp32 deterministic";
const std::string kGemmKey = "gemm tn m3136 n128 k1024 ld128/3136/3136 accumulate align256/256/64 fp32";

// A cache at `path` holding the two choices, saved for `source`.
void writeTwoChoices(const std::string& path, const AlgorithmSource& source) {
  AlgorithmCache cache(path);
  cache.open(source);
  cache.record(kConvKey, convChoice());
  cache.record(kGemmKey, gemmChoice());
  REQUIRE(cache.save());
}

}  // namespace

TEST_CASE("saved choices read back equal on the same GPU and libraries, without timing again") {
  TempDir dir;
  const std::string path = dir / kAlgorithmCacheFileName;
  writeTwoChoices(path, h200());
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));  // renamed into place

  AlgorithmCache again(path);
  again.open(h200());
  CHECK(again.takeNotes().empty());
  CHECK(again.size() == 2);
  REQUIRE(again.find(kConvKey).has_value());
  CHECK(*again.find(kConvKey) == convChoice());
  CHECK(again.find(kConvKey)->time_ms == 0.1 + 0.2);
  REQUIRE(again.find(kGemmKey).has_value());
  CHECK(again.find(kGemmKey)->config == std::vector<int64_t>{21, 18, 4, 2, 0, 0, 11, 0, 0});
  CHECK_FALSE(again.find("conv fwd n1").has_value());
  // Nothing new: nothing to write. The same choice again is not new either.
  CHECK_FALSE(again.save());
  again.record(kConvKey, convChoice());
  CHECK_FALSE(again.save());
  AlgorithmChoice faster = convChoice();
  faster.algo = 1;
  again.record(kConvKey, faster);
  CHECK(again.save());

  AlgorithmCache third(path);
  third.open(h200());
  CHECK(third.find(kConvKey)->algo == 1);
  CHECK(third.find(kGemmKey)->algo == 21);
}

TEST_CASE("the file names its GPU and library versions, and holds one entry per key") {
  std::map<std::string, AlgorithmChoice> choices{{kConvKey, convChoice()}};
  const std::string text = AlgorithmCache::encode(h200(), choices);
  CHECK(text ==
        "{\"format\":\"dtrain gpu algorithms\",\"version\":1,\"gpu\":\"NVIDIA H200\",\"cudnn_version\":91900,"
        "\"cublaslt_version\":130100,\"choices\":{\"" +
            kConvKey +
            "\":{\"algo\":5,\"math\":1,\"workspace_bytes\":123456789,\"time_ms\":0.30000000000000004,"
            "\"config\":[]}}}\n");
  AlgorithmSource source;
  std::map<std::string, AlgorithmChoice> read;
  std::string problem;
  REQUIRE(parseAlgorithmFile(text, &source, &read, &problem));
  CHECK(source == h200());
  CHECK(read == choices);
}

TEST_CASE("a file timed on another GPU, cuDNN or cuBLASLt is ignored, with a note, and rewritten") {
  TempDir dir;
  const std::string path = dir / kAlgorithmCacheFileName;
  for (const AlgorithmSource& other :
       {AlgorithmSource{"NVIDIA H100 80GB HBM3", 91900, 130100},
        AlgorithmSource{"NVIDIA H200", 91300, 130100}, AlgorithmSource{"NVIDIA H200", 91900, 120900}}) {
    CAPTURE(other.describe());
    writeTwoChoices(path, other);
    AlgorithmCache cache(path);
    cache.open(h200());
    CHECK(cache.size() == 0);
    const std::vector<std::string> notes = cache.takeNotes();
    REQUIRE(notes.size() == 1);
    CHECK(notes[0] == path + " was timed on " + other.describe() +
                          ", this is NVIDIA H200 with cuDNN 9.19.0 and cuBLASLt 13.1.0: timing the GPU "
                          "algorithms afresh");
    CHECK(cache.takeNotes().empty());
    // The next save replaces the file with this GPU's choices.
    cache.record(kConvKey, convChoice());
    CHECK(cache.save());
    AlgorithmCache reread(path);
    reread.open(h200());
    CHECK(reread.size() == 1);
    CHECK(reread.takeNotes().empty());
  }
}

TEST_CASE("a corrupt or truncated file is named in one note and the algorithms are timed afresh") {
  TempDir dir;
  const std::string path = dir / kAlgorithmCacheFileName;
  writeTwoChoices(path, h200());
  const std::string whole = readWholeFile(path);
  const std::string good_choice =
      "{\"algo\":5,\"math\":1,\"workspace_bytes\":0,\"time_ms\":0.5,\"config\":[]}";
  auto file = [&](const std::string& choice) {
    return "{\"format\":\"dtrain gpu algorithms\",\"version\":1,\"gpu\":\"NVIDIA "
           "H200\",\"cudnn_version\":91900,"
           "\"cublaslt_version\":130100,\"choices\":{\"k\":" +
           choice + "}}";
  };
  {  // the frame the bad cases below break one thing of
    AlgorithmSource source;
    std::map<std::string, AlgorithmChoice> read;
    std::string problem;
    REQUIRE(parseAlgorithmFile(file(good_choice), &source, &read, &problem));
    CHECK(read.at("k").time_ms == 0.5);
  }

  struct Case {
    std::string name, text, problem;
  };
  const std::vector<Case> cases = {
      {"truncated", whole.substr(0, whole.size() / 2), "invalid JSON at byte"},
      {"empty", "", "invalid JSON at byte 0"},
      {"another format", "{\"format\":\"safetensors\"}", "it is not a \"dtrain gpu algorithms\" file"},
      {"a later version", "{\"format\":\"dtrain gpu algorithms\",\"version\":2}",
       "version 2 is not the 1 this dtrain reads"},
      {"no gpu", "{\"format\":\"dtrain gpu algorithms\",\"version\":1}", "the file has no gpu"},
      {"a choice without algo", file("{\"math\":1}"), "choice 'k' has no algo"},
      {"a fractional algo",
       file("{\"algo\":1.5,\"math\":1,\"workspace_bytes\":0,\"time_ms\":1,\"config\":[]}"), ""},
      {"a negative workspace",
       file("{\"algo\":1,\"math\":1,\"workspace_bytes\":-1,\"time_ms\":1,\"config\":[]}"),
       "choice 'k' has a negative workspace or time"},
      {"a config of strings",
       file("{\"algo\":1,\"math\":1,\"workspace_bytes\":0,\"time_ms\":1,\"config\":[\"x\"]}"), ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    dir.write(kAlgorithmCacheFileName, c.text);
    AlgorithmCache cache(path);
    CHECK_NOTHROW(cache.open(h200()));
    CHECK(cache.size() == 0);
    const std::vector<std::string> notes = cache.takeNotes();
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].rfind(path + " is corrupt (", 0) == 0);
    CHECK(notes[0].find(c.problem) != std::string::npos);
    CHECK(notes[0].find("); timing the GPU algorithms afresh") != std::string::npos);
    CHECK(notes[0].find('\n') == std::string::npos);
    // The next save replaces it with a readable file, even with nothing timed yet.
    CHECK(cache.save());
    AlgorithmCache reread(path);
    reread.open(h200());
    CHECK(reread.takeNotes().empty());
  }
}

TEST_CASE("a save that fails halfway leaves the previous file whole; a stale temporary file is ignored") {
  TempDir dir;
  const std::string path = dir / kAlgorithmCacheFileName;
  writeTwoChoices(path, h200());
  const std::string before = readWholeFile(path);

  // A run killed while writing leaves at most the temporary file behind.
  dir.write(std::string(kAlgorithmCacheFileName) + ".tmp", "{\"format\":\"dtrain gpu alg");
  AlgorithmCache cache(path);
  cache.open(h200());
  CHECK(cache.takeNotes().empty());
  CHECK(cache.size() == 2);

  // The temporary file cannot be written (a directory holds its name): the
  // save throws, and the file keeps its old, complete contents.
  std::filesystem::remove(path + ".tmp");
  std::filesystem::create_directory(path + ".tmp");
  cache.record("conv fwd n1 c1x1x1 f1 k1x1 s1x1 p0x0 g1 fp32 any", convChoice());
  CHECK_THROWS_AS(cache.save(), IoError);
  CHECK(readWholeFile(path) == before);
  // The choice is still to be written, and is once the way is clear.
  std::filesystem::remove(path + ".tmp");
  CHECK(cache.save());
  AlgorithmCache reread(path);
  reread.open(h200());
  CHECK(reread.size() == 3);
}

TEST_CASE("a cache without a path, or not yet opened, writes nothing") {
  AlgorithmCache memory;
  memory.open(h200());
  memory.record(kConvKey, convChoice());
  CHECK(memory.find(kConvKey).has_value());
  CHECK_FALSE(memory.save());

  TempDir dir;
  AlgorithmCache unopened(dir / kAlgorithmCacheFileName);
  CHECK_FALSE(unopened.isOpen());
  unopened.record(kConvKey, convChoice());
  CHECK_FALSE(unopened.save());
  CHECK_FALSE(std::filesystem::exists(dir / kAlgorithmCacheFileName));
}

TEST_CASE("one cache serves one GPU: opening it for another throws, for the same one does nothing") {
  AlgorithmCache cache;
  cache.open(h200());
  cache.record(kConvKey, convChoice());
  CHECK_NOTHROW(cache.open(h200()));
  CHECK(cache.size() == 1);
  try {
    cache.open(AlgorithmSource{"NVIDIA H100 80GB HBM3", 91900, 130100});
    FAIL("expected a DeviceError");
  } catch (const DeviceError& e) {
    CHECK(std::string(e.what()) ==
          "GPU algorithm choices for NVIDIA H200 with cuDNN 9.19.0 and cuBLASLt 13.1.0 cannot serve NVIDIA "
          "H100 80GB HBM3 with cuDNN 9.19.0 and cuBLASLt 13.1.0 in the same process");
  }
}

TEST_CASE("a batch_norm path choice is saved beside the convolutions' and reads back equal") {
  // What CudaBatchNorm records: the path as algo, the winner's median time.
  TempDir dir;
  const std::string path = dir / kAlgorithmCacheFileName;
  BatchNormAlgorithmKey key;
  key.batch = 128;
  key.channels = 16;
  key.plane = 1024;
  key.activation = "relu";
  key.residual = true;
  AlgorithmChoice own;
  own.algo = static_cast<int64_t>(BatchNormPath::Own);
  own.time_ms = 0.0371;
  {
    AlgorithmCache cache(path);
    cache.open(h200());
    cache.record(kConvKey, convChoice());
    cache.record(algorithmKey(key), own);
    REQUIRE(cache.save());
  }
  AlgorithmCache again(path);
  again.open(h200());
  CHECK(again.size() == 2);
  REQUIRE(again.find("batchnorm n128 c16 p1024 relu residual").has_value());
  CHECK(*again.find(algorithmKey(key)) == own);
  key.residual = false;  // another shape: not chosen yet
  CHECK_FALSE(again.find(algorithmKey(key)).has_value());
  // Another GPU's file serves no batch_norm choice either.
  AlgorithmCache other(path);
  other.open(AlgorithmSource{"NVIDIA H100 80GB HBM3", 91900, 130100});
  CHECK(other.size() == 0);
}
