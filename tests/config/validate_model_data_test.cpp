// Validation of the keys of the real-model work: presets resnet and
// mobilenet_v2, the image_folder dataset, normalisation, augmentation, label
// smoothing and sync_batchnorm. Each message names the key, its position and
// the bad value.
#include <doctest/doctest.h>

#include "core/config/job_to_toml.h"
#include "core/config/parse_job.h"
#include "core/config/validate_job.h"
#include "tests/config/config_test_util.h"

using dtrain::JobConfig;
using dtrain::parseJobString;
using dtrain::validateJob;
using dtrain::test::configErrorOf;
using dtrain::test::kMinimalJob;
using dtrain::test::TempDir;

namespace {

std::string errorOf(const std::string& text) {
  return configErrorOf([&] { validateJob(parseJobString(text, "job.toml")); });
}

// The minimal job plus sections other than [model] and [data].
std::string validationError(const std::string& extra) { return errorOf(kMinimalJob + extra); }

// A job with this [model] table on synthetic data.
std::string modelError(const std::string& model_lines) {
  return errorOf("[data]\ndataset = \"synthetic\"\n[model]\n" + model_lines);
}

// A job on an image folder at `dir` with extra [data] lines.
std::string imageFolderError(const std::string& dir, const std::string& data_lines) {
  return errorOf("[model]\npreset = \"mlp\"\n[data]\ndataset = \"image_folder\"\ndir = \"" + dir + "\"\n" +
                 data_lines);
}

}  // namespace

TEST_CASE("resnet depth and mobilenet width are checked") {
  CHECK(
      modelError("preset = \"resnet\"\ndepth = 21\n")
          .find("[model] depth must be 18, 34, 50, 101 or 152 (torchvision's ResNets) or 6n+2 for a CIFAR-style "
                "ResNet: 20, 32, 44, 56, 110 (got 21)") != std::string::npos);
  CHECK(modelError("preset = \"resnet\"\ndepth = 50\n") == "(no ConfigError)");
  CHECK(modelError("preset = \"resnet\"\ndepth = 56\n") == "(no ConfigError)");
  CHECK(modelError("preset = \"mobilenet_v2\"\nwidth = 0\n")
            .find("[model] width must be in [0.1, 4] (got 0.0)") != std::string::npos);
  CHECK(modelError("preset = \"resnt\"\n").find("did you mean 'resnet'?") != std::string::npos);
}

TEST_CASE("image_folder keys: split, size, channels, unreadable images") {
  TempDir dir;
  CHECK(imageFolderError(dir.path(), "image_size = [96, 96]\n") == "(no ConfigError)");
  CHECK(imageFolderError(dir.path(), "validation_fraction = 1.0\n")
            .find("[data] validation_fraction must be in (0, 1) when no validation_dir is given (got 1.0)") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "validation_dir = \"" + dir.path() + "/nope\"\n")
            .find("[data] validation_dir '" + dir.path() + "/nope' is not a directory") != std::string::npos);
  CHECK(imageFolderError(dir.path(), "image_size = [96]\n")
            .find("[data] image_size must be [height, width] with extents in [1, 4096] (got [96])") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "channels = 4\n")
            .find("[data] channels must be 1 (grey) or 3 (RGB) (got 4)") != std::string::npos);
  CHECK(imageFolderError(dir.path(), "bad_images = \"ignore\"\n").find("[data] bad_images must be one of") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path() + "/missing", "")
            .find("does not exist; set dir to a folder holding one "
                  "sub-folder of images per class") != std::string::npos);
}

TEST_CASE("normalisation and augmentation keys") {
  TempDir dir;
  CHECK(imageFolderError(dir.path(), "mean = [0.5, 0.5]\n")
            .find("[data] mean must have one value or one per channel (3), got [0.5, 0.5]") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "std = [0.2, 0.0, 0.2]\n").find("[data] std entries must be > 0") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "mean = [\"a\"]\n").find("[data] mean[0] must be a float (got string") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "augment_scale = [0.5, 0.2]\n")
            .find("[data] augment_scale must be [min, max] area fractions with 0 < min <= max <= 1") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "augment_ratio = [0.0, 1.0]\n").find("[data] augment_ratio must be") !=
        std::string::npos);
  CHECK(imageFolderError(dir.path(), "augment_crop_padding = -1\n")
            .find("[data] augment_crop_padding must be in [0, 1024] (got -1)") != std::string::npos);
  CHECK(imageFolderError(dir.path(), "augment_flip = true\naugment_resized_crop = true\nmean = 0.5\n")
            .find("[data] mean must be an array of numbers") != std::string::npos);
}

TEST_CASE("label smoothing and sync_batchnorm") {
  CHECK(validationError("\n[train]\nlabel_smoothing = 1.0\n")
            .find("[train] label_smoothing must be in [0, 1) (got 1.0)") != std::string::npos);
  CHECK(validationError("\n[train]\nlabel_smoothing = 0.1\n[strategy]\nsync_batchnorm = true\n") ==
        "(no ConfigError)");
  CHECK(validationError("\n[strategy]\nsync_batchnorm = 1\n")
            .find("[strategy] sync_batchnorm must be a boolean") != std::string::npos);
}

TEST_CASE("the new keys survive the resolved job written back") {
  TempDir dir;
  JobConfig job = parseJobString("[data]\ndataset = \"image_folder\"\ndir = \"" + dir.path() +
                                     "\"\nmean = [0.485, 0.456, 0.406]\naugment_scale = [0.25, 1]\n"
                                     "[model]\npreset = \"mobilenet_v2\"\nwidth = 0.75\n",
                                 "job.toml");
  JobConfig again = parseJobString(dtrain::jobToToml(job), "again.toml");
  CHECK(again.data.mean == std::vector<double>{0.485, 0.456, 0.406});
  CHECK(again.data.augment_scale == std::vector<double>{0.25, 1.0});
  CHECK(again.model.width == 0.75);
  CHECK(again.model.preset == "mobilenet_v2");
}
