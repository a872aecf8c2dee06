// The type-specific options of one layer entry ([[model.layers]]), kept with
// their source positions so a layer factory can report
// "job.toml:30:1: [model.layers] 'conv1' filters must be > 0 (got 0)".
// A factory reads what it knows with the typed getters, then calls
// finish(), which rejects any key it did not read (with a "did you mean").
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/config/source_pos.h"

namespace dtrain {

class LayerOptions {
 public:
  using Value = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;
  struct Entry {
    Value value;
    SourcePos pos;
  };

  LayerOptions() = default;
  // `layer` names the layer in messages; `pos` is its table's position.
  LayerOptions(std::string layer, SourcePos pos) : layer_(std::move(layer)), pos_(std::move(pos)) {}
  // With the layer's type too, so finish() can say "'conv1' (conv2d) has unknown option ...".
  LayerOptions(std::string layer, std::string type, SourcePos pos)
      : layer_(std::move(layer)), type_(std::move(type)), pos_(std::move(pos)) {}

  const std::string& layer() const { return layer_; }
  const std::string& type() const { return type_; }
  const SourcePos& pos() const { return pos_; }

  void set(const std::string& key, Value v, SourcePos pos) { entries_[key] = {std::move(v), std::move(pos)}; }
  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  const std::map<std::string, Entry>& entries() const { return entries_; }

  // Typed getters. A missing key returns `fallback` (or throws ConfigError when
  // required and no fallback is given); a wrong type throws ConfigError naming
  // the key, the layer and the position. An integer is accepted where a float is asked.
  int64_t getInt(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  double getFloat(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  bool getBool(const std::string& key, std::optional<bool> fallback = std::nullopt) const;
  std::string getString(const std::string& key, std::optional<std::string> fallback = std::nullopt) const;
  // An integer n is read as the pair {n, n}; an array must have exactly 2 integers.
  std::pair<int64_t, int64_t> getPair(const std::string& key,
                                      std::optional<std::pair<int64_t, int64_t>> fallback = std::nullopt) const;

  // A ConfigError for `key` with the key's position: "<pos>: [model.layers] '<layer>' <msg>".
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  // Throws for the first key that no getter asked for, suggesting the closest known one.
  void finish() const;

 private:
  std::string layer_;
  std::string type_;
  SourcePos pos_;
  std::map<std::string, Entry> entries_;
  mutable std::set<std::string> read_;
};

}  // namespace dtrain
