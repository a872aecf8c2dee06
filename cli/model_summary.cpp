#include "cli/model_summary.h"

#include <cstdio>

namespace dtrain::cli {

namespace {

std::string withCommas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string row(const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                const std::string& e, const std::string& f) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-10s %-32s %-14s %12s %14s\n", a.c_str(), b.c_str(), c.c_str(),
                d.c_str(), e.c_str(), f.c_str());
  return buf;
}

}  // namespace

std::string modelSummary(const Model& model) {
  std::string out = row("layer", "type", "config", "output", "params", "FLOPs/sample");
  out += row("input", "", "", model.inputShape().str(), "", "");
  int64_t total_params = 0;
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    const auto& node = model.nodes()[i];
    int64_t params = 0;
    for (const auto& p : node.layer->paramSpecs()) params += p.shape.numel();
    total_params += params;
    // A fused relu's element ops are counted by the layer that applies it.
    int alias = model.aliasOf(i);
    bool fused = alias >= 0 && node.layer->type() == "relu";
    std::string config = fused ? "fused into " + model.nodes()[alias].layer->name() : node.layer->describe();
    out += row(node.layer->name(), node.layer->type(), config, node.out_shape.str(), withCommas(params),
               withCommas(fused ? 0 : node.layer->forwardFlops()));
  }
  out += row("total", "", "", "", withCommas(total_params), withCommas(model.forwardFlops()));
  return out;
}

}  // namespace dtrain::cli
