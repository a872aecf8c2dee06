// dtrain: train, check, evaluate and resume jobs described by a TOML file.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>

#include "cli/bench_command.h"
#include "cli/bench_cpu_command.h"
#include "cli/bench_step_command.h"
#include "cli/commands.h"
#include "core/backend/cpu/cpu_level.h"
#include "core/backend/cpu/openblas_kernels.h"
#include "core/errors.h"

int main(int argc, char** argv) {
  using namespace dtrain::cli;
  // Before anything runs: an OpenBLAS that fell back to pre-AVX2 kernels on a
  // CPU it does not know gets Haswell's (the program starts again once).
  dtrain::pinOpenblasKernels(argv);
  // When a peer dies its sockets close; a write to one must come back as EPIPE, which the
  // collective reports by naming the peer, not kill this process with SIGPIPE (and hide
  // which host failed). Workers are this binary too and inherit the setting across exec.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"dtrain: distributed deep-learning training from a TOML job file"};
  app.require_subcommand(1);
  // The version names the CPU kernels this host would compute with.
  app.set_version_flag("--version", [] {
    try {
      return "dtrain 0.1.0\nCPU kernels: " + dtrain::cpu::describeActiveLevel();
    } catch (const dtrain::ConfigError& e) {
      return std::string("dtrain 0.1.0\nCPU kernels: none chosen: ") + e.what();
    }
  });

  TrainArgs train;
  auto* train_cmd = app.add_subcommand("train", "Train the model a job file describes");
  train_cmd->add_option("job", train.job_file, "Job file (TOML)")->required();
  train_cmd->add_option("--set", train.overrides, "Override a job key: --set optimizer.lr=0.02")->take_all();
  train_cmd->add_flag("-q,--quiet", train.quiet, "No progress output");
  train_cmd->add_flag("--overwrite", train.overwrite,
                      "Start over in a run directory that already holds checkpoints (deletes them)");
  train_cmd->add_option(
      "--node", train.node,
      "Multi-host runs: this host's index among [cluster] hosts (default: found by address)");
  // Fault injection for the resume tests; not shown in --help.
  train_cmd->add_option("--fault-kill-at-step", train.fault_kill_at_step)->group("");
  train_cmd->add_option("--fault-overflow-at-step", train.fault_overflow_at_step)->group("");

  CheckArgs check;
  auto* check_cmd =
      app.add_subcommand("check", "Validate a job file; print the resolved job and a model summary");
  check_cmd->add_option("job", check.job_file, "Job file (TOML)")->required();
  check_cmd->add_option("--set", check.overrides, "Override a job key")->take_all();

  EvalArgs eval;
  auto* eval_cmd = app.add_subcommand("eval", "Evaluate a checkpoint on the test split");
  eval_cmd
      ->add_option("checkpoint", eval.checkpoint,
                   "Checkpoint directory, its `latest` link, or a run directory")
      ->required();
  eval_cmd->add_flag("--json", eval.json, "Print one JSON object {loss, accuracy, samples}");

  GenerateArgs generate;
  auto* generate_cmd =
      app.add_subcommand("generate", "Sample text (or token ids) from a trained language model");
  generate_cmd
      ->add_option("checkpoint", generate.checkpoint,
                   "Checkpoint directory, its `latest` link, or a run directory")
      ->required();
  generate_cmd->add_option("--prompt", generate.prompt,
                           "Text to continue (byte-level models), or token ids separated by spaces");
  generate_cmd->add_option("--tokens", generate.tokens, "Tokens to sample (default 200)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  generate_cmd
      ->add_option("--temperature", generate.temperature, "Softmax temperature; 0 = always the likeliest")
      ->check(CLI::Range(0.0, 100.0));
  generate_cmd->add_option("--top-k", generate.top_k, "Sample among the k likeliest only (0 = all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  generate_cmd->add_option("--seed", generate.seed, "Seed of the sampling (the same seed, the same text)");
  generate_cmd->add_flag(
      "--no-cache", generate.no_cache,
      "Recompute the whole sequence each token instead of caching keys and values (slower; "
      "the same tokens)");

  BenchAllreduceArgs bench_allreduce;
  auto* bench_allreduce_cmd = addBenchCommand(app, bench_allreduce);
  BenchLoaderArgs bench_loader;
  auto* bench_loader_cmd = addBenchLoaderCommand(app, bench_loader);
  BenchStepArgs bench_step;
  auto* bench_step_cmd = addBenchStepCommand(app, bench_step);
  BenchCpuArgs bench_cpu;
  auto* bench_cpu_cmd = addBenchCpuCommand(app, bench_cpu);

  ResumeArgs resume;
  auto* resume_cmd = app.add_subcommand("resume", "Continue a run from its latest complete checkpoint");
  resume_cmd->add_option("run_dir", resume.run_dir, "Run directory (job.run_dir)")->required();
  resume_cmd
      ->add_option(
          "--set", resume.overrides,
          "Change how the run goes on: [strategy], [cluster], job.threads, job.device, train.steps, "
          "train.epochs, eval/checkpoint/log cadence (--set strategy.workers=3); other keys are fixed "
          "by the checkpoint")
      ->take_all()
      ->allow_extra_args(false);  // one value per --set, so RUN_DIR may follow
  resume_cmd->add_option(
      "--job", resume.job_file,
      "Take those keys from this job file (e.g. [cluster] naming the hosts left); its other "
      "keys must equal the checkpoint's. Hosts other than node 0 need only this file, no "
      "checkpoint");
  resume_cmd->add_flag("-q,--quiet", resume.quiet, "No progress output");
  resume_cmd->add_option(
      "--node", resume.node,
      "Multi-host runs: this host's index among [cluster] hosts (default: found by address)");
  resume_cmd->add_option("--fault-kill-at-step", resume.fault_kill_at_step)->group("");
  resume_cmd->add_option("--fault-overflow-at-step", resume.fault_overflow_at_step)->group("");
  // How a host hands its workers the job it resolved; not shown in --help.
  resume_cmd->add_option("--resolved-job", resume.resolved_job)->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitBadConfig;
  }

  try {
    dtrain::cpu::activeLevel();  // a DTRAIN_CPU this CPU cannot honour ends here, in one line
    if (*train_cmd) return runTrain(train);
    if (*check_cmd) return runCheck(check);
    if (*eval_cmd) return runEval(eval);
    if (*generate_cmd) return runGenerate(generate);
    if (*bench_allreduce_cmd) return runBenchAllreduce(bench_allreduce);
    if (*bench_loader_cmd) return runBenchLoader(bench_loader);
    if (*bench_step_cmd) return runBenchStep(bench_step);
    if (*bench_cpu_cmd) return runBenchCpu(bench_cpu);
    if (*resume_cmd) return runResume(resume);
  } catch (const dtrain::ConfigError& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return kExitBadConfig;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "dtrain: error: out of memory (`dtrain check` predicts a worker's memory); use a smaller "
                 "batch_size or model, or [strategy] type = \"sharded\" with more workers\n");
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    return kExitFailure;
  }
  return kExitFailure;
}
