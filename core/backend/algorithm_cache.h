// The GPU library algorithms a run chose by timing (convolution passes,
// matrix products), by key (core/backend/algorithm_keys.h), kept in the run
// directory so that a resume on the same kind of GPU with the same libraries
// computes with the same algorithms (bit for bit, with [job] deterministic)
// without timing them again.
//
// The file (RUN_DIR/gpu_algorithms.json) is one JSON object:
//   {"format": "dtrain gpu algorithms", "version": 1,
//    "gpu": "NVIDIA H200", "cudnn_version": 91900, "cublaslt_version": 130100,
//    "choices": {"conv fwd n128 c32x14x14 ...": {"algo": 1, "math": 1,
//                "workspace_bytes": 0, "time_ms": 0.0123, "config": []}, ...}}
// A file from another GPU or library version is ignored (the choices are
// timed afresh and the file rewritten); a corrupt one gets a one-line note
// naming it and is ignored too. Saving writes a temporary file, syncs it and
// renames it over the old one, so a killed run leaves the old file or the
// new one, never half of one.
//
// Device-free: the engine owns the cache and saves it; the CUDA module reads
// and records choices through a pointer. Thread-safe (one mutex).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

// Where the choices were timed: they hold for this GPU model and these
// library versions only.
struct AlgorithmSource {
  std::string gpu;  // "NVIDIA H200"
  int64_t cudnn_version = 0;
  int64_t cublaslt_version = 0;
  bool operator==(const AlgorithmSource& o) const {
    return gpu == o.gpu && cudnn_version == o.cudnn_version && cublaslt_version == o.cublaslt_version;
  }
  // "NVIDIA H200 with cuDNN 9.19.0 and cuBLASLt 13.1.0", for messages.
  std::string describe() const;
};

// One choice. The meaning of algo, math and config is the library's.
struct AlgorithmChoice {
  int64_t algo = 0;              // cuDNN's algorithm enumerator, or cuBLASLt's algorithm id
  int64_t math = 0;              // cuDNN's math type (0 for products)
  uint64_t workspace_bytes = 0;  // what the algorithm needs
  double time_ms = 0;            // the median of its timed runs
  std::vector<int64_t> config;   // cuBLASLt: the algorithm's configuration attributes
  bool operator==(const AlgorithmChoice& o) const {
    return algo == o.algo && math == o.math && workspace_bytes == o.workspace_bytes && time_ms == o.time_ms &&
           config == o.config;
  }
};

inline constexpr const char* kAlgorithmCacheFileName = "gpu_algorithms.json";

class AlgorithmCache {
 public:
  // `path` = the file to read and write; "" keeps the choices in memory only.
  explicit AlgorithmCache(std::string path = "");

  // Takes the file's choices when it was written for `source`; otherwise
  // (absent, another GPU or library version, corrupt) starts empty, with a
  // note saying why when there was a file. Only the first call reads; later
  // ones only check that the source is the same. Never throws for the file's
  // contents.
  void open(const AlgorithmSource& source);
  bool isOpen() const;

  std::optional<AlgorithmChoice> find(const std::string& key) const;
  // Adds or replaces a choice; it is written by the next save().
  void record(const std::string& key, const AlgorithmChoice& choice);
  size_t size() const;

  // Writes the file when a choice was recorded since the last save (and the
  // cache has a path and was opened); returns whether it wrote. Throws IoError.
  bool save();

  // Notes about the file for the user ("... was timed on another GPU ..."),
  // each one line; cleared by the call.
  std::vector<std::string> takeNotes();

  const std::string& path() const { return path_; }

  // The file's text for these choices; parseAlgorithmFile reads it back.
  static std::string encode(const AlgorithmSource& source,
                            const std::map<std::string, AlgorithmChoice>& choices);

 private:
  void readFile();

  std::string path_;
  mutable std::mutex mutex_;
  bool open_ = false;
  bool dirty_ = false;
  AlgorithmSource source_;
  std::map<std::string, AlgorithmChoice> choices_;
  std::vector<std::string> notes_;
};

// The source and choices of a file's text. Returns false, with a reason in
// *problem ("invalid JSON at byte 12: ...", "choice 'x' has no algo"), for
// text that is not such a file.
bool parseAlgorithmFile(const std::string& text, AlgorithmSource* source,
                        std::map<std::string, AlgorithmChoice>* choices, std::string* problem);

}  // namespace dtrain
