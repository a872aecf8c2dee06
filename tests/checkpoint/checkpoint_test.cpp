#include "core/train/checkpoint.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "core/errors.h"
#include "core/io/crc32.h"
#include "core/io/json.h"
#include "core/train/checkpoint_publish.h"
#include "test_files.h"

using namespace dtrain;
using dtrain::testing::exists;
using dtrain::testing::TempDir;

namespace {

// Deterministic contents for `step`: values depend on the step so a reader
// can tell which checkpoint it got.
struct Fixture {
  std::vector<float> w, b, mw;
  CheckpointContents c;
  explicit Fixture(int64_t step, size_t wsize = 6) : w(wsize), b(3), mw(wsize) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(step) + 0.25f * static_cast<float>(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(step) - static_cast<float>(i);
    for (size_t i = 0; i < mw.size(); ++i)
      mw[i] = 0.5f * static_cast<float>(step * 10 + static_cast<int64_t>(i));
    int64_t cols = static_cast<int64_t>(wsize / 3);
    c.weights = {{"dense1.weight", Shape{3, cols}, w.data()}, {"dense1.bias", Shape{3}, b.data()}};
    c.optimizer = {{"momentum.dense1.weight", Shape{3, cols}, mw.data()}};
    c.metadata = {{"dtrain.step", std::to_string(step)}, {"model", "mlp"}};
    c.state_toml = "step = " + std::to_string(step) + "\nepoch = 1\n";
  }
};

std::string write(const std::string& run, int64_t step, int64_t keep_last = 0) {
  Fixture f(step);
  return writeCheckpoint(run, step, f.c, keep_last);
}

std::string readLink(const std::string& path) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

std::vector<std::string> names(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(p.substr(p.rfind('/') + 1));
  return out;
}

std::vector<std::string> tempEntries(const std::string& ckdir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ckdir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(".tmp-", 0) == 0) out.push_back(n);
  }
  return out;
}

void checkIsStep(const LoadedCheckpoint& l, int64_t step) {
  Fixture f(step);
  CHECK(l.step == step);
  REQUIRE(l.weights.tensors.size() == 2);
  CHECK(l.weights.tensors[0].name == "dense1.weight");
  CHECK(l.weights.tensors[0].shape == Shape{3, 2});
  CHECK(l.weights.tensors[0].data == f.w);
  CHECK(l.weights.tensors[1].name == "dense1.bias");
  CHECK(l.weights.tensors[1].data == f.b);
  REQUIRE(l.optimizer.tensors.size() == 1);
  CHECK(l.optimizer.tensors[0].name == "momentum.dense1.weight");
  CHECK(l.optimizer.tensors[0].data == f.mw);
  CHECK(l.metadata == f.c.metadata);
  CHECK(l.state_toml == f.c.state_toml);
}

std::string messageOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no CheckpointError)";
}

}  // namespace

TEST_CASE("checkpoint round trip") {
  TempDir tmp;
  std::string run = tmp / "run";
  std::string dir = write(run, 400);
  CHECK(dir == run + "/checkpoints/step-00000400");
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.toml", "manifest.json"})
    CHECK(exists(dir + "/" + f));
  CHECK(dtrain::testing::readBytes(dir + "/state.toml") == "step = 400\nepoch = 1\n");

  JsonValue m = parseJson(dtrain::testing::readBytes(dir + "/manifest.json"));
  CHECK(m.find("version")->asInt64() == 1);
  CHECK(m.find("step")->asInt64() == 400);
  const JsonValue* model = m.find("files")->find("model.safetensors");
  REQUIRE(model != nullptr);
  CHECK(static_cast<size_t>(model->find("bytes")->asInt64()) ==
        dtrain::testing::readBytes(dir + "/model.safetensors").size());

  LoadedCheckpoint l = readCheckpoint(dir);
  CHECK(l.dir == dir);
  checkIsStep(l, 400);

  std::vector<std::string> warnings;
  checkIsStep(loadLatestCheckpoint(run, &warnings), 400);
  checkIsStep(loadLatestCheckpoint(run + "/", &warnings), 400);
  checkIsStep(loadLatestCheckpoint(run + "/checkpoints", &warnings), 400);
  checkIsStep(loadLatestCheckpoint(run + "/checkpoints/latest", &warnings), 400);
  checkIsStep(loadLatestCheckpoint(dir + "/", &warnings), 400);
  CHECK(warnings.empty());
  CHECK(tempEntries(run + "/checkpoints").empty());
}

TEST_CASE("checkpoint with an empty optimizer state") {
  TempDir tmp;
  Fixture f(3);
  f.c.optimizer.clear();
  f.c.metadata.clear();
  f.c.state_toml.clear();
  std::string dir = writeCheckpoint(tmp.path(), 3, f.c, 3);
  LoadedCheckpoint l = readCheckpoint(dir);
  CHECK(l.optimizer.tensors.empty());
  CHECK(l.metadata.empty());
  CHECK(l.state_toml.empty());
  CHECK(l.weights.tensors.size() == 2);
}

TEST_CASE("keep_last prunes the oldest and latest points at the newest") {
  TempDir tmp;
  std::string run = tmp.path();
  for (int64_t s = 100; s <= 500; s += 100) {
    write(run, s, 3);
    CHECK(readLink(run + "/checkpoints/latest") ==
          "step-" + std::string(s < 1000 ? "00000" : "0000") + std::to_string(s));
  }
  CHECK(names(listCheckpoints(run)) ==
        std::vector<std::string>{"step-00000300", "step-00000400", "step-00000500"});
  CHECK(tempEntries(run + "/checkpoints").empty());

  // Steps compare as numbers, not text; keep_last 1 keeps only the newest.
  write(run, 100000000, 1);
  CHECK(names(listCheckpoints(run)) == std::vector<std::string>{"step-100000000"});
  CHECK(readLink(run + "/checkpoints/latest") == "step-100000000");
  checkIsStep(loadLatestCheckpoint(run, nullptr), 100000000);
}

TEST_CASE("keep_last below 1 keeps everything; the step just written is never pruned") {
  TempDir tmp;
  std::string run = tmp.path();
  for (int64_t s = 1; s <= 4; ++s) write(run, s, 0);
  CHECK(listCheckpoints(run).size() == 4);
  // Writing an older step (after resuming from it) keeps it even though newer ones exist.
  write(run, 2, 2);
  CHECK(names(listCheckpoints(run)) == std::vector<std::string>{"step-00000002", "step-00000004"});
  CHECK(readLink(run + "/checkpoints/latest") == "step-00000002");
}

TEST_CASE("rewriting a step replaces it") {
  TempDir tmp;
  std::string run = tmp.path();
  write(run, 5);
  Fixture other(6);
  writeCheckpoint(run, 5, other.c, 3);
  LoadedCheckpoint l = readCheckpoint(run + "/checkpoints/step-00000005");
  CHECK(l.weights.tensors[0].data == other.w);
  CHECK(l.step == 5);
  CHECK(listCheckpoints(run).size() == 1);
  CHECK(tempEntries(run + "/checkpoints").empty());
}

TEST_CASE("replacing a checkpoint directory: atomic exchange and the rename-aside fallback") {
  for (bool allow_exchange : {true, false}) {
    CAPTURE(allow_exchange);
    TempDir tmp;
    std::string ck = tmp.path();
    std::filesystem::create_directory(ck + "/step-00000001");
    dtrain::testing::writeBytes(ck + "/step-00000001/f", "old");
    std::filesystem::create_directory(ck + "/.tmp-new");
    dtrain::testing::writeBytes(ck + "/.tmp-new/f", "new");
    publishCheckpointDir(ck, ck + "/.tmp-new", ck + "/step-00000001", ck + "/.tmp-old", allow_exchange);
    CHECK(dtrain::testing::readBytes(ck + "/step-00000001/f") == "new");
    CHECK(!exists(ck + "/.tmp-new"));
    CHECK(!exists(ck + "/.tmp-old"));
    // First publication of a step: a plain rename.
    std::filesystem::create_directory(ck + "/.tmp-2");
    publishCheckpointDir(ck, ck + "/.tmp-2", ck + "/step-00000002", ck + "/.tmp-old", allow_exchange);
    CHECK(exists(ck + "/step-00000002"));
    CHECK(!exists(ck + "/.tmp-2"));
  }
}

TEST_CASE("a corrupted file is detected and the loader falls back with a warning") {
  TempDir tmp;
  std::string run = tmp.path();
  write(run, 300);
  std::string bad = write(run, 400);

  SUBCASE("flipped byte") {
    dtrain::testing::flipByte(bad + "/model.safetensors", -3);
    std::string msg = messageOf([&] { readCheckpoint(bad); });
    CHECK(msg.find(bad) != std::string::npos);
    CHECK(msg.find("model.safetensors: CRC-32") != std::string::npos);
    CHECK(msg.find("manifest says") != std::string::npos);

    std::vector<std::string> warnings;
    LoadedCheckpoint l = loadLatestCheckpoint(run, &warnings);
    checkIsStep(l, 300);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].rfind("checkpoint step-00000400 is corrupt (model.safetensors: CRC-32 ", 0) == 0);
    CHECK(warnings[0].find("); using step-00000300") != std::string::npos);
    // Through the link as well: it names step-00000400 but is not trusted.
    warnings.clear();
    checkIsStep(loadLatestCheckpoint(run + "/checkpoints/latest", &warnings), 300);
    CHECK(warnings.size() == 1);
  }
  SUBCASE("truncated file") {
    dtrain::testing::truncateBy(bad + "/optimizer.safetensors", 4);
    std::string msg = messageOf([&] { readCheckpoint(bad); });
    CHECK(msg.find("optimizer.safetensors: size") != std::string::npos);
    std::vector<std::string> warnings;
    checkIsStep(loadLatestCheckpoint(run, &warnings), 300);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].rfind("checkpoint step-00000400 is corrupt (optimizer.safetensors: size ", 0) == 0);
    CHECK(warnings[0].find(", manifest says ") != std::string::npos);
  }
  SUBCASE("edited state.toml") {
    dtrain::testing::writeBytes(bad + "/state.toml", "step = 999\nepoch = 1\n");
    CHECK(messageOf([&] { readCheckpoint(bad); }).find("state.toml") != std::string::npos);
  }
  SUBCASE("missing file") {
    std::filesystem::remove(bad + "/model.safetensors");
    CHECK(messageOf([&] { readCheckpoint(bad); }).find("model.safetensors is missing") != std::string::npos);
    std::vector<std::string> warnings;
    checkIsStep(loadLatestCheckpoint(run, &warnings), 300);
    CHECK(warnings.size() == 1);
  }
  SUBCASE("damaged manifest") {
    dtrain::testing::writeBytes(bad + "/manifest.json", "{\"format\":\"dtrain-checkpoint\",");
    CHECK(messageOf([&] { readCheckpoint(bad); }).find("manifest.json is not valid JSON") !=
          std::string::npos);
    std::vector<std::string> warnings;
    checkIsStep(loadLatestCheckpoint(run, &warnings), 300);
    CHECK(warnings.size() == 1);
  }
  SUBCASE("manifest from a newer format") {
    std::string m = dtrain::testing::readBytes(bad + "/manifest.json");
    m.replace(m.find("\"version\":1"), 11, "\"version\":2");
    dtrain::testing::writeBytes(bad + "/manifest.json", m);
    CHECK(messageOf([&] { readCheckpoint(bad); }).find("format version 2") != std::string::npos);
  }
  SUBCASE("an explicit corrupt step directory is not replaced silently") {
    dtrain::testing::flipByte(bad + "/model.safetensors", 100);
    std::vector<std::string> warnings;
    std::string msg = messageOf([&] { loadLatestCheckpoint(bad, &warnings); });
    CHECK(msg.find("is corrupt") != std::string::npos);
    CHECK(msg.find("model.safetensors") != std::string::npos);
    CHECK(warnings.empty());
  }
}

TEST_CASE("a checksum-valid but malformed tensor file is reported") {
  TempDir tmp;
  std::string dir = write(tmp.path(), 1);
  // Replace model.safetensors with garbage and update the manifest to match,
  // as a buggy writer would: the parse error must still name the file.
  const std::string garbage = "not a safetensors file";
  dtrain::testing::writeBytes(dir + "/model.safetensors", garbage);
  std::string text = dtrain::testing::readBytes(dir + "/manifest.json");
  JsonValue manifest = parseJson(text);
  const JsonValue* entry = manifest.find("files")->find("model.safetensors");
  std::string old_bytes = "\"bytes\":" + std::to_string(entry->find("bytes")->asInt64());
  std::string old_crc = "\"crc32\":" + std::to_string(entry->find("crc32")->asInt64());
  text.replace(text.find(old_bytes), old_bytes.size(), "\"bytes\":" + std::to_string(garbage.size()));
  text.replace(text.find(old_crc), old_crc.size(),
               "\"crc32\":" + std::to_string(crc32Update(0, garbage.data(), garbage.size())));
  dtrain::testing::writeBytes(dir + "/manifest.json", text);
  std::string msg = messageOf([&] { readCheckpoint(dir); });
  CHECK(msg.find("is corrupt (model.safetensors: header length") != std::string::npos);
}

TEST_CASE("all checkpoints corrupt: the error lists what was tried") {
  TempDir tmp;
  std::string run = tmp.path();
  std::string a = write(run, 1);
  std::string b = write(run, 2);
  dtrain::testing::flipByte(a + "/model.safetensors", -1);
  dtrain::testing::truncateBy(b + "/state.toml", 1);
  std::vector<std::string> warnings;
  std::string msg = messageOf([&] { loadLatestCheckpoint(run, &warnings); });
  CHECK(msg.find("no valid checkpoint") != std::string::npos);
  CHECK(msg.find("step-00000002 (state.toml: size") != std::string::npos);
  CHECK(msg.find("step-00000001 (model.safetensors: CRC-32") != std::string::npos);
  CHECK(msg.find("from scratch") != std::string::npos);
  CHECK(warnings.empty());
}

TEST_CASE("half-written checkpoints are ignored and cleaned up") {
  TempDir tmp;
  std::string run = tmp.path();
  write(run, 10);
  std::string ck = run + "/checkpoints";
  // A write killed midway (by a process that no longer exists) ...
  std::filesystem::create_directory(ck + "/.tmp-step-00000020-9999999");
  dtrain::testing::writeBytes(ck + "/.tmp-step-00000020-9999999/model.safetensors", "partial");
  // ... and a step directory without its manifest (e.g. copied incompletely).
  std::filesystem::create_directory(ck + "/step-00000030");
  std::filesystem::copy_file(ck + "/step-00000010/model.safetensors",
                             ck + "/step-00000030/model.safetensors");
  // Names that merely look similar are not checkpoints either.
  std::filesystem::create_directory(ck + "/step-0000040");
  std::filesystem::create_directory(ck + "/step-000000050");

  CHECK(names(listCheckpoints(run)) == std::vector<std::string>{"step-00000010"});
  std::vector<std::string> warnings;
  checkIsStep(loadLatestCheckpoint(run, &warnings), 10);
  CHECK(warnings.empty());
  std::string msg = messageOf([&] { readCheckpoint(ck + "/step-00000030"); });
  CHECK(msg.find("is incomplete") != std::string::npos);
  CHECK(msg.find("manifest.json is missing") != std::string::npos);
  CHECK(messageOf([&] { loadLatestCheckpoint(ck + "/step-00000030", &warnings); }).find("is incomplete") !=
        std::string::npos);

  write(run, 11, 5);
  CHECK(!exists(ck + "/.tmp-step-00000020-9999999"));
  CHECK(exists(ck + "/step-00000030"));  // not ours to delete
}

TEST_CASE("missing or empty locations give a clear error") {
  TempDir tmp;
  std::vector<std::string> warnings;
  CHECK(messageOf([&] { loadLatestCheckpoint(tmp / "nope", &warnings); }).find("no checkpoint at") !=
        std::string::npos);
  CHECK(messageOf([&] { readCheckpoint(tmp / "nope"); }).find("no checkpoint at") != std::string::npos);
  CHECK(messageOf([&] { loadLatestCheckpoint(tmp.path(), &warnings); }).find("neither") != std::string::npos);
  std::filesystem::create_directories(tmp / "run/checkpoints");
  CHECK(messageOf([&] { loadLatestCheckpoint(tmp / "run", &warnings); }).find("no complete checkpoint") !=
        std::string::npos);
  dtrain::testing::writeBytes(tmp / "file", "x");
  CHECK(messageOf([&] { loadLatestCheckpoint(tmp / "file", &warnings); }).find("not a directory") !=
        std::string::npos);
  CHECK(listCheckpoints(tmp / "absent").empty());
}

TEST_CASE("write errors throw IoError, clean up, and keep earlier checkpoints") {
  TempDir tmp;
  std::string run = tmp.path();
  write(run, 1);

  SUBCASE("file size limit reached mid-write (like a full disk)") {
    Fixture big(2, 3 * 100000);
    struct rlimit old;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 64 * 1024;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
    std::string msg;
    try {
      writeCheckpoint(run, 2, big.c, 3);
    } catch (const IoError& e) {
      msg = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    CHECK(msg.find("model.safetensors") != std::string::npos);
    CHECK(msg.find("File too large") != std::string::npos);
    CHECK(tempEntries(run + "/checkpoints").empty());
    CHECK(names(listCheckpoints(run)) == std::vector<std::string>{"step-00000001"});
    CHECK(readLink(run + "/checkpoints/latest") == "step-00000001");
    checkIsStep(loadLatestCheckpoint(run, nullptr), 1);
  }
  SUBCASE("run directory is a file") {
    dtrain::testing::writeBytes(tmp / "plain", "x");
    Fixture f(1);
    CHECK_THROWS_AS(writeCheckpoint(tmp / "plain", 1, f.c, 3), IoError);
  }
  SUBCASE("invalid contents") {
    Fixture f(2);
    f.c.weights.push_back(f.c.weights[0]);  // duplicate name
    CHECK_THROWS_AS(writeCheckpoint(run, 2, f.c, 3), Error);
    CHECK(tempEntries(run + "/checkpoints").empty());
    CHECK(listCheckpoints(run).size() == 1);
    CHECK_THROWS_AS(writeCheckpoint(run, -1, Fixture(1).c, 3), Error);
  }
}

TEST_CASE("killing the writer at random moments never damages complete checkpoints") {
  TempDir tmp;
  std::string run = tmp.path();
  write(run, 0);
  for (int round = 0; round < 12; ++round) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: write checkpoints as fast as possible until killed.
      try {
        for (int64_t s = 1 + round * 1000;; ++s) {
          Fixture f(s % 7, 3 * 20000);
          writeCheckpoint(run, s % 7, f.c, 3);  // also replaces existing steps
        }
      } catch (...) {
      }
      ::_exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + round * 3700));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    // Every complete-looking checkpoint verifies, and resuming works.
    for (const std::string& dir : listCheckpoints(run)) {
      CAPTURE(dir);
      CHECK_NOTHROW(readCheckpoint(dir));
    }
    std::vector<std::string> warnings;
    CHECK_NOTHROW(loadLatestCheckpoint(run, &warnings));
    CHECK(warnings.empty());
    CHECK(exists(run + "/checkpoints/latest"));
  }
  // The next write in this process cleans up what the killed writers left.
  write(run, 99, 2);
  CHECK(tempEntries(run + "/checkpoints").empty());
}
