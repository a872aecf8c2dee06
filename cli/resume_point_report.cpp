#include <cstdio>

#include "cli/commands.h"

namespace dtrain::cli {

ResumePoint loadResumePointReporting(const std::string& path) {
  std::vector<std::string> warnings;
  ResumePoint from = loadResumePoint(path, &warnings);
  for (const auto& w : warnings) std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  return from;
}

}  // namespace dtrain::cli
