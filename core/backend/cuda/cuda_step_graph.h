// StepGraph on a GPU (core/backend/step_graph.h): stream capture of the
// context's compute stream into a CUDA graph, instantiated once and launched
// on the same stream. The caching allocator records a pool for the capture
// (CachingAllocator::beginRecording), which the graph holds until it is
// destroyed: its buffers are handed to no other work meanwhile.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "core/backend/cuda/cuda_context.h"
#include "core/backend/step_graph.h"

namespace dtrain {

class CudaStepGraph final : public StepGraph {
 public:
  // Starts capturing ctx's stream (throws DeviceError when it cannot).
  static std::unique_ptr<StepRecording> beginRecording(CudaContext& ctx);

  CudaStepGraph(CudaContext& ctx, cudaGraph_t graph, cudaGraphExec_t exec, int pool);
  // Waits for the stream (a replay may still run) before the pool's buffers
  // go back to the allocator.
  ~CudaStepGraph() override;
  void launch() override;

 private:
  CudaContext& ctx_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  int pool_;
};

}  // namespace dtrain
