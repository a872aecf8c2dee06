// Where a value came from: "job.toml:12:5" or "--set optimizer.lr=-0.1".
#pragma once
#include <string>

namespace dtrain {

struct SourcePos {
  std::string origin;  // file path, or "--set key=value"
  int line = 0;        // 0 when the origin has no lines (a --set override, a default)
  int column = 0;

  // "job.toml:12:5", "--set optimizer.lr=-0.1", or "" for a built-in default.
  std::string str() const {
    if (line > 0) return origin + ":" + std::to_string(line) + ":" + std::to_string(column);
    return origin;
  }
};

}  // namespace dtrain
