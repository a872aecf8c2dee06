#include "core/comm/gloo_all_to_all_exchange.h"

namespace dtrain {

AllToAllExchange::AllToAllExchange(gloo::Context& context) : rank_(context.rank) {
  for (Round& round : rounds_) {
    const int slot = context.nextSlot();
    round.received.assign(static_cast<size_t>(context.size), 0);  // before buffers point into it
    for (int peer = 0; peer < context.size; ++peer) {
      if (peer == context.rank) continue;
      if (&round == &rounds_[0]) peers_.push_back(peer);
      auto& pair = context.getPair(peer);
      round.sends.push_back(pair->createSendBuffer(slot, &round.mine, sizeof(int64_t)));
      round.receives.push_back(pair->createRecvBuffer(slot, &round.received[peer], sizeof(int64_t)));
    }
  }
}

std::vector<int64_t> AllToAllExchange::run(int64_t mine) {
  Round& round = rounds_[next_];
  next_ ^= 1;
  round.mine = mine;
  for (auto& send : round.sends) send->send();
  for (size_t i = 0; i < round.receives.size(); ++i) {
    waiting_for_ = peers_[i];
    round.receives[i]->waitRecv();
  }
  waiting_for_ = -1;
  for (auto& send : round.sends) send->waitSend();
  std::vector<int64_t> all = round.received;
  all[static_cast<size_t>(rank_)] = mine;
  return all;
}

}  // namespace dtrain
