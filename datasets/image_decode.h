// Image files through stb_image: a cheap header probe, a full decode to 8-bit
// pixels, and the resize of a window of those pixels to a [C,H,W] float
// sample in [0,1]. Decoding failures are returned, not thrown, so the caller
// applies its bad-image policy; the reason names the format the file's first
// bytes claim ("corrupt, truncated or unsupported JPEG data").
// Ownership: DecodedImage owns its pixels. Thread-safety: free functions with
// no shared state (stb_image keeps its failure reason per thread); they block
// on file reads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "datasets/image_ops.h"

namespace dtrain {

struct StbPixelsFree {
  void operator()(uint8_t* pixels) const;
};

// Interleaved 8-bit pixels (row-major, `channels` bytes a pixel), or why not.
struct DecodedImage {
  std::unique_ptr<uint8_t, StbPixelsFree> pixels;  // null when decoding failed
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;
  std::string error;  // why decoding failed ("" when it did not)
  bool ok() const { return pixels != nullptr; }
};

// Reads the header of the image file at `path`: "" when stb_image knows the
// format and the extents, else the reason (unreadable, empty, unknown type,
// truncated header). Reads a few hundred bytes, not the image.
std::string probeImageFile(const std::string& path);

// Reads and decodes the image file at `path` into `channels` (1: grey, 3:
// RGB; other layouts are converted, alpha dropped).
DecodedImage decodeImageFile(const std::string& path, int channels);

// Writes `window` of `image` resized to out_height x out_width (stb_image_resize's
// default filters; a window of the output size is copied exactly) as
// image.channels planes of floats byte / 255 to `out`. Throws Error when the
// resize cannot allocate its buffers.
void resizeToFloats(const DecodedImage& image, const CropWindow& window, int64_t out_height,
                    int64_t out_width, float* out);

}  // namespace dtrain
