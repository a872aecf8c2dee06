#include "datasets/synthetic_dataset.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/util/rng.h"

namespace dtrain {

namespace {

// Stream tags: distinct constants so prototypes, train and test samples never
// share a random stream.
constexpr uint64_t kProtoTag = 0x70726f746f747970ULL;
constexpr uint64_t kTrainTag = 0x747261696e000001ULL;
constexpr uint64_t kTestTag = 0x7465737400000002ULL;

// Largest data set generated in memory; bigger requests are almost certainly
// a typo in the job file.
constexpr int64_t kMaxBytes = int64_t{1} << 36;

void check(const DataSection& data, int64_t samples, const char* samples_key) {
  if (data.shape.size() != 3)
    throw ConfigError("[data] shape must have 3 entries [C,H,W] for the synthetic dataset, got " +
                      std::to_string(data.shape.size()));
  for (int64_t d : data.shape)
    if (d <= 0 || d > 65536)
      throw ConfigError("[data] shape entries must be between 1 and 65536, got " + std::to_string(d));
  if (data.classes < 1 || data.classes > 65536)
    throw ConfigError("[data] classes must be between 1 and 65536, got " + std::to_string(data.classes));
  if (samples < 0)
    throw ConfigError(std::string("[data] ") + samples_key + " must be >= 0, got " + std::to_string(samples));
  const int64_t per_sample = data.shape[0] * data.shape[1] * data.shape[2];
  if (per_sample > kMaxBytes || (samples > 0 && per_sample > kMaxBytes / samples))
    throw ConfigError(std::string("[data] ") + samples_key + " x shape is too large to generate in memory (" +
                      std::to_string(samples) + " samples of " + std::to_string(per_sample) + " bytes)");
}

// A smooth bump of radius 1 with compact support: (1 - t)^2 for t = d^2/r^2 < 1.
// Polynomial rather than exp() so results do not depend on the maths library.
float bump(float t) { return t < 1.0f ? (1.0f - t) * (1.0f - t) : 0.0f; }

// classes x C x H x W prototype values in [0,1].
std::vector<float> makePrototypes(int64_t classes, int64_t C, int64_t H, int64_t W, uint64_t seed) {
  std::vector<float> protos(static_cast<size_t>(classes * C * H * W), 0.0f);
  Rng rng(seed);
  const float extent = static_cast<float>(std::max(H, W));
  for (int64_t k = 0; k < classes; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      float* p = protos.data() + (k * C + c) * H * W;
      const int blobs = 3 + static_cast<int>(rng.below(3));
      for (int b = 0; b < blobs; ++b) {
        const float cy = rng.uniform(0.0f, static_cast<float>(H));
        const float cx = rng.uniform(0.0f, static_cast<float>(W));
        const float r = rng.uniform(0.15f, 0.35f) * extent + 0.5f;
        // One blob in four darkens, so prototypes differ in shape, not only in brightness.
        const float amp = rng.uniform(0.5f, 1.0f) * (rng.below(4) == 0 ? -0.6f : 1.0f);
        const float inv_r2 = 1.0f / (r * r);
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x) {
            const float dy = static_cast<float>(y) + 0.5f - cy, dx = static_cast<float>(x) + 0.5f - cx;
            p[y * W + x] += amp * bump((dy * dy + dx * dx) * inv_r2);
          }
      }
      float max = 0.0f;
      for (int64_t i = 0; i < H * W; ++i) max = std::max(max, p[i] = std::clamp(p[i], 0.0f, 1.0f));
      if (max > 0.0f)
        for (int64_t i = 0; i < H * W; ++i) p[i] /= max;
    }
  }
  return protos;
}

}  // namespace

SyntheticDataset::SyntheticDataset(const DataSection& data, Split split, uint64_t seed)
    : split_(split), classes_(data.classes) {
  const bool train = split == Split::Train;
  const int64_t count = train ? data.train_samples : data.test_samples;
  check(data, count, train ? "train_samples" : "test_samples");
  const int64_t C = data.shape[0], H = data.shape[1], W = data.shape[2];
  const int64_t numel = C * H * W;

  const std::vector<float> protos = makePrototypes(classes_, C, H, W, Rng::mix(seed, kProtoTag));
  // Variation that a model has to see through, so the task is learnable but
  // not solved by template matching (nearest class mean gets about 90%
  // at 28x28 and 10 classes, leaving room for a real model): a shift of up to
  // a sixth of the image, contrast, a faint copy of another class's prototype
  // and per-pixel noise.
  const int64_t max_shift = std::min(H, W) / 6;
  const uint64_t split_seed = Rng::mix(seed, train ? kTrainTag : kTestTag);

  std::vector<uint8_t> pixels(static_cast<size_t>(count * numel));
  std::vector<int32_t> labels(static_cast<size_t>(count));
  auto shift = [&](Rng& rng) {
    return static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * max_shift + 1))) - max_shift;
  };
  for (int64_t i = 0; i < count; ++i) {
    // One stream per sample: sample i does not depend on how many came before.
    Rng rng(Rng::mix(split_seed, static_cast<uint64_t>(i)));
    const int64_t k = static_cast<int64_t>(rng.below(static_cast<uint64_t>(classes_)));
    const int64_t other = static_cast<int64_t>(rng.below(static_cast<uint64_t>(classes_)));
    const int64_t sy = shift(rng), sx = shift(rng);
    const int64_t oy = shift(rng), ox = shift(rng);
    const float contrast = rng.uniform(0.6f, 1.0f);
    const float distract = rng.uniform(0.0f, 0.4f);
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(k);
    uint8_t* out = pixels.data() + i * numel;
    for (int64_t c = 0; c < C; ++c) {
      const float* p = protos.data() + (k * C + c) * H * W;
      const float* q = protos.data() + (other * C + c) * H * W;
      for (int64_t y = 0; y < H; ++y) {
        const int64_t py = std::clamp<int64_t>(y - sy, 0, H - 1);
        const int64_t qy = std::clamp<int64_t>(y - oy, 0, H - 1);
        for (int64_t x = 0; x < W; ++x) {
          const int64_t px = std::clamp<int64_t>(x - sx, 0, W - 1);
          const int64_t qx = std::clamp<int64_t>(x - ox, 0, W - 1);
          // Triangular noise: the sum of two uniforms.
          const float noise = 0.6f * (rng.uniform() + rng.uniform() - 1.0f);
          const float v = contrast * p[py * W + px] + distract * q[qy * W + qx] + noise;
          out[(c * H + y) * W + x] = static_cast<uint8_t>(std::clamp(v, 0.0f, 1.0f) * 255.0f + 0.5f);
        }
      }
    }
  }
  images_ = ByteImages(Shape{C, H, W}, std::move(pixels), std::move(labels));
}

std::string SyntheticDataset::describe() const {
  return std::string("synthetic ") + splitName(split_) + ": " + std::to_string(size()) + " x " +
         sampleShape().str() + ", " + std::to_string(classes_) + " classes";
}

}  // namespace dtrain
