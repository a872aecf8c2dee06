// The entries of a TOML table in the order they were written. toml::table keeps
// its keys sorted by name; errors read better reported in file order.
#pragma once
#include <toml++/toml.h>

#include <string>
#include <vector>

namespace dtrain {

struct TableEntry {
  std::string key;
  toml::source_position key_pos;  // where the key itself is written
  const toml::node* node;
};

// By key position; tables built in memory (no positions) keep name order.
std::vector<TableEntry> entriesInFileOrder(const toml::table& table);

}  // namespace dtrain
