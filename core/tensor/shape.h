// Shape: the extents of a tensor, outermost first (NCHW for images).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace dtrain {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }

  // Product of all extents (1 for a scalar shape).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // The same shape with a leading batch extent.
  Shape withBatch(int64_t n) const {
    std::vector<int64_t> d{n};
    d.insert(d.end(), dims_.begin(), dims_.end());
    return Shape(std::move(d));
  }
  // The shape without its leading extent (per-sample shape of a batch).
  Shape withoutBatch() const {
    return Shape(std::vector<int64_t>(dims_.begin() + (dims_.empty() ? 0 : 1), dims_.end()));
  }
  // "[32,14,14]"
  std::string str() const {
    std::string s = "[";
    for (size_t i = 0; i < dims_.size(); ++i) s += (i ? "," : "") + std::to_string(dims_[i]);
    return s + "]";
  }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace dtrain
