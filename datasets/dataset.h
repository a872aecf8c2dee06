// Dataset: labelled images addressed by index, held in memory (IDX, CIFAR,
// synthetic) or decoded from files on every read (image_folder).
// Ownership: openDataset returns a uniquely owned dataset; a BatchLoader only
// borrows it, so the dataset must outlive its loaders.
// Thread-safety: immutable after construction (but for internal, locked
// bookkeeping); get() may be called from any number of threads at once. get()
// blocks on file reads for datasets that decode files.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/config/job_config.h"
#include "core/errors.h"
#include "core/tensor/shape.h"

namespace dtrain {

class Augmentation;
class ByteImages;

enum class Split { Train, Test };

// "train" / "test", for messages.
const char* splitName(Split split);

class Dataset {
 public:
  virtual ~Dataset() = default;
  // One line for logs: "fashion_mnist train: 60000 x [1,28,28], 10 classes".
  virtual std::string describe() const = 0;
  virtual int64_t size() const = 0;
  // Per-sample shape [C,H,W].
  virtual Shape sampleShape() const = 0;
  virtual int64_t classes() const = 0;
  // Writes sampleShape().numel() floats (pixels scaled to [0,1]) to `out` and
  // returns the label in [0, classes()). Throws Error for an index outside
  // [0, size()).
  virtual int32_t get(int64_t index, float* out) const = 0;
  // get() with `augmentation`'s transforms of the sample's `draw` applied
  // (Augmentation::sampleDraw). The default augments get()'s floats; a
  // dataset that decodes files overrides it to take the resized crop from the
  // decoded original, before its resize, which keeps more detail.
  virtual int32_t getAugmented(int64_t index, const Augmentation& augmentation, uint64_t draw,
                               float* out) const;
  // Labels per sample: 1 for images; T for a window of T tokens (each
  // position's label is the token after it).
  virtual int64_t labelsPerSample() const { return 1; }
  // Writes the sample's floats and its labelsPerSample() labels. The default
  // is get()'s single label.
  virtual void getWithLabels(int64_t index, float* out, int32_t* labels) const {
    labels[0] = get(index, out);
  }
  // The labels of sample `index` that count in the loss: all but a token
  // window's padding (getWithLabels gives those as -1).
  virtual int64_t countedLabels(int64_t index) const { return labelsPerSample(); }
  // True when get() reads and decodes a file (worth several loader threads).
  virtual bool decodesFiles() const { return false; }
  // The samples as bytes when the dataset holds them so and get() is their
  // ByteImages::get (a GPU run's batches then cross as bytes); else null.
  virtual const ByteImages* byteImages() const { return nullptr; }
};

// Fashion-MNIST's class count (its labels are 0..9).
constexpr int64_t kFashionMnistClasses = 10;

// The error for a [data] dataset name this build does not know.
ConfigError unknownDatasetError(const std::string& name);

// Opens the [data] section's dataset for one split. `seed` drives synthetic
// data (the job seed); files are read eagerly, so every file problem surfaces
// here as IoError / DataError, and an unknown dataset name as ConfigError.
// Blocks while reading and decompressing (about a second for Fashion-MNIST).
std::unique_ptr<Dataset> openDataset(const DataSection& data, Split split, uint64_t seed);

}  // namespace dtrain
