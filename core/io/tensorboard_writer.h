// TensorBoardWriter: scalars (loss, accuracy, learning rate...) in a
// TensorBoard event file, DIR/events.out.tfevents.<unix seconds>.<hostname>,
// which TensorBoard reads without TensorFlow or a protobuf library here.
//
// The file is a sequence of TFRecords (length, masked CRC-32C of the length,
// data, masked CRC-32C of the data), each holding one serialized
// tensorflow.Event; the first says file_version "brain.Event:2".
//
// Each event goes to the kernel with one write() of the whole record, so a
// TensorBoard watching the file sees it at once and a killed process leaves at
// most a truncated last record (which TensorBoard's reader skips). flush()
// adds an fsync for power loss. A failed write is cut back off the file.
//
// Owns its descriptor; not thread-safe; blocking.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// Seconds since the Unix epoch, with fractions (an event's wall_time).
double unixSecondsNow();

class TensorBoardWriter {
 public:
  // Creates `dir` (mkdir -p) and a new event file in it, and writes the
  // file_version event. A resumed run passes the step of its checkpoint: a
  // "session start" event at resume_step + 1 then makes TensorBoard drop what
  // the interrupted run wrote after that step (in its older files).
  // Throws IoError naming the path.
  explicit TensorBoardWriter(const std::string& dir, int64_t resume_step = -1);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event at `step` holding a scalar per (tag, value); nothing for an
  // empty list. Throws IoError (e.g. disk full).
  void scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values,
               double wall_time = unixSecondsNow());

  // fsyncs the file. Throws IoError.
  void flush();

  const std::string& path() const { return path_; }

 private:
  void writeRecord(const std::string& event);

  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;  // the file's length after the last complete record
};

}  // namespace dtrain
