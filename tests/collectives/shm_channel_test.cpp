// The shared-memory channel a pipeline's stages talk through: messages
// larger than its ring arrive whole and in order; a sender that exits in the
// middle of a message, or a receiver that takes nothing, makes the other
// end throw CommError naming the peer, at once or after the timeout.
#include "core/comm/shm_channel.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "core/comm/in_memory_store.h"
#include "core/errors.h"

using namespace dtrain;
using namespace std::chrono_literals;

TEST_CASE("shm channel: messages larger than the ring arrive whole and in order") {
  InMemoryStore store;
  auto receiver = ShmChannel::receiver(store, "c", 4096, "stage 0", 10s);
  std::vector<std::vector<uint8_t>> sent;
  for (int m = 0; m < 3; ++m) {
    std::vector<uint8_t> bytes(100000 + 777 * m);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + m);
    sent.push_back(bytes);
  }
  std::thread sender_thread([&] {
    auto sender = ShmChannel::sender(store, "c", "stage 1", 10s);
    for (const auto& bytes : sent) sender->send(bytes.data(), static_cast<int64_t>(bytes.size()));
  });
  for (const auto& bytes : sent) {
    std::vector<uint8_t> got(bytes.size());
    receiver->recv(got.data(), static_cast<int64_t>(got.size()));
    CHECK(got == bytes);
  }
  sender_thread.join();
}

TEST_CASE("shm channel: a sender that exits in the middle of a message makes the receiver throw naming it") {
  InMemoryStore store;
  auto receiver = ShmChannel::receiver(store, "c", 1 << 20, "stage 0 (rank 0)", 10s);
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      auto sender = ShmChannel::sender(store, "c", "stage 1", 10s);
      const std::vector<uint8_t> half(1000, 7);
      sender->send(half.data(), static_cast<int64_t>(half.size()));
    } catch (...) {
      std::_Exit(3);
    }
    std::_Exit(0);
  }
  std::vector<uint8_t> whole(2000);
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  try {
    receiver->recv(whole.data(), static_cast<int64_t>(whole.size()));
  } catch (const CommError& e) {
    error = e.what();
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  CHECK(error.find("receive: stage 0 (rank 0) (pid " + std::to_string(child) + ") has exited") !=
        std::string::npos);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("shm channel: a receiver that takes nothing makes the sender throw after the timeout") {
  InMemoryStore store;
  auto receiver = ShmChannel::receiver(store, "c", 4096, "stage 0", 200ms);
  auto sender = ShmChannel::sender(store, "c", "stage 1", 200ms);
  const std::vector<uint8_t> bytes(20000, 1);
  std::string error;
  try {
    sender->send(bytes.data(), static_cast<int64_t>(bytes.size()));
  } catch (const CommError& e) {
    error = e.what();
  }
  CHECK(error == "send: stage 1 did not take part within 200 ms");
}
