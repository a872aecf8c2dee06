#include "core/config/cluster_token.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/errors.h"

namespace dtrain {
namespace {

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

std::string readFirstLine(const std::string& path) {
  const std::string file = "[cluster] token_file '" + path + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError(file + " is a directory, not a file");
  std::ifstream in(path);
  if (!in) throw ConfigError(file + " cannot be read (" + std::strerror(errno) + ")");
  std::string line;
  std::getline(in, line);
  if (in.bad()) throw ConfigError(file + " cannot be read (" + std::strerror(errno) + ")");
  std::string token = trim(line);
  if (token.empty()) throw ConfigError(file + " is empty; its first line must hold the token");
  return token;
}

}  // namespace

std::string readClusterToken(const ClusterSection& cluster) {
  if (!cluster.token.empty() && !cluster.token_file.empty())
    throw ConfigError("[cluster] token and token_file are both given; use one or the other");
  if (!cluster.token.empty()) {
    if (cluster.token == kHiddenToken)
      throw ConfigError(std::string("[cluster] token is \"") + kHiddenToken +
                        "\": the secret is not stored with a resolved job; give it again with --set "
                        "cluster.token=..., or keep it in a token_file");
    std::string token = trim(cluster.token);
    if (token.empty()) throw ConfigError("[cluster] token is empty");
    return token;
  }
  if (cluster.token_file.empty()) throw ConfigError("[cluster] needs token or token_file");
  return readFirstLine(cluster.token_file);
}

}  // namespace dtrain
