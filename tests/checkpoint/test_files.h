// Helpers for the checkpoint tests: a self-deleting temporary directory and
// raw file manipulation (read, write, flip a byte, truncate).
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tests/common/temp_dir.h"

namespace dtrain::testing {


inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// XORs the byte at `offset` (negative: from the end) with 0xFF.
inline void flipByte(const std::string& path, int64_t offset) {
  std::string b = readBytes(path);
  size_t i = offset >= 0 ? static_cast<size_t>(offset) : b.size() - static_cast<size_t>(-offset);
  b.at(i) = static_cast<char>(b.at(i) ^ 0xFF);
  writeBytes(path, b);
}

inline void truncateBy(const std::string& path, size_t n) {
  std::string b = readBytes(path);
  b.resize(b.size() - n);
  writeBytes(path, b);
}

inline bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A safetensors file from a header text and data bytes (no padding added).
inline std::string safetensorsBytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

}  // namespace dtrain::testing
