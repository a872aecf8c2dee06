#include "strategies/pipeline/stage_message.h"

#include <cstring>

#include "core/errors.h"

namespace dtrain::pipeline {

namespace {

constexpr uint32_t kMagic = 0x31504C44;  // "DLP1"
constexpr uint16_t kVersion = 1;

// The header as it travels: fixed layout, little-endian hosts only.
struct Wire {
  uint32_t magic;
  uint16_t version;
  uint8_t direction;
  uint8_t dims;
  int32_t from_stage;
  int32_t to_stage;
  int64_t step;
  int32_t micro_batch;
  int32_t unused;
  int64_t shape[kStageMessageMaxDims];
  char layer[kStageMessageMaxLayerName + 1];
  uint8_t spare[16];
};
static_assert(sizeof(Wire) == kStageMessageBytes, "the stage message header has a fixed size");

std::string directionName(Direction d) { return d == Direction::Activation ? "activation" : "gradient"; }

}  // namespace

std::vector<uint8_t> StageMessage::encode() const {
  if (layer.size() > kStageMessageMaxLayerName)
    throw Error("pipeline: layer name '" + layer + "' is longer than " +
                std::to_string(kStageMessageMaxLayerName) + " bytes");
  if (shape.rank() > kStageMessageMaxDims)
    throw Error("pipeline: a message of " + std::to_string(shape.rank()) + " dimensions (at most " +
                std::to_string(kStageMessageMaxDims) + ")");
  Wire w{};
  w.magic = kMagic;
  w.version = kVersion;
  w.direction = static_cast<uint8_t>(direction);
  w.dims = static_cast<uint8_t>(shape.rank());
  w.from_stage = from_stage;
  w.to_stage = to_stage;
  w.step = step;
  w.micro_batch = micro_batch;
  for (size_t i = 0; i < shape.rank(); ++i) w.shape[i] = shape[i];
  std::memcpy(w.layer, layer.data(), layer.size());
  std::vector<uint8_t> out(sizeof w);
  std::memcpy(out.data(), &w, sizeof w);
  return out;
}

StageMessage StageMessage::decode(const std::vector<uint8_t>& bytes, const std::string& peer) {
  if (bytes.size() != sizeof(Wire))
    throw CommError(peer + ": a pipeline message header of " + std::to_string(bytes.size()) +
                    " bytes (expected " + std::to_string(sizeof(Wire)) +
                    "); is something else talking to this stage?");
  Wire w;
  std::memcpy(&w, bytes.data(), sizeof w);
  if (w.magic != kMagic) throw CommError(peer + ": not a dtrain pipeline message (bad magic)");
  if (w.version != kVersion)
    throw CommError(peer + ": pipeline message version " + std::to_string(w.version) +
                    " (this dtrain speaks " + std::to_string(kVersion) +
                    "); run the same dtrain build everywhere");
  if (w.direction != static_cast<uint8_t>(Direction::Activation) &&
      w.direction != static_cast<uint8_t>(Direction::Gradient))
    throw CommError(peer + ": a pipeline message of unknown direction " + std::to_string(w.direction));
  if (w.dims > kStageMessageMaxDims)
    throw CommError(peer + ": a pipeline message of " + std::to_string(w.dims) + " dimensions");
  if (std::memchr(w.layer, 0, sizeof w.layer) == nullptr)
    throw CommError(peer + ": a pipeline message whose layer name is not terminated");
  StageMessage m;
  m.direction = static_cast<Direction>(w.direction);
  m.from_stage = w.from_stage;
  m.to_stage = w.to_stage;
  m.step = w.step;
  m.micro_batch = w.micro_batch;
  m.layer = w.layer;
  m.shape = Shape(std::vector<int64_t>(w.shape, w.shape + w.dims));
  return m;
}

std::string StageMessage::describe() const {
  return "the " + directionName(direction) + " of '" + layer + "' for micro-batch " +
         std::to_string(micro_batch) +
         (step < 0 ? " of evaluation batch " + std::to_string(-step) : " of step " + std::to_string(step)) +
         ", " + shape.str() + ", stage " + std::to_string(from_stage) + " -> " + std::to_string(to_stage);
}

void checkStageMessage(const StageMessage& expected, const StageMessage& got) {
  std::string what;
  if (got.direction != expected.direction)
    what = "another direction";
  else if (got.layer != expected.layer)
    what = "another layer's result";
  else if (got.step != expected.step)
    what = "another step";
  else if (got.micro_batch != expected.micro_batch)
    what = "another micro-batch";
  else if (got.from_stage != expected.from_stage || got.to_stage != expected.to_stage)
    what = "another pair of stages";
  else if (got.shape != expected.shape)
    what = "another shape";
  if (what.empty()) return;
  throw CommError(
      "pipeline: stage " + std::to_string(expected.to_stage) + " expected " + expected.describe() +
      ", and received " + got.describe() + " (" + what +
      "); the stages do not run the same schedule or model: start every stage from the same job file "
      "and dtrain build");
}

}  // namespace dtrain::pipeline
