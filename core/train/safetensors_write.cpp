// writeSafetensors: header construction and the durable write.
#include <algorithm>
#include <unordered_set>
#include <vector>

#include "core/errors.h"
#include "core/io/json.h"
#include "core/train/safetensors.h"

namespace dtrain {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this build writes host floats as they are");

namespace {

void validateTensors(const std::string& path, const std::vector<NamedTensorView>& tensors) {
  std::unordered_set<std::string> names;
  for (const NamedTensorView& t : tensors) {
    std::string where = "cannot write " + path + ": tensor \"" + t.name + "\" ";
    if (t.name.empty()) throw Error("cannot write " + path + ": a tensor has an empty name");
    if (t.name == "__metadata__") throw Error(where + "uses the reserved name __metadata__");
    if (!names.insert(t.name).second) throw Error(where + "appears twice");
    for (int64_t d : t.shape.dims())
      if (d < 0) throw Error(where + "has a negative extent in shape " + t.shape.str());
    if (t.shape.numel() > 0 && t.data == nullptr && !t.fill) throw Error(where + "has no data");
  }
}

std::string buildHeader(const std::vector<NamedTensorView>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  JsonWriter header;
  if (!metadata.empty()) {
    JsonWriter meta;
    for (const auto& [k, v] : metadata) meta.add(k, v);
    header.add("__metadata__", meta);
  }
  uint64_t offset = 0;
  for (const NamedTensorView& t : tensors) {
    uint64_t bytes = static_cast<uint64_t>(t.shape.numel()) * sizeof(float);
    JsonWriter info;
    info.add("dtype", "F32");
    info.add("shape", t.shape.dims());
    info.add("data_offsets",
             std::vector<int64_t>{static_cast<int64_t>(offset), static_cast<int64_t>(offset + bytes)});
    header.add(t.name, info);
    offset += bytes;
  }
  std::string text = header.str();
  // Pad so the data (after the 8-byte length) starts 8-byte aligned, which
  // lets readers map the floats in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// Calls piece(first, count) for the pieces of streamed tensor `t`, in order.
template <class Piece>
void forEachPiece(const NamedTensorView& t, Piece&& piece) {
  const int64_t n = t.shape.numel();
  for (int64_t first = 0; first < n; first += kStreamedPieceFloats)
    piece(first, std::min(kStreamedPieceFloats, n - first));
}

}  // namespace

void takePartInStreamedWrite(const std::vector<NamedTensorView>& tensors) {
  std::vector<float> piece;
  for (const NamedTensorView& t : tensors) {
    if (t.shape.numel() == 0 || t.data) continue;
    forEachPiece(t, [&](int64_t first, int64_t count) {
      piece.resize(static_cast<size_t>(count));
      t.fill(first, count, piece.data());
    });
  }
}

void writeSafetensors(const std::string& path, const std::vector<NamedTensorView>& tensors,
                      const std::map<std::string, std::string>& metadata, FileDigest* digest) {
  validateTensors(path, tensors);
  std::string header = buildHeader(tensors, metadata);
  unsigned char len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  FileSink sink(path);
  sink.write(len, sizeof len);
  sink.write(header);
  std::vector<float> piece;  // a streamed tensor's, one at a time
  for (const NamedTensorView& t : tensors) {
    if (t.shape.numel() == 0) continue;
    if (t.data) {
      sink.write(t.data, static_cast<size_t>(t.shape.numel()) * sizeof(float));
      continue;
    }
    forEachPiece(t, [&](int64_t first, int64_t count) {
      piece.resize(static_cast<size_t>(count));
      t.fill(first, count, piece.data());
      sink.write(piece.data(), static_cast<size_t>(count) * sizeof(float));
    });
  }
  sink.finish();
  if (digest) *digest = sink.digest();
}

}  // namespace dtrain
