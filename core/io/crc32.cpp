#include "core/io/crc32.h"

#include <zlib.h>

#include <algorithm>

namespace dtrain {

uint32_t crc32Update(uint32_t crc, const void* data, size_t n) {
  // zlib takes a 32-bit length; feed larger buffers in chunks.
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t{1} << 30);
    c = ::crc32(c, p, static_cast<uInt>(chunk));
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace dtrain
