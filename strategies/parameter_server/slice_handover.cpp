#include "strategies/parameter_server/slice_handover.h"

#include <algorithm>
#include <sstream>

namespace dtrain {

void DoneSlices::merge(const DoneSlices& other) {
  own_upto = std::max(own_upto, other.own_upto);
  others.insert(other.others.begin(), other.others.end());
}

std::string DoneSlices::text() const {
  std::string s = std::to_string(own_upto);
  for (const auto& [batch, slice] : others) s += " " + std::to_string(batch) + ":" + std::to_string(slice);
  return s;
}

bool DoneSlices::parse(const std::string& text, DoneSlices& out) {
  std::istringstream in(text);
  DoneSlices d;
  if (!(in >> d.own_upto)) return false;
  std::string item;
  while (in >> item) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return false;
    try {
      d.others.emplace(std::stoll(item.substr(0, colon)), std::stoi(item.substr(colon + 1)));
    } catch (const std::exception&) {
      return false;
    }
  }
  out = std::move(d);
  return true;
}

SliceHandover::SliceHandover(int workers) : workers_(workers) {}

bool SliceHandover::isLost(int worker) const {
  for (const Loss& l : losses_)
    if (l.worker == worker) return true;
  return false;
}

void SliceHandover::lose(int worker, DoneSlices done) {
  if (worker < 0 || worker >= workers_ || isLost(worker)) return;
  Loss loss{worker, std::move(done), {}};
  for (int w = 0; w < workers_; ++w)
    if (w != worker && !isLost(w)) loss.survivors.push_back(w);
  if (loss.survivors.empty()) return;  // nobody left to hand anything to
  losses_.push_back(std::move(loss));
}

int SliceHandover::ownerAfter(int64_t batch, int slice, size_t losses) const {
  int owner = slice;
  for (size_t k = 0; k < losses; ++k) {
    const Loss& l = losses_[k];
    if (owner != l.worker) continue;
    const bool done = slice == l.worker ? batch <= l.done.own_upto : l.done.others.count({batch, slice}) > 0;
    if (done) continue;  // computed and applied before the loss: nobody does it again
    // In turn over the survivors, so consecutive slices spread over them.
    const auto turn =
        static_cast<size_t>((batch * workers_ + slice) % static_cast<int64_t>(l.survivors.size()));
    owner = l.survivors[turn];
  }
  return owner;
}

int SliceHandover::owner(int64_t batch, int slice) const { return ownerAfter(batch, slice, losses_.size()); }

std::vector<int> SliceHandover::inherited(int worker, int64_t batch) const {
  std::vector<int> out;
  for (const Loss& l : losses_)
    if (l.worker != worker && owner(batch, l.worker) == worker) out.push_back(l.worker);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int64_t, int>> SliceHandover::handedOver(int worker, int first_loss,
                                                               int64_t upto) const {
  std::vector<std::pair<int64_t, int>> out;
  if (first_loss >= losses()) return out;
  // Before the earliest batch any lost worker left undone, nothing moved.
  int64_t from = upto + 1;
  for (const Loss& l : losses_) {
    from = std::min(from, l.done.own_upto + 1);
    if (!l.done.others.empty()) from = std::min(from, l.done.others.begin()->first);
  }
  for (int64_t b = std::max<int64_t>(0, from); b <= upto; ++b)
    for (const Loss& l : losses_) {
      const int before = ownerAfter(b, l.worker, static_cast<size_t>(first_loss));
      if (before != worker && owner(b, l.worker) == worker) out.emplace_back(b, l.worker);
    }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace dtrain
