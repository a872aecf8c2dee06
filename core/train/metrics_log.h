// Appends one JSON object a line to RUN_DIR/metrics.jsonl: every training
// step and every evaluation, with at least step, epoch, split, loss, accuracy,
// images_per_s and time (seconds since the Unix epoch).
//
// Not thread-safe; written from the trainer loop only. Each line is flushed so
// a killed run keeps everything up to its last step.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

class JsonWriter;

struct MetricsRecord {
  int64_t step = 0;
  int64_t epoch = 0;
  std::string split;  // "train" | "test"
  double loss = 0;
  double accuracy = 0;
  double images_per_s = 0;  // tokens per second for a language model (`tokens`)
  double lr = -1;           // train lines only (< 0: omitted)
  int64_t samples = 0;      // samples the figures cover (tokens for a language model)
  // A language model's figures are per token: its rate is written as
  // tokens_per_s, and its test lines add perplexity (and bits_per_byte when
  // each token is a byte).
  bool tokens = false;
  bool byte_tokens = false;
  // What the strategy measured of the step (a parameter server's staleness
  // and per-shard traffic), written as further fields.
  std::vector<std::pair<std::string, double>> extra;
  // When the step ended (its host side: a GPU's work was queued by then),
  // seconds since the Unix epoch; 0: when the line is written. A train line
  // is written a step later, once its figures are settled.
  double time = 0;
};

// Seconds since the Unix epoch, now.
double unixTime();

class MetricsLog {
 public:
  // Opens RUN_DIR/metrics.jsonl for appending. When resuming from `resume_step`,
  // first drops lines of steps after it (written by the interrupted run after
  // its last checkpoint), replacing the file atomically.
  MetricsLog(const std::string& run_dir, int64_t resume_step = -1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const MetricsRecord& r);
  // An elastic run's group changed before step `step` + 1:
  // {"step":N,"event":"generation","generation":G,"world_size":W,"change":"..."}.
  void writeGeneration(int64_t step, uint64_t generation, int world_size, const std::string& change);
  const std::string& path() const { return path_; }
  // Opened to resume: the last step of the lines kept (-1: none).
  int64_t lastStep() const { return last_step_; }

 private:
  // Adds the time (`time`, or now when 0) and writes the line, flushed.
  void append(JsonWriter& w, double time = 0);

  std::string path_;
  int64_t last_step_ = -1;
  std::FILE* file_ = nullptr;
};

}  // namespace dtrain
