// The ranks a run lost and goes on without (a parameter server's workers in
// an asynchronous mode), as the coordinator announces them in the store
// under kLostRanksKey: in the order they were lost, with their hosts.
#pragma once
#include <string>
#include <vector>

#include "core/comm/store.h"

namespace dtrain {

struct LostRank {
  int rank = -1;
  std::string host;
};

// The announcement's text ("RANK HOST" lines) read back; lines that do not
// parse are skipped.
std::vector<LostRank> parseLostRanks(const Bytes& text);
// What the store announces now (nothing when no rank was lost). Throws
// CommError when the store cannot be reached.
std::vector<LostRank> readLostRanks(Store& store);

}  // namespace dtrain
