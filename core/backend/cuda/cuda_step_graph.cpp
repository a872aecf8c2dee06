#include "core/backend/cuda/cuda_step_graph.h"

#include "core/backend/cuda/cuda_check.h"
#include "core/errors.h"

namespace dtrain {

namespace {

class CudaStepRecording final : public StepRecording {
 public:
  CudaStepRecording(CudaContext& ctx, int pool) : ctx_(ctx), pool_(pool) {}
  ~CudaStepRecording() override {
    if (!finished_) finish(false, nullptr);
  }

  std::unique_ptr<StepGraph> finish(bool keep, std::string* why_not) override {
    finished_ = true;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(ctx_.stream(), &graph);
    ctx_.allocator().endRecording();
    std::string failure;
    if (ended != cudaSuccess || !graph)
      failure = std::string("CUDA: stream capture: ") + cudaGetErrorString(ended);
    cudaGraphExec_t exec = nullptr;
    if (keep && failure.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      if (made != cudaSuccess)
        failure = std::string("CUDA: instantiate the step's graph: ") + cudaGetErrorString(made);
    }
    if (!keep || !failure.empty()) {
      cudaGetLastError();  // a failed capture leaves its error behind; the eager step must not see it
      if (graph) cudaGraphDestroy(graph);
      ctx_.allocator().dropPool(pool_);  // nothing of the recording ran
      if (why_not) *why_not = failure;
      return nullptr;
    }
    return std::make_unique<CudaStepGraph>(ctx_, graph, exec, pool_);
  }

 private:
  CudaContext& ctx_;
  int pool_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<StepRecording> CudaStepGraph::beginRecording(CudaContext& ctx) {
  const int pool = ctx.allocator().beginRecording();
  // Thread-local: a call this thread makes that capture does not allow (a
  // synchronisation, a read-back) fails the recording instead of running
  // outside it; other threads (the loader's) are not concerned.
  const cudaError_t began = cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal);
  if (began != cudaSuccess) {
    ctx.allocator().endRecording();
    ctx.allocator().dropPool(pool);
    throw DeviceError(std::string("CUDA: begin recording the step: ") + cudaGetErrorString(began));
  }
  return std::make_unique<CudaStepRecording>(ctx, pool);
}

CudaStepGraph::CudaStepGraph(CudaContext& ctx, cudaGraph_t graph, cudaGraphExec_t exec, int pool)
    : ctx_(ctx), graph_(graph), exec_(exec), pool_(pool) {}

CudaStepGraph::~CudaStepGraph() {
  try {
    ctx_.synchronize();
  } catch (...) {  // a failing device: nothing is left to protect
  }
  cudaGraphExecDestroy(exec_);
  cudaGraphDestroy(graph_);
  ctx_.allocator().dropPool(pool_);
}

void CudaStepGraph::launch() {
  checkCuda(cudaGraphLaunch(exec_, ctx_.stream()), "replay the step's CUDA graph");
}

}  // namespace dtrain
