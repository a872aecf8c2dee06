#include "core/config/layer_options.h"

#include "core/config/fail_at.h"
#include "core/config/suggest.h"
#include "core/config/value_text.h"

namespace dtrain {

void LayerOptions::fail(const std::string& key, const std::string& msg) const {
  auto it = entries_.find(key);
  const SourcePos& pos = it != entries_.end() ? it->second.pos : pos_;
  failAt(pos, "[model.layers] '" + layer_ + "' " + msg);
}

int64_t LayerOptions::getInt(const std::string& key, std::optional<int64_t> fallback) const {
  read_.insert(key);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (fallback) return *fallback;
    fail(key, "needs '" + key + "'");
  }
  if (auto* v = std::get_if<int64_t>(&it->second.value)) return *v;
  fail(key, key + " must be an integer (got " + describeValue(it->second.value) + ")");
}

double LayerOptions::getFloat(const std::string& key, std::optional<double> fallback) const {
  read_.insert(key);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (fallback) return *fallback;
    fail(key, "needs '" + key + "'");
  }
  if (auto* v = std::get_if<double>(&it->second.value)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second.value)) return static_cast<double>(*v);
  fail(key, key + " must be a float (got " + describeValue(it->second.value) + ")");
}

bool LayerOptions::getBool(const std::string& key, std::optional<bool> fallback) const {
  read_.insert(key);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (fallback) return *fallback;
    fail(key, "needs '" + key + "'");
  }
  if (auto* v = std::get_if<bool>(&it->second.value)) return *v;
  fail(key, key + " must be a boolean (got " + describeValue(it->second.value) + ")");
}

std::string LayerOptions::getString(const std::string& key, std::optional<std::string> fallback) const {
  read_.insert(key);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (fallback) return *fallback;
    fail(key, "needs '" + key + "'");
  }
  if (auto* v = std::get_if<std::string>(&it->second.value)) return *v;
  fail(key, key + " must be a string (got " + describeValue(it->second.value) + ")");
}

std::pair<int64_t, int64_t> LayerOptions::getPair(const std::string& key,
                                                  std::optional<std::pair<int64_t, int64_t>> fallback) const {
  read_.insert(key);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (fallback) return *fallback;
    fail(key, "needs '" + key + "'");
  }
  if (auto* v = std::get_if<int64_t>(&it->second.value)) return {*v, *v};
  auto* a = std::get_if<std::vector<int64_t>>(&it->second.value);
  if (a && a->size() == 2) return {(*a)[0], (*a)[1]};
  fail(key,
       key + " must be an integer or an array of 2 integers (got " + describeValue(it->second.value) + ")");
}

void LayerOptions::finish() const {
  // Report the unread key that comes first in the file, as a reader would find it.
  const std::pair<const std::string, Entry>* first = nullptr;
  for (const auto& entry : entries_) {
    if (read_.count(entry.first)) continue;
    const SourcePos& p = entry.second.pos;
    if (!first || p.line < first->second.pos.line ||
        (p.line == first->second.pos.line && p.column < first->second.pos.column))
      first = &entry;
  }
  if (!first) return;
  std::string what = "'" + layer_ + "'" + (type_.empty() ? "" : " (" + type_ + ")");
  std::string msg = "[model.layers] " + what + " has unknown option '" + first->first + "'";
  std::string hint = closestMatch(first->first, std::vector<std::string>(read_.begin(), read_.end()));
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  failAt(first->second.pos, msg);
}

}  // namespace dtrain
