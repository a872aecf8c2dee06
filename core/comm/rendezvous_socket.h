// ZeroMQ socket settings and errors shared by the rendezvous server and
// client, so both ends refuse the same oversized frames and neither blocks
// on close.
#pragma once
#include <string>
#include <zmq.hpp>

namespace dtrain {

// Linger 0 (close drops what is unsent instead of waiting for a dead peer)
// and ZMQ_MAXMSGSIZE = wire::kMaxMessageBytes (a peer cannot make us buffer more).
void setCommonSocketOptions(zmq::socket_t& socket);

// Binds; throws CommError naming the endpoint, and the port when it is taken.
void bindOrExplain(zmq::socket_t& socket, const std::string& endpoint);
// Connects; throws CommError for an address that is not tcp://HOST:PORT.
void connectOrExplain(zmq::socket_t& socket, const std::string& endpoint);

// The TCP port a bound socket listens on (the chosen one after port 0).
int boundPort(const zmq::socket_t& socket);

}  // namespace dtrain
