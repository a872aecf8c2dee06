#include "strategies/parameter_server/placement.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/errors.h"

namespace dtrain {

namespace {

constexpr int64_t kAlignFloats = 16;  // ParamStore's tensor alignment

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t multiple) { return ceilDiv(a, multiple) * multiple; }

// One unit of packing: a whole entry, or one piece of a split entry.
struct Item {
  int64_t begin = 0, end = 0;
  const std::string* variable = nullptr;
  int64_t size() const { return end - begin; }
};

// Cuts [begin, end) into ceil(n / chunk) nearly equal pieces of at most
// `chunk` floats. Equal pieces pack better than chunk-sized ones with a small
// remainder. The piece size is rounded up to the alignment when that still
// fits the chunk; it can only lower the count below ceil(n / chunk) if the
// piece exceeded the chunk, which it does not, so the count is exact.
void splitInto(std::vector<Item>& items, int64_t begin, int64_t end, const std::string& variable,
               int64_t chunk) {
  const int64_t n = end - begin;
  const int64_t count = ceilDiv(n, chunk);
  int64_t piece = ceilDiv(n, count);
  if (roundUp(piece, kAlignFloats) <= chunk) piece = roundUp(piece, kAlignFloats);
  for (int64_t at = begin; at < end; at += piece) items.push_back({at, std::min(at + piece, end), &variable});
}

// The store's entries, each covering its floats and the padding up to the next
// entry (or the end of the buffer), cut at `chunk`.
std::vector<Item> itemsOf(const ParamStore& store, int64_t chunk) {
  std::vector<const ParamEntry*> entries;
  for (const auto& e : store.entries()) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(),
            [](const ParamEntry* a, const ParamEntry* b) { return a->offset < b->offset; });
  std::vector<Item> items;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t begin = entries[i]->offset;
    const int64_t end = i + 1 < entries.size() ? entries[i + 1]->offset : store.size();
    if (end > begin) splitInto(items, begin, end, entries[i]->name, chunk);
  }
  return items;
}

// Joins neighbours of one shard and one variable; `ranges` is sorted by begin.
std::vector<PlacedRange> mergeNeighbours(const std::vector<PlacedRange>& ranges) {
  std::vector<PlacedRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && merged.back().shard == r.shard && merged.back().end == r.begin &&
        merged.back().variable == r.variable)
      merged.back().end = r.end;
    else
      merged.push_back(r);
  }
  return merged;
}

std::string bytesText(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(int64_t(1) << 30));
  else if (bytes >= (int64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(int64_t(1) << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

int64_t floatBytes(int64_t floats) { return floats * static_cast<int64_t>(sizeof(float)); }

}  // namespace

std::vector<PlacedRange> ShardPlacement::rangesOf(int shard) const {
  std::vector<PlacedRange> own;
  for (const auto& r : ranges)
    if (r.shard == shard) own.push_back(r);
  return own;
}

int64_t chunkFloatsFor(int64_t total_floats, int shards, int64_t max_chunk_floats) {
  if (shards < 1)
    throw ConfigError("parameter servers: " + std::to_string(shards) + " shards; need at least 1");
  const int64_t quarter_of_mean =
      roundUp(std::max<int64_t>(ceilDiv(total_floats, 4 * int64_t(shards)), 1), kAlignFloats);
  return std::max<int64_t>(std::min(max_chunk_floats, quarter_of_mean), 1);
}

ShardPlacement placeVariables(const ParamStore& store, int shards, int64_t chunk_floats) {
  if (shards < 1)
    throw ConfigError("parameter servers: " + std::to_string(shards) + " shards; need at least 1");
  if (chunk_floats < 1)
    throw ConfigError("parameter servers: chunk of " + std::to_string(chunk_floats) +
                      " floats; need at least 1");

  std::vector<Item> items = itemsOf(store, chunk_floats);
  // Largest first; equal sizes by offset, so the order (and the placement) is
  // the same in every process.
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (items[a].size() != items[b].size()) return items[a].size() > items[b].size();
    return items[a].begin < items[b].begin;
  });

  ShardPlacement placement;
  placement.shards = shards;
  placement.shard_floats.assign(shards, 0);
  std::vector<PlacedRange> ranges;
  for (size_t i : order) {
    // min_element returns the first minimum: ties go to the lower shard.
    const int shard =
        static_cast<int>(std::min_element(placement.shard_floats.begin(), placement.shard_floats.end()) -
                         placement.shard_floats.begin());
    placement.shard_floats[shard] += items[i].size();
    ranges.push_back({shard, items[i].begin, items[i].end, *items[i].variable});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const PlacedRange& a, const PlacedRange& b) { return a.begin < b.begin; });
  placement.ranges = mergeNeighbours(ranges);
  return placement;
}

ShardPlacement placeVariables(const ParamStore& store, int shards) {
  return placeVariables(store, shards, chunkFloatsFor(store.size(), shards));
}

double largestShareOverMean(const ShardPlacement& placement) {
  int64_t total = 0, largest = 0;
  for (int64_t f : placement.shard_floats) {
    total += f;
    largest = std::max(largest, f);
  }
  if (total == 0) return 0.0;
  return static_cast<double>(largest) * placement.shards / static_cast<double>(total);
}

std::vector<std::string> describePlacement(const ShardPlacement& placement, bool per_variable) {
  int64_t total = 0;
  for (int64_t f : placement.shard_floats) total += f;
  std::vector<std::string> lines;
  char buf[256];
  std::snprintf(buf, sizeof buf, "placement: %d shard%s, %s, largest shard %.2fx the mean", placement.shards,
                placement.shards == 1 ? "" : "s", bytesText(floatBytes(total)).c_str(),
                largestShareOverMean(placement));
  lines.push_back(buf);

  for (int s = 0; s < placement.shards; ++s) {
    const auto own = placement.rangesOf(s);
    if (own.empty()) {
      std::snprintf(buf, sizeof buf, "  shard %d: empty", s);
    } else {
      std::set<std::string> variables;
      for (const auto& r : own) variables.insert(r.variable);
      const double share = total > 0 ? 100.0 * placement.shard_floats[s] / total : 0.0;
      std::snprintf(buf, sizeof buf, "  shard %d: %s (%.1f%%), %zu variable%s (%zu piece%s)", s,
                    bytesText(floatBytes(placement.shard_floats[s])).c_str(), share, variables.size(),
                    variables.size() == 1 ? "" : "s", own.size(), own.size() == 1 ? "" : "s");
    }
    lines.push_back(buf);
  }

  if (per_variable) {
    for (const auto& r : placement.ranges) {
      std::snprintf(buf, sizeof buf, "    shard %d  [%lld, %lld)  %s  ", r.shard,
                    static_cast<long long>(r.begin), static_cast<long long>(r.end),
                    bytesText(floatBytes(r.end - r.begin)).c_str());
      lines.push_back(buf + r.variable);  // appended, not formatted: a name has no length limit
    }
  }
  return lines;
}

}  // namespace dtrain
