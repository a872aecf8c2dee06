#include "core/backend/algorithm_cache.h"

#include <cmath>
#include <utility>

#include "core/errors.h"
#include "core/io/file_sink.h"
#include "core/io/file_source.h"
#include "core/io/fs_ops.h"
#include "core/io/json.h"

namespace dtrain {

namespace {

constexpr const char* kFormat = "dtrain gpu algorithms";
constexpr int64_t kVersion = 1;

// cuDNN 9 and cuBLASLt number their versions major*10000 + minor*100 + patch.
std::string versionText(int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

// The member `key` of `object`, or throws Error naming `where` and the key.
const JsonValue& member(const JsonValue& object, const std::string& key, const std::string& where) {
  const JsonValue* v = object.find(key);
  if (!v) throw Error(where + " has no " + key);
  return *v;
}

AlgorithmChoice readChoice(const std::string& key, const JsonValue& v) {
  const std::string where = "choice '" + key + "'";
  if (!v.isObject()) throw Error(where + " is a " + v.typeName() + ", not an object");
  AlgorithmChoice c;
  c.algo = member(v, "algo", where).asInt64();
  c.math = member(v, "math", where).asInt64();
  const int64_t bytes = member(v, "workspace_bytes", where).asInt64();
  c.time_ms = member(v, "time_ms", where).asDouble();
  if (bytes < 0 || !std::isfinite(c.time_ms) || c.time_ms < 0)
    throw Error(where + " has a negative workspace or time");
  c.workspace_bytes = static_cast<uint64_t>(bytes);
  for (const JsonValue& item : member(v, "config", where).asArray()) c.config.push_back(item.asInt64());
  return c;
}

}  // namespace

std::string AlgorithmSource::describe() const {
  return (gpu.empty() ? std::string("an unnamed GPU") : gpu) + " with cuDNN " + versionText(cudnn_version) +
         " and cuBLASLt " + versionText(cublaslt_version);
}

bool parseAlgorithmFile(const std::string& text, AlgorithmSource* source,
                        std::map<std::string, AlgorithmChoice>* choices, std::string* problem) {
  try {
    const JsonValue root = parseJson(text);
    if (!root.isObject()) throw Error("the file holds a " + std::string(root.typeName()) + ", not an object");
    const JsonValue* format = root.find("format");
    if (!format || !format->isString() || format->asString() != kFormat)
      throw Error("it is not a \"" + std::string(kFormat) + "\" file");
    const int64_t version = member(root, "version", "the file").asInt64();
    if (version != kVersion)
      throw Error("version " + std::to_string(version) + " is not the " + std::to_string(kVersion) +
                  " this dtrain reads");
    AlgorithmSource s;
    s.gpu = member(root, "gpu", "the file").asString();
    s.cudnn_version = member(root, "cudnn_version", "the file").asInt64();
    s.cublaslt_version = member(root, "cublaslt_version", "the file").asInt64();
    std::map<std::string, AlgorithmChoice> read;
    for (const auto& [key, value] : member(root, "choices", "the file").asObject())
      read[key] = readChoice(key, value);
    *source = std::move(s);
    *choices = std::move(read);
    return true;
  } catch (const Error& e) {  // JsonParseError included
    *problem = e.what();
    return false;
  }
}

std::string AlgorithmCache::encode(const AlgorithmSource& source,
                                   const std::map<std::string, AlgorithmChoice>& choices) {
  JsonWriter entries;
  for (const auto& [key, c] : choices) {
    JsonWriter entry;
    entry.add("algo", c.algo)
        .add("math", c.math)
        .add("workspace_bytes", c.workspace_bytes)
        .add("time_ms", c.time_ms)
        .add("config", c.config);
    entries.add(key, entry);
  }
  JsonWriter root;
  root.add("format", kFormat)
      .add("version", kVersion)
      .add("gpu", source.gpu)
      .add("cudnn_version", source.cudnn_version)
      .add("cublaslt_version", source.cublaslt_version)
      .add("choices", entries);
  return root.str() + "\n";
}

AlgorithmCache::AlgorithmCache(std::string path) : path_(std::move(path)) {}

void AlgorithmCache::open(const AlgorithmSource& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_) {
    // One process drives one GPU; a second source would mix choices.
    if (!(source == source_))
      throw DeviceError("GPU algorithm choices for " + source_.describe() + " cannot serve " +
                        source.describe() + " in the same process");
    return;
  }
  source_ = source;
  open_ = true;
  if (!path_.empty()) readFile();
}

void AlgorithmCache::readFile() {
  std::string text;
  try {
    if (!pathExists(path_)) return;
    text = readWholeFile(path_);
  } catch (const IoError& e) {
    notes_.push_back(std::string(e.what()) + "; timing the GPU algorithms afresh");
    return;
  }
  AlgorithmSource file_source;
  std::map<std::string, AlgorithmChoice> file_choices;
  std::string problem;
  if (!parseAlgorithmFile(text, &file_source, &file_choices, &problem)) {
    notes_.push_back(path_ + " is corrupt (" + problem + "); timing the GPU algorithms afresh");
    dirty_ = true;  // replace it with a readable file at the next save
    return;
  }
  if (!(file_source == source_)) {
    notes_.push_back(path_ + " was timed on " + file_source.describe() + ", this is " + source_.describe() +
                     ": timing the GPU algorithms afresh");
    dirty_ = true;
    return;
  }
  choices_ = std::move(file_choices);
}

bool AlgorithmCache::isOpen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

std::optional<AlgorithmChoice> AlgorithmCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

void AlgorithmCache::record(const std::string& key, const AlgorithmChoice& choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = choices_.emplace(key, choice);
  if (!inserted && it->second == choice) return;
  it->second = choice;
  dirty_ = true;
}

size_t AlgorithmCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return choices_.size();
}

bool AlgorithmCache::save() {
  std::string text, tmp;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (path_.empty() || !open_ || !dirty_) return false;
    text = encode(source_, choices_);
    dirty_ = false;
  }
  tmp = path_ + ".tmp";
  try {
    writeFileDurably(tmp, text);
    renamePath(tmp, path_);
    fsyncDirectory(parentPath(path_));
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirty_ = true;  // try again at the next save
    throw;
  }
  return true;
}

std::vector<std::string> AlgorithmCache::takeNotes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(notes_, {});
}

}  // namespace dtrain
