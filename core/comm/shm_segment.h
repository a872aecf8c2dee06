// ShmSegment: one POSIX shared-memory object mapped into this process.
//
// create() makes a new object under a name unique to this process and call
// ("/dtrain-<pid>-<random hex>"), reserves all of its memory at once (so a
// /dev/shm that is full or too small fails here with an error, not later
// with SIGBUS on first touch) and maps it; open() maps an existing one by
// name. The mapping outlives the name: unlinkName() removes the name once
// every rank has mapped the object, and the memory goes when the last
// process unmaps it, so a run killed later leaves nothing in /dev/shm.
//
// Errors are CommError clauses naming the segment and the reason (errno's
// text), for the caller to prefix with its group. The destructor unmaps and
// never throws; it does not unlink (the group's join protocol decides when).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace dtrain {

class ShmSegment {
 public:
  // A new zero-filled segment of `bytes`.
  static std::unique_ptr<ShmSegment> create(int64_t bytes);
  // The existing segment `name`, mapped whole.
  static std::unique_ptr<ShmSegment> open(const std::string& name);

  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  const std::string& name() const { return name_; }
  uint8_t* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

  // Removes the name from /dev/shm; the mapping stays. Idempotent, and a name
  // another rank removed first is no error. Never throws.
  void unlinkName();

 private:
  ShmSegment(std::string name, uint8_t* data, int64_t bytes)
      : name_(std::move(name)), data_(data), bytes_(bytes) {}

  std::string name_;
  uint8_t* data_;
  int64_t bytes_;
  bool unlinked_ = false;
};

}  // namespace dtrain
