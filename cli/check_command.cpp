#include <cstdio>
#include <cstdlib>
#include <optional>

#include "cli/commands.h"
#include "cli/memory_check.h"
#include "cli/model_summary.h"
#include "cli/tf_config_report.h"
#include "core/backend/cpu/cpu_level.h"
#include "core/backend/cpu/openblas_kernels.h"
#include "core/config/job_to_toml.h"
#include "core/config/parse_job.h"
#include "core/config/tf_config_plan.h"
#include "core/config/validate_job.h"
#include "core/nn/layer_registry.h"
#include "core/nn/param_store.h"
#include "core/train/device_choice.h"
#include "datasets/dataset_info.h"
#include "models/model_builder.h"
#include "strategies/parameter_server/placement.h"
#include "strategies/pipeline/pipeline_plan.h"

namespace dtrain::cli {

// Reads only the dataset files' headers, so checking a job takes milliseconds.
int runCheck(const CheckArgs& args) {
  JobConfig job = parseJobFile(args.job_file, args.overrides);
  validateJob(job);
  // Read before anything is printed, so a bad TF_CONFIG is the one line of output.
  const std::optional<TfConfig> tf_config =
      jobTfConfig(job, [](const char* name) -> const char* { return std::getenv(name); });
  const Device device = resolveDevice(job.job.device);
  checkCpuBf16(job.job, device);
  DatasetInfo data = peekDataset(job.data);
  auto model = buildModel(job.model, data.sample_shape, data.classes, builtinLayers());
  model->setPrecision(precisionNamed(job.job.precision));
  // A pipeline's stages too: a bad one is the one line of output.
  std::optional<pipeline::PipelinePlan> plan;
  if (job.strategy.type == "pipeline")
    plan = pipeline::planPipelineJob(job, /*measure=*/job.strategy.stage_layers.empty());
  std::printf("# %s: valid\n# resolved job (defaults filled in)\n\n%s\n", args.job_file.c_str(),
              jobToToml(job).c_str());
  std::printf("# data: %lld training and %lld test samples of %s, %lld classes\n",
              static_cast<long long>(data.train_samples), static_cast<long long>(data.test_samples),
              data.sample_shape.str().c_str(), static_cast<long long>(data.classes));
  std::printf("# device: %s; CPU kernels: %s; OpenBLAS's %s kernels loaded\n", describeDevice(device).c_str(),
              cpu::describeActiveLevel().c_str(), openblasCoreName());
  if (tf_config) std::printf("%s", tfConfigReport(*tf_config, job).c_str());
  std::printf("# precision: %s\n", describePrecision(job).c_str());
  if (device.isCpu())
    if (const std::string cpu_precision = describeCpuPrecision(job.job); !cpu_precision.empty())
      std::printf("# %s\n", cpu_precision.c_str());
  std::printf("# model\n%s", modelSummary(*model).c_str());
  std::printf("%s", describeMemoryPlan(job, *model).c_str());
  if (job.strategy.type == "parameter_server") {
    ParamStore store;
    model->registerParams(store);
    std::printf("# parameter-server placement\n");
    for (const std::string& line : describePlacement(placeVariables(store, job.strategy.ps), true))
      std::printf("%s\n", line.c_str());
  }
  if (job.strategy.type == "pipeline") {
    const bool named = !job.strategy.stage_layers.empty();
    const bool timed = !named && job.strategy.split_by == "time";
    std::printf("# pipeline stages (%s)\n",
                timed   ? "split by the layers' times on a micro-batch, measured now on one "
                          "thread; a run measures again"
                : named ? "as [[strategy.stages]] names them; times predicted from FLOPs"
                        : "split by the layers' FLOPs; times predicted from them");
    for (const std::string& line : pipeline::describePlan(*plan, timed)) std::printf("%s\n", line.c_str());
  }
  return kExitOk;
}

}  // namespace dtrain::cli
