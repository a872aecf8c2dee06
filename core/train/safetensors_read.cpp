// readSafetensors: validation of the header against the file, then the data.
#include <algorithm>

#include "core/errors.h"
#include "core/io/file_source.h"
#include "core/io/json.h"
#include "core/train/safetensors.h"

namespace dtrain {

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

struct Entry {
  std::string name;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

class HeaderReader {
 public:
  explicit HeaderReader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& problem) const { throw CheckpointError(path_ + ": " + problem); }

  std::string quoted(const std::string& name) const { return jsonQuote(name); }

  void readMetadata(const JsonValue& v, std::map<std::string, std::string>* out) const {
    if (!v.isObject()) fail("__metadata__ is a " + std::string(v.typeName()) + ", expected an object");
    for (const auto& [k, val] : v.asObject()) {
      if (!val.isString())
        fail("__metadata__ value " + quoted(k) + " is a " + val.typeName() + ", expected a string");
      (*out)[k] = val.asString();
    }
  }

  // A non-negative integer that fits the format's u64 (and our int64).
  int64_t readCount(const JsonValue& v, const std::string& what) const {
    if (v.isNumber()) {
      try {
        int64_t i = v.asInt64();
        if (i >= 0) return i;
      } catch (const Error&) {
        // fall through to the message below
      }
    }
    fail(what + " must be a non-negative integer");
  }

  Entry readEntry(const std::string& name, const JsonValue& v) const {
    std::string t = "tensor " + quoted(name);
    if (!v.isObject()) fail(t + " is described by a " + v.typeName() + ", expected an object");
    const JsonValue* dtype = v.find("dtype");
    const JsonValue* shape = v.find("shape");
    const JsonValue* offsets = v.find("data_offsets");
    if (!dtype || !shape || !offsets) fail(t + " lacks one of dtype, shape, data_offsets");
    if (!dtype->isString()) fail(t + " has a non-string dtype");
    if (dtype->asString() != "F32")
      fail(t + " has dtype " + dtype->asString() + "; only F32 is supported (convert the file to float32)");

    Entry e;
    e.name = name;
    if (!shape->isArray()) fail(t + " has a shape that is not an array");
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    bool overflow = false;
    for (const JsonValue& d : shape->asArray()) {
      int64_t x = readCount(d, t + " shape extent");
      dims.push_back(x);
      overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(x), &numel);
    }
    e.shape = Shape(std::move(dims));
    if (!offsets->isArray() || offsets->asArray().size() != 2) fail(t + " data_offsets must be [begin, end]");
    e.begin = static_cast<uint64_t>(readCount(offsets->asArray()[0], t + " data_offsets begin"));
    e.end = static_cast<uint64_t>(readCount(offsets->asArray()[1], t + " data_offsets end"));
    if (e.end < e.begin) fail(t + " data_offsets " + range(e) + " end before they begin");
    uint64_t bytes = 0;
    if (overflow || __builtin_mul_overflow(numel, uint64_t{sizeof(float)}, &bytes) ||
        bytes != e.end - e.begin)
      fail(t + " has shape " + e.shape.str() + " (" +
           (overflow ? std::string("too many") : std::to_string(numel)) + " floats) but data_offsets " +
           range(e) + " span " + std::to_string(e.end - e.begin) + " bytes");
    return e;
  }

  static std::string range(const Entry& e) {
    return "[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]";
  }

 private:
  std::string path_;
};

}  // namespace

SafetensorsFile readSafetensors(const std::string& path) {
  FileSource src(path);
  HeaderReader hr(path);
  const uint64_t size = src.size();
  if (size < 8)
    hr.fail("file is " + std::to_string(size) + " bytes, too short for a safetensors file (truncated?)");
  unsigned char len_bytes[8];
  src.readAt(len_bytes, 8, 0);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t{len_bytes[i]} << (8 * i);
  if (header_len > size - 8)
    hr.fail("header length " + std::to_string(header_len) + " exceeds the " + std::to_string(size - 8) +
            " bytes after the length field (truncated or not a safetensors file)");
  if (header_len > kSafetensorsMaxHeaderBytes)
    hr.fail("header length " + std::to_string(header_len) + " exceeds the limit of " +
            std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");

  std::string header(static_cast<size_t>(header_len), '\0');
  src.readAt(header.data(), header.size(), 8);
  if (header.empty() || header[0] != '{') hr.fail("header does not start with '{' (not a safetensors file?)");
  JsonValue root;
  try {
    root = parseJson(header);
  } catch (const JsonParseError& e) {
    hr.fail("header is not valid JSON (byte " + std::to_string(e.offset()) + " of the header: " + e.reason() +
            ")");
  }

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, v] : root.asObject()) {
    if (name == "__metadata__")
      hr.readMetadata(v, &file.metadata);
    else
      entries.push_back(hr.readEntry(name, v));
  }

  // Other writers may list tensors in any order; the data itself must be
  // covered exactly once, so check coverage in offset order.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    std::string t = "tensor " + jsonQuote(e.name) + " data_offsets " + HeaderReader::range(e);
    if (e.end > data_size)
      hr.fail(t + " run past the end of the data (" + std::to_string(data_size) + " bytes; truncated file?)");
    if (e.begin < expected)
      hr.fail(t + " overlap the previous tensor, which ends at " + std::to_string(expected));
    if (e.begin > expected) hr.fail(t + " leave a gap after byte " + std::to_string(expected));
    expected = e.end;
  }
  if (expected != data_size)
    hr.fail("tensors cover " + std::to_string(expected) + " bytes but the file holds " +
            std::to_string(data_size) + " bytes of data (trailing garbage or a wrong header)");

  file.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    SafetensorsTensor t;
    t.name = std::move(e.name);
    t.shape = std::move(e.shape);
    t.data.resize(static_cast<size_t>((e.end - e.begin) / sizeof(float)));
    if (!t.data.empty())
      src.readAt(t.data.data(), static_cast<size_t>(e.end - e.begin), data_start + e.begin);
    file.tensors.push_back(std::move(t));
  }
  return file;
}

}  // namespace dtrain
