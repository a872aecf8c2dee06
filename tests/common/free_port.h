// A loopback TCP port for a test's coordinator or peers to listen on.
#pragma once
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dtrain::testing {

// A TCP port nobody listens on right now: the kernel's pick for port 0,
// released at once (another process may take it before the test does, which
// the kernel's choice of a fresh port makes unlikely).
inline int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  REQUIRE(bound);
  return ntohs(addr.sin_port);
}

}  // namespace dtrain::testing
