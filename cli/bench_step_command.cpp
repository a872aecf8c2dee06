#include "cli/bench_step_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "core/errors.h"
#include "core/io/json.h"
#include "core/train/step_profile.h"
#include "core/train/trainer.h"
#include "strategies/make_strategy.h"

namespace dtrain::cli {

namespace {

double ms(double seconds) { return seconds * 1e3; }

JsonWriter reportJson(const StepReport& r, const JobConfig& job) {
  JsonWriter w;
  w.add("job", job.job.name);
  w.add("device", r.device);
  w.add("batch_size", r.batch);
  w.add("steps", r.steps);
  w.add("warmup", r.warmup);
  w.add("step_ms", ms(r.step_s));
  w.add("images_per_s", r.images_per_s);
  JsonWriter phases;
  phases.add("data_wait_ms", ms(r.data_wait_s));
  phases.add("copy_ms", ms(r.copy_s));
  phases.add("forward_ms", ms(r.forward_s));
  phases.add("loss_ms", ms(r.loss_s));
  phases.add("backward_ms", ms(r.backward_s));
  phases.add("optimizer_ms", ms(r.optimizer_s));
  phases.add("communication_ms", ms(r.communication_s));
  phases.add("host_idle_ms", ms(r.host_idle_s));
  w.add("phases", phases);
  std::vector<JsonWriter> layers;
  for (const LayerTiming& t : r.layers) {
    JsonWriter l;
    l.add("name", t.name);
    l.add("type", t.type);
    l.add("forward_ms", ms(t.forward_s));
    l.add("backward_ms", ms(t.backward_s));
    l.add("algorithm", t.algorithm);
    layers.push_back(std::move(l));
  }
  w.add("layers", layers);
  return w;
}

void printReport(const StepReport& r, const JobConfig& job) {
  std::printf("bench step: %s on %s, batch %lld, %lld steps timed after %lld warm-up\n", job.job.name.c_str(),
              r.device.c_str(), static_cast<long long>(r.batch), static_cast<long long>(r.steps),
              static_cast<long long>(r.warmup));
  std::printf("step %.3f ms (%.0f images/s)\n", ms(r.step_s), r.images_per_s);
  std::printf(
      "  data wait %.3f  copy %.3f  forward %.3f  loss %.3f  backward %.3f  optimizer %.3f  communication "
      "%.3f  "
      "host idle %.3f (ms per step)\n",
      ms(r.data_wait_s), ms(r.copy_s), ms(r.forward_s), ms(r.loss_s), ms(r.backward_s), ms(r.optimizer_s),
      ms(r.communication_s), ms(r.host_idle_s));
  size_t name_w = 5, type_w = 4;
  for (const LayerTiming& t : r.layers) {
    name_w = std::max(name_w, t.name.size());
    type_w = std::max(type_w, t.type.size());
  }
  std::printf("  %-*s  %-*s  %10s  %11s  %s\n", static_cast<int>(name_w), "layer", static_cast<int>(type_w),
              "type", "forward ms", "backward ms", "algorithm");
  for (const LayerTiming& t : r.layers)
    std::printf("  %-*s  %-*s  %10.3f  %11.3f  %s\n", static_cast<int>(name_w), t.name.c_str(),
                static_cast<int>(type_w), t.type.c_str(), ms(t.forward_s), ms(t.backward_s),
                t.algorithm.c_str());
}

}  // namespace

CLI::App* addBenchStepCommand(CLI::App& app, BenchStepArgs& args) {
  auto* step = app.get_subcommand("bench")->add_subcommand(
      "step", "Train a few steps and show where a step's time goes, layer by layer");
  step->add_option("job", args.job_file, "Job file (TOML)")->required();
  step->add_option("--set", args.overrides, "Override a job key: --set job.device=cuda")->take_all();
  step->add_option("--steps", args.steps, "Timed steps (default 20)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  step->add_option("--warmup", args.warmup, "Untimed steps first (default 5)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  step->add_flag("--json", args.json, "Print one JSON object instead of a table");
  return step;
}

int runBenchStep(const BenchStepArgs& args) {
  JobConfig job = parseJobFile(args.job_file, args.overrides);
  validateJob(job);
  if (job.strategy.type != "one_device")
    throw ConfigError("bench step times one process: its [strategy] type is \"" + job.strategy.type +
                      "\"; add --set strategy.type=one_device (a rank's step is the same computation)");
  job.train.steps = args.warmup + args.steps;
  StepProfile profile(args.warmup);
  TrainerOptions options;
  options.quiet = true;
  options.profile = &profile;
  options.strategy = makeStrategy(job.strategy, nullptr);
  Trainer trainer(job, options);
  const TrainOutcome outcome = trainer.run(nullptr);
  if (outcome.interrupted) return 128 + outcome.stop_signal;
  const StepReport report = profile.finish();
  if (report.steps < args.steps)
    throw DataError("bench step: the training data gave only " + std::to_string(report.steps + args.warmup) +
                    " steps of the " + std::to_string(args.steps + args.warmup) +
                    " asked for; use fewer --steps or --warmup");
  if (args.json)
    std::printf("%s\n", reportJson(report, job).str().c_str());
  else
    printReport(report, job);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace dtrain::cli
