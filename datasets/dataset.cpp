#include "datasets/dataset.h"

#include "core/errors.h"
#include "datasets/augmentation.h"
#include "datasets/cifar_dataset.h"
#include "datasets/idx_dataset.h"
#include "datasets/image_folder_dataset.h"
#include "datasets/synthetic_dataset.h"
#include "datasets/token_windows.h"

namespace dtrain {

const char* splitName(Split split) { return split == Split::Train ? "train" : "test"; }

int32_t Dataset::getAugmented(int64_t index, const Augmentation& augmentation, uint64_t draw,
                              float* out) const {
  const int32_t label = get(index, out);
  augmentation.apply(out, sampleShape(), draw);
  return label;
}

std::unique_ptr<Dataset> openDataset(const DataSection& data, Split split, uint64_t seed) {
  if (data.dataset == "fashion_mnist")
    return std::make_unique<IdxDataset>("fashion_mnist", data.dir, split, kFashionMnistClasses);
  if (data.dataset == "idx") {
    // The class count comes from the train labels for both splits, so a test
    // split opened on its own still agrees with the model's output width.
    int64_t classes = split == Split::Train ? 0 : IdxDataset::trainClasses("idx", data.dir);
    return std::make_unique<IdxDataset>("idx", data.dir, split, classes);
  }
  if (data.dataset == "cifar10")
    return std::make_unique<CifarDataset>(CifarVariant::Cifar10, data.dir, split);
  if (data.dataset == "cifar100")
    return std::make_unique<CifarDataset>(CifarVariant::Cifar100, data.dir, split);
  if (data.dataset == "image_folder") return std::make_unique<ImageFolderDataset>(data, split);
  if (data.dataset == "synthetic") return std::make_unique<SyntheticDataset>(data, split, seed);
  if (isTokenDataset(data.dataset)) return openTokenDataset(data, split);
  throw unknownDatasetError(data.dataset);
}

ConfigError unknownDatasetError(const std::string& name) {
  return ConfigError(
      "[data] dataset \"" + name +
      "\" is unknown; use fashion_mnist, idx, cifar10, cifar100, image_folder, synthetic, tokens or text");
}

}  // namespace dtrain
