// JsonWriter, jsonQuote and jsonNumber.
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/io/json.h"
#include "core/io/utf8.h"

namespace dtrain {

std::string jsonQuote(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c >= 0x80) {
      size_t len = utf8SequenceLength(p + i, n - i);
      if (len == 0) {
        appendUtf8(out, 0xFFFD);  // keep the output valid JSON
        ++i;
      } else {
        out.append(s, i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
  return out;
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  if (ec != std::errc()) {
    // Cannot happen with a 64-byte buffer; %.17g also round-trips.
    std::snprintf(buf, sizeof buf, "%.17g", v);
    end = buf + std::char_traits<char>::length(buf);
  }
  std::string s(buf, end);
  // Mark it as a float ("1.0", not "1") so readers that infer types keep it one.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

JsonWriter& JsonWriter::addRaw(const std::string& key, const std::string& json) {
  if (!keys_.insert(key).second) throw Error("JSON key \"" + key + "\" was added twice to one object");
  if (!body_.empty()) body_ += ',';
  body_ += jsonQuote(key);
  body_ += ':';
  body_ += json;
  return *this;
}

JsonWriter& JsonWriter::add(const std::string& key, int64_t v) { return addRaw(key, std::to_string(v)); }
JsonWriter& JsonWriter::add(const std::string& key, uint64_t v) { return addRaw(key, std::to_string(v)); }
JsonWriter& JsonWriter::add(const std::string& key, double v) { return addRaw(key, jsonNumber(v)); }
JsonWriter& JsonWriter::add(const std::string& key, bool v) { return addRaw(key, v ? "true" : "false"); }
JsonWriter& JsonWriter::add(const std::string& key, const std::string& v) {
  return addRaw(key, jsonQuote(v));
}
JsonWriter& JsonWriter::add(const std::string& key, const char* v) {
  return v ? addRaw(key, jsonQuote(v)) : addNull(key);
}
JsonWriter& JsonWriter::addNull(const std::string& key) { return addRaw(key, "null"); }
JsonWriter& JsonWriter::add(const std::string& key, const JsonWriter& object) {
  return addRaw(key, object.str());
}

namespace {
template <typename T, typename F>
std::string joinArray(const std::vector<T>& items, F&& format) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ',';
    s += format(items[i]);
  }
  return s + "]";
}
}  // namespace

JsonWriter& JsonWriter::add(const std::string& key, const std::vector<int64_t>& v) {
  return addRaw(key, joinArray(v, [](int64_t x) { return std::to_string(x); }));
}
JsonWriter& JsonWriter::add(const std::string& key, const std::vector<double>& v) {
  return addRaw(key, joinArray(v, [](double x) { return jsonNumber(x); }));
}
JsonWriter& JsonWriter::add(const std::string& key, const std::vector<std::string>& v) {
  return addRaw(key, joinArray(v, [](const std::string& x) { return jsonQuote(x); }));
}

JsonWriter& JsonWriter::add(const std::string& key, const std::vector<JsonWriter>& v) {
  return addRaw(key, joinArray(v, [](const JsonWriter& x) { return x.str(); }));
}

}  // namespace dtrain
