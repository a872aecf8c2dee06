// A model whose parameters are not all in memory at once (a sharded run's
// stage 3 keeps 1/N of them): told before and after each node's forward and
// backward, so that the parameters a node reads are gathered before it runs
// and may be released once it is done. Calls come from the thread that runs
// the model's pass.
#pragma once

namespace dtrain {

class ParameterGate {
 public:
  virtual ~ParameterGate() = default;
  // Before node `node` runs (its forward, or with `backward` its backward);
  // returns once its parameters are there.
  virtual void beforeNode(int node, bool backward) = 0;
  // After it has run.
  virtual void afterNode(int node, bool backward) = 0;
};

}  // namespace dtrain
