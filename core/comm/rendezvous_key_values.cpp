#include "core/comm/rendezvous_key_values.h"

#include <charconv>
#include <utility>

#include "core/errors.h"

namespace dtrain {

namespace {

// Moves the reads that `take` selects out of `parked`, keeping the order of the rest.
template <class Pred>
std::vector<ParkedRead> takeIf(std::vector<ParkedRead>& parked, Pred take) {
  std::vector<ParkedRead> taken, kept;
  for (ParkedRead& r : parked) (take(r) ? taken : kept).push_back(std::move(r));
  parked = std::move(kept);
  return taken;
}

}  // namespace

const Bytes* RendezvousKeyValues::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

void RendezvousKeyValues::set(const std::string& key, Bytes value) { values_[key] = std::move(value); }

int64_t RendezvousKeyValues::add(const std::string& key, int64_t delta) {
  int64_t current = 0;
  if (const Bytes* v = find(key)) {
    const char* first = reinterpret_cast<const char*>(v->data());
    const char* last = first + v->size();
    auto [end, ec] = std::from_chars(first, last, current);
    if (ec != std::errc() || end != last || v->empty())
      throw CommError(
          "cannot add to key '" + key + "': it holds a " + std::to_string(v->size()) +
          "-byte value that is not a decimal integer (use add() only on keys that only add() writes)");
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum))
    throw CommError("cannot add " + std::to_string(delta) + " to key '" + key + "' (" +
                    std::to_string(current) + "): the sum overflows a 64-bit integer");
  std::string text = std::to_string(sum);
  values_[key] = Bytes(text.begin(), text.end());
  return sum;
}

std::vector<std::string> RendezvousKeyValues::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const std::string& k : keys)
    if (!find(k)) out.push_back(k);
  return out;
}

void RendezvousKeyValues::park(ParkedRead read) { parked_.push_back(std::move(read)); }

std::vector<ParkedRead> RendezvousKeyValues::takeSatisfied() {
  return takeIf(parked_, [&](const ParkedRead& r) { return missing(r.keys).empty(); });
}

std::vector<ParkedRead> RendezvousKeyValues::takeExpired(RendezvousClock::time_point now) {
  return takeIf(parked_, [&](const ParkedRead& r) { return r.deadline <= now; });
}

std::vector<ParkedRead> RendezvousKeyValues::takeAll() { return std::exchange(parked_, {}); }

void RendezvousKeyValues::clear() {
  values_.clear();
  parked_.clear();
}

}  // namespace dtrain
