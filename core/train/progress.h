// Shows training progress. On a terminal: one bar per epoch, redrawn in place
// (step/total, loss, accuracy, images/s, ETA). Otherwise (a log file, a pipe):
// one plain line every `plain_every_seconds`, so logs stay readable.
//
// Not thread-safe; the trainer calls it from its loop thread only.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dtrain {

class ProgressDisplay {
 public:
  // `unit`: what the rate counts, "img/s" or "tok/s".
  ProgressDisplay(std::FILE* out, bool terminal, double plain_every_seconds, std::string unit = "img/s");

  void beginEpoch(int64_t epoch, int64_t epochs, int64_t steps_in_epoch, int64_t first_step_in_epoch);
  // After each step: running averages over the epoch so far, and the samples
  // trained on since beginEpoch (the images/s shown is their average rate).
  void update(int64_t step_in_epoch, double loss, double accuracy, int64_t samples);
  // Ends the bar line (terminal) before other output.
  void endEpoch();
  // A line that must not be drawn over by the bar (evaluation, checkpoint notes).
  void line(const std::string& text);

  static bool isTerminal(std::FILE* f);

 private:
  void draw(bool final);

  std::FILE* out_;
  bool terminal_;
  double plain_every_;
  std::string unit_;
  int64_t epoch_ = 0, epochs_ = 0, steps_ = 0, step_ = 0, first_step_ = 0;
  double loss_ = 0, accuracy_ = 0, images_per_s_ = 0;
  bool bar_open_ = false;
  std::chrono::steady_clock::time_point epoch_start_, last_draw_;
};

// "1:02:03", "4:05" (hours only when needed).
std::string formatDuration(double seconds);

}  // namespace dtrain
