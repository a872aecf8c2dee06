// Reading cluster.hosts: one table per host, written as [[cluster.hosts]] or as
// an inline array (hosts = [{ address = "10.0.0.1", slots = 2 }, ...]), and the
// short form --set takes (cluster.hosts=10.0.0.1:2,10.0.0.2:2).
#pragma once
#include <toml++/toml.h>

#include <string>

#include "core/config/assign_field.h"
#include "core/config/job_config.h"

namespace dtrain {

// Replaces job.cluster.hosts with the entries of `node` and records where each
// was written: job.positions gets "cluster.hosts", "cluster.hosts[i].address"
// and "cluster.hosts[i].slots" (those given). Throws ConfigError when the node
// is neither an array of tables nor the short text form (see hostListToArray),
// an entry lacks an address, has an unknown key
// (with a "did you mean") or a value of the wrong type. Values are checked by
// validate_job.h.
void readClusterHosts(JobConfig& job, const toml::node& node, const ValueOrigin& where);

// "10.0.0.1:2, node7, [fe80::1]:4" -> the tables readClusterHosts reads:
// address, and slots when a ":N" follows (an IPv6 address with slots goes in
// brackets). Slots that are not digits are kept as text, for readClusterHosts
// to report. An empty text is an empty list.
toml::array hostListToArray(const std::string& text);

}  // namespace dtrain
