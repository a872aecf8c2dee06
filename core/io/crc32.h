// CRC-32 (the zlib / PNG / gzip polynomial, as Python's zlib.crc32 computes it).
// Pure functions; thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dtrain {

// Extends `crc` (0 for the start of a stream) with `n` bytes at `data`.
uint32_t crc32Update(uint32_t crc, const void* data, size_t n);

}  // namespace dtrain
