#include "core/config/value_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace dtrain {

std::string formatFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // %g turns to an exponent once the digits before the point outnumber the
  // precision (300 -> "3e+02"); whole numbers of up to 17 digits read better plain.
  int exponent = v == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(v))));
  if (std::strchr(buf, 'e') && exponent >= precision && exponent < 17)
    std::snprintf(buf, sizeof buf, "%.*g", exponent + 1, v);
  std::string s = buf;
  // TOML reads "5" as an integer; a float needs a fraction or an exponent.
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string quoteString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string formatIntArray(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string formatFloatArray(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + formatFloat(v[i]);
  return out + "]";
}

std::string formatKey(const std::string& key) {
  bool bare = !key.empty();
  for (char c : key) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    bare = bare && ok;
  }
  return bare ? key : quoteString(key);
}

std::string formatValue(const LayerOptions::Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return formatFloat(*d);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&v)) return quoteString(*s);
  return formatIntArray(std::get<std::vector<int64_t>>(v));
}

namespace {

// A node in TOML syntax, for showing what was written; tables are only named
// because their content is rarely what the message is about.
std::string nodeText(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return quoteString(node.as_string()->get());
    case toml::node_type::integer:
      return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point:
      return formatFloat(node.as_floating_point()->get());
    case toml::node_type::boolean:
      return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array: {
      std::string out = "[";
      const toml::array& a = *node.as_array();
      for (size_t i = 0; i < a.size(); ++i) out += (i ? ", " : "") + nodeText(a[i]);
      return out + "]";
    }
    case toml::node_type::table:
      return "{...}";
    default: {
      std::ostringstream os;
      if (auto* d = node.as_date()) os << *d;
      if (auto* t = node.as_time()) os << *t;
      if (auto* dt = node.as_date_time()) os << *dt;
      return os.str();
    }
  }
}

}  // namespace

std::string describeNode(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string " + nodeText(node);
    case toml::node_type::integer:
      return "integer " + nodeText(node);
    case toml::node_type::floating_point:
      return "float " + nodeText(node);
    case toml::node_type::boolean:
      return "boolean " + nodeText(node);
    case toml::node_type::array:
      return "array " + nodeText(node);
    case toml::node_type::table:
      return "table";
    case toml::node_type::date:
      return "date " + nodeText(node);
    case toml::node_type::time:
      return "time " + nodeText(node);
    case toml::node_type::date_time:
      return "date-time " + nodeText(node);
    default:
      return "nothing";
  }
}

std::string describeValue(const LayerOptions::Value& v) {
  if (std::holds_alternative<int64_t>(v)) return "integer " + formatValue(v);
  if (std::holds_alternative<double>(v)) return "float " + formatValue(v);
  if (std::holds_alternative<bool>(v)) return "boolean " + formatValue(v);
  if (std::holds_alternative<std::string>(v)) return "string " + formatValue(v);
  return "array " + formatValue(v);
}

}  // namespace dtrain
