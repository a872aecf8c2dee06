// The header every stage-to-stage message carries ahead of its floats: which
// step, micro-batch and direction it is, which layer's result (or the
// gradient of which) it holds, from which stage to which, and its shape. The
// receiver checks it against what its schedule expects next, so messages to
// the same peer swapped, a stage built from another job, or a shape that
// does not fit are refused with a line naming the producing layer, never
// computed on (Megatron PR #5271 swapped two silently).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor/shape.h"

namespace dtrain::pipeline {

enum class Direction : uint8_t { Activation = 1, Gradient = 2 };

struct StageMessage {
  Direction direction = Direction::Activation;
  int32_t from_stage = 0, to_stage = 0;
  int64_t step = 0;  // the global batch's update number; -k: evaluation batch k
  int32_t micro_batch = 0;
  std::string layer;  // whose result it is (an activation) or the gradient of (a gradient)
  Shape shape;        // [rows, per-sample dims...]

  // Fixed-size bytes (kEncodedBytes), little-endian hosts only; decode()
  // throws CommError naming `peer` for bytes that are not such a header.
  std::vector<uint8_t> encode() const;
  static StageMessage decode(const std::vector<uint8_t>& bytes, const std::string& peer);
  // "the activation of 'conv3' for micro-batch 2 of step 7, [4, 8, 12, 12], stage 1 -> 2"
  std::string describe() const;
};

constexpr size_t kStageMessageBytes = 160;
constexpr size_t kStageMessageMaxLayerName = 63;
constexpr size_t kStageMessageMaxDims = 6;

// Throws CommError when `got` is not `expected`, naming both (and so the
// layer that produced it) and what differs.
void checkStageMessage(const StageMessage& expected, const StageMessage& got);

}  // namespace dtrain::pipeline
