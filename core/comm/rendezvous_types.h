// Plain values shared by the rendezvous coordinator, its workers and the wire
// format: who a worker says it is, the group it gets back, and the timeouts.
// Ownership: plain values, copied freely.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dtrain {

// Every rendezvous deadline is on this clock: wall-clock jumps must not fire or stall them.
using RendezvousClock = std::chrono::steady_clock;

// What a worker tells the coordinator when it joins.
struct JoinRequest {
  std::string job_id;
  // Shared secret of the job: a worker without it cannot join (or disturb) the run.
  std::string token;
  std::string host;  // this worker's host name, for peers and error messages
  int node = 0;      // index of this worker's host in the job's node list
  int slot = 0;      // this worker's index among its host's workers
  int pid = 0;
  int local_devices = 0;  // devices (GPUs, or CPU slots) visible on this host
};

// One member of a formed group; Membership::peers is indexed by rank.
struct PeerInfo {
  std::string host;
  int node = 0;
  int slot = 0;
  int pid = 0;
  int local_devices = 0;
};

// What every worker gets when the group forms.
struct Membership {
  int rank = -1;
  int world_size = 0;
  // New for every formed group (a fresh coordinator's first group is 1): keys,
  // barriers and heartbeats of an earlier group are refused, never mixed in.
  uint64_t generation = 0;
  std::vector<PeerInfo> peers;
};

// One host of the job's layout, as the coordinator expects it.
struct NodeLayout {
  std::string address;  // for messages: "node 1 (10.0.0.2)"
  int slots = 1;        // workers on this host
};

struct ClientTimeouts {
  // How long join() waits for the whole group (and for the coordinator to answer at all).
  std::chrono::milliseconds join{60000};
  std::chrono::milliseconds heartbeat_interval{1000};
  // Silence from the coordinator longer than this aborts the worker.
  std::chrono::milliseconds heartbeat_timeout{10000};
  // The coordinator was there a moment ago (an elastic run's worker joining
  // its next generation): its silence counts from the start, so a lost
  // coordinator is found within heartbeat_timeout, not at the join deadline.
  bool coordinator_known = false;
};

// The key under which a group announces the ranks it lost and survived: one
// line "RANK HOST" per rank, in the order they were lost.
inline constexpr const char* kLostRanksKey = "lost_ranks";

// An elastic run's keys, in a formed group's table: set while replacements
// wait to join (the chief polls it at step boundaries); what the regroup
// that formed this group changed (a line for the run's log); and why the run
// must stop (a policy limit: the workers checkpoint and stop).
inline constexpr const char* kElasticWaitingKey = "elastic/waiting";
inline constexpr const char* kElasticChangeKey = "elastic/change";
inline constexpr const char* kElasticStopKey = "elastic/stop";

// In-job recovery ([cluster] elastic): a lost rank ends its group, and the
// survivors form the next one (RendezvousRegroup), with replacements.
struct ElasticPolicy {
  bool enabled = false;
  int min_workers = 1;   // fewer after a regroup: the run stops with a checkpoint
  int max_restarts = 3;  // regroups after losses within restart_window; one more stops it
  std::chrono::milliseconds restart_window{600000};
  // A node that lost workers twice within restart_window: its replacements wait this long.
  std::chrono::milliseconds host_cooldown{60000};
  // A rank that does not answer the regroup notice within this is lost.
  std::chrono::milliseconds answer_window{500};
};

// Receives the coordinator's log lines (one line each, no newline).
using RendezvousLog = std::function<void(const std::string& line)>;

struct RendezvousServerConfig {
  // Where the coordinator listens: "tcp://*:29400", or "tcp://127.0.0.1:0" for
  // any free port (RendezvousServer::port() then says which).
  std::string bind = "tcp://*:29400";
  std::string job_id;
  std::string token;
  std::vector<NodeLayout> nodes;
  // From the first join: a group still incomplete then fails, naming who is missing.
  std::chrono::milliseconds join_timeout{60000};
  // A rank silent for longer is lost, and the group aborts.
  std::chrono::milliseconds heartbeat_timeout{10000};
  // How often a forming group logs who it is still waiting for.
  std::chrono::milliseconds progress_interval{5000};
  // Ranks whose loss the run survives (by rank; empty: none): a parameter
  // server's workers other than the chief, when their updates need no
  // lockstep. A lost one is dropped from the group and announced under the
  // key kLostRanksKey instead of aborting it, while no more than
  // `max_survivable_losses` are lost; one more aborts the group.
  std::vector<bool> survivable;
  int max_survivable_losses = 0;
  ElasticPolicy elastic;
  RendezvousLog log;  // may be empty; called from the server's thread
};

}  // namespace dtrain
