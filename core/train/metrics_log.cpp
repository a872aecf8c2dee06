#include "core/train/metrics_log.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "core/io/json.h"

namespace dtrain {

double unixTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

// The step of a metrics line; every line starts with {"step":N.
int64_t stepOfLine(const std::string& line) {
  const char prefix[] = "{\"step\":";
  if (line.compare(0, sizeof prefix - 1, prefix) != 0) return -1;
  return std::strtoll(line.c_str() + sizeof prefix - 1, nullptr, 10);
}

// Keeps the lines up to `step` (the checkpoint a resume starts from). Written to
// a temporary file and renamed, so a crash here leaves the old file intact.
// Returns the last step kept (-1: none).
int64_t truncateAfter(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return -1;
  int64_t last = -1;
  std::string tmp = path + ".tmp", line, kept;
  while (std::getline(in, line)) {
    // A line cut short by a kill has no closing brace: drop it too.
    int64_t s = stepOfLine(line);
    if (s >= 0 && s <= step && !line.empty() && line.back() == '}') {
      kept += line + "\n";
      last = std::max(last, s);
    }
  }
  in.close();
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    if (!out.flush()) throw IoError("cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError("cannot replace " + path + ": " + ec.message());
  return last;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& run_dir, int64_t resume_step)
    : path_((std::filesystem::path(run_dir) / "metrics.jsonl").string()) {
  if (resume_step >= 0) last_step_ = truncateAfter(path_, resume_step);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw IoError("cannot open " + path_ + " for appending: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::writeGeneration(int64_t step, uint64_t generation, int world_size,
                                 const std::string& change) {
  JsonWriter w;
  w.add("step", step);
  w.add("event", std::string("generation"));
  w.add("generation", static_cast<int64_t>(generation));
  w.add("world_size", static_cast<int64_t>(world_size));
  w.add("change", change);
  append(w);
}

void MetricsLog::append(JsonWriter& w, double time) {
  w.add("time", time > 0 ? time : unixTime());
  std::string line = w.str() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw IoError("cannot write " + path_ + ": " + std::strerror(errno));
}

void MetricsLog::write(const MetricsRecord& r) {
  JsonWriter w;
  w.add("step", r.step);
  w.add("epoch", r.epoch);
  w.add("split", r.split);
  w.add("loss", r.loss);
  w.add("accuracy", r.accuracy);
  w.add(r.tokens ? "tokens_per_s" : "images_per_s", r.images_per_s);
  if (r.lr >= 0) w.add("lr", r.lr);
  w.add(r.tokens ? "tokens" : "samples", r.samples);
  if (r.tokens && r.split == "test") {
    w.add("perplexity", std::exp(r.loss));
    if (r.byte_tokens) w.add("bits_per_byte", r.loss / std::log(2.0));
  }
  for (const auto& [name, value] : r.extra) w.add(name, value);
  append(w, r.time);
}

}  // namespace dtrain
