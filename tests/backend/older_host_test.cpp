// The one binary on an older host: under qemu's user-mode emulation of a
// Haswell CPU (AVX2 and FMA, no AVX-512), dtrain chooses the avx2 level, trains
// a small cnn without meeting an instruction that CPU lacks, and ends with the
// weights this host computes when DTRAIN_CPU=avx2 pretends to be one: the same
// kernels, one thread, so the same bits. Skipped where qemu-user is absent.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "tests/train/run_helpers.h"

namespace dtrain {
namespace {

bool haveQemu() { return std::system("command -v qemu-x86_64 > /dev/null 2>&1") == 0; }

std::string cnnJob(const std::string& run_dir) {
  return "[job]\nname = \"older\"\nrun_dir = \"" + run_dir +
         "\"\nseed = 3\nthreads = 1\n"
         "[model]\npreset = \"cnn\"\n"
         "[data]\ndataset = \"synthetic\"\ntrain_samples = 32\ntest_samples = 8\nshape = [1, 28, 28]\nclasses = 4\n"
         "[train]\nsteps = 2\nbatch_size = 8\neval_every_epoch = false\ncheckpoint_every_epoch = false\n"
         "[optimizer]\ntype = \"sgd\"\nlr = 0.05\nmomentum = 0.9\n";
}

TEST_CASE("an emulated AVX2-only CPU runs the binary at the avx2 level, computing what DTRAIN_CPU=avx2 does here") {
  if (!haveQemu()) {
    MESSAGE("qemu-user is not installed: the binary was not run on an emulated AVX2-only CPU");
    return;
  }
  testing::TempDir dir("older_host");
  testing::writeFile(dir / "emulated.toml", cnnJob(dir / "emulated"));
  testing::writeFile(dir / "pretended.toml", cnnJob(dir / "pretended"));
  // qemu's warnings about CPU features it does not emulate are dropped.
  testing::writeFile(dir / "emulate.sh", "qemu-x86_64 -cpu Haswell \"$1\" train \"$2\" 2>&1 | "
                                         "grep -v \"TCG doesn't support\"; exit ${PIPESTATUS[0]}\n");
  const std::string cmd = "bash '" + (dir / "emulate.sh") + "' '" + DTRAIN_BINARY + "' '" + (dir / "emulated.toml") +
                          "' > '" + (dir / "emulated.log") + "'";
  const int status = std::system(cmd.c_str());
  const std::string log = testing::readFile(dir / "emulated.log");
  INFO(log);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);  // a SIGILL would end it with 132
  CHECK(log.find("(CPU kernels avx2)") != std::string::npos);

  const testing::RunResult pretended =
      testing::runDtrain({"train", dir / "pretended.toml", "-q"}, "DTRAIN_CPU=avx2");
  REQUIRE(pretended.exit_code == 0);
  CHECK(testing::readFile(dir / "emulated/checkpoints/latest/model.safetensors") ==
        testing::readFile(dir / "pretended/checkpoints/latest/model.safetensors"));
}

}  // namespace
}  // namespace dtrain
