#include "core/launch/route_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"

namespace dtrain {
namespace {

// The local address of a UDP socket connected to `to`; "" with *why set when there is none.
std::string sourceAddress(const addrinfo& to, std::string* why) {
  int fd = ::socket(to.ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::strerror(errno);
    return "";
  }
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  std::string address;
  if (::connect(fd, to.ai_addr, to.ai_addrlen) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    *why = std::strerror(errno);
  } else {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = local.ss_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof text))
      address = text;
    else
      *why = std::strerror(errno);
  }
  ::close(fd);
  return address;
}

}  // namespace

std::string localAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string where = host + " port " + std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw CommError("cannot resolve the coordinator host " + where + " (" + ::gai_strerror(rc) +
                    "): check the coordinator address and this host's name resolution");
  std::string why = "no address";
  std::string address;
  for (addrinfo* a = found; a && address.empty(); a = a->ai_next) address = sourceAddress(*a, &why);
  ::freeaddrinfo(found);
  if (address.empty())
    throw CommError("this host has no route to the coordinator " + where + " (" + why +
                    "): check the coordinator address and this host's network");
  return address;
}

}  // namespace dtrain
