#include "core/train/checkpoint_manifest.h"

#include "core/io/json.h"
#include "core/train/checkpoint_layout.h"

namespace dtrain {

std::string encodeManifest(const CheckpointManifest& m) {
  JsonWriter files;
  for (const ManifestEntry& e : m.files) {
    JsonWriter f;
    f.add("bytes", e.digest.bytes);
    f.add("crc32", e.digest.crc32);  // as Python's zlib.crc32 prints it
    files.add(e.file, f);
  }
  JsonWriter root;
  root.add("format", kCheckpointFormatName);
  root.add("version", m.version);
  root.add("step", m.step);
  root.add("files", files);
  return root.str() + "\n";
}

namespace {
bool readNonNegative(const JsonValue* v, int64_t max, int64_t* out) {
  if (!v || !v->isNumber()) return false;
  try {
    int64_t i = v->asInt64();
    if (i < 0 || i > max) return false;
    *out = i;
    return true;
  } catch (const Error&) {
    return false;
  }
}
}  // namespace

bool decodeManifest(const std::string& text, CheckpointManifest* m, std::string* problem) {
  const std::string name = kManifestFileName;
  JsonValue root;
  try {
    root = parseJson(text);
  } catch (const JsonParseError& e) {
    *problem = name + " is not valid JSON (" + e.what() + ")";
    return false;
  }
  const JsonValue* format = root.find("format");
  if (!root.isObject() || !format || !format->isString() || format->asString() != kCheckpointFormatName) {
    *problem = name + " is not a dtrain checkpoint manifest";
    return false;
  }
  if (!readNonNegative(root.find("version"), INT64_MAX, &m->version)) {
    *problem = name + " has no valid version";
    return false;
  }
  if (m->version != kCheckpointFormatVersion) {
    *problem = name + " has format version " + std::to_string(m->version) +
               " but this dtrain reads version " + std::to_string(kCheckpointFormatVersion) +
               " (use the dtrain that wrote it)";
    return false;
  }
  if (!readNonNegative(root.find("step"), INT64_MAX, &m->step)) {
    *problem = name + " has no valid step";
    return false;
  }
  const JsonValue* files = root.find("files");
  if (!files || !files->isObject()) {
    *problem = name + " has no file list";
    return false;
  }
  m->files.clear();
  for (const auto& [file, info] : files->asObject()) {
    ManifestEntry e;
    e.file = file;
    int64_t bytes = 0, crc = 0;
    // Only plain names: a manifest must not point outside its directory.
    bool plain = !file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos;
    if (!plain || !readNonNegative(info.find("bytes"), INT64_MAX, &bytes) ||
        !readNonNegative(info.find("crc32"), UINT32_MAX, &crc)) {
      *problem = name + " has a malformed entry for " + jsonQuote(file);
      return false;
    }
    e.digest.bytes = static_cast<uint64_t>(bytes);
    e.digest.crc32 = static_cast<uint32_t>(crc);
    m->files.push_back(std::move(e));
  }
  for (const char* required : {kModelFileName, kOptimizerFileName, kStateFileName}) {
    bool found = false;
    for (const ManifestEntry& e : m->files) found = found || e.file == required;
    if (!found) {
      *problem = name + " does not list " + required;
      return false;
    }
  }
  return true;
}

}  // namespace dtrain
