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

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ =
        std::filesystem::temp_directory_path() / ("dtrain_config_test_" + std::to_string(getpid()) + "_" +
                                                  std::to_string(stamp) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

// The smallest job that validates without a dataset on disk.
inline const char* const kMinimalJob =
    "[model]\n"
    "preset = \"mlp\"\n"
    "\n"
    "[data]\n"
    "dataset = \"synthetic\"\n";

}  // namespace dtrain::test
