#include "datasets/dataset_info.h"

#include "core/errors.h"
#include "datasets/cifar_dataset.h"
#include "datasets/dataset.h"
#include "datasets/idx_dataset.h"
#include "datasets/idx_file.h"
#include "datasets/image_folder_dataset.h"
#include "datasets/normalisation.h"
#include "datasets/token_windows.h"

namespace dtrain {

namespace {

int64_t idxSamples(const std::string& name, const std::string& dir, Split split, Shape* shape) {
  std::vector<int64_t> images = readIdxDims(IdxDataset::imagesPath(name, dir, split), 3);
  std::vector<int64_t> labels = readIdxDims(IdxDataset::labelsPath(name, dir, split), 1);
  if (images[0] != labels[0])
    throw DataError(IdxDataset::imagesPath(name, dir, split) + " holds " + std::to_string(images[0]) +
                    " images but " + IdxDataset::labelsPath(name, dir, split) + " holds " +
                    std::to_string(labels[0]) + " labels");
  *shape = Shape{1, images[1], images[2]};
  return images[0];
}

// The shape, classes and split sizes, by dataset.
DatasetInfo peekShapeAndSizes(const DataSection& data) {
  DatasetInfo info;
  if (data.dataset == "synthetic") {
    info.sample_shape = Shape(data.shape);
    info.classes = data.classes;
    info.train_samples = data.train_samples;
    info.test_samples = data.test_samples;
    return info;
  }
  if (data.dataset == "cifar10" || data.dataset == "cifar100") {
    const CifarVariant v = data.dataset == "cifar10" ? CifarVariant::Cifar10 : CifarVariant::Cifar100;
    info.sample_shape = Shape{3, 32, 32};
    info.classes = CifarDataset::variantClasses(v);
    info.train_samples = CifarDataset::splitSamples(v, data.dir, Split::Train);
    info.test_samples = CifarDataset::splitSamples(v, data.dir, Split::Test);
    return info;
  }
  if (isTokenDataset(data.dataset)) {
    // Reads the corpus: a token file's size is in its header, but a text's
    // only after decompressing it.
    const auto train = openTokenDataset(data, Split::Train), test = openTokenDataset(data, Split::Test);
    info.sample_shape = train->sampleShape();
    info.classes = train->classes();
    info.train_samples = train->size();
    info.test_samples = test->size();
    return info;
  }
  if (data.dataset == "image_folder") {
    // Lists both splits and checks each image's header (no decoding), so
    // unreadable images are reported here as training would report them.
    const ImageFolderDataset train(data, Split::Train), test(data, Split::Test);
    info.sample_shape = train.sampleShape();
    info.classes = train.classes();
    info.train_samples = train.size();
    info.test_samples = test.size();
    return info;
  }
  if (data.dataset != "fashion_mnist" && data.dataset != "idx") throw unknownDatasetError(data.dataset);
  Shape test_shape;
  info.train_samples = idxSamples(data.dataset, data.dir, Split::Train, &info.sample_shape);
  info.test_samples = idxSamples(data.dataset, data.dir, Split::Test, &test_shape);
  if (test_shape != info.sample_shape)
    throw DataError("[data] " + data.dir + ": test images are " + test_shape.str() +
                    " but training images are " + info.sample_shape.str());
  // fashion_mnist has 10 classes by definition; a generic idx set counts its labels.
  info.classes = data.dataset == "fashion_mnist" ? kFashionMnistClasses
                                                 : IdxDataset::trainClasses(data.dataset, data.dir);
  return info;
}

}  // namespace

DatasetInfo peekDataset(const DataSection& data) {
  DatasetInfo info = peekShapeAndSizes(data);
  // What the loader checks too, reported before a run starts.
  Normalisation::fromConfig(data, info.sample_shape[0]);
  return info;
}

}  // namespace dtrain
