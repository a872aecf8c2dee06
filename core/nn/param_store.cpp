#include "core/nn/param_store.h"

#include <cmath>

#include "core/errors.h"
#include "core/util/rng.h"

namespace dtrain {

void ParamStore::add(const std::string& layer, const ParamSpec& spec) {
  if (params_.defined() && params_.numel() > 0)
    throw Error("ParamStore::add after allocate (" + layer + "." + spec.name + ")");
  ParamEntry e;
  e.name = layer + "." + spec.name;
  e.shape = spec.shape;
  e.offset = size_;
  e.spec = spec;
  size_ += paddedSize(spec.shape.numel());
  entries_.push_back(std::move(e));
}

void ParamStore::allocate(Device device) {
  // An empty store (a model without buffers) needs no device memory.
  params_ = Tensor::zerosInHugePages(Shape{size_}, size_ > 0 ? device : Device::cpu());
}

const ParamEntry* ParamStore::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

int64_t ParamStore::count() const {
  int64_t n = 0;
  for (const auto& e : entries_) n += e.shape.numel();
  return n;
}

Tensor ParamStore::view(const Tensor& flat, size_t i) const {
  const ParamEntry& e = entries_.at(i);
  char* base = static_cast<char*>(const_cast<void*>(flat.raw()));
  return Tensor::view(base + static_cast<size_t>(e.offset) * elementSize(flat.dtype()), e.shape,
                      flat.device(), flat.dtype());
}

void ParamStore::initialize(uint64_t seed) {
  Tensor host = params_.device().isCpu() ? params_ : Tensor::zeros(Shape{size_});
  for (size_t i = 0; i < entries_.size(); ++i) {
    const ParamEntry& e = entries_[i];
    float* p = host.data() + e.offset;
    int64_t n = e.shape.numel();
    Rng rng(splitmix64(seed ^ hashString(e.name)));
    switch (e.spec.init) {
      case InitKind::Zeros:
        for (int64_t j = 0; j < n; ++j) p[j] = 0.0f;
        break;
      case InitKind::Ones:
        for (int64_t j = 0; j < n; ++j) p[j] = 1.0f;
        break;
      case InitKind::HeNormal: {
        double stddev = std::sqrt(2.0 / std::max<int64_t>(1, e.spec.fan_in));
        for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(rng.normal() * stddev);
        break;
      }
      case InitKind::Normal:
        for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(rng.normal() * e.spec.init_std);
        break;
      case InitKind::GlorotUniform: {
        double limit = std::sqrt(6.0 / std::max<int64_t>(1, e.spec.fan_in + e.spec.fan_out));
        for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>((2.0 * rng.uniformDouble() - 1.0) * limit);
        break;
      }
    }
  }
  if (!params_.device().isCpu()) params_.copyFrom(host);
}

}  // namespace dtrain
