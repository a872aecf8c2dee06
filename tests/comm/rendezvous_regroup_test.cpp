// An elastic run's coordinator between generations, on a clock the test
// moves: who counts as lost, when the next group forms and with whom, and
// the policy limits it applies then.
#include <doctest/doctest.h>

#include "coordinator_driver.h"
#include "rendezvous_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Two nodes of two slots; peers "a0", "a1", "b0", "b1" joined as generation 1.
RendezvousServerConfig elasticConfig() {
  RendezvousServerConfig c = serverConfig({2, 2});
  c.elastic.enabled = true;
  c.elastic.answer_window = 500ms;
  return c;
}

const std::vector<std::string> kPeers = {"a0", "a1", "b0", "b1"};

void joinAll(Driver& d) {
  for (int i = 0; i < 4; ++i)
    d.send(kPeers[static_cast<size_t>(i)], 1, wire::Join{joinRequest(i / 2, i % 2)});
  for (const std::string& p : kPeers) only<wire::Welcome>(d.take(p));
}

// `peer` joins again from a new connection (same process: same host and pid).
void rejoin(Driver& d, const std::string& peer, int node, int slot) {
  d.send(peer + "'", 2, wire::Join{joinRequest(node, slot)});
}

std::string valueOf(Driver& d, const std::string& peer, uint64_t generation, const std::string& key) {
  wire::Get get = withGeneration(wire::Get{}, generation);
  get.key = key;
  get.timeout_ms = 100;
  d.send(peer, 9, get);
  return textOf(only<wire::Value>(d.take(peer)).value);
}

}  // namespace

TEST_CASE("regroup: a killed rank's host reports it; the survivors who join again form generation 2") {
  Driver d(elasticConfig());
  joinAll(d);
  d.loseProcess(1, joinRequest(1, 1).pid, "killed by signal 9");
  // The lost rank is told too: if it was only frozen, it learns it must join again.
  for (const std::string& p : kPeers) {
    const std::vector<wire::Message> to_p = d.take(p);
    const wire::RegroupNotice& n = only<wire::RegroupNotice>(to_p);
    CHECK(n.generation == 1);
    CHECK(n.reason == "lost rank 3 (host host1, pid 1011): killed by signal 9");
  }
  CHECK(d.coordinator().status().regrouping);
  rejoin(d, "b0", 1, 0);
  rejoin(d, "a0", 0, 0);
  CHECK(d.take("a0'").empty());  // rank 1 not in yet
  rejoin(d, "a1", 0, 1);
  // Survivors keep their order: old ranks 0, 1, 2 are the new 0, 1, 2.
  CHECK(only<wire::Welcome>(d.take("a0'")).membership.rank == 0);
  CHECK(only<wire::Welcome>(d.take("a1'")).membership.rank == 1);
  const Membership m = only<wire::Welcome>(d.take("b0'")).membership;
  CHECK(m.rank == 2);
  CHECK(m.world_size == 3);
  CHECK(m.generation == 2);
  CHECK(valueOf(d, "a0'", 2, kElasticChangeKey) ==
        "generation 2: 3 worker(s); lost rank 3 (host host1, pid 1011): killed by signal 9");
  CHECK(d.coordinator().status().lost_pids == std::vector<int>{1011});
  CHECK_FALSE(d.coordinator().status().failure.has_value());
}

TEST_CASE("regroup: a rank that does not answer the notice within the answer window is lost") {
  Driver d(elasticConfig());
  joinAll(d);
  // Rank 0's collective failed (a peer vanished without its host telling): it joins again.
  rejoin(d, "a0", 0, 0);
  for (const std::string& p : {"a1", "b0", "b1"}) only<wire::RegroupNotice>(d.take(p));
  // Ranks 1 and 2 answer (their heartbeat); rank 3 is silent.
  d.send("a1", 5, withGeneration(wire::Heartbeat{}, 1));
  d.send("b0", 5, withGeneration(wire::Heartbeat{}, 1));
  only<wire::Ok>(d.take("a1"));
  only<wire::Ok>(d.take("b0"));
  rejoin(d, "a1", 0, 1);
  d.advance(499ms);
  rejoin(d, "b0", 1, 0);
  CHECK(d.take("a0'").empty());  // rank 3 still has 1 ms
  d.advance(1ms);
  CHECK(only<wire::Welcome>(d.take("a0'")).membership.world_size == 3);
  CHECK(valueOf(d, "a0'", 2, kElasticChangeKey)
            .find("lost rank 3 (host host1, pid 1011): did not answer the regroup notice within 0.5 s") !=
        std::string::npos);
}

TEST_CASE("regroup: a replacement waits, is announced to the chief, and joins when the ranks re-form") {
  Driver d(elasticConfig());
  joinAll(d);
  d.loseProcess(1, joinRequest(1, 1).pid, "killed");
  rejoin(d, "a0", 0, 0);
  rejoin(d, "a1", 0, 1);
  rejoin(d, "b0", 1, 0);
  for (const std::string& p : {"a0'", "a1'", "b0'"}) d.take(p);
  // A second worker for a slot that is taken is refused; the lost one's place is free.
  JoinRequest twice = joinRequest(1, 0);
  twice.pid = 2000;
  d.send("x", 1, wire::Join{twice});
  CHECK(only<wire::Refused>(d.take("x")).reason.find("node 1 slot 0 is taken") != std::string::npos);
  JoinRequest replacement = joinRequest(1, 1);
  replacement.pid = 2001;
  d.send("r", 1, wire::Join{replacement});
  CHECK(d.take("r").empty());  // waits
  d.advance(10ms);
  wire::Check check = withGeneration(wire::Check{}, 2);
  check.key = kElasticWaitingKey;
  d.send("a0'", 3, check);
  CHECK(only<wire::Flag>(d.take("a0'")).value);
  // The ranks agreed to re-form after a step: they all join again.
  d.send("a0''", 4, wire::Join{joinRequest(0, 0)});
  d.send("a1''", 4, wire::Join{joinRequest(0, 1)});
  d.send("b0''", 4, wire::Join{joinRequest(1, 0)});
  const Membership m = only<wire::Welcome>(d.take("r")).membership;
  CHECK(m.rank == 3);
  CHECK(m.world_size == 4);
  CHECK(m.generation == 3);
  CHECK(only<wire::Welcome>(d.take("a0''")).membership.rank == 0);
  CHECK(valueOf(d, "r", 3, kElasticChangeKey) ==
        "generation 3: 4 worker(s); joined node 1 slot 1 (host host1, pid 2001)");
}

TEST_CASE("regroup: losses beyond max_restarts, or below min_workers, form the group with a stop") {
  RendezvousServerConfig config = elasticConfig();
  config.elastic.max_restarts = 1;
  config.elastic.min_workers = 2;
  Driver d(config);
  joinAll(d);
  d.loseProcess(1, joinRequest(1, 1).pid, "killed");
  rejoin(d, "a0", 0, 0);
  rejoin(d, "a1", 0, 1);
  rejoin(d, "b0", 1, 0);
  d.take("a0'");
  d.send("a0'", 3, withGeneration(wire::Check{}, 2));  // no key: "" is not set
  d.take("a0'");
  wire::Check stop = withGeneration(wire::Check{}, 2);
  stop.key = kElasticStopKey;
  d.send("a0'", 4, stop);
  CHECK_FALSE(only<wire::Flag>(d.take("a0'")).value);  // 1 restart: allowed

  d.loseProcess(1, joinRequest(1, 0).pid, "killed");
  d.send("a0''", 5, wire::Join{joinRequest(0, 0)});
  d.send("a1''", 5, wire::Join{joinRequest(0, 1)});
  only<wire::Welcome>(d.take("a0''"));
  CHECK(valueOf(d, "a0''", 3, kElasticStopKey) ==
        "the run lost workers 2 times within 600.0 s, more than [cluster] max_restarts = 1");
  // Node 1 lost workers twice in the window: a replacement from it waits out the cool-down.
  JoinRequest replacement = joinRequest(1, 0);
  replacement.pid = 3000;
  d.send("r", 1, wire::Join{replacement});
  d.advance(10ms);
  wire::Check waiting = withGeneration(wire::Check{}, 3);
  waiting.key = kElasticWaitingKey;
  d.send("a0''", 6, waiting);
  CHECK_FALSE(only<wire::Flag>(d.take("a0''")).value);

  // One more loss leaves 1 worker, fewer than min_workers = 2 (said first).
  d.loseProcess(0, joinRequest(0, 1).pid, "killed");
  d.send("a0'''", 7, wire::Join{joinRequest(0, 0)});
  only<wire::Welcome>(d.take("a0'''"));
  CHECK(valueOf(d, "a0'''", 4, kElasticStopKey) ==
        "only 1 worker(s) remain, fewer than [strategy] min_workers = 2");
}

TEST_CASE("regroup: when every rank is lost the run fails, naming them") {
  Driver d(elasticConfig());
  joinAll(d);
  d.loseProcess(0, joinRequest(0, 0).pid, "killed");
  d.advance(500ms);
  const auto failure = d.coordinator().status().failure;
  REQUIRE(failure.has_value());
  CHECK(failure->find("every rank of generation 1 was lost") != std::string::npos);
  CHECK(failure->find("rank 2 (host host1, pid 1010): did not answer the regroup notice") !=
        std::string::npos);
}

TEST_CASE("regroup: another host reports its dead worker with the job's token; a stranger is refused") {
  Driver d(elasticConfig());
  joinAll(d);
  wire::ReportLost report;
  report.job_id = kJob;
  report.token = "not-the-token";
  report.node = 1;
  report.pid = joinRequest(1, 0).pid;
  report.why = "killed by signal 9";
  d.send("host1", 1, report);
  CHECK(only<wire::Refused>(d.take("host1")).reason == "wrong token for job 'job-7'");
  CHECK(d.take("a0").empty());
  report.token = kToken;
  d.send("host1", 2, report);
  only<wire::Ok>(d.take("host1"));
  const std::vector<wire::Message> to_a0 = d.take("a0");
  CHECK(only<wire::RegroupNotice>(to_a0).reason == "lost rank 2 (host host1, pid 1010): killed by signal 9");
}
