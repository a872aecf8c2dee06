// Which of this host's addresses faces a given peer: the source address the
// kernel would use for a route to it. A launcher says nothing about the
// network, so a worker it started listens for its collectives on the address
// that reaches the coordinator, the one network every rank shares.
#pragma once
#include <string>

namespace dtrain {

// The numeric local address ("10.0.0.5", "127.0.0.1", "fe80::1%eth0" style
// without the zone) of the route toward host:port. Sends nothing (a UDP
// socket is connected, which only picks the route). Throws CommError naming
// the host when it does not resolve or no route leads there.
std::string localAddressToward(const std::string& host, int port);

}  // namespace dtrain
