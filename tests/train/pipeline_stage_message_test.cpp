// The header of a stage-to-stage message: encoded and decoded unchanged,
// garbage refused naming the peer, and a message other than the one the
// receiver's schedule expects refused naming the layer that produced it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "strategies/pipeline/stage_message.h"

using namespace dtrain;
using namespace dtrain::pipeline;

namespace {

StageMessage activation() {
  StageMessage m;
  m.direction = Direction::Activation;
  m.from_stage = 1;
  m.to_stage = 2;
  m.step = 7;
  m.micro_batch = 2;
  m.layer = "conv3";
  m.shape = Shape{4, 8, 12, 12};
  return m;
}

std::string decodeError(const std::vector<uint8_t>& bytes) {
  try {
    StageMessage::decode(bytes, "stage 1 (10.0.0.2)");
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

std::string mismatch(const StageMessage& got) {
  try {
    checkStageMessage(activation(), got);
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("pipeline message: a header reads back as it was written") {
  const StageMessage m = activation();
  const std::vector<uint8_t> bytes = m.encode();
  CHECK(bytes.size() == kStageMessageBytes);
  const StageMessage back = StageMessage::decode(bytes, "peer");
  CHECK(back.direction == m.direction);
  CHECK(back.from_stage == 1);
  CHECK(back.to_stage == 2);
  CHECK(back.step == 7);
  CHECK(back.micro_batch == 2);
  CHECK(back.layer == "conv3");
  CHECK(back.shape == m.shape);
  CHECK_NOTHROW(checkStageMessage(m, back));
  CHECK(m.describe() == "the activation of 'conv3' for micro-batch 2 of step 7, [4,8,12,12], stage 1 -> 2");
}

TEST_CASE("pipeline message: garbage is refused naming the peer") {
  CHECK(decodeError(std::vector<uint8_t>(18, 'x')) ==
        "stage 1 (10.0.0.2): a pipeline message header of 18 bytes (expected 160); is something else talking "
        "to "
        "this stage?");
  std::vector<uint8_t> bytes = activation().encode();
  bytes[0] ^= 0xff;
  CHECK(decodeError(bytes) == "stage 1 (10.0.0.2): not a dtrain pipeline message (bad magic)");
  bytes = activation().encode();
  bytes[4] = 9;  // the version
  CHECK(decodeError(bytes).find("pipeline message version 9 (this dtrain speaks 1)") != std::string::npos);
  bytes = activation().encode();
  bytes[6] = 3;  // the direction
  CHECK(decodeError(bytes) == "stage 1 (10.0.0.2): a pipeline message of unknown direction 3");
  bytes = activation().encode();
  for (size_t i = 80; i < 144; ++i) bytes[i] = 'a';  // the layer name, unterminated
  CHECK(decodeError(bytes) == "stage 1 (10.0.0.2): a pipeline message whose layer name is not terminated");
}

TEST_CASE("pipeline message: another message than the one expected is refused naming its layer") {
  StageMessage swapped = activation();
  swapped.micro_batch = 3;
  CHECK(mismatch(swapped) ==
        "pipeline: stage 2 expected the activation of 'conv3' for micro-batch 2 of step 7, [4,8,12,12], "
        "stage 1 "
        "-> 2, and received the activation of 'conv3' for micro-batch 3 of step 7, [4,8,12,12], stage 1 -> 2 "
        "(another micro-batch); the stages do not run the same schedule or model: start every stage from the "
        "same job file and dtrain build");
  StageMessage other_layer = activation();
  other_layer.layer = "conv2";
  CHECK(mismatch(other_layer).find("received the activation of 'conv2'") != std::string::npos);
  CHECK(mismatch(other_layer).find("(another layer's result)") != std::string::npos);
  StageMessage gradient = activation();
  gradient.direction = Direction::Gradient;
  CHECK(mismatch(gradient).find("(another direction)") != std::string::npos);
  StageMessage wide = activation();
  wide.shape = Shape{4, 16, 12, 12};
  CHECK(mismatch(wide).find("(another shape)") != std::string::npos);
  StageMessage late = activation();
  late.step = 6;
  CHECK(mismatch(late).find("(another step)") != std::string::npos);
  StageMessage long_name = activation();
  long_name.layer = std::string(64, 'x');
  CHECK_THROWS_AS(long_name.encode(), Error);
}
