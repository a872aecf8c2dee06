#include "core/config/assign_field.h"

#include <limits>

#include "core/config/fail_at.h"
#include "core/config/value_text.h"

namespace dtrain {

SourcePos ValueOrigin::at(const toml::node& node) const { return at(node.source().begin); }

SourcePos ValueOrigin::at(const toml::source_position& pos) const {
  if (fixed) return *fixed;
  return SourcePos{origin, static_cast<int>(pos.line), static_cast<int>(pos.column)};
}

namespace {

struct Assigner {
  const JobField& field;
  const toml::node& node;
  const ValueOrigin& where;

  [[noreturn]] void wrongType(const toml::node& bad, const std::string& name,
                              const std::string& expected) const {
    failAt(where.at(bad), std::string("[") + field.section + "] " + name + " must be " + expected + " (got " +
                              describeNode(bad) + ")");
  }

  int64_t integer(const toml::node& n, const std::string& name) const {
    if (auto* v = n.as_integer()) return v->get();
    wrongType(n, name, "an integer");
  }

  void operator()(int64_t* out) const { *out = integer(node, field.key); }

  void operator()(int* out) const {
    int64_t v = integer(node, field.key);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      wrongType(node, field.key,
                "an integer between " + std::to_string(std::numeric_limits<int>::min()) + " and " +
                    std::to_string(std::numeric_limits<int>::max()));
    *out = static_cast<int>(v);
  }

  // A seed of -1 is as good as any; it keeps its bits and is written back as -1.
  void operator()(uint64_t* out) const { *out = static_cast<uint64_t>(integer(node, field.key)); }

  void operator()(double* out) const {
    if (auto* v = node.as_floating_point()) {
      *out = v->get();
    } else if (auto* i = node.as_integer()) {
      *out = static_cast<double>(i->get());
    } else {
      wrongType(node, field.key, "a float");
    }
  }

  double floating(const toml::node& n, const std::string& name) const {
    if (auto* v = n.as_floating_point()) return v->get();
    if (auto* i = n.as_integer()) return static_cast<double>(i->get());
    wrongType(n, name, "a float");
  }

  void operator()(std::vector<double>* out) const {
    auto* a = node.as_array();
    if (!a) wrongType(node, field.key, "an array of numbers");
    std::vector<double> values;
    for (size_t i = 0; i < a->size(); ++i)
      values.push_back(floating((*a)[i], std::string(field.key) + "[" + std::to_string(i) + "]"));
    *out = std::move(values);
  }

  void operator()(bool* out) const {
    auto* v = node.as_boolean();
    if (!v) wrongType(node, field.key, "a boolean (true or false)");
    *out = v->get();
  }

  void operator()(std::string* out) const {
    auto* v = node.as_string();
    if (!v) wrongType(node, field.key, "a string");
    *out = v->get();
  }

  void operator()(std::vector<int64_t>* out) const {
    auto* a = node.as_array();
    if (!a) wrongType(node, field.key, "an array of integers");
    std::vector<int64_t> values;
    for (size_t i = 0; i < a->size(); ++i)
      values.push_back(integer((*a)[i], std::string(field.key) + "[" + std::to_string(i) + "]"));
    *out = std::move(values);
  }
};

}  // namespace

void assignField(JobConfig& job, const JobField& field, const toml::node& node, const ValueOrigin& where) {
  std::visit(Assigner{field, node, where}, field.ref(job));
  job.positions[field.dotted()] = where.at(node);
}

}  // namespace dtrain
