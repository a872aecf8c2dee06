#include "datasets/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/errors.h"

namespace dtrain {

namespace {

const char* const kFix = " (re-download or reinstall the dataset)";

// Upper bound on the data an IDX header may announce. Far above any real
// dataset, low enough that a corrupt header cannot overflow size arithmetic.
constexpr int64_t kMaxIdxBytes = int64_t{1} << 48;

// Reads larger than this go to zlib in pieces (gzread takes an unsigned int).
constexpr size_t kMaxRead = size_t{1} << 30;

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, static_cast<unsigned>(v));
  return buf;
}

uint32_t expectedMagic(int rank) { return (uint32_t{kIdxUInt8} << 8) | static_cast<uint32_t>(rank); }

std::string whatFor(int rank) {
  if (rank == 3) return "images";
  if (rank == 1) return "labels";
  return std::to_string(rank) + "-dimensional data";
}

// The bytes of a file, decompressed when it is gzip. Throws IoError for I/O
// failures and DataError for corrupt compressed data.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw IoError(path + ": file not found");
    if (std::filesystem::is_directory(path, ec))
      throw IoError(path + ": is a directory, expected an IDX file");
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) throw IoError(path + ": cannot open: " + std::strerror(errno));
    unsigned char head[2] = {0, 0};
    size_t n = std::fread(head, 1, 2, file_);
    if (std::ferror(file_)) throw IoError(path + ": cannot read: " + std::strerror(errno));
    if (n == 2 && head[0] == 0x1f && head[1] == 0x8b) {
      std::fclose(file_);
      file_ = nullptr;
      gz_ = gzopen(path.c_str(), "rb");
      if (!gz_) throw IoError(path + ": cannot open: " + std::strerror(errno));
      gzbuffer(gz_, 1 << 17);  // fewer, larger reads than the 8 KiB default
    } else {
      std::rewind(file_);
    }
  }
  ~ByteSource() {
    if (file_) std::fclose(file_);
    if (gz_) gzclose(gz_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return gz_ != nullptr; }

  // Reads up to n bytes; fewer only at the end of the (decompressed) data.
  size_t read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t total = 0;
    while (total < n) {
      size_t want = std::min(n - total, kMaxRead);
      size_t got;
      if (gz_) {
        int r = gzread(gz_, out + total, static_cast<unsigned>(want));
        if (r < 0) throwGzError();
        got = static_cast<size_t>(r);
      } else {
        got = std::fread(out + total, 1, want, file_);
        if (got < want && std::ferror(file_)) throw IoError(path_ + ": cannot read: " + std::strerror(errno));
      }
      total += got;
      if (got < want) break;
    }
    return total;
  }

  // True when the gzip stream stopped before its end marker and checksum.
  bool gzipCutShort() const {
    if (!gz_) return false;
    int errnum = Z_OK;
    gzerror(gz_, &errnum);
    return errnum == Z_BUF_ERROR;
  }

 private:
  [[noreturn]] void throwGzError() {
    int errnum = Z_OK;
    const char* msg = gzerror(gz_, &errnum);
    if (errnum == Z_ERRNO) throw IoError(path_ + ": cannot read: " + std::strerror(errno));
    throw DataError(path_ + ": corrupt gzip data (" + (msg ? msg : "unknown zlib error") + ")" + kFix);
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
};

uint32_t bigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string dimsStr(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

namespace {

// Reads and checks the magic and the extents; leaves `src` at the data.
std::vector<int64_t> readHeader(ByteSource& src, const std::string& path, int expected_rank) {
  const std::string what = whatFor(expected_rank);
  const std::string expect = hex(expectedMagic(expected_rank), 8) + " for " + what;

  unsigned char magic_bytes[4];
  size_t got = src.read(magic_bytes, 4);
  if (got < 4)
    throw DataError(path + ": not an IDX file (only " + std::to_string(got) + " bytes long; expected magic " +
                    expect + ")" + kFix);
  uint32_t magic = bigEndian32(magic_bytes);
  if (magic_bytes[0] != 0 || magic_bytes[1] != 0)
    throw DataError(path + ": not an IDX file (magic " + hex(magic, 8) + "; expected " + expect + ")" + kFix);
  if (magic_bytes[2] != kIdxUInt8)
    throw DataError(path + ": unsupported IDX element type " + hex(magic_bytes[2], 2) + " (magic " +
                    hex(magic, 8) + "; only unsigned bytes, type 0x08, are supported: expected " + expect +
                    ")" + kFix);
  const int rank = magic_bytes[3];
  if (rank != expected_rank)
    throw DataError(path + ": IDX file has " + std::to_string(rank) + " dimension(s) (magic " +
                    hex(magic, 8) + "), expected " + std::to_string(expected_rank) + " (magic " + expect +
                    "); check that the images and labels files are not swapped" + kFix);

  const int64_t header_bytes = 4 + 4 * int64_t{rank};
  std::vector<unsigned char> dim_bytes(static_cast<size_t>(4 * rank));
  got = src.read(dim_bytes.data(), dim_bytes.size());
  if (got < dim_bytes.size())
    throw DataError(path + ": truncated IDX header: expected " + std::to_string(header_bytes) +
                    " bytes, got " + std::to_string(4 + got) + kFix);

  std::vector<int64_t> dims;
  int64_t data_bytes = 1;
  for (int i = 0; i < rank; ++i) dims.push_back(bigEndian32(&dim_bytes[static_cast<size_t>(4 * i)]));
  for (int i = 0; i < rank; ++i) {
    if (dims[static_cast<size_t>(i)] == 0)
      throw DataError(path + ": IDX dimension " + std::to_string(i) + " of " + dimsStr(dims) +
                      " is 0; every dimension must be positive" + kFix);
    data_bytes *= dims[static_cast<size_t>(i)];
    if (data_bytes > kMaxIdxBytes)
      throw DataError(path + ": IDX dimensions " + dimsStr(dims) + " are implausibly large (corrupt header)" +
                      kFix);
  }
  return dims;
}

}  // namespace

std::vector<int64_t> readIdxDims(const std::string& path, int expected_rank) {
  ByteSource src(path);
  return readHeader(src, path, expected_rank);
}

IdxArray readIdx(const std::string& path, int expected_rank) {
  ByteSource src(path);
  IdxArray out;
  out.dims = readHeader(src, path, expected_rank);
  const int64_t header_bytes = 4 + 4 * static_cast<int64_t>(out.dims.size());
  int64_t data_bytes = 1;
  for (int64_t d : out.dims) data_bytes *= d;
  const int64_t expected_total = header_bytes + data_bytes;
  auto truncated = [&](int64_t have) {
    std::string why = src.gzipCutShort() ? "; the gzip stream ends early" : "";
    return DataError(path + ": truncated IDX file: expected " + std::to_string(expected_total) +
                     " bytes of data, got " + std::to_string(header_bytes + have) + why + kFix);
  };

  // Grow the buffer as data arrives rather than trusting the header with one
  // huge allocation: a corrupt or truncated file then fails after reading what
  // it has. Real datasets (Fashion-MNIST: 47 MB) fit the first allocation.
  constexpr int64_t kFirstChunk = int64_t{64} << 20;
  int64_t have = 0;
  out.data.resize(static_cast<size_t>(std::min(data_bytes, kFirstChunk)));
  for (;;) {
    size_t want = out.data.size() - static_cast<size_t>(have);
    size_t n = src.read(out.data.data() + have, want);
    have += static_cast<int64_t>(n);
    if (n < want) throw truncated(have);
    if (have == data_bytes) break;
    out.data.resize(static_cast<size_t>(std::min(data_bytes, 2 * have)));
  }

  // Anything after the data is an error too (a concatenated or wrong file).
  // Reading to the end also makes zlib verify the gzip checksum.
  int64_t trailing = 0;
  unsigned char scratch[1 << 14];
  for (size_t n; (n = src.read(scratch, sizeof scratch)) > 0;) trailing += static_cast<int64_t>(n);
  if (trailing > 0)
    throw DataError(path + ": IDX file has " + std::to_string(trailing) +
                    " unexpected trailing bytes: expected " + std::to_string(expected_total) +
                    " bytes in all for dimensions " + dimsStr(out.dims) + ", got " +
                    std::to_string(expected_total + trailing) + kFix);
  if (src.gzipCutShort())
    throw DataError(path + ": truncated gzip file (the compressed stream ends before its checksum)" + kFix);
  return out;
}

namespace {

int64_t elementSize(uint8_t type) {
  switch (type) {
    case 0x08:
    case 0x09:
      return 1;
    case 0x0B:
      return 2;
    case 0x0C:
    case 0x0D:
      return 4;
    case 0x0E:
      return 8;
    default:
      return 0;
  }
}

}  // namespace

void writeIdx(const std::string& path, uint8_t type, const std::vector<int64_t>& dims,
              const std::vector<uint8_t>& bytes, bool gzip) {
  const int64_t elem = elementSize(type);
  if (elem == 0) throw Error("writeIdx(" + path + "): unknown IDX element type " + hex(type, 2));
  if (dims.empty() || dims.size() > 255)
    throw Error("writeIdx(" + path + "): an IDX file has 1 to 255 dimensions, got " +
                std::to_string(dims.size()));
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > int64_t{0xffffffff})
      throw Error("writeIdx(" + path + "): dimension " + std::to_string(d) + " does not fit in uint32");
    count *= d;
  }
  if (static_cast<int64_t>(bytes.size()) != count * elem)
    throw Error("writeIdx(" + path + "): " + std::to_string(bytes.size()) + " bytes given for dimensions " +
                dimsStr(dims) + ", expected " + std::to_string(count * elem));

  std::vector<unsigned char> header;
  auto put32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<unsigned char>(v >> shift));
  };
  put32((uint32_t{type} << 8) | static_cast<uint32_t>(dims.size()));
  for (int64_t d : dims) put32(static_cast<uint32_t>(d));

  auto fail = [&]() { return IoError(path + ": cannot write: " + std::strerror(errno)); };
  if (gzip) {
    gzFile gz = gzopen(path.c_str(), "wb");
    if (!gz) throw fail();
    bool ok =
        gzwrite(gz, header.data(), static_cast<unsigned>(header.size())) == static_cast<int>(header.size());
    for (size_t off = 0; ok && off < bytes.size(); off += kMaxRead) {
      unsigned n = static_cast<unsigned>(std::min(kMaxRead, bytes.size() - off));
      ok = gzwrite(gz, bytes.data() + off, n) == static_cast<int>(n);
    }
    if (gzclose(gz) != Z_OK) ok = false;
    if (!ok) throw fail();
  } else {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw fail();
    bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
              std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (std::fclose(f) != 0) ok = false;
    if (!ok) throw fail();
  }
}

}  // namespace dtrain
