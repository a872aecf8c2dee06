#include "core/comm/gloo_store.h"

#include <utility>

namespace dtrain {

GlooStore::GlooStore(dtrain::Store& store, std::string prefix, std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

std::string GlooStore::fullKey(const std::string& key) const {
  return prefix_.empty() ? key : prefix_ + "/" + key;
}

std::vector<std::string> GlooStore::fullKeys(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) out.push_back(fullKey(k));
  return out;
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_.set(fullKey(key), Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  Bytes value = store_.get(fullKey(key), timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { store_.wait(fullKeys(keys), timeout_); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo passes its context timeout, kNoTimeout (zero) meaning "forever":
  // that becomes ours, so every wait stays bounded.
  store_.wait(fullKeys(keys), timeout.count() > 0 ? timeout : timeout_);
}

}  // namespace dtrain
