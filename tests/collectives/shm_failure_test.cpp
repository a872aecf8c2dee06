// The shared-memory group's failures: a rank that never joins, one that
// skips a call, one that drops its group, a peer process that exits, a
// /dev/shm too small, ranks that disagree on the slot size. The others must
// throw CommError naming what happened, within the deadline or at once when
// the peer cannot come, and leave no segment behind.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "collectives_test_util.h"
#include "core/comm/in_memory_store.h"
#include "core/comm/shm_wait.h"
#include "core/errors.h"
#include "failure_scenarios.h"
#include "shm_test_util.h"

using namespace dtrain;
using namespace dtrain::testing;
using namespace std::chrono_literals;

namespace {

// The store of a test whose ranks are two processes: rank 0's set() sends
// the value down a pipe and rank 1's get() reads it, which is all joining
// needs; check() finds nothing (each process holds one group).
class PipeStore : public Store {
 public:
  PipeStore(int readFd, int writeFd) : readFd_(readFd), writeFd_(writeFd) {}
  void set(const std::string&, const Bytes& value) override {
    const uint32_t length = static_cast<uint32_t>(value.size());
    if (!writeAll(&length, sizeof length) || !writeAll(value.data(), value.size()))
      throw CommError("pipe store: cannot write");
  }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    uint32_t length = 0;
    if (!readAll(&length, sizeof length, timeout)) throw CommError("pipe store: no value for " + key);
    Bytes value(length);
    if (!readAll(value.data(), length, timeout)) throw CommError("pipe store: short value for " + key);
    return value;
  }
  int64_t add(const std::string&, int64_t) override { throw CommError("pipe store: add is not supported"); }
  void wait(const std::vector<std::string>&, std::chrono::milliseconds) override {
    throw CommError("pipe store: wait is not supported");
  }
  bool check(const std::string&) override { return false; }

 private:
  bool writeAll(const void* data, size_t bytes) {
    auto* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
      const ssize_t put = ::write(writeFd_, p, bytes);
      if (put <= 0) return false;
      p += put;
      bytes -= size_t(put);
    }
    return true;
  }
  bool readAll(void* data, size_t bytes, std::chrono::milliseconds timeout) {
    auto* p = static_cast<uint8_t*>(data);
    while (bytes > 0) {
      pollfd ready{readFd_, POLLIN, 0};
      if (::poll(&ready, 1, static_cast<int>(timeout.count())) <= 0) return false;
      const ssize_t got = ::read(readFd_, p, bytes);
      if (got <= 0) return false;
      p += got;
      bytes -= size_t(got);
    }
    return true;
  }
  int readFd_, writeFd_;
};

// Rank 1 of a two-process group, in a child process: joins through the
// pipe, takes part in one exact all-reduce, then exits without a word (its
// group not destroyed, as in a crash). Exit status 0 = its sum was right.
[[noreturn]] void runChildRank(int readFd) {
  int status = 3;
  try {
    PipeStore store(readFd, -1);
    ShmProcessGroup group(store, 1, 2, shmTestOptions(5s));
    std::vector<float> data(1001);
    for (int64_t i = 0; i < 1001; ++i) data[i] = contribution(1, i, 0);
    group.allReduceSum(data.data(), 1001);
    status = firstMismatch(data.data(), 1001, [](int64_t i) { return sumOverRanks(2, i, 0); }) == "" ? 0 : 2;
    ::_exit(status);  // here, while the group is still in scope
  } catch (...) {
    status = 4;
  }
  ::_exit(status);
}

}  // namespace

TEST_CASE("shm failure: a rank that never joins fails the others' construction in time, naming it") {
  InMemoryStore store;
  ScenarioOutcome out = absentRank(
      3, 2, [&](int rank) { return std::make_unique<ShmProcessGroup>(store, rank, 3, shmTestOptions(1s)); });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(out.errors[r] == "shm group (rank " + std::to_string(r) + " of 3): rank 2 did not join within 1 s");
    CHECK(out.took[r] >= 0.9);
    CHECK(out.took[r] < 4.0);
  }
  CHECK(out.errors[2] == "");
  CHECK(leftoverSegments().empty());
}

TEST_CASE("shm failure: without rank 0 the others' construction fails in time, naming it") {
  InMemoryStore store;
  auto errors = runRanks(3, [&](int rank) {
    if (rank == 0) return;
    ShmProcessGroup group(store, rank, 3, shmTestOptions(1s));
  });
  for (int r = 1; r < 3; ++r)
    CHECK(errors[r] == "shm group (rank " + std::to_string(r) +
                           " of 3): rank 0 did not join within 1 s (is every rank started, with the same "
                           "store, size and prefix 'test'?)");
}

TEST_CASE("shm failure: a rank that skips a call makes the others throw after the timeout, naming it") {
  InMemoryStore store;
  ScenarioOutcome out = skippedCall(3, 1, [&](int rank) {
    return std::make_unique<ShmProcessGroup>(store, rank, 3, shmTestOptions(1500ms));
  });
  for (int r : {0, 2}) {
    CAPTURE(r);
    const std::string who = "shm group (rank " + std::to_string(r) + " of 3)";
    CHECK(out.errors[r] == who + ": all-reduce of 1001 floats: rank 1 did not take part within 1.5 s");
    CHECK(out.took[r] >= 1.4);
    CHECK(out.took[r] < 5.0);
    CHECK(out.later_errors[r] ==
          who +
              ": barrier: the group failed earlier (rank 1 did not take part within 1.5 s); it "
              "cannot be used again");
  }
  CHECK(out.errors[1] == "");
  CHECK(leftoverSegments().empty());
}

TEST_CASE("shm failure: a rank that drops its group while failing makes the others throw at once") {
  InMemoryStore store;
  ScenarioOutcome out = rankFailsWithGroup(
      3, 2, [&](int rank) { return std::make_unique<ShmProcessGroup>(store, rank, 3, shmTestOptions(10s)); },
      false);
  CHECK(out.errors[2] == "rank 2 hit an error of its own");
  for (int r : {0, 1}) {
    CAPTURE(r);
    // Rank 1 may instead find rank 0 gone, if rank 0 gave up first.
    CHECK(has(out.errors[r],
              "shm group (rank " + std::to_string(r) + " of 3): all-reduce of 1001 floats: rank "));
    CHECK(has(out.errors[r], " left the group (a call of its own failed, or it destroyed its group)"));
    CHECK(out.took[r] < 1.0);  // not the 10 s timeout
  }
  CHECK(has(out.errors[0], "rank 2 left the group"));
}

TEST_CASE("shm failure: processHasExited tells a running process from an exited one, reaped or not") {
  CHECK_FALSE(processHasExited(::getpid()));
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(gate[1]);
    char byte;
    (void)!::read(gate[0], &byte, 1);  // until the parent closes its end
    ::_exit(0);
  }
  ::close(gate[0]);
  CHECK_FALSE(processHasExited(child));
  ::close(gate[1]);
  // Exited but not yet reaped: a zombie, which kill() still finds.
  auto end = std::chrono::steady_clock::now() + 5s;
  while (!processHasExited(child) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
  CHECK(processHasExited(child));
  CHECK(::kill(child, 0) == 0);
  if (!processHasExited(child)) ::kill(child, SIGKILL);  // never hang the suite on a failed check
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(processHasExited(child));  // reaped: gone
}

TEST_CASE("shm failure: a peer process that exits makes the call throw at once, naming it and its pid") {
  int pipeFds[2];
  REQUIRE(::pipe(pipeFds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipeFds[1]);
    runChildRank(pipeFds[0]);
  }
  ::close(pipeFds[0]);
  std::string firstResult = "(not run)", error;
  std::chrono::steady_clock::time_point secondCall{};
  double took = -1;
  try {
    PipeStore store(-1, pipeFds[1]);
    ShmProcessGroup group(store, 0, 2, shmTestOptions(5s));
    std::vector<float> data(1001);
    for (int64_t i = 0; i < 1001; ++i) data[i] = contribution(0, i, 0);
    group.allReduceSum(data.data(), 1001);
    firstResult = firstMismatch(data.data(), 1001, [](int64_t i) { return sumOverRanks(2, i, 0); });
    secondCall = std::chrono::steady_clock::now();
    group.allReduceSum(data.data(), 1001);  // the child has gone
  } catch (const CommError& e) {
    error = e.what();
    took = secondsSince(secondCall);
  }
  ::close(pipeFds[1]);
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the child's sum was right too
  CHECK(firstResult == "");
  CHECK(error == "shm group (rank 0 of 2): all-reduce of 1001 floats: rank 1 (pid " + std::to_string(child) +
                     ") has exited");
  CHECK(took < 1.0);  // found by the liveness check, not the 5 s timeout
  CHECK(leftoverSegments().empty());
}

TEST_CASE("shm failure: a /dev/shm too small for the segment fails construction naming it, leaving nothing") {
  struct statvfs fs {};
  REQUIRE(::statvfs("/dev/shm", &fs) == 0);
  const int64_t available = int64_t(fs.f_bavail) * int64_t(fs.f_frsize);
  // Three slots of more than half the free room: the check refuses before reserving anything.
  const int64_t slotBytes = (available / 2 / 64 + 1) * 64;
  if (slotBytes > (int64_t(1) << 40)) {
    MESSAGE("skipped: /dev/shm has more room than the largest slot size can exceed");
    return;
  }
  InMemoryStore store;
  auto errors =
      runRanks(2, [&](int rank) { ShmProcessGroup group(store, rank, 2, shmTestOptions(10s, slotBytes)); });
  CAPTURE(errors[0]);
  CHECK(has(errors[0], "shm group (rank 0 of 2): the shared-memory segment /dtrain-"));
  CHECK(has(errors[0], " free (give it more room, e.g. docker run --shm-size, or lower slot_bytes)"));
  CHECK(errors[1] ==
        "shm group (rank 1 of 2): rank 0 could not create the shared-memory segment (see its error)");
  CHECK(leftoverSegments().empty());
}

TEST_CASE("shm failure: ranks given different slot sizes refuse to form a group, at once") {
  InMemoryStore store;
  std::vector<double> took(2, 0);
  auto errors = runRanks(2, [&](int rank) {
    auto start = std::chrono::steady_clock::now();
    try {
      ShmProcessGroup group(store, rank, 2, shmTestOptions(10s, rank == 0 ? 4096 : 8192));
    } catch (...) {
      took[rank] = secondsSince(start);
      throw;
    }
  });
  CHECK(errors[1] ==
        "shm group (rank 1 of 2): rank 0 made the group for 2 ranks with 4096-byte slots, but this rank was "
        "given 2 ranks and 8192-byte slots (every rank needs the same size and slot_bytes)");
  CHECK(errors[0] == "shm group (rank 0 of 2): rank 1 gave up joining (see its error)");
  CHECK(took[0] < 1.0);
  CHECK(leftoverSegments().empty());
}

TEST_CASE("shm failure: a prefix an earlier group used in the same store is refused") {
  InMemoryStore store;
  auto first = runRanks(2, [&](int rank) { ShmProcessGroup group(store, rank, 2, shmTestOptions(1s)); });
  CHECK(first[0] == "");
  CHECK(first[1] == "");
  auto second = runRanks(2, [&](int rank) { ShmProcessGroup group(store, rank, 2, shmTestOptions(1s)); });
  CHECK(second[0] ==
        "shm group (rank 0 of 2): the store already holds a group under the prefix 'test' (give each group "
        "its own prefix, e.g. with the run's generation)");
  // Rank 1 reads the earlier group's name, whose segment is gone.
  CHECK(has(second[1], "shm group (rank 1 of 2): the shared-memory segment /dtrain-"));
  CHECK(has(second[1], " is gone"));
  CHECK(leftoverSegments().empty());
}
