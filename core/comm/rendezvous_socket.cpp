#include "core/comm/rendezvous_socket.h"

#include <cerrno>

#include "core/comm/wire.h"
#include "core/errors.h"

namespace dtrain {

namespace {

// "tcp://*:29400" -> "29400"; empty when there is no port.
std::string portText(const std::string& endpoint) {
  size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || endpoint.compare(0, 6, "tcp://") != 0) return "";
  return endpoint.substr(colon + 1);
}

}  // namespace

void setCommonSocketOptions(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(wire::kMaxMessageBytes));
}

void bindOrExplain(zmq::socket_t& socket, const std::string& endpoint) {
  try {
    socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    std::string port = portText(endpoint);
    if (e.num() == EADDRINUSE)
      throw CommError(
          "cannot serve the rendezvous on " + endpoint + ": port " + port +
          " is already in use (another dtrain run, or another program): stop it, or choose another "
          "coordinator port in the job's [cluster] table");
    if (e.num() == EACCES)
      throw CommError("cannot serve the rendezvous on " + endpoint + ": permission denied for port " + port +
                      " (ports below 1024 need privileges): choose a port above 1024");
    throw CommError("cannot serve the rendezvous on " + endpoint + ": " + e.what() +
                    " (expected tcp://ADDRESS:PORT, e.g. tcp://*:29400)");
  }
}

void connectOrExplain(zmq::socket_t& socket, const std::string& endpoint) {
  if (portText(endpoint).empty())
    throw CommError("invalid coordinator address '" + endpoint + "': expected tcp://HOST:PORT");
  try {
    socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw CommError("invalid coordinator address '" + endpoint + "': " + e.what() +
                    " (expected tcp://HOST:PORT)");
  }
}

int boundPort(const zmq::socket_t& socket) {
  std::string text = portText(socket.get(zmq::sockopt::last_endpoint));
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    return 0;  // not a TCP endpoint (inproc, ipc): no port to report
  }
}

}  // namespace dtrain
