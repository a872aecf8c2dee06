#include "core/config/host_port.h"

namespace dtrain {

std::optional<HostPort> parseHostPort(const std::string& text, std::string* problem) {
  const std::string shape = "must be \"host:port\", like \"10.0.0.1:29500\"";
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *problem = shape + " or \"[fe80::1]:29500\"";
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      *problem = shape;
      return std::nullopt;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      *problem = "must put an IPv6 address in brackets, like \"[fe80::1]:29500\"";
      return std::nullopt;
    }
  }
  if (host.empty() || port.empty()) {
    *problem = shape;
    return std::nullopt;
  }
  // At most 5 digits: anything longer is out of range and would overflow.
  bool digits = port.size() <= 5;
  for (char c : port) digits = digits && c >= '0' && c <= '9';
  int value = digits ? std::stoi(port) : 0;
  if (!digits || value < 1 || value > 65535) {
    *problem = "port must be in [1, 65535]";
    return std::nullopt;
  }
  return HostPort{host, value};
}

std::string joinHostPort(const std::string& host, int port) {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace dtrain
