// All parameters of a model in one contiguous buffer, all gradients in another,
// with a table {name, offset, shape}. Buckets, checkpoints and broadcasts are
// views of these buffers. Each tensor starts on a 16-float boundary so vector
// loops over one tensor stay aligned.
//
// The buffers may live on a GPU; initialize() computes the values on the host
// and copies them there, so they are the same on every device.
//
// Ownership: the store owns the parameter buffer. Gradient buffers are separate
// (one per model replica) and laid out by the same table: gradBuffer() makes one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/nn/layer.h"
#include "core/tensor/tensor.h"

namespace dtrain {

struct ParamEntry {
  std::string name;  // "<layer>.<param>", e.g. "conv1.weight"
  Shape shape;
  int64_t offset = 0;  // in floats, into the flat buffers
  ParamSpec spec;
};

class ParamStore {
 public:
  // Registers a tensor; only before allocate().
  void add(const std::string& layer, const ParamSpec& spec);
  // Allocates the parameter buffer (zeros) on `device`.
  void allocate(Device device = Device::cpu());
  // Fills every tensor by its init kind from a seeded generator. Each tensor's
  // values depend only on the seed and its name, not on the order of layers.
  void initialize(uint64_t seed);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry* find(const std::string& name) const;
  // The floats a tensor of `numel` values takes in the flat buffers: each
  // starts on a 16-float boundary.
  static int64_t paddedSize(int64_t numel) { return (numel + 15) / 16 * 16; }
  // Number of floats in the flat buffers, padding included.
  int64_t size() const { return size_; }
  // Number of trainable values, padding excluded.
  int64_t count() const;

  Tensor& params() { return params_; }
  const Tensor& params() const { return params_; }
  // A zeroed gradient buffer with this store's layout, on the parameters' device.
  Tensor gradBuffer() const { return Tensor::zerosInHugePages(Shape{size_}, params_.device()); }
  Device device() const { return params_.device(); }
  // Views of entry i inside a flat buffer of this layout.
  Tensor view(const Tensor& flat, size_t i) const;

 private:
  std::vector<ParamEntry> entries_;
  int64_t size_ = 0;
  Tensor params_;
};

}  // namespace dtrain
