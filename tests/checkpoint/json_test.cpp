#include "core/io/json.h"

#include <doctest/doctest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace dtrain;

TEST_CASE("json writer: types, order, nesting and escaping") {
  JsonWriter inner;
  inner.add("x", 1).add("y", std::vector<int64_t>{1, -2, 3});
  JsonWriter w;
  w.add("int", int64_t{-42})
      .add("size", size_t{7})
      .add("big", uint64_t{18446744073709551615ull})
      .add("dbl", 0.1)
      .add("whole", 2.0)
      .add("t", true)
      .add("f", false)
      .add("s", "a\"b\\c\n\t\x01/")
      .add("str", std::string("é"))
      .add("ints", std::vector<int64_t>{})
      .add("dbls", std::vector<double>{1.5, -0.25})
      .add("strs", std::vector<std::string>{"a", "b"})
      .add("obj", inner)
      .addNull("nothing");
  CHECK(
      w.str() ==
      "{\"int\":-42,\"size\":7,\"big\":18446744073709551615,\"dbl\":0.1,\"whole\":2.0,\"t\":true,\"f\":false,"
      "\"s\":\"a\\\"b\\\\c\\n\\t\\u0001/\",\"str\":\"\xc3\xa9\",\"ints\":[],\"dbls\":[1.5,-0.25],"
      "\"strs\":[\"a\",\"b\"],\"obj\":{\"x\":1,\"y\":[1,-2,3]},\"nothing\":null}");
  CHECK(JsonWriter().str() == "{}");
  CHECK(JsonWriter().empty());
}

TEST_CASE("json writer: duplicate key throws") {
  JsonWriter w;
  w.add("k", 1);
  CHECK_THROWS_AS(w.add("k", 2), Error);
}

TEST_CASE("json writer: non-finite doubles become null") {
  JsonWriter w;
  w.add("nan", std::nan("")).add("inf", std::numeric_limits<double>::infinity()).add("ninf", -HUGE_VAL);
  CHECK(w.str() == "{\"nan\":null,\"inf\":null,\"ninf\":null}");
  CHECK(jsonNumber(std::numeric_limits<double>::quiet_NaN()) == "null");
}

TEST_CASE("json writer: doubles round-trip exactly") {
  std::mt19937_64 rng(7);
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                0.1,
                                1.0 / 3.0,
                                1e300,
                                -1e-300,
                                5e-324,
                                std::numeric_limits<double>::max(),
                                123456789012345678.0};
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isfinite(d)) values.push_back(d);
  }
  for (double v : values) {
    std::string s = jsonNumber(v);
    double back = parseJson(s).asDouble();
    CHECK_MESSAGE(std::memcmp(&back, &v, sizeof v) == 0, s);
  }
  CHECK(jsonNumber(1e21) == "1e+21");
  CHECK(jsonNumber(float(0.1f)) == "0.10000000149011612");
}

TEST_CASE("json writer: invalid UTF-8 is replaced so output stays valid") {
  std::string bad =
      "a\xff"
      "b\xc3";  // stray byte, truncated sequence
  std::string q = jsonQuote(bad);
  CHECK(q ==
        "\"a\xef\xbf\xbd"
        "b\xef\xbf\xbd\"");
  CHECK(parseJson(q).asString() ==
        "a\xef\xbf\xbd"
        "b\xef\xbf\xbd");
  std::string good = "\xe2\x82\xac \xf0\x9f\x98\x80";  // euro sign, emoji
  CHECK(jsonQuote(good) == "\"" + good + "\"");
}

TEST_CASE("json parser: values and structure") {
  JsonValue v = parseJson(
      " {\"a\": [1, -2.5e3, true, false, null, \"x\"], \"b\": {\"c\": {}}, \"d\": [], \"e\": "
      "\"\\u00e9\\ud83d\\ude00\\/\"} ");
  REQUIRE(v.isObject());
  REQUIRE(v.asObject().size() == 4);
  CHECK(v.asObject()[0].first == "a");  // document order
  CHECK(v.asObject()[3].first == "e");
  const auto& a = v.find("a")->asArray();
  REQUIRE(a.size() == 6);
  CHECK(a[0].asInt64() == 1);
  CHECK(a[1].asDouble() == -2500.0);
  CHECK(a[1].asInt64() == -2500);
  CHECK(a[2].asBool());
  CHECK_FALSE(a[3].asBool());
  CHECK(a[4].isNull());
  CHECK(a[5].asString() == "x");
  CHECK(v.find("b")->find("c")->asObject().empty());
  CHECK(v.find("d")->asArray().empty());
  CHECK(v.find("e")->asString() == "\xc3\xa9\xf0\x9f\x98\x80/");
  CHECK(v.find("missing") == nullptr);
  CHECK(parseJson("\"\\u0000\"").asString() == std::string(1, '\0'));
  CHECK(parseJson("1e-999").asDouble() == 0.0);
}

TEST_CASE("json parser: integers are exact and range-checked") {
  CHECK(parseJson("9007199254740993").asInt64() == 9007199254740993LL);
  CHECK(parseJson("-9223372036854775808").asInt64() == std::numeric_limits<int64_t>::min());
  CHECK(parseJson("9223372036854775807").asInt64() == std::numeric_limits<int64_t>::max());
  CHECK_THROWS_AS(parseJson("9223372036854775808").asInt64(), Error);
  CHECK_THROWS_AS(parseJson("1.5").asInt64(), Error);
  CHECK(parseJson("1e3").asInt64() == 1000);
  CHECK(parseJson("-0").asInt64() == 0);
}

TEST_CASE("json parser: wrong-type access throws") {
  JsonValue v = parseJson("{\"a\":1}");
  CHECK_THROWS_AS(v.asArray(), Error);
  CHECK_THROWS_AS(v.find("a")->asString(), Error);
  CHECK_THROWS_AS(v.find("a")->asBool(), Error);
  CHECK(std::string(v.typeName()) == "object");
}

TEST_CASE("json parser: writer output parses back") {
  JsonWriter inner;
  inner.add("shape", std::vector<int64_t>{2, 3}).add("name", "conv1.weight");
  JsonWriter w;
  w.add("loss", 0.123456789).add("step", 400).add("ok", true).add("inner", inner).add("s", "q\"\\\n");
  JsonValue v = parseJson(w.str());
  CHECK(v.find("loss")->asDouble() == 0.123456789);
  CHECK(v.find("step")->asInt64() == 400);
  CHECK(v.find("ok")->asBool());
  CHECK(v.find("inner")->find("shape")->asArray()[1].asInt64() == 3);
  CHECK(v.find("inner")->find("name")->asString() == "conv1.weight");
  CHECK(v.find("s")->asString() == "q\"\\\n");
}

TEST_CASE("json parser: malformed input throws with the byte offset") {
  struct Case {
    const char* text;
    size_t offset;
  };
  const Case cases[] = {
      {"", 0},
      {"   ", 3},
      {"{", 1},
      {"[1,]", 3},
      {"{\"a\":1,}", 7},
      {"{\"a\" 1}", 5},
      {"{a:1}", 1},
      {"{'a':1}", 1},
      {"[1 2]", 3},
      {"01", 0},
      {"-", 1},
      {"1.", 2},
      {"1e", 2},
      {".5", 0},
      {"+1", 0},
      {"NaN", 0},
      {"Infinity", 0},
      {"tru", 0},
      {"nul", 0},
      {"1e999", 0},
      {"\"abc", 0},
      {"\"a\nb\"", 2},
      {"\"\\x\"", 1},
      {"\"\\u12g4\"", 5},
      {"\"\\ud800\"", 1},
      {"\"\\udc00\"", 1},
      {"\"\\ud800\\u0041\"", 1},
      {"\"\xff\"", 1},
      {"\"\xc0\xaf\"", 1},       // overlong '/'
      {"\"\xed\xa0\x80\"", 1},   // encoded surrogate
      {"{\"a\":1,\"a\":2}", 7},  // duplicate key
      {"{} {}", 3},
      {"[1] x", 4},
      {"/* c */ 1", 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    try {
      parseJson(c.text);
      FAIL("accepted malformed JSON");
    } catch (const JsonParseError& e) {
      CHECK(e.offset() == c.offset);
      CHECK(std::string(e.what()).find("at byte " + std::to_string(c.offset)) != std::string::npos);
    }
  }
}

TEST_CASE("json parser: nesting is depth-limited, not stack-limited") {
  std::string ok = std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']');
  CHECK_NOTHROW(parseJson(ok));
  std::string deep = std::string(kJsonMaxDepth + 1, '[') + std::string(kJsonMaxDepth + 1, ']');
  CHECK_THROWS_AS(parseJson(deep), JsonParseError);
  std::string hostile(1000000, '[');
  CHECK_THROWS_AS(parseJson(hostile), JsonParseError);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  CHECK_THROWS_AS(parseJson(objects), JsonParseError);
  CHECK_THROWS_AS(parseJson("[[1]]", 1), JsonParseError);
}
