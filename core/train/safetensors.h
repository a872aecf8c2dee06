// The safetensors file format, as Python's `safetensors` library reads it:
//   8 bytes      little-endian u64 N, the header length
//   N bytes      UTF-8 JSON: {"__metadata__":{"k":"v"}, "name":{"dtype":"F32",
//                "shape":[..],"data_offsets":[begin,end]}, ...}, padded with
//                spaces so the data starts at a multiple of 8
//   the rest     raw little-endian tensor data; offsets are relative to its
//                start; tensors are contiguous with no gaps or overlap
// Only F32 tensors are written and accepted. Blocking file I/O; the functions
// share no state and are thread-safe for distinct paths.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/io/file_sink.h"
#include "core/tensor/shape.h"

namespace dtrain {

// A tensor to write; `data` (shape.numel() floats, host memory) is borrowed
// and must stay valid for the call. Without data, `fill` streams it: it is
// asked for floats [first, first + count) into `out`, piece by piece in
// order (a sharded run's optimizer state, from the workers that own it).
struct NamedTensorView {
  std::string name;
  Shape shape;
  const float* data = nullptr;
  std::function<void(int64_t first, int64_t count, float* out)> fill{};
};

// A streamed tensor is asked for pieces of at most this many floats.
constexpr int64_t kStreamedPieceFloats = int64_t(1) << 20;

struct SafetensorsTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // the header's __metadata__
  std::vector<SafetensorsTensor> tensors;       // in file (data offset) order
  // The tensor called `name`, or nullptr.
  const SafetensorsTensor* find(const std::string& name) const;
};

// Header lengths above this are rejected before anything is allocated (the
// same limit the reference implementation uses).
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Writes `tensors` in the given order to `path` (created or truncated), fsyncs
// it and, when `digest` is given, stores the file's size and CRC-32 there.
// Throws Error for an invalid tensor list (empty, duplicate or reserved name,
// negative extent, null data) before touching the file, and IoError when the
// file cannot be written (the partial file is deleted). Writes in place: to
// replace a file atomically, write elsewhere and rename.
void writeSafetensors(const std::string& path, const std::vector<NamedTensorView>& tensors,
                      const std::map<std::string, std::string>& metadata, FileDigest* digest = nullptr);

// Reads and fully validates `path`. Throws IoError when it cannot be read and
// CheckpointError ("<path>: <problem>") when its content is not a valid F32
// safetensors file.
SafetensorsFile readSafetensors(const std::string& path);

// Asks the streamed tensors of `tensors` for every piece, in the order
// writeSafetensors would, writing nothing: a worker whose fills are
// collective takes part in the chief's write with it.
void takePartInStreamedWrite(const std::vector<NamedTensorView>& tensors);

}  // namespace dtrain
