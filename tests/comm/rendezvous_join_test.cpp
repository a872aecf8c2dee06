// Joining: ranks follow the job's node/slot layout whatever the arrival
// order; every kind of wrong worker is refused with a reason it can act on
// (and the coordinator goes on serving the right ones); a group that does not
// form says who is missing.
#include <doctest/doctest.h>

#include <set>

#include "rendezvous_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("rendezvous: workers get ranks in node/slot order, one generation and the peer table") {
  LogCapture log;
  RendezvousServer server(serverConfig({2, 3}, &log));
  server.start();
  CHECK_FALSE(server.formed());
  CHECK(server.generation() == 0);

  // Arrival order deliberately unlike rank order.
  JoinedGroup g = joinAll(endpointOf(server), {{1, 2}, {0, 1}, {1, 0}, {0, 0}, {1, 1}});
  const int expected_rank[] = {4, 1, 2, 0, 3};
  for (size_t i = 0; i < g.members.size(); ++i) {
    const Membership& m = g.members[i];
    CHECK(m.rank == expected_rank[i]);
    CHECK(m.world_size == 5);
    CHECK(m.generation == 1);
    REQUIRE(m.peers.size() == 5);
    CHECK(g.clients[i]->membership().rank == m.rank);
  }
  const std::vector<PeerInfo>& peers = g.members[0].peers;
  const int node_of[] = {0, 0, 1, 1, 1}, slot_of[] = {0, 1, 0, 1, 2};
  for (int r = 0; r < 5; ++r) {
    CHECK(peers[r].node == node_of[r]);
    CHECK(peers[r].slot == slot_of[r]);
    CHECK(peers[r].host == "host" + std::to_string(node_of[r]));
    CHECK(peers[r].pid == 1000 + 10 * node_of[r] + slot_of[r]);
    CHECK(peers[r].local_devices == 2);
  }
  CHECK(server.formed());
  CHECK(server.generation() == 1);
  CHECK_FALSE(server.aborted().has_value());
  CHECK(log.find("group formed: generation 1, 5 workers on 2 node(s)").has_value());
}

TEST_CASE("rendezvous: a wrong token is refused without echoing it, then a right worker joins") {
  LogCapture log;
  RendezvousServer server(serverConfig({1}, &log));
  server.start();
  JoinRequest bad = joinRequest(0, 0);
  bad.token = "guessed-token-123";
  RendezvousClient intruder(endpointOf(server), bad, fastTimeouts());
  std::string why = commErrorOf([&] { intruder.join(); });
  CHECK(why.find("wrong token for job 'job-7'") != std::string::npos);
  CHECK(why.find("guessed-token-123") == std::string::npos);
  CHECK(why.find(kToken) == std::string::npos);
  auto line = log.find("refused the join of host host0 pid 1000");
  REQUIRE(line.has_value());
  CHECK(line->find("guessed-token-123") == std::string::npos);

  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}});
  CHECK(g.members[0].rank == 0);
  CHECK(g.members[0].generation == 1);
}

TEST_CASE("rendezvous: a worker of another job is refused, naming both jobs") {
  RendezvousServer server(serverConfig({1}));
  server.start();
  JoinRequest other = joinRequest(0, 0);
  other.job_id = "other-job";
  RendezvousClient stranger(endpointOf(server), other, fastTimeouts());
  std::string why = commErrorOf([&] { stranger.join(); });
  CHECK(why.find("serves job 'job-7', not 'other-job'") != std::string::npos);
  CHECK(joinAll(endpointOf(server), {{0, 0}}).members[0].world_size == 1);
}

TEST_CASE("rendezvous: another protocol version is refused by name and request id") {
  LogCapture log;
  RendezvousServer server(serverConfig({1}, &log));
  server.start();
  RawPeer raw(endpointOf(server));
  std::string frame = wire::encode(77, wire::Join{joinRequest(0, 0)});
  frame[4] = 99;  // version 99, little-endian
  raw.send(frame);
  auto answer = raw.receive();
  REQUIRE(answer.has_value());
  CHECK(answer->request_id == 77);
  auto* refused = std::get_if<wire::Refused>(&answer->body);
  REQUIRE(refused != nullptr);
  CHECK(refused->reason.find("protocol version 99 but this coordinator speaks version 2") !=
        std::string::npos);
  CHECK(log.find("protocol version 99").has_value());
  CHECK(joinAll(endpointOf(server), {{0, 0}}).members[0].rank == 0);
}

TEST_CASE("rendezvous: node and slot out of range are refused with the layout") {
  RendezvousServer server(serverConfig({2, 1}));
  server.start();
  RendezvousClient far(endpointOf(server), joinRequest(5, 0), fastTimeouts());
  CHECK(commErrorOf([&] { far.join(); }).find("node index 5 is out of range: the job has 2 node(s), 0..1") !=
        std::string::npos);
  RendezvousClient wide(endpointOf(server), joinRequest(0, 2), fastTimeouts());
  CHECK(commErrorOf([&] {
          wide.join();
        }).find("slot 2 is out of range for node 0 (10.0.0.1), which has 2 slot(s), 0..1") !=
        std::string::npos);
  JoinRequest negative = joinRequest(1, 0);
  negative.slot = -1;
  RendezvousClient below(endpointOf(server), negative, fastTimeouts());
  CHECK(commErrorOf([&] { below.join(); }).find("slot -1 is out of range") != std::string::npos);
  JoinedGroup g = joinAll(endpointOf(server), {{1, 0}, {0, 1}, {0, 0}});
  CHECK(g.members[0].rank == 2);
}

TEST_CASE("rendezvous: a duplicate (node, slot) is refused naming who holds it; the group still forms") {
  RendezvousServer server(serverConfig({2}));
  server.start();
  RawPeer first(endpointOf(server));
  first.send(1, wire::Join{joinRequest(0, 0)});
  // A heartbeat answered after the join (same connection, in order) proves the join arrived.
  first.send(2, wire::Heartbeat{});
  auto ack = first.receive();
  REQUIRE(ack.has_value());
  CHECK(ack->request_id == 2);
  CHECK(std::holds_alternative<wire::Ok>(ack->body));

  RendezvousClient twin(endpointOf(server), joinRequest(0, 0), fastTimeouts());
  CHECK(commErrorOf([&] { twin.join(); }) ==
        "rank 0 (node 0, slot 0) has already joined from host host0 pid 1000");

  JoinedGroup g = joinAll(endpointOf(server), {{0, 1}});
  CHECK(g.members[0].rank == 1);
  auto welcome = first.receive();
  REQUIRE(welcome.has_value());
  CHECK(welcome->request_id == 1);
  REQUIRE(std::holds_alternative<wire::Welcome>(welcome->body));
  CHECK(std::get<wire::Welcome>(welcome->body).membership.rank == 0);
}

TEST_CASE("rendezvous: a late joiner is refused and the formed group carries on") {
  LogCapture log;
  RendezvousServer server(serverConfig({1}, &log));
  server.start();
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}});
  RendezvousClient late(endpointOf(server), joinRequest(0, 0), fastTimeouts());
  std::string why = commErrorOf([&] { late.join(); });
  CHECK(why.find(
            "the group of generation 1 has already formed with all 1 workers; a late worker cannot join") !=
        std::string::npos);
  CHECK(log.find("a late worker cannot join").has_value());
  g.clients[0]->set("still", bytesOf("here"));
  CHECK(textOf(g.clients[0]->get("still", 1000ms)) == "here");
  CHECK(server.generation() == 1);
}

TEST_CASE("rendezvous: the join deadline fails the joined workers, naming the missing ones") {
  LogCapture log;
  RendezvousServerConfig config = serverConfig({1, 2}, &log);
  config.join_timeout = 300ms;
  RendezvousServer server(config);
  server.start();
  RendezvousClient lonely(endpointOf(server), joinRequest(0, 0), fastTimeouts());
  auto t0 = Clock::now();
  std::string why = commErrorOf([&] { lonely.join(); });
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(seconds >= 0.25);
  CHECK(seconds < 2.0);
  CHECK(why ==
        "the group did not form within 0.3 s: still waiting for 2 of 3 workers: node 1 (10.0.0.2) slots 0, 1 "
        "(is "
        "dtrain running on those hosts, and can they reach the coordinator?)");
  REQUIRE(server.aborted().has_value());
  CHECK(*server.aborted() == why);
  CHECK(log.find("the group did not form within 0.3 s").has_value());
  CHECK_FALSE(server.formed());
}

TEST_CASE("rendezvous: a forming group logs who it is still waiting for") {
  LogCapture log;
  RendezvousServerConfig config = serverConfig({2, 2}, &log);
  config.progress_interval = 100ms;
  RendezvousServer server(config);
  server.start();
  RawPeer first(endpointOf(server));
  first.send(1, wire::Join{joinRequest(1, 1)});
  auto line = log.find("waiting for 3 of 4 workers", 2000ms);
  REQUIRE(line.has_value());
  CHECK(line->find("waiting for 3 of 4 workers: node 0 (10.0.0.1) slots 0, 1; node 1 (10.0.0.2) slot 0 (") ==
        0);
  CHECK(line->find("left before the join deadline)") != std::string::npos);
  JoinedGroup g = joinAll(endpointOf(server), {{0, 0}, {0, 1}, {1, 0}});
  CHECK(g.members[2].rank == 2);
}

TEST_CASE("rendezvous: a port in use fails with the port and what to do") {
  RendezvousServer first(serverConfig({1}));
  RendezvousServerConfig config = serverConfig({1});
  config.bind = "tcp://127.0.0.1:" + std::to_string(first.port());
  std::string why = commErrorOf([&] { RendezvousServer second(config); });
  CHECK(why.find("port " + std::to_string(first.port()) + " is already in use") != std::string::npos);
  CHECK(why.find("choose another coordinator port") != std::string::npos);
}

TEST_CASE("rendezvous: bad addresses and bad layouts are refused up front") {
  CHECK(commErrorOf([] { RendezvousClient c("localhost", joinRequest(0, 0)); }) ==
        "invalid coordinator address 'localhost': expected tcp://HOST:PORT");
  RendezvousServerConfig empty = serverConfig({});
  CHECK(commErrorOf([&] { RendezvousServer s(empty); }).find("at least one node") != std::string::npos);
  RendezvousServerConfig zero = serverConfig({1, 0});
  CHECK(commErrorOf([&] { RendezvousServer s(zero); }) ==
        "node 1 (10.0.0.2) has 0 worker slots; every node needs at least one");
  RendezvousServerConfig instant = serverConfig({1});
  instant.heartbeat_timeout = 0ms;
  CHECK(commErrorOf([&] { RendezvousServer s(instant); }).find("must be positive") != std::string::npos);
  ClientTimeouts backwards = fastTimeouts();
  backwards.heartbeat_timeout = backwards.heartbeat_interval;
  CHECK(commErrorOf([&] {
          RendezvousClient c("tcp://127.0.0.1:1", joinRequest(0, 0), backwards);
        }).find("must be longer than the heartbeat interval") != std::string::npos);
}

TEST_CASE("rendezvous: a worker with no coordinator says whom it could not reach") {
  int port = 0;
  {
    RendezvousServer gone(serverConfig({1}));  // bound and closed: nothing listens there now
    port = gone.port();
  }
  ClientTimeouts t = fastTimeouts();
  t.join = 100ms;
  RendezvousClient orphan("tcp://127.0.0.1:" + std::to_string(port), joinRequest(0, 0), t);
  std::string why = commErrorOf([&] { orphan.join(); });
  CHECK(why.find("no answer from the coordinator at tcp://127.0.0.1:" + std::to_string(port) +
                 " within 0.1 s") == 0);
}
