// The batch_norm passes' backward (core/backend/batch_norm_ops.h) against a
// double-precision reference, on planes of odd sizes (tails shorter than a
// vector and than the 16-element step) and on rows; the activation's mask
// recomputed from x is the mask read from the output, bit for bit, with
// values exactly on relu's and relu6's kinks; and the masked gradient the
// sums pass writes is fusedActivationGrad's.
#include "core/backend/batch_norm_ops.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace dtrain {
namespace {

using ops::FusedActivation;

struct Case {
  int64_t n, channels, plane;
};

const Case kCases[] = {{3, 2, 1}, {2, 3, 9}, {3, 2, 16}, {2, 2, 37}, {1, 2, 1029}, {2, 1, 3000}};
const FusedActivation kActs[] = {FusedActivation::None, FusedActivation::Relu, FusedActivation::Relu6};

struct Data {
  std::vector<float> x, dy, y, mean, scale, shift;
};

// Random values, with every seventh on a kink of channel 0 (scale 2, shift
// 0): x = mean normalises to exactly 0 (relu's and relu6's lower kink), x =
// mean + 3 to exactly 6 (relu6's upper one).
Data makeData(const Case& c, FusedActivation act, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.5f, 2.0f);
  Data d;
  const int64_t count = c.n * c.channels * c.plane;
  for (int64_t i = 0; i < count; ++i) {
    d.x.push_back(normal(rng));
    d.dy.push_back(normal(rng));
  }
  for (int64_t k = 0; k < c.channels; ++k) {
    d.mean.push_back(0.25f * static_cast<float>(k) + 0.5f);
    d.scale.push_back(k % 2 == 0 ? 2.0f : 0.75f);
    d.shift.push_back(k == 0 ? 0.0f : 0.125f);
  }
  for (int64_t i = 0; i < count; i += 7) {
    const int64_t k = (i / c.plane) % c.channels;
    d.x[static_cast<size_t>(i)] = i % 14 == 0 ? d.mean[k] : d.mean[k] + 3.0f;
  }
  d.y.resize(static_cast<size_t>(count));
  ops::batchNormApply(d.x.data(), d.y.data(), c.n, c.channels, c.plane, d.mean.data(), d.scale.data(),
                      d.shift.data(), nullptr, act);
  return d;
}

ops::BatchNormGradInputs inputsOf(const Data& d, const Case& c, FusedActivation act, bool from_output) {
  ops::BatchNormGradInputs in;
  in.x = d.x.data();
  in.dy = d.dy.data();
  in.y = from_output ? d.y.data() : nullptr;
  in.n = c.n;
  in.channels = c.channels;
  in.plane = c.plane;
  in.act = act;
  in.mean = d.mean.data();
  in.scale = d.scale.data();
  in.shift = d.shift.data();
  return in;
}

bool passes(FusedActivation act, float y) {
  if (act == FusedActivation::Relu) return y > 0.0f;
  if (act == FusedActivation::Relu6) return y > 0.0f && y < 6.0f;
  return true;
}

int64_t channelOf(const Case& c, int64_t i) {
  return c.plane == 1 ? i % c.channels : (i / c.plane) % c.channels;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("batch_norm's gradient sums and input gradient match a double reference, the mask from x or y") {
  std::mt19937 rng(5);
  for (const Case& c : kCases)
    for (FusedActivation act : kActs) {
      CAPTURE(c.plane);
      CAPTURE(static_cast<int>(act));
      const Data d = makeData(c, act, rng);
      const int64_t count = c.n * c.channels * c.plane;
      // The reference, with the mask taken at the forward's output.
      std::vector<double> ref_g(c.channels, 0.0), ref_dev(c.channels, 0.0), abs_dev(c.channels, 0.0);
      std::vector<float> ref_masked(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const int64_t k = channelOf(c, i);
        const float g = passes(act, d.y[i]) ? d.dy[i] : 0.0f;
        ref_masked[i] = g;
        const double dev = static_cast<double>(d.x[i]) - d.mean[k];
        ref_g[k] += g;
        ref_dev[k] += g * dev;
        abs_dev[k] += std::fabs(g * dev);
      }
      std::vector<float> fused(static_cast<size_t>(count));
      ops::fusedActivationGrad(d.y.data(), d.dy.data(), fused.data(), count, act);
      CHECK(sameBits(fused, ref_masked));

      std::vector<float> a(c.channels, 0.5f), b(c.channels, -0.25f), cc(c.channels, 0.125f);
      std::vector<float> dx_ref(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const int64_t k = channelOf(c, i);
        dx_ref[i] = static_cast<float>(0.5 * ref_masked[i] -
                                       0.25 * (static_cast<double>(d.x[i]) - d.mean[k]) + 0.125);
      }
      std::vector<float> masked_from[2], dx_from[2];
      for (int from_output = 0; from_output < 2; ++from_output) {
        CAPTURE(from_output);
        const ops::BatchNormGradInputs in = inputsOf(d, c, act, from_output == 1);
        std::vector<double> sum_g(c.channels, 0.0), sum_dev(c.channels, 0.0);
        std::vector<float>& masked = masked_from[from_output];
        masked.assign(static_cast<size_t>(count), -7.0f);
        ops::batchNormGradSums(in, sum_g.data(), sum_dev.data(), masked.data());
        CHECK(sameBits(masked, ref_masked));
        // Float sums of at most 128 terms a lane block, then double: each
        // term's error is within 128 float steps of the absolute sum.
        const double bound = 128.0 * std::ldexp(1.0, -24);
        for (int64_t k = 0; k < c.channels; ++k) {
          double abs_g = 0.0;
          for (int64_t i = 0; i < count; ++i)
            if (channelOf(c, i) == k) abs_g += std::fabs(ref_masked[i]);
          CHECK(std::fabs(sum_g[k] - ref_g[k]) <= bound * abs_g);
          CHECK(std::fabs(sum_dev[k] - ref_dev[k]) <= bound * abs_dev[k]);
        }
        std::vector<float>& dx = dx_from[from_output];
        dx.assign(static_cast<size_t>(count), -7.0f);
        ops::batchNormInputGrad(in, a.data(), b.data(), cc.data(), dx.data());
        // Three float operations on values of at most |0.5 g| + |0.25 dev| + 0.125.
        double worst = 0.0;
        for (int64_t i = 0; i < count; ++i) {
          const int64_t k = channelOf(c, i);
          const double size = 0.5 * std::fabs(ref_masked[i]) +
                              0.25 * std::fabs(static_cast<double>(d.x[i]) - d.mean[k]) + 0.125;
          worst = std::max(worst,
                           std::fabs(static_cast<double>(dx[i]) - dx_ref[i]) / (4.0 * std::ldexp(size, -24)));
        }
        CHECK(worst <= 1.0);
      }
      // The mask recomputed from x is the one read at y, so both agree exactly.
      CHECK(sameBits(dx_from[0], dx_from[1]));
      // A fused residual's path: the input gradient from the masked gradient, act None.
      ops::BatchNormGradInputs from_masked = inputsOf(d, c, FusedActivation::None, false);
      from_masked.dy = masked_from[0].data();
      std::vector<float> dx_masked(static_cast<size_t>(count));
      ops::batchNormInputGrad(from_masked, a.data(), b.data(), cc.data(), dx_masked.data());
      CHECK(sameBits(dx_masked, dx_from[1]));
    }
}

}  // namespace
}  // namespace dtrain
