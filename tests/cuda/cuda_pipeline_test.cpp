// The pipeline strategy with GPU stages, through the binary: every stage a
// process on the GPU (here they share GPU 0, so the ranks' collectives are
// staged through host memory, and so are the stage-to-stage messages), on
// the mlp with dropout, the cnn and the residual DAG whose skip connections
// cross the cuts. After 3 steps the weights and optimizer state equal one
// CPU process's with the same global batch within 1e-4 (fp32, TF32 off:
// the GPU's sums round in another order than the CPU's).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/train/pipeline_jobs.h"
#include "tests/train/run_helpers.h"

using namespace dtrain::testing;

TEST_CASE("cuda: a pipeline of GPU stages ends as one CPU process does") {
  TempDir dir("cuda_pipe");
  struct Shape {
    std::string schedule;
    int stages, micro_batches, replicas;
  };
  const std::vector<Shape> shapes = {{"1f1b", 2, 3, 1}, {"gpipe", 3, 4, 2}};
  for (const ModelCase& m : models()) {
    CAPTURE(m.name);
    const std::string one = dir / (m.name + "_cpu");
    train(job(one, m, ""), one + ".toml");
    for (const Shape& s : shapes) {
      CAPTURE(s.schedule);
      CAPTURE(s.stages);
      const std::string run = dir / (m.name + "_" + s.schedule);
      std::string toml = job(run, m,
                             "[strategy]\ntype = \"pipeline\"\nstages = " + std::to_string(s.stages) +
                                 "\nmicro_batches = " + std::to_string(s.micro_batches) + "\nschedule = \"" +
                                 s.schedule + "\"\nreplicas = " + std::to_string(s.replicas) + "\n");
      toml.replace(toml.find("threads = 1\n"), 12, "threads = 1\ndevice = \"cuda\"\nprecision = \"fp32\"\n");
      train(toml, run + ".toml");
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        CAPTURE(file);
        CHECK(checkpointDifference(run + "/checkpoints/latest", one + "/checkpoints/latest", file) <= 1e-4);
      }
    }
  }
}

TEST_CASE("cuda: a GPU pipeline's start-up line names its device and its stages") {
  TempDir dir("cuda_pipe_line");
  const std::string run = dir / "run";
  std::string toml =
      job(run, models()[1], "[strategy]\ntype = \"pipeline\"\nstages = 2\nmicro_batches = 2\n");
  toml.replace(toml.find("threads = 1\n"), 12, "threads = 1\ndevice = \"cuda\"\n");
  writeFile(run + ".toml", toml);
  const RunResult r = runDtrain({"train", run + ".toml"});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("cuda:0") != std::string::npos);
  CHECK(r.output.find("2 stages x 1 replica, 1f1b over 2 micro-batches") != std::string::npos);
}
