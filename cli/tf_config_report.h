// The lines `dtrain check` prints for a job that takes its cluster from
// TF_CONFIG: every task with its address and dtrain role, which one this
// process is, and the [strategy] and [cluster] the cluster implies.
#pragma once
#include <string>

#include "core/config/job_config.h"
#include "core/config/tf_config.h"

namespace dtrain::cli {

// "# TF_CONFIG: ..." lines, each ending in a newline.
std::string tfConfigReport(const TfConfig& tf, const JobConfig& job);

}  // namespace dtrain::cli
