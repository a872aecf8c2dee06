#include "core/config/parse_layers.h"

#include "core/config/fail_at.h"
#include "core/config/table_entries.h"
#include "core/config/value_text.h"

namespace dtrain {
namespace {

// The option values a layer factory can ask for; nullopt for anything else.
std::optional<LayerOptions::Value> optionValue(const toml::node& node) {
  if (auto* v = node.as_integer()) return LayerOptions::Value{v->get()};
  if (auto* v = node.as_floating_point()) return LayerOptions::Value{v->get()};
  if (auto* v = node.as_boolean()) return LayerOptions::Value{v->get()};
  if (auto* v = node.as_string()) return LayerOptions::Value{v->get()};
  if (auto* a = node.as_array()) {
    std::vector<int64_t> ints;
    for (const toml::node& e : *a) {
      auto* i = e.as_integer();
      if (!i) return std::nullopt;
      ints.push_back(i->get());
    }
    return LayerOptions::Value{std::move(ints)};
  }
  return std::nullopt;
}

LayerSpec parseLayer(const toml::table& table, size_t index, const ValueOrigin& where) {
  LayerSpec spec;
  spec.pos = where.at(table);
  const std::string entry = "[model.layers] entry " + std::to_string(index + 1);

  const toml::node* name = table.get("name");
  if (!name) failAt(spec.pos, entry + " needs 'name'");
  if (!name->is_string())
    failAt(where.at(*name), entry + " name must be a string (got " + describeNode(*name) + ")");
  spec.name = name->as_string()->get();
  const std::string layer = "[model.layers] '" + spec.name + "'";

  const toml::node* type = table.get("type");
  if (!type) failAt(spec.pos, layer + " needs 'type'");
  if (!type->is_string())
    failAt(where.at(*type), layer + " type must be a string (got " + describeNode(*type) + ")");
  spec.type = type->as_string()->get();

  spec.options = LayerOptions(spec.name, spec.type, spec.pos);
  for (const TableEntry& e : entriesInFileOrder(table)) {
    if (e.key == "name" || e.key == "type") continue;
    if (e.key == "inputs") {
      auto* inputs = e.node->as_array();
      if (!inputs)
        failAt(where.at(*e.node),
               layer + " inputs must be an array of strings (got " + describeNode(*e.node) + ")");
      for (size_t i = 0; i < inputs->size(); ++i) {
        const toml::node& input = (*inputs)[i];
        if (!input.is_string())
          failAt(where.at(input), layer + " inputs[" + std::to_string(i) + "] must be a string (got " +
                                      describeNode(input) + ")");
        spec.inputs.push_back(input.as_string()->get());
      }
      continue;
    }
    std::optional<LayerOptions::Value> value = optionValue(*e.node);
    if (!value)
      failAt(where.at(*e.node), layer + " " + e.key +
                                    " must be an integer, float, boolean, string or array of integers (got " +
                                    describeNode(*e.node) + ")");
    spec.options.set(e.key, std::move(*value), where.at(*e.node));
  }
  return spec;
}

}  // namespace

std::vector<LayerSpec> parseLayers(const toml::node& node, const ValueOrigin& where) {
  auto* array = node.as_array();
  if (!array)
    failAt(where.at(node),
           "[model] layers must be an array of tables ([[model.layers]]) (got " + describeNode(node) + ")");
  std::vector<LayerSpec> layers;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& entry = (*array)[i];
    auto* table = entry.as_table();
    if (!table)
      failAt(where.at(entry),
             "[model] layers[" + std::to_string(i) + "] must be a table (got " + describeNode(entry) + ")");
    layers.push_back(parseLayer(*table, i, where));
  }
  return layers;
}

}  // namespace dtrain
