// The update check of tests/cuda/cuda_training_test.cpp, tried on the CPU: an
// Adam applied to the same gradients from the same weights as the CPU's Adam
// must give its weights within a normwise 1e-6. Here the double reference
// stands for a correct implementation that rounds differently (more so than
// a GPU kernel running the same float formulas), and float Adam with one
// planted bug for a wrong one, on the cnn's real gradients (noise-level ones
// included: the same gradients in, so no amplification). Each step starts
// from the reference's weights, as the CUDA test starts each from the GPU's.
#include <doctest/doctest.h>

#include <vector>

#include "core/optim/update_rules.h"
#include "tests/optim/adam_reference.h"
#include "tests/optim/cnn_runs.h"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

enum class Bug { None, Beta1, Beta2, NoBiasCorrection };

// Float Adam's update of p from the element rule, with `bug` planted in its
// scalars (as a kernel with a wrong constant would have it).
void buggyAdam(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
               std::vector<float>& v, const OptimizerSection& opt, int64_t step, Bug bug) {
  update_rules::AdamScalars s = update_rules::adamScalars(opt.lr, opt.beta1, opt.beta2, opt.eps,
                                                          opt.weight_decay, opt.type == "adamw", step);
  if (bug == Bug::Beta1) {
    s.beta1 = 0.8f;
    s.one_minus_beta1 = 0.2f;
  }
  if (bug == Bug::Beta2) {
    s.beta2 = 0.99f;
    s.one_minus_beta2 = 0.01f;
  }
  if (bug == Bug::NoBiasCorrection) {
    s.step_size = static_cast<float>(opt.lr);
    s.bc2_sqrt = 1.0f;
  }
  for (size_t i = 0; i < p.size(); ++i) update_rules::adam(p[i], g[i], m[i], v[i], s);
}

// The check's figure at each step: normwise error of the float update against
// the double reference's, both from the reference's weights.
std::vector<double> updateErrors(const CnnRun& run, const OptimizerSection& opt, Bug bug) {
  const int64_t n = static_cast<int64_t>(run.initial.size());
  AdamReference reference(opt, n);
  auto adam = makeOptimizer(opt);  // the code under test when no bug is planted
  adam->init(n);
  std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  std::vector<double> p(run.initial.begin(), run.initial.end());
  std::vector<double> errors;
  for (size_t s = 0; s < run.grads.size(); ++s) {
    const auto step = static_cast<int64_t>(s) + 1;
    std::vector<float> pf(p.begin(), p.end());
    if (bug == Bug::None)
      adam->update(pf.data(), run.grads[s].data(), 0, n, StepInfo{opt.lr, step});
    else
      buggyAdam(pf, run.grads[s], m, v, opt, step, bug);
    reference.update(p.data(), run.grads[s].data(), step);
    errors.push_back(normwiseError(pf, p));
  }
  return errors;
}

}  // namespace

TEST_CASE("adam's update check passes a correct update and fails a wrong beta1, beta2 or bias correction") {
  for (const char* type : {"adam", "adamw"}) {
    CAPTURE(type);
    const OptimizerSection opt = cnnOptimizer(type);
    const CnnRun run = trainCnn(1, opt);
    // Correct, rounded otherwise: measured at most 5.3e-8 per step.
    for (double e : updateErrors(run, opt, Bug::None)) CHECK(e < 1e-6);
    // Every bug shows at every step, from step 1, beyond 100 times the
    // bound: step 1 moves each weight by lr * sign(g), and a wrong beta1
    // (0.8) makes that 2 lr, a wrong beta2 (0.99) 0.32 lr, no bias correction
    // 3.2 lr (measured 5.5e-4 to 3.2e-3 of the largest weight, 1.25).
    for (Bug bug : {Bug::Beta1, Bug::Beta2, Bug::NoBiasCorrection}) {
      CAPTURE(static_cast<int>(bug));
      for (double e : updateErrors(run, opt, bug)) CHECK(e > 1e-4);
    }
  }
}
