#include "core/comm/in_memory_store.h"

#include <charconv>

#include "core/errors.h"
#include "core/util/seconds.h"

namespace dtrain {

namespace {

std::string keyList(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

void InMemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

Bytes InMemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, {key}, timeout, "get");
  return values_.at(key);
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t sum = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t current = 0;
    auto it = values_.find(key);
    if (it != values_.end()) {
      const char* first = reinterpret_cast<const char*>(it->second.data());
      const char* last = first + it->second.size();
      auto [end, ec] = std::from_chars(first, last, current);
      if (ec != std::errc() || end != last || it->second.empty())
        throw CommError(
            "cannot add to key '" + key + "': it holds a " + std::to_string(it->second.size()) +
            "-byte value that is not a decimal integer (use add() only on keys that only add() writes)");
    }
    if (__builtin_add_overflow(current, delta, &sum))
      throw CommError("cannot add " + std::to_string(delta) + " to key '" + key + "' (" +
                      std::to_string(current) + "): the sum overflows a 64-bit integer");
    std::string text = std::to_string(sum);
    values_[key] = Bytes(text.begin(), text.end());
  }
  changed_.notify_all();
  return sum;
}

void InMemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout, "wait");
}

bool InMemoryStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.count(key) != 0;
}

void InMemoryStore::waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout, const char* operation) {
  auto allSet = [&] {
    for (const std::string& k : keys)
      if (!values_.count(k)) return false;
    return true;
  };
  // A steady deadline, so spurious wake-ups and set()s of other keys do not
  // stretch the wait.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (changed_.wait_until(lock, deadline, allSet)) return;
  std::vector<std::string> missing;
  for (const std::string& k : keys)
    if (!values_.count(k)) missing.push_back(k);
  throw CommError(std::string("store ") + operation + ": timed out after " + durationText(timeout) +
                  " waiting for key" + (missing.size() == 1 ? " " : "s ") + keyList(missing) +
                  " (nothing set it in time)");
}

}  // namespace dtrain
