#include "strategies/batch_norm_across_workers.h"

#include <vector>

namespace dtrain {

bool syncsBatchStats(const TrainingParts& parts, int workers) {
  return parts.job->strategy.sync_batchnorm && workers > 1 && parts.replicas->buffers().size() > 0;
}

void sumBatchStatsOver(ProcessGroup& workers, ReplicaSet& replicas) {
  ProcessGroup* group = &workers;
  replicas.syncBatchStatsAcrossRanks([group](double* data, int64_t n) { group->allReduceSum(data, n); });
}

void averageBuffers(ProcessGroup& workers, ParamStore& buffers, bool synchronised) {
  if (workers.size() == 1 || buffers.size() == 0 || synchronised) return;
  Tensor host = buffers.params().to(Device::cpu());
  std::vector<double> sums(host.data(), host.data() + host.numel());
  workers.allReduceSum(sums.data(), static_cast<int64_t>(sums.size()));
  for (size_t i = 0; i < sums.size(); ++i) host.data()[i] = static_cast<float>(sums[i] / workers.size());
  buffers.params().copyFrom(host);
}

}  // namespace dtrain
