// Why a Gloo call failed, told in one clause that names the peer rank where
// it can be known: Gloo's own errors name a peer by its socket address (or
// not at all), which does not say which rank to look at. Internal to
// GlooProcessGroup; also the wording its other messages share.
#pragma once
#include <gloo/context.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "core/util/seconds.h"  // durationText, which these messages use

namespace dtrain {

// "rank 2", "ranks 2, 5"; with the ranks' hosts (by rank; may be empty):
// "rank 2 (host b)", "ranks 2, 3 (host b)", "ranks 1 (host a), 3 (host b)".
std::string ranksText(const std::vector<int>& ranks, const std::vector<std::string>& hosts = {});

// A Gloo message without its leading "[file:line] " (or "[enforce fail at file:line] ").
std::string withoutSourceLocation(const std::string& message);

// The clause for `error` (thrown by a Gloo call or the store), e.g. "timed
// out after 2 s waiting for rank 3" or "connection to rank 1 closed (peer
// process gone?)". `timeout` is the group's. `suspects` gives the ranks to
// name (the one a wait was on, or those findBrokenPeers finds); it is called
// only for Gloo's transport errors, other than a failed connect. `hosts`
// names each rank's host in those clauses (GlooOptions::rank_hosts).
std::string explainGlooFailure(std::exception_ptr error, std::chrono::milliseconds timeout,
                               const std::function<std::vector<int>()>& suspects,
                               const std::vector<std::string>& hosts = {});

// The peers whose connection has failed, found by a zero-byte notice on each
// (a connection that failed rethrows its error on any further use). Only for
// a group that is unusable already: a healthy peer files the notice under a
// slot no one reads. Never throws; names no one when it cannot even try.
std::vector<int> findBrokenPeers(gloo::Context& context);

}  // namespace dtrain
