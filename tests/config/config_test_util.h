// Helpers for the config tests: the message a call throws, and job files in a
// temporary directory that is removed afterwards.
#pragma once
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/errors.h"

#include "tests/common/temp_dir.h"

namespace dtrain::test {

// The ConfigError message `f` throws, or a note saying it threw nothing.
template <typename F>
std::string configErrorOf(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

using dtrain::testing::TempDir;

// The smallest job that validates without a dataset on disk.
inline const char* const kMinimalJob =
    "[model]\n"
    "preset = \"mlp\"\n"
    "\n"
    "[data]\n"
    "dataset = \"synthetic\"\n";

}  // namespace dtrain::test
