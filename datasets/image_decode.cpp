#include "datasets/image_decode.h"

#include <stb_image.h>
#include <stb_image_resize.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "core/errors.h"

namespace dtrain {

namespace {

// Why stb_image could not read an image starting with `head` (its first
// bytes). stb_image's own reason is not used: it comes from the last format
// it tried, which is often not the file's ("bad png sig" for a broken JPEG).
std::string undecodableReason(const uint8_t* head, size_t n) {
  auto starts = [&](std::initializer_list<uint8_t> magic) {
    return n >= magic.size() && std::equal(magic.begin(), magic.end(), head);
  };
  if (starts({0xff, 0xd8, 0xff})) return "corrupt, truncated or unsupported JPEG data";
  if (starts({0x89, 'P', 'N', 'G'})) return "corrupt, truncated or unsupported PNG data";
  if (starts({'B', 'M'})) return "corrupt, truncated or unsupported BMP data";
  return "not a JPEG, PNG or BMP image";
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The whole file; why not in `error`.
std::vector<uint8_t> readWhole(const std::string& path, std::string* error) {
  File f(std::fopen(path.c_str(), "rb"));
  struct stat st;
  if (!f || fstat(fileno(f.get()), &st) != 0) {
    *error = std::string("cannot open: ") + std::strerror(errno);
    return {};
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  if (std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    *error = std::ferror(f.get()) ? std::string("cannot read: ") + std::strerror(errno)
                                  : std::string("shorter than its size (changed while read?)");
    return {};
  }
  return bytes;
}

}  // namespace

void StbPixelsFree::operator()(uint8_t* pixels) const { stbi_image_free(pixels); }

std::string probeImageFile(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return std::string("cannot open: ") + std::strerror(errno);
  uint8_t head[8];
  const size_t n = std::fread(head, 1, sizeof head, f.get());
  if (n == 0)
    return std::ferror(f.get()) ? std::string("cannot read: ") + std::strerror(errno) : "empty file";
  std::rewind(f.get());
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_file(f.get(), &w, &h, &comp)) return undecodableReason(head, n);
  if (w < 1 || h < 1) return "an image of no pixels";
  return "";
}

DecodedImage decodeImageFile(const std::string& path, int channels) {
  DecodedImage image;
  const std::vector<uint8_t> bytes = readWhole(path, &image.error);
  if (!image.error.empty()) return image;
  if (bytes.empty()) {
    image.error = "empty file";
    return image;
  }
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    image.error = "larger than 2 GB";
    return image;
  }
  int w = 0, h = 0, in_file = 0;
  image.pixels.reset(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &in_file, channels));
  if (!image.pixels) {
    image.error = undecodableReason(bytes.data(), bytes.size());
    return image;
  }
  image.width = w;
  image.height = h;
  image.channels = channels;
  return image;
}

void resizeToFloats(const DecodedImage& image, const CropWindow& window, int64_t out_height,
                    int64_t out_width, float* out) {
  const int64_t C = image.channels;
  const int64_t stride = image.width * C;
  const uint8_t* src = image.pixels.get() + window.top * stride + window.left * C;
  std::vector<uint8_t> resized;
  if (window.height != out_height || window.width != out_width) {
    resized.resize(static_cast<size_t>(out_height * out_width * C));
    // Plain (not sRGB-aware) filtering of the stored values, as PIL and
    // torchvision resize them.
    if (!stbir_resize_uint8(src, static_cast<int>(window.width), static_cast<int>(window.height),
                            static_cast<int>(stride), resized.data(), static_cast<int>(out_width),
                            static_cast<int>(out_height), static_cast<int>(out_width * C),
                            static_cast<int>(C)))
      throw Error("out of memory resizing a " + std::to_string(window.width) + "x" +
                  std::to_string(window.height) + " image");
    src = resized.data();
  }
  const int64_t row = resized.empty() ? stride : out_width * C;
  // Interleaved rows to planes. A true division (see byte_images.cpp), so
  // values equal byte / 255 exactly.
  for (int64_t c = 0; c < C; ++c) {
    float* plane = out + c * out_height * out_width;
    for (int64_t y = 0; y < out_height; ++y) {
      const uint8_t* in = src + y * row + c;
      float* o = plane + y * out_width;
      for (int64_t x = 0; x < out_width; ++x) o[x] = static_cast<float>(in[x * C]) / 255.0f;
    }
  }
}

}  // namespace dtrain
