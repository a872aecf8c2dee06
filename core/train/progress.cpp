#include "core/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace dtrain {

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

bool ProgressDisplay::isTerminal(std::FILE* f) { return isatty(fileno(f)) == 1; }

ProgressDisplay::ProgressDisplay(std::FILE* out, bool terminal, double plain_every_seconds, std::string unit)
    : out_(out), terminal_(terminal), plain_every_(plain_every_seconds), unit_(std::move(unit)) {}

void ProgressDisplay::beginEpoch(int64_t epoch, int64_t epochs, int64_t steps_in_epoch,
                                 int64_t first_step_in_epoch) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps_in_epoch;
  first_step_ = first_step_in_epoch;
  step_ = first_step_in_epoch;
  epoch_start_ = last_draw_ = std::chrono::steady_clock::now();
}

void ProgressDisplay::update(int64_t step_in_epoch, double loss, double accuracy, int64_t samples) {
  step_ = step_in_epoch;
  loss_ = loss;
  accuracy_ = accuracy;
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  images_per_s_ = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0;
  double since = std::chrono::duration<double>(now - last_draw_).count();
  // A terminal is redrawn ~10 times a second; a log gets a line every few seconds.
  if (since >= (terminal_ ? 0.1 : plain_every_) || step_ == steps_) {
    last_draw_ = now;
    draw(step_ == steps_);
  }
}

void ProgressDisplay::draw(bool final) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  int64_t done = step_ - first_step_;
  double eta = done > 0 ? elapsed / done * (steps_ - step_) : NAN;
  char stats[160];
  std::snprintf(stats, sizeof stats, "%lld/%lld loss %.4f acc %.4f %.0f %s %s %s",
                static_cast<long long>(step_), static_cast<long long>(steps_), loss_, accuracy_,
                images_per_s_, unit_.c_str(), final ? "took" : "eta",
                formatDuration(final ? elapsed : eta).c_str());
  char head[48];
  std::snprintf(head, sizeof head, "epoch %lld/%lld", static_cast<long long>(epoch_ + 1),
                static_cast<long long>(epochs_));
  if (terminal_) {
    const int width = 24;
    int filled = steps_ > 0 ? static_cast<int>(width * step_ / steps_) : width;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(out_, "\r\033[K%s [%s] %s", head, bar.c_str(), stats);
    bar_open_ = true;
  } else {
    std::fprintf(out_, "%s %s\n", head, stats);
  }
  std::fflush(out_);
}

void ProgressDisplay::endEpoch() {
  if (terminal_ && bar_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  bar_open_ = false;
}

void ProgressDisplay::line(const std::string& text) {
  if (terminal_ && bar_open_) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "%s\n", text.c_str());
  if (terminal_ && bar_open_) draw(false);
  std::fflush(out_);
}

}  // namespace dtrain
