#include "core/config/layer_options.h"

#include <doctest/doctest.h>

#include "core/config/parse_job.h"
#include "tests/config/config_test_util.h"

using dtrain::LayerOptions;
using dtrain::SourcePos;
using dtrain::test::configErrorOf;

namespace {

// conv1 as a job file would give it: the table at line 30, one option a line.
LayerOptions conv1() {
  LayerOptions o("conv1", "conv2d", SourcePos{"job.toml", 30, 1});
  o.set("filters", int64_t{32}, SourcePos{"job.toml", 33, 11});
  o.set("kernel", std::vector<int64_t>{3, 5}, SourcePos{"job.toml", 34, 10});
  o.set("stride", int64_t{2}, SourcePos{"job.toml", 35, 10});
  o.set("scale", int64_t{2}, SourcePos{"job.toml", 36, 9});
  o.set("rate", 0.25, SourcePos{"job.toml", 37, 8});
  o.set("bias", true, SourcePos{"job.toml", 38, 8});
  o.set("padding", std::string("same"), SourcePos{"job.toml", 39, 11});
  return o;
}

}  // namespace

TEST_CASE("LayerOptions typed getters") {
  LayerOptions o = conv1();
  CHECK(o.layer() == "conv1");
  CHECK(o.type() == "conv2d");
  CHECK(o.getInt("filters") == 32);
  CHECK(o.getInt("groups", 1) == 1);
  CHECK(o.getPair("kernel") == std::pair<int64_t, int64_t>{3, 5});
  CHECK(o.getPair("stride") == std::pair<int64_t, int64_t>{2, 2});
  CHECK(o.getPair("dilation", std::pair<int64_t, int64_t>{1, 1}) == std::pair<int64_t, int64_t>{1, 1});
  CHECK(o.getFloat("rate") == 0.25);
  CHECK(o.getFloat("scale") == 2.0);  // an integer is fine for a float
  CHECK(o.getBool("bias") == true);
  CHECK(o.getString("padding") == "same");
  CHECK(o.getString("activation", std::string("relu")) == "relu");
  CHECK_NOTHROW(o.finish());
}

TEST_CASE("LayerOptions reports wrong types and missing keys with positions") {
  LayerOptions o = conv1();
  o.set("units", std::string("x"), SourcePos{"job.toml", 40, 9});
  CHECK(configErrorOf([&] { o.getInt("units"); }) ==
        "job.toml:40:9: [model.layers] 'conv1' units must be an integer (got string \"x\")");
  CHECK(configErrorOf([&] { o.getInt("rate"); }) ==
        "job.toml:37:8: [model.layers] 'conv1' rate must be an integer (got float 0.25)");
  CHECK(configErrorOf([&] { o.getFloat("padding"); }) ==
        "job.toml:39:11: [model.layers] 'conv1' padding must be a float (got string \"same\")");
  CHECK(configErrorOf([&] { o.getBool("filters"); }) ==
        "job.toml:33:11: [model.layers] 'conv1' filters must be a boolean (got integer 32)");
  CHECK(configErrorOf([&] { o.getString("bias"); }) ==
        "job.toml:38:8: [model.layers] 'conv1' bias must be a string (got boolean true)");
  CHECK(configErrorOf([&] { o.getPair("padding"); }) ==
        "job.toml:39:11: [model.layers] 'conv1' padding must be an integer or an array of 2 integers (got "
        "string "
        "\"same\")");
  o.set("size", std::vector<int64_t>{1, 2, 3}, SourcePos{"job.toml", 41, 8});
  CHECK(configErrorOf([&] { o.getPair("size"); }) ==
        "job.toml:41:8: [model.layers] 'conv1' size must be an integer or an array of 2 integers (got array "
        "[1, 2, "
        "3])");
  CHECK(configErrorOf([&] { o.getInt("groups"); }) == "job.toml:30:1: [model.layers] 'conv1' needs 'groups'");
  CHECK(configErrorOf([&] { o.fail("filters", "filters must be > 0 (got 0)"); }) ==
        "job.toml:33:11: [model.layers] 'conv1' filters must be > 0 (got 0)");
}

TEST_CASE("LayerOptions::finish rejects the first unread option, suggesting a read one") {
  LayerOptions o("conv1", "conv2d", SourcePos{"job.toml", 30, 1});
  o.set("filter", int64_t{32}, SourcePos{"job.toml", 32, 10});
  o.set("zzz", int64_t{1}, SourcePos{"job.toml", 33, 7});
  o.set("kernel", int64_t{3}, SourcePos{"job.toml", 31, 10});
  CHECK(o.getInt("filters", 16) == 16);
  CHECK(o.getPair("kernel") == std::pair<int64_t, int64_t>{3, 3});
  CHECK(configErrorOf([&] { o.finish(); }) ==
        "job.toml:32:10: [model.layers] 'conv1' (conv2d) has unknown option 'filter' (did you mean "
        "'filters'?)");
  o.getInt("filter");
  CHECK(configErrorOf([&] { o.finish(); }) ==
        "job.toml:33:7: [model.layers] 'conv1' (conv2d) has unknown option 'zzz'");
}

TEST_CASE("LayerOptions from a job file carry the file positions") {
  dtrain::JobConfig job = dtrain::parseJobString(
      "[[model.layers]]\n"
      "name = \"conv1\"\n"
      "type = \"conv2d\"\n"
      "filters = \"x\"\n"
      "kernal = 3\n",
      "job.toml");
  const LayerOptions& o = job.model.layers.at(0).options;
  CHECK(configErrorOf([&] { o.getInt("filters"); }) ==
        "job.toml:4:11: [model.layers] 'conv1' filters must be an integer (got string \"x\")");
  CHECK(configErrorOf([&] { o.getInt("kernel"); }) == "job.toml:1:1: [model.layers] 'conv1' needs 'kernel'");
  CHECK(
      configErrorOf([&] { o.finish(); }) ==
      "job.toml:5:10: [model.layers] 'conv1' (conv2d) has unknown option 'kernal' (did you mean 'kernel'?)");
}

TEST_CASE("LayerOptions without a type or position still give a readable message") {
  LayerOptions o("fc", SourcePos{});
  o.set("unit", int64_t{3}, SourcePos{});
  CHECK(configErrorOf([&] { o.getInt("units"); }) == "[model.layers] 'fc' needs 'units'");
  CHECK(configErrorOf([&] { o.finish(); }) ==
        "[model.layers] 'fc' has unknown option 'unit' (did you mean 'units'?)");
}
