// Minimal JSON for dtrain's own files: a writer that builds one object (the
// safetensors header, a metrics.jsonl line, `eval --json` output) and a strict
// RFC 8259 parser for reading such text back.
//
// Writer: doubles are printed in their shortest form that parses back to the
// same value; NaN and infinities become null (JSON has no spelling for them);
// strings are escaped, and bytes that are not valid UTF-8 become U+FFFD so the
// output is always valid JSON. Members keep insertion order.
//
// Parser: no comments, trailing commas, NaN, leading zeros or duplicate keys;
// strings must be valid UTF-8; nesting is limited (kJsonMaxDepth) so hostile
// input cannot exhaust the stack. Errors throw JsonParseError carrying the
// byte offset. Pure values and functions; thread-safe for distinct objects.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/errors.h"

namespace dtrain {

// Bad JSON text. what() reads "invalid JSON at byte N: <reason>".
class JsonParseError : public Error {
 public:
  JsonParseError(size_t offset, const std::string& reason);
  size_t offset() const { return offset_; }
  const std::string& reason() const { return reason_; }

 private:
  size_t offset_;
  std::string reason_;
};

class JsonValue {
 public:
  enum class Type : uint8_t { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<JsonValue>;
  using Member = std::pair<std::string, JsonValue>;
  using Object = std::vector<Member>;  // document order

  JsonValue() = default;  // null
  static JsonValue boolean(bool b);
  // `text` is the literal as written (kept so integers read back exactly).
  static JsonValue number(double v, std::string text);
  static JsonValue string(std::string s);
  static JsonValue array(Array items);
  static JsonValue object(Object members);

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::Null; }
  bool isBool() const { return type_ == Type::Bool; }
  bool isNumber() const { return type_ == Type::Number; }
  bool isString() const { return type_ == Type::String; }
  bool isArray() const { return type_ == Type::Array; }
  bool isObject() const { return type_ == Type::Object; }
  // "null", "boolean", "number", "string", "array", "object" (for messages).
  const char* typeName() const;

  // Typed access; each throws Error when the value has another type.
  bool asBool() const;
  double asDouble() const;
  // Exact for integer literals; throws Error for fractions or out-of-range values.
  int64_t asInt64() const;
  const std::string& asString() const;
  const Array& asArray() const;
  const Object& asObject() const;

  // Object member by key, or nullptr (also for non-objects). Linear search.
  const JsonValue* find(const std::string& key) const;

 private:
  Type type_ = Type::Null;
  bool bool_ = false;
  double number_ = 0.0;
  std::string text_;  // string value, or the number's literal
  Array array_;
  Object object_;
};

constexpr int kJsonMaxDepth = 64;

// Parses one JSON value (surrounding whitespace allowed, nothing else).
// Throws JsonParseError.
JsonValue parseJson(const std::string& text, int max_depth = kJsonMaxDepth);

// `s` as a quoted, escaped JSON string.
std::string jsonQuote(const std::string& s);
// Shortest round-trip spelling of `v` ("0.1", "1.0", "1e+300"); "null" if not finite.
std::string jsonNumber(double v);

// Builds one JSON object, member by member. Adding a key twice throws Error.
class JsonWriter {
 public:
  JsonWriter& add(const std::string& key, int64_t v);
  JsonWriter& add(const std::string& key, uint64_t v);
  // Any other integer type (int, size_t, ...); bool has its own overload.
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JsonWriter& add(const std::string& key, T v) {
    if constexpr (std::is_signed_v<T>)
      return add(key, static_cast<int64_t>(v));
    else
      return add(key, static_cast<uint64_t>(v));
  }
  JsonWriter& add(const std::string& key, double v);
  JsonWriter& add(const std::string& key, bool v);
  JsonWriter& add(const std::string& key, const std::string& v);
  JsonWriter& add(const std::string& key, const char* v);  // else it would pick bool
  JsonWriter& add(const std::string& key, const std::vector<int64_t>& v);
  JsonWriter& add(const std::string& key, const std::vector<double>& v);
  JsonWriter& add(const std::string& key, const std::vector<std::string>& v);
  JsonWriter& add(const std::string& key, const JsonWriter& object);  // nested object
  JsonWriter& add(const std::string& key, const std::vector<JsonWriter>& objects);  // array of objects
  JsonWriter& addNull(const std::string& key);

  bool empty() const { return keys_.empty(); }
  // The object as compact JSON text ("{}" when empty).
  std::string str() const { return "{" + body_ + "}"; }

 private:
  JsonWriter& addRaw(const std::string& key, const std::string& json);

  std::string body_;
  std::unordered_set<std::string> keys_;
};

}  // namespace dtrain
