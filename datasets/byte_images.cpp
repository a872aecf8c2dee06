#include "datasets/byte_images.h"

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace dtrain {

ByteImages::ByteImages(Shape sample_shape, std::vector<uint8_t> pixels, std::vector<int32_t> labels)
    : shape_(std::move(sample_shape)),
      sample_bytes_(shape_.numel()),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)) {
  if (static_cast<int64_t>(pixels_.size()) != sample_bytes_ * size())
    throw Error("internal: " + std::to_string(pixels_.size()) + " pixel bytes for " + std::to_string(size()) +
                " samples of shape " + shape_.str());
}

int32_t ByteImages::maxLabel() const {
  return labels_.empty() ? -1 : *std::max_element(labels_.begin(), labels_.end());
}

int32_t ByteImages::get(int64_t index, float* out) const {
  if (index < 0 || index >= size())
    throw Error("sample index " + std::to_string(index) + " is out of range for a dataset of " +
                std::to_string(size()) + " samples");
  const uint8_t* src = pixels_.data() + index * sample_bytes_;
  // A true division (not a multiply by 1/255, which is off by an ulp for some
  // bytes) so the values equal byte / 255 exactly; it still vectorises.
  for (int64_t i = 0; i < sample_bytes_; ++i) out[i] = static_cast<float>(src[i]) / 255.0f;
  return labels_[static_cast<size_t>(index)];
}

}  // namespace dtrain
