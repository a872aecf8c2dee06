// Which of the [cluster] hosts this machine is: the node index a dtrain started
// on every host finds for itself, so one command line serves all of them.
// Resolving names may wait on DNS; call it once at start-up.
#pragma once
#include <string>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

// How this machine can be named: its interface addresses and its host name.
struct HostIdentity {
  std::vector<std::string> addresses;  // numeric, IPv4 first, each once: "10.0.0.5", "127.0.0.1", "::1"
  std::string name;                    // gethostname()
};

// This machine's identity (getifaddrs, gethostname). Interfaces that are down still count:
// an address is this host's whether or not traffic flows on it yet.
HostIdentity localHostIdentity();

// The numeric addresses `host` resolves to (getaddrinfo), each once; empty when
// it does not resolve. IPv4-mapped IPv6 addresses are given as IPv4.
std::vector<std::string> resolveHostAddresses(const std::string& host);

// The index of the one host in cluster.hosts that is this machine: a host
// matches when its address resolves to one of `self`'s addresses or is its
// host name (or the name's first label). Throws ConfigError when none or
// several match, listing this machine's addresses and name and asking for
// --node N.
int findLocalNode(const ClusterSection& cluster, const HostIdentity& self);
int findLocalNode(const ClusterSection& cluster);  // with localHostIdentity()

}  // namespace dtrain
