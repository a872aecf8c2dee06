// IDX files: the MNIST container format. A 4-byte big-endian magic
// 0x0000TTNN (TT = element type, NN = number of dimensions), NN big-endian
// uint32 extents, then the elements. Files may be raw or gzip-compressed; the
// reader detects gzip by its 0x1f 0x8b magic, so the file name does not matter.
// Ownership: readIdx returns its data by value. Thread-safety: free functions
// with no shared state. Both block on file I/O.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// IDX element type byte for unsigned bytes: the only type dtrain reads.
constexpr uint8_t kIdxUInt8 = 0x08;

struct IdxArray {
  std::vector<int64_t> dims;  // outermost first, every extent > 0
  std::vector<uint8_t> data;  // product(dims) bytes
};

// Reads an unsigned-byte IDX file with `expected_rank` dimensions (3 for
// images, 1 for labels). The magic, the type byte, the rank, every extent and
// the exact data size are checked: a wrong, truncated or over-long file (or
// corrupt gzip data) throws DataError, and a file that cannot be opened or read
// throws IoError; both messages start with the path.
IdxArray readIdx(const std::string& path, int expected_rank);

// Only the header of such a file: its extents, with the same checks of the
// magic, type and rank (the data is not read, so its size is not checked).
std::vector<int64_t> readIdxDims(const std::string& path, int expected_rank);

// Writes an IDX file (for tests and data-generation scripts). `type` is the
// element type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float,
// 0x0E double); `bytes` holds the elements already in file (big-endian) order
// and must be product(dims) * element size long. Extents may be 0 so tests
// can produce invalid files. Throws Error for inconsistent arguments and
// IoError when the file cannot be written.
void writeIdx(const std::string& path, uint8_t type, const std::vector<int64_t>& dims,
              const std::vector<uint8_t>& bytes, bool gzip);

}  // namespace dtrain
