// The steps of a Gloo group's construction before it can run collectives:
// a TCP device on an address of this host, the ranks meeting in the store,
// and every connection's socket send buffer sized by a first large message.
// Internal to GlooProcessGroup. Each throws CommError starting with `who`
// ("gloo group (rank 1 of 4)") or, for primeSendBuffers, what Gloo throws.
#pragma once
#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/store.h"

namespace dtrain {

// The TCP device listening on `address`, which must be an address of this host.
std::shared_ptr<gloo::transport::Device> listenOn(const std::string& address, const std::string& who);

// Collective: marks `rank` as joined under `prefix` in the store and waits
// (up to `timeout`) until all `size` ranks have; names the ranks that did
// not (with their hosts, when `hosts` gives them). Refuses a prefix an
// earlier group left in the store (its addresses are stale).
void awaitEveryRankJoined(Store& store, int rank, int size, const std::string& prefix,
                          std::chrono::milliseconds timeout, const std::string& who,
                          const std::vector<std::string>& hosts = {});

// Collective, once after connecting and before any algorithm object sends:
// one large message from every rank to every other, so that no connection's
// send buffer is pinned small (see the .cpp). Runs one of Gloo's per-call
// barriers under `barrier_tag`.
void primeSendBuffers(const std::shared_ptr<gloo::Context>& context, std::chrono::milliseconds timeout,
                      uint32_t barrier_tag);

}  // namespace dtrain
