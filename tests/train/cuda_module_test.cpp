// The CUDA backend is a module dtrain loads only when a job asks for a GPU:
// a CPU run never maps it or any CUDA library, and a host that lacks one of
// its libraries gets one line naming that library (or the module) and a
// non-zero exit, never a crash and never a quiet fall-back to the CPU.
#include "core/backend/cuda_module.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "core/backend/device_query.h"
#include "tests/train/run_helpers.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Runs the binary with DTRAIN_CUDA_MODULE set to `module`.
RunResult runWithModule(const std::string& module, const std::vector<std::string>& args) {
  return runDtrain(args, "DTRAIN_CUDA_MODULE='" + module + "'");
}

}  // namespace

TEST_CASE("a GPU job on a host lacking one of the CUDA module's libraries fails in one line naming it") {
  TempDir dir("cuda-module");
  writeFile(dir.file("job.toml"), smallJob(dir.file("run")));
  const RunResult r = runWithModule(DTRAIN_TEST_MODULE_WITH_ABSENT_DEPENDENCY,
                                    {"train", dir.file("job.toml"), "--set", "job.device=cuda"});
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.rfind(
            "dtrain: error: device cuda:0: the CUDA backend needs libdtrain_test_absent_dependency.so", 0) ==
        0);
  CHECK(r.output.find("use device = \"cpu\"") != std::string::npos);
  CHECK(stepDirs(dir.file("run")).empty());  // nothing half-made
  // "auto" asks the driver first; with no GPU visible it trains on the CPU, whatever the module.
  if (visibleCudaDevices() == 0) {
    const RunResult a =
        runWithModule(DTRAIN_TEST_MODULE_WITH_ABSENT_DEPENDENCY,
                      {"train", dir.file("job.toml"), "--set", "job.device=auto", "--set", "train.steps=3",
                       "--set", "job.run_dir=" + dir.file("auto-run"), "--quiet"});
    CHECK_MESSAGE(a.exit_code == 0, a.output);
  }
}

TEST_CASE("a GPU job without the module file names the module and what to do") {
  TempDir dir("cuda-module");
  writeFile(dir.file("job.toml"), smallJob(dir.file("run")));
  const std::string missing = dir.file("nowhere/libdtrain_cuda.so");
  const RunResult r = runWithModule(missing, {"train", dir.file("job.toml"), "--set", "job.device=cuda"});
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(lineCount(r.output) == 1);
  CHECK(r.output.find("the CUDA backend module " + missing + " is missing") != std::string::npos);
}

TEST_CASE("the loader's reasons name a missing library, a missing module and a mismatched module") {
  const std::string m = "/opt/dtrain/libdtrain_cuda.so";
  CHECK(
      describeModuleLoadFailure(m, "libcudnn.so.9: cannot open shared object file: No such file or directory")
          .rfind("the CUDA backend needs libcudnn.so.9, which this host lacks", 0) == 0);
  CHECK(describeModuleLoadFailure(m, m + ": cannot open shared object file: No such file or directory")
            .rfind("the CUDA backend module " + m + " is missing", 0) == 0);
  const std::string mismatch =
      describeModuleLoadFailure(m, m + ": undefined symbol: _ZN6dtrain4Conv2d7forwardEv");
  CHECK(mismatch.find("does not match this dtrain binary") != std::string::npos);
  CHECK(mismatch.find("undefined symbol: _ZN6dtrain4Conv2d7forwardEv") != std::string::npos);
}

TEST_CASE("a CPU run maps neither the CUDA module nor any CUDA library") {
  TempDir dir("cuda-module");
  writeFile(dir.file("job.toml"), smallJob(dir.file("run")));
  const std::string log = dir.file("log");
  const pid_t pid = startDtrain({"train", dir.file("job.toml"), "--set", "train.epochs=200"}, log);
  // Training has begun once the first checkpoint exists (every 7 steps).
  REQUIRE(waitFor([&] { return !stepDirs(dir.file("run")).empty(); }, 60));
  const std::string maps = readFile("/proc/" + std::to_string(pid) + "/maps");
  ::kill(pid, SIGTERM);
  waitExit(pid);
  REQUIRE(maps.find("libopenblas") != std::string::npos);  // the maps were read while it ran
  for (const char* lib : {"libdtrain_cuda", "libcudart", "libcublas", "libcudnn", "libnccl", "libcuda.so"})
    CHECK_MESSAGE(maps.find(lib) == std::string::npos, lib);
}
