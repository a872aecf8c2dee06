// "host:port" text, as [cluster] coordinator and MASTER_ADDR/MASTER_PORT give
// it: a name or IPv4 address, or an IPv6 address in brackets ("[fe80::1]:29500").
#pragma once
#include <optional>
#include <string>

namespace dtrain {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;      // 1..65535
};

// The host and port of `text`; nullopt when it is not host:port, with
// *problem saying what is wrong in words that follow the key's name:
// `must be "host:port", like "10.0.0.1:29500"`, `port must be in [1, 65535]`, ...
std::optional<HostPort> parseHostPort(const std::string& text, std::string* problem);

// "10.0.0.1:29500", "[fe80::1]:29500": an IPv6 host goes in brackets.
std::string joinHostPort(const std::string& host, int port);

}  // namespace dtrain
