#include "core/config/table_entries.h"

#include <algorithm>

namespace dtrain {

std::vector<TableEntry> entriesInFileOrder(const toml::table& table) {
  std::vector<TableEntry> entries;
  for (auto&& [key, node] : table) entries.push_back({std::string(key.str()), key.source().begin, &node});
  std::stable_sort(entries.begin(), entries.end(), [](const TableEntry& a, const TableEntry& b) {
    if (a.key_pos.line != b.key_pos.line) return a.key_pos.line < b.key_pos.line;
    return a.key_pos.column < b.key_pos.column;
  });
  return entries;
}

}  // namespace dtrain
