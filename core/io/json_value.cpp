// JsonValue accessors and JsonParseError.
#include <charconv>
#include <cmath>

#include "core/io/json.h"

namespace dtrain {

JsonParseError::JsonParseError(size_t offset, const std::string& reason)
    : Error("invalid JSON at byte " + std::to_string(offset) + ": " + reason),
      offset_(offset),
      reason_(reason) {}

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.type_ = Type::Bool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::number(double d, std::string text) {
  JsonValue v;
  v.type_ = Type::Number;
  v.number_ = d;
  v.text_ = std::move(text);
  return v;
}

JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.type_ = Type::String;
  v.text_ = std::move(s);
  return v;
}

JsonValue JsonValue::array(Array items) {
  JsonValue v;
  v.type_ = Type::Array;
  v.array_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(Object members) {
  JsonValue v;
  v.type_ = Type::Object;
  v.object_ = std::move(members);
  return v;
}

const char* JsonValue::typeName() const {
  switch (type_) {
    case Type::Null:
      return "null";
    case Type::Bool:
      return "boolean";
    case Type::Number:
      return "number";
    case Type::String:
      return "string";
    case Type::Array:
      return "array";
    case Type::Object:
      return "object";
  }
  return "unknown";
}

namespace {
[[noreturn]] void wrongType(const JsonValue& v, const char* wanted) {
  throw Error(std::string("JSON value is a ") + v.typeName() + ", expected " + wanted);
}
}  // namespace

bool JsonValue::asBool() const {
  if (type_ != Type::Bool) wrongType(*this, "a boolean");
  return bool_;
}

double JsonValue::asDouble() const {
  if (type_ != Type::Number) wrongType(*this, "a number");
  return number_;
}

int64_t JsonValue::asInt64() const {
  if (type_ != Type::Number) wrongType(*this, "an integer");
  if (text_.find_first_of(".eE") == std::string::npos) {
    // An integer literal: convert the text itself so values above 2^53 stay exact.
    int64_t i = 0;
    auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), i);
    if (ec == std::errc() && end == text_.data() + text_.size()) return i;
    throw Error("JSON number " + text_ + " does not fit in a 64-bit integer");
  }
  // 9.2e18 is the largest double below 2^63; 2^63 itself does not fit.
  if (std::trunc(number_) == number_ && number_ >= -9223372036854775808.0 && number_ < 9223372036854775808.0)
    return static_cast<int64_t>(number_);
  throw Error("JSON number " + text_ + " is not an integer");
}

const std::string& JsonValue::asString() const {
  if (type_ != Type::String) wrongType(*this, "a string");
  return text_;
}

const JsonValue::Array& JsonValue::asArray() const {
  if (type_ != Type::Array) wrongType(*this, "an array");
  return array_;
}

const JsonValue::Object& JsonValue::asObject() const {
  if (type_ != Type::Object) wrongType(*this, "an object");
  return object_;
}

const JsonValue* JsonValue::find(const std::string& key) const {
  if (type_ != Type::Object) return nullptr;
  for (const Member& m : object_)
    if (m.first == key) return &m.second;
  return nullptr;
}

}  // namespace dtrain
