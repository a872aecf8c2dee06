// The coordinator faces the network: raw TCP garbage, broken frames, unknown
// types and strangers must neither crash nor stall it. Each is refused (when
// it can be answered at all), and a correct worker joins afterwards.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util/rng.h"
#include "rendezvous_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// A plain TCP connection to the loopback port: no ZeroMQ at all.
class RawTcp {
 public:
  explicit RawTcp(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~RawTcp() { ::close(fd_); }
  // Best effort: the server may hang up halfway, which is the point.
  void write(const std::string& bytes) { (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

 private:
  int fd_ = -1;
};

}  // namespace

TEST_CASE("rendezvous robustness: raw TCP garbage does not disturb the coordinator") {
  RendezvousServer server(serverConfig({2}));
  server.start();
  Rng rng(5);
  {
    std::string noise(4096, '\0');
    for (char& c : noise) c = static_cast<char>(rng.below(256));
    RawTcp a(server.port());
    a.write(noise);
    // A ZMTP-looking greeting that announces an absurd frame.
    RawTcp b(server.port());
    b.write(std::string("\xff\0\0\0\0\0\0\0\x01\x7f", 10) + std::string(54, '\0') +
            "\x02\xff\xff\xff\xff\xff");
    RawTcp c(server.port());
    c.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    // A connection that says nothing and stays open while the group forms.
    RawTcp idle(server.port());
    JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}});
    CHECK(g.members[1].rank == 1);
    g.clients[0]->set("k", bytesOf("v"));
    CHECK(textOf(g.clients[1]->get("k", 1000ms)) == "v");
  }
}

TEST_CASE("rendezvous robustness: malformed frames are refused with a reason, then a join works") {
  LogCapture log;
  RendezvousServer server(serverConfig({1}, &log));
  server.start();
  RawPeer raw(endpointOf(server));

  raw.send(std::string());
  CHECK(raw.refusal() ==
        "malformed rendezvous message: truncated message: 0 bytes, shorter than the 15-byte header");
  raw.send("hello");
  CHECK(raw.refusal().find("shorter than the 15-byte header") != std::string::npos);
  raw.send("this is not a rendezvous message at all");
  CHECK(raw.refusal().find("does not start with \"DTRZ\"") != std::string::npos);

  std::string join = wire::encode(41, wire::Join{joinRequest(0, 0)});
  raw.send(join.substr(0, join.size() / 2));
  auto cut = raw.receive();
  REQUIRE(cut.has_value());
  CHECK(cut->request_id == 41);  // the header survived, so the answer finds its request
  REQUIRE(std::holds_alternative<wire::Refused>(cut->body));
  CHECK(std::get<wire::Refused>(cut->body).reason.find(
            "malformed rendezvous message: truncated message: field '") == 0);

  raw.send(join + "xyz");
  CHECK(raw.refusal().find("3 unexpected bytes after the last field") != std::string::npos);
  std::string unknown = wire::encode(1, wire::Ok{});
  unknown[6] = static_cast<char>(200);
  raw.send(unknown);
  CHECK(raw.refusal().find("unknown message type 200") != std::string::npos);
  raw.sendParts({join, join});
  CHECK(raw.refusal() == "malformed rendezvous message: a rendezvous message is one frame, this one had 2");
  raw.send(1, wire::Welcome{});
  CHECK(raw.refusal() == "unexpected 'welcome' message: the coordinator only takes worker requests");
  wire::Set set;
  set.generation = 1;
  set.key = "k";
  raw.send(2, set);
  CHECK(raw.refusal() == "no group has formed yet: a worker must join before it sends a set");

  CHECK(log.find("refused a message from an unknown peer: malformed rendezvous message").has_value());
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}});
  CHECK(g.members[0].rank == 0);

  // Requests from a connection that never joined the formed group.
  raw.send(3, set);
  CHECK(raw.refusal() ==
        "this connection has not joined generation 1: a worker must join before it sends a set");
  wire::Heartbeat beat;
  beat.generation = 1;
  raw.send(4, beat);
  CHECK(raw.refusal().find("has not joined generation 1") != std::string::npos);
  CHECK_FALSE(g.clients[0]->check("k"));
}

TEST_CASE("rendezvous robustness: a storm of corrupted frames leaves the coordinator serving") {
  RendezvousServer server(serverConfig({2}));
  server.start();
  JoinRequest wrong = joinRequest(0, 0);
  wrong.token = "not-the-token";  // so no corrupted join can take a slot
  wire::Set set;
  set.generation = 1;
  set.key = "key";
  set.value = bytesOf("value");
  wire::Wait wait;
  wait.keys = {"a", "b"};
  const std::string frames[] = {wire::encode(1, wire::Join{wrong}), wire::encode(2, set),
                                wire::encode(3, wait)};
  Rng rng(99);
  RawPeer raw(endpointOf(server));
  const int kFrames = 600;
  for (int i = 0; i < kFrames; ++i) {
    std::string bad = frames[i % 3];
    int flips = 1 + static_cast<int>(rng.below(3));
    for (int f = 0; f < flips; ++f) bad[rng.below(bad.size())] = static_cast<char>(rng.below(256));
    if (rng.below(4) == 0) bad.resize(rng.below(bad.size()));
    raw.send(bad);
  }
  // Every frame gets exactly one answer, and the server is still quick.
  int answers = 0;
  while (answers < kFrames && raw.receive(1000ms)) ++answers;
  CHECK(answers == kFrames);
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}});
  CHECK(g.members[0].generation == 1);
}
