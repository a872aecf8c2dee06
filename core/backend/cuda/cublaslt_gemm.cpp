#include "core/backend/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "core/backend/algorithm_cache.h"
#include "core/backend/cuda/median_time.h"
#include "core/errors.h"
#include "core/tensor/tensor.h"

namespace dtrain {

namespace {

// cuBLASLt rarely offers more; all it offers are timed.
constexpr int kMaxCandidates = 64;
constexpr int kTimedRuns = 3;
// Below this a search runs without a workspace rather than ask for less.
constexpr size_t kSmallestSearchWorkspace = size_t{1} << 20;

// What an algorithm is, as cuBLASLt configures it; ID first (set by
// cublasLtMatmulAlgoInit, the rest by cublasLtMatmulAlgoConfigSetAttribute).
constexpr cublasLtMatmulAlgoConfigAttributes_t kConfigAttributes[] = {CUBLASLT_ALGO_CONFIG_ID,
                                                                      CUBLASLT_ALGO_CONFIG_TILE_ID,
                                                                      CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                                      CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                                      CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
                                                                      CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION,
                                                                      CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                                                      CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID,
                                                                      CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID};
constexpr size_t kConfigCount = sizeof(kConfigAttributes) / sizeof(kConfigAttributes[0]);

void checkLt(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw DeviceError("cuBLASLt: " + what + ": " + cublasGetStatusString(status));
}

// Descriptors are destroyed with their owner (errors ignored: nothing to do about them).
struct DescDeleter {
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter>;

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

Layout columnMajor(DType type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  checkLt(cublasLtMatrixLayoutCreate(&l, cudaTypeOf(type), static_cast<uint64_t>(rows),
                                     static_cast<uint64_t>(cols), ld),
          "describe a matrix");
  return Layout(l);
}

// fp32 sums whatever the element types (the scale type, alpha and beta's, is
// fp32 too); only fp32 inputs may be rounded to TF32, and the key says so.
cublasComputeType_t computeType(bool tf32) {
  return tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// The algorithm's configuration as integers; empty when cuBLASLt will not tell.
std::vector<int64_t> configOf(const cublasLtMatmulAlgo_t& algo) {
  std::vector<int64_t> config;
  for (cublasLtMatmulAlgoConfigAttributes_t attr : kConfigAttributes) {
    size_t size = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS ||
        size == 0 || size > sizeof(uint64_t))
      return {};
    uint64_t value = 0;  // little-endian: a narrower attribute fills the low bytes
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, size, &written) != CUBLAS_STATUS_SUCCESS)
      return {};
    config.push_back(static_cast<int64_t>(value));
  }
  return config;
}

// The algorithm `config` describes for the product `k`, or false when this
// cuBLASLt cannot build it.
bool algoFromConfig(cublasLtHandle_t handle, const GemmAlgorithmKey& k, const std::vector<int64_t>& config,
                    cublasLtMatmulAlgo_t& algo) {
  if (config.size() != kConfigCount) return false;
  const cudaDataType_t ab = cudaTypeOf(k.inputs), cd = cudaTypeOf(k.output);
  if (cublasLtMatmulAlgoInit(handle, computeType(k.tf32), CUDA_R_32F, ab, ab, cd, cd,
                             static_cast<int>(config[0]), &algo) != CUBLAS_STATUS_SUCCESS)
    return false;
  for (size_t i = 1; i < kConfigCount; ++i) {
    size_t size = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, kConfigAttributes[i], nullptr, 0, &size) !=
            CUBLAS_STATUS_SUCCESS ||
        size == 0 || size > sizeof(uint64_t))
      return false;
    const auto value = static_cast<uint64_t>(config[i]);
    if (cublasLtMatmulAlgoConfigSetAttribute(&algo, kConfigAttributes[i], &value, size) !=
        CUBLAS_STATUS_SUCCESS)
      return false;
  }
  return true;
}

std::string configText(const std::vector<int64_t>& config) {
  if (config.size() != kConfigCount) return "algo ?";
  return "algo " + std::to_string(config[0]) + " tile " + std::to_string(config[1]) + " split-K " +
         std::to_string(config[2]) + " stages " + std::to_string(config[6]);
}

}  // namespace

CublasLtHandle::CublasLtHandle() { checkLt(cublasLtCreate(&handle_), "create a handle"); }

CublasLtHandle::~CublasLtHandle() {
  if (handle_) cublasLtDestroy(handle_);
}

struct TunedGemm::Plan {
  enum class How { Heuristic, Measured, Cached };
  MatmulDesc desc;
  Layout first, second, out;  // cuBLAS's A (our b), B (our a), C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
  How how = How::Heuristic;
  double time_ms = 0;
  std::vector<int64_t> config;
};

TunedGemm::TunedGemm(const GemmAlgoOptions& options) : options_(options) {}

TunedGemm::~TunedGemm() = default;

TunedGemm::Plan& TunedGemm::planFor(cublasLtHandle_t handle, cudaStream_t stream, const GemmAlgorithmKey& k,
                                    const void* a, const void* b, const LibraryMemory& memory) {
  const std::string name = algorithmKey(k);
  auto found = plans_.find(name);
  if (found != plans_.end()) return *found->second;

  // cuBLAS is column-major: a row-major c[m,n] is a column-major c^T[n,m], and
  // c^T = op(b)^T * op(a)^T, so the operands swap places and keep their flags.
  auto plan = std::make_unique<Plan>();
  cublasLtMatmulDesc_t desc = nullptr;
  checkLt(cublasLtMatmulDescCreate(&desc, computeType(k.tf32), CUDA_R_32F), "describe a product");
  plan->desc.reset(desc);
  const cublasOperation_t op_first = k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkLt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first),
          "set a transpose");
  checkLt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second),
          "set a transpose");
  plan->first = k.trans_b ? columnMajor(k.inputs, k.k, k.n, k.ldb) : columnMajor(k.inputs, k.n, k.k, k.ldb);
  plan->second = k.trans_a ? columnMajor(k.inputs, k.m, k.k, k.lda) : columnMajor(k.inputs, k.k, k.m, k.lda);
  plan->out = columnMajor(k.output, k.n, k.m, k.ldc);
  cublasLtMatrixLayout_t first = plan->first.get(), second = plan->second.get(), out = plan->out.get();

  // A choice this GPU and cuBLASLt made before, when it still checks out.
  if (options_.cache) {
    const std::optional<AlgorithmChoice> entry = options_.cache->find(name);
    cublasLtMatmulHeuristicResult_t checked{};
    if (entry && algoFromConfig(handle, k, entry->config, plan->algo) &&
        cublasLtMatmulAlgoCheck(handle, desc, first, second, out, out, &plan->algo, &checked) ==
            CUBLAS_STATUS_SUCCESS &&
        checked.workspaceSize <= options_.workspace_limit) {
      plan->workspace_bytes = checked.workspaceSize;
      plan->how = Plan::How::Cached;
      plan->time_ms = entry->time_ms;
      plan->config = entry->config;
      return *plans_.emplace(name, std::move(plan)).first->second;
    }
  }

  // The search's workspace: as much of the limit as the allocator can give.
  size_t ws_bytes = options_.workspace_limit;
  std::shared_ptr<void> ws;
  while (memory.scratch && ws_bytes >= kSmallestSearchWorkspace && !(ws = memory.scratch(ws_bytes)))
    ws_bytes /= 2;
  if (!ws) ws_bytes = 0;

  cublasLtMatmulPreference_t pref = nullptr;
  checkLt(cublasLtMatmulPreferenceCreate(&pref), "create a preference");
  Preference pref_owner(pref);
  const uint64_t max_ws = ws_bytes;
  // The buffers' true alignment in bytes: by default cuBLASLt assumes 256 and
  // may pick kernels the rows of a narrow layer's output cannot feed (a
  // 16-bit buffer may be only 2-byte aligned; the tensor cores' kernels want 16).
  const auto align_first = static_cast<uint32_t>(k.align_b), align_second = static_cast<uint32_t>(k.align_a),
             align_out = static_cast<uint32_t>(k.align_c);
  checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                               sizeof max_ws),
          "set the workspace limit");
  checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first,
                                               sizeof align_first),
          "set an alignment");
  checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                               &align_second, sizeof align_second),
          "set an alignment");
  checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out,
                                               sizeof align_out),
          "set an alignment");
  checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out,
                                               sizeof align_out),
          "set an alignment");
  std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxCandidates);
  int returned = 0;
  const cublasStatus_t listed = cublasLtMatmulAlgoGetHeuristic(handle, desc, first, second, out, out, pref,
                                                               kMaxCandidates, results.data(), &returned);
  if (listed != CUBLAS_STATUS_SUCCESS || returned == 0)
    throw DeviceError(
        "cuBLASLt: no algorithm for the product " + name + " within a workspace of " +
        std::to_string(ws_bytes) + " bytes" +
        (listed != CUBLAS_STATUS_SUCCESS ? std::string(": ") + cublasGetStatusString(listed) : ""));
  results.resize(static_cast<size_t>(returned));

  // Timed into a scratch output: beta = 1 would otherwise add every run into c.
  const size_t out_bytes = static_cast<size_t>((k.m - 1) * k.ldc + k.n) * elementSize(k.output);
  std::shared_ptr<void> scratch_out = memory.scratch ? memory.scratch(out_bytes) : nullptr;
  int best = -1;
  double best_ms = 0;
  if (scratch_out && cudaMemsetAsync(scratch_out.get(), 0, out_bytes, stream) == cudaSuccess) {
    const float alpha = 1.0f, beta = k.accumulate ? 1.0f : 0.0f;
    for (int i = 0; i < returned; ++i) {
      const cublasLtMatmulHeuristicResult_t& r = results[static_cast<size_t>(i)];
      if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > ws_bytes) continue;
      const double ms = medianMilliseconds(stream, kTimedRuns, [&] {
        return cublasLtMatmul(handle, desc, &alpha, b, first, a, second, &beta, scratch_out.get(), out,
                              scratch_out.get(), out, &r.algo, ws.get(), ws_bytes,
                              stream) == CUBLAS_STATUS_SUCCESS;
      });
      if (ms >= 0 && (best < 0 || ms < best_ms)) {  // the earlier (better ranked) one keeps a tie
        best = i;
        best_ms = ms;
      }
    }
  } else {
    cudaGetLastError();
  }
  if (best < 0) {  // nothing could be timed: cuBLASLt's first usable choice
    for (int i = 0; i < returned && best < 0; ++i)
      if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS &&
          results[static_cast<size_t>(i)].workspaceSize <= ws_bytes)
        best = i;
    if (best < 0) throw DeviceError("cuBLASLt: none of its algorithms for the product " + name + " can run");
    plan->how = Plan::How::Heuristic;
  } else {
    plan->how = Plan::How::Measured;
    plan->time_ms = best_ms;
    ++measurements_;
  }
  plan->algo = results[static_cast<size_t>(best)].algo;
  plan->workspace_bytes = results[static_cast<size_t>(best)].workspaceSize;
  plan->config = configOf(plan->algo);
  if (options_.cache && plan->how == Plan::How::Measured && !plan->config.empty()) {
    AlgorithmChoice record;
    record.algo = plan->config[0];
    record.workspace_bytes = plan->workspace_bytes;
    record.time_ms = best_ms;
    record.config = plan->config;
    options_.cache->record(name, record);
  }
  return *plans_.emplace(name, std::move(plan)).first->second;
}

void TunedGemm::run(cublasLtHandle_t handle, cudaStream_t stream, bool trans_a, bool trans_b, int64_t m,
                    int64_t n, int64_t k, float alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
                    float beta, void* c, int64_t ldc, DType inputs, DType output, bool allow_tf32,
                    const LibraryMemory& memory) {
  if (output != inputs && output != DType::F32)
    throw DeviceError(std::string("cuBLASLt: a product of ") + dtypeName(inputs) + " inputs into a " +
                      dtypeName(output) + " output (it writes the inputs' type or f32)");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty batch: c = beta * c, which training only needs for beta 1 and 0
    if (beta == 1.0f) return;
    if (beta != 0.0f) throw DeviceError("cuBLASLt: a product with k = 0 and beta other than 0 or 1");
    const size_t element = elementSize(output);  // all-zero bits are +0 in every type
    if (cudaMemset2DAsync(c, static_cast<size_t>(ldc) * element, 0, static_cast<size_t>(n) * element,
                          static_cast<size_t>(m), stream) != cudaSuccess)
      throw DeviceError("CUDA: clear a product's output: " +
                        std::string(cudaGetErrorString(cudaGetLastError())));
    return;
  }
  GemmAlgorithmKey key;
  key.trans_a = trans_a;
  key.trans_b = trans_b;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.accumulate = beta != 0.0f;
  key.align_a = pointerAlignment(a);
  key.align_b = pointerAlignment(b);
  key.align_c = pointerAlignment(c);
  key.tf32 = allow_tf32 && inputs == DType::F32;
  key.inputs = inputs;
  key.output = output;
  Plan& plan = planFor(handle, stream, key, a, b, memory);
  void* ws = plan.workspace_bytes > 0 ? memory.workspace(plan.workspace_bytes) : nullptr;
  cublasLtMatrixLayout_t out = plan.out.get();
  checkLt(cublasLtMatmul(handle, plan.desc.get(), &alpha, b, plan.first.get(), a, plan.second.get(), &beta, c,
                         out, c, out, &plan.algo, ws, plan.workspace_bytes, stream),
          "the product " + algorithmKey(key));
}

void TunedGemm::run(cublasLtHandle_t handle, cudaStream_t stream, bool trans_a, bool trans_b, int64_t m,
                    int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc, bool allow_tf32,
                    const LibraryMemory& memory) {
  run(handle, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, DType::F32, DType::F32,
      allow_tf32, memory);
}

std::string TunedGemm::algorithms() const {
  std::string text;
  for (const auto& [name, plan] : plans_) {
    char ms[48];
    std::snprintf(ms, sizeof ms, "%.3f ms", plan->time_ms);
    text += (text.empty() ? "" : "; ") + name + ": " + configText(plan->config) +
            (plan->how == Plan::How::Measured ? ", " + std::string(ms)
             : plan->how == Plan::How::Cached ? " (cached, " + std::string(ms) + ")"
                                              : std::string(" (heuristic)"));
  }
  return text;
}

}  // namespace dtrain
