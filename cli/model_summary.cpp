#include "cli/model_summary.h"

#include <algorithm>
#include <array>
#include <vector>

namespace dtrain::cli {

namespace {

std::string withCommas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

using Row = std::array<std::string, 8>;  // layer, type, config, output, params, FLOPs, forward, backward

// Columns as wide as their longest entry (preset layer names run long);
// the two number columns are right-aligned.
std::string table(const std::vector<Row>& rows) {
  std::array<size_t, 8> width{};
  for (const Row& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const Row& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      line += c == 4 || c == 5 ? pad + r[c] : r[c] + pad;
      if (c + 1 < r.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string modelSummary(const Model& model) {
  std::vector<Row> rows;
  const Precision precision = model.precision();
  rows.push_back({"layer", "type", "config", "output", "params", "FLOPs/sample", "forward", "backward"});
  rows.push_back({"input", "", "", model.inputShape().str(), "", "",
                  isSixteenBit(precision) ? std::string("rounded to ") + precisionName(precision) : "", ""});
  int64_t total_params = 0;
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    const auto& node = model.nodes()[i];
    int64_t params = 0;
    for (const auto& p : node.layer->paramSpecs()) params += p.shape.numel();
    total_params += params;
    // A fused activation's or add's element ops are counted by the layer that applies it.
    const int alias = model.aliasOf(i);
    const std::string type = node.layer->type();
    const bool fused = alias >= 0 && (type == "relu" || type == "relu6" || type == "add");
    std::string config = fused ? "fused into " + model.nodes()[alias].layer->name() : node.layer->describe();
    // Layers reading several results say which (residual adds, concatenations).
    if (node.inputs.size() > 1) {
      std::string from;
      for (int in : node.inputs)
        from +=
            (from.empty() ? "" : ", ") + (in < 0 ? std::string("input") : model.nodes()[in].layer->name());
      config += (config.empty() ? "" : "; ") + std::string("of ") + from;
    }
    // The arithmetic of each pass; a fused layer's is its producer's.
    const PassPrecision passes = passPrecisionOf(node.layer->sixteenBitRole(), precision);
    rows.push_back({node.layer->name(), type, config, node.out_shape.str(), withCommas(params),
                    withCommas(fused ? 0 : node.layer->forwardFlops()), fused ? "(fused)" : passes.forward,
                    fused ? "(fused)" : passes.backward});
  }
  rows.push_back({"total", "", "", "", withCommas(total_params), withCommas(model.forwardFlops()), "", ""});
  return table(rows);
}

}  // namespace dtrain::cli
