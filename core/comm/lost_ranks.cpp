#include "core/comm/lost_ranks.h"

#include <sstream>

#include "core/comm/rendezvous_types.h"

namespace dtrain {

std::vector<LostRank> parseLostRanks(const Bytes& text) {
  std::vector<LostRank> out;
  std::istringstream lines(std::string(text.begin(), text.end()));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    LostRank r;
    if (fields >> r.rank && r.rank >= 0) {
      fields >> r.host;
      out.push_back(r);
    }
  }
  return out;
}

std::vector<LostRank> readLostRanks(Store& store) {
  if (!store.check(kLostRanksKey)) return {};
  return parseLostRanks(store.get(kLostRanksKey, std::chrono::seconds(10)));
}

}  // namespace dtrain
