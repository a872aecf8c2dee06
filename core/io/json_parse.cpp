// parseJson: a strict recursive-descent RFC 8259 parser with a depth limit.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "core/io/json.h"
#include "core/io/utf8.h"

namespace dtrain {

namespace {

class Parser {
 public:
  Parser(const std::string& text, int max_depth) : s_(text), max_depth_(max_depth) {}

  JsonValue parseDocument() {
    skipSpace();
    if (pos_ == s_.size()) fail(pos_, "empty input, expected a JSON value");
    JsonValue v = parseValue(0);
    skipSpace();
    if (pos_ != s_.size()) fail(pos_, "unexpected " + describe(pos_) + " after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& reason) const { throw JsonParseError(at, reason); }

  // "'x'", "byte 0x01" or "end of input", for messages.
  std::string describe(size_t at) const {
    if (at >= s_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(s_[at]);
    if (c >= 0x21 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  JsonValue parseValue(int depth) {
    if (pos_ >= s_.size()) fail(pos_, "unexpected end of input, expected a JSON value");
    char c = s_[pos_];
    switch (c) {
      case '{':
        return parseObject(depth + 1);
      case '[':
        return parseArray(depth + 1);
      case '"':
        return JsonValue::string(parseString());
      case 't':
        expectWord("true");
        return JsonValue::boolean(true);
      case 'f':
        expectWord("false");
        return JsonValue::boolean(false);
      case 'n':
        expectWord("null");
        return JsonValue();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parseNumber();
        fail(pos_, "unexpected " + describe(pos_) + ", expected a JSON value");
    }
  }

  void checkDepth(int depth) const {
    if (depth > max_depth_) fail(pos_, "nesting deeper than " + std::to_string(max_depth_) + " levels");
  }

  void expectWord(const char* word) {
    size_t start = pos_;
    for (const char* w = word; *w; ++w, ++pos_)
      if (pos_ >= s_.size() || s_[pos_] != *w)
        fail(start, "unexpected " + describe(start) + ", expected a JSON value");
  }

  JsonValue parseObject(int depth) {
    checkDepth(depth);
    ++pos_;  // '{'
    JsonValue::Object members;
    std::unordered_set<std::string> seen;
    skipSpace();
    if (consume('}')) return JsonValue::object(std::move(members));
    for (;;) {
      skipSpace();
      size_t key_pos = pos_;
      if (pos_ >= s_.size() || s_[pos_] != '"')
        fail(pos_, "unexpected " + describe(pos_) + ", expected a string key");
      std::string key = parseString();
      if (!seen.insert(key).second) fail(key_pos, "duplicate key " + jsonQuote(key));
      skipSpace();
      if (!consume(':')) fail(pos_, "unexpected " + describe(pos_) + ", expected ':' after a key");
      skipSpace();
      JsonValue v = parseValue(depth);
      members.emplace_back(std::move(key), std::move(v));
      skipSpace();
      if (consume('}')) return JsonValue::object(std::move(members));
      if (!consume(',')) fail(pos_, "unexpected " + describe(pos_) + ", expected ',' or '}'");
    }
  }

  JsonValue parseArray(int depth) {
    checkDepth(depth);
    ++pos_;  // '['
    JsonValue::Array items;
    skipSpace();
    if (consume(']')) return JsonValue::array(std::move(items));
    for (;;) {
      skipSpace();
      items.push_back(parseValue(depth));
      skipSpace();
      if (consume(']')) return JsonValue::array(std::move(items));
      if (!consume(',')) fail(pos_, "unexpected " + describe(pos_) + ", expected ',' or ']'");
    }
  }

  unsigned parseHex4() {
    if (s_.size() - pos_ < 4) fail(pos_, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= unsigned(c - 'A' + 10);
      else
        fail(pos_ + i, "invalid hex digit " + describe(pos_ + i) + " in \\u escape");
    }
    pos_ += 4;
    return v;
  }

  std::string parseString() {
    size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (;;) {
      if (pos_ >= s_.size()) fail(start, "unterminated string");
      unsigned char c = p[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail(pos_, "control character " + describe(pos_) + " inside a string (escape it)");
      if (c >= 0x80) {
        size_t len = utf8SequenceLength(p + pos_, s_.size() - pos_);
        if (len == 0) fail(pos_, "invalid UTF-8 " + describe(pos_) + " inside a string");
        out.append(s_, pos_, len);
        pos_ += len;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      size_t esc = pos_++;
      if (pos_ >= s_.size()) fail(start, "unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = parseHex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail(esc, "unpaired UTF-16 low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.compare(pos_, 2, "\\u") != 0) fail(esc, "unpaired UTF-16 high surrogate in \\u escape");
            pos_ += 2;
            unsigned lo = parseHex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail(esc, "unpaired UTF-16 high surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          fail(esc, "invalid escape \\" + std::string(1, e) + " in a string");
      }
    }
  }

  bool digitAt(size_t i) const { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; }

  JsonValue parseNumber() {
    size_t start = pos_;
    consume('-');
    if (!digitAt(pos_)) fail(pos_, "expected a digit after '-'");
    if (s_[pos_] == '0') {
      ++pos_;
      if (digitAt(pos_)) fail(start, "numbers must not have leading zeros");
    } else {
      while (digitAt(pos_)) ++pos_;
    }
    bool integral = true;
    if (consume('.')) {
      integral = false;
      if (!digitAt(pos_)) fail(pos_, "expected a digit after '.'");
      while (digitAt(pos_)) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (!consume('+')) consume('-');
      if (!digitAt(pos_)) fail(pos_, "expected a digit in the exponent");
      while (digitAt(pos_)) ++pos_;
    }
    std::string text = s_.substr(start, pos_ - start);
    double v = 0.0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) {
      // Underflow rounds to zero; overflow has no finite value and is rejected.
      bool tiny = !integral && text.find("e-") != std::string::npos;
      bool tiny_upper = !integral && text.find("E-") != std::string::npos;
      if (!tiny && !tiny_upper) fail(start, "number " + text + " is out of range");
      v = text[0] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || end != text.data() + text.size()) {
      fail(start, "malformed number " + text);
    }
    return JsonValue::number(v, std::move(text));
  }

  const std::string& s_;
  int max_depth_;
  size_t pos_ = 0;
};

}  // namespace

JsonValue parseJson(const std::string& text, int max_depth) {
  return Parser(text, max_depth).parseDocument();
}

}  // namespace dtrain
