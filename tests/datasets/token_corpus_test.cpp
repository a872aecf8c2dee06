#include "datasets/token_corpus.h"

#include <doctest/doctest.h>
#include <zlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/errors.h"
#include "test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Little-endian bytes of the values (the test host is little-endian, as the
// reader is: see datasets/token_corpus.cpp).
template <class T>
std::vector<uint8_t> leBytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<uint8_t> llmcHeader(int32_t magic, int32_t version, int32_t count) {
  std::vector<int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  return leBytes(h);
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// An llm.c uint16 file of `tokens`, its header count `count` (default: right).
std::string writeU16(const TempDir& dir, const std::string& name, const std::vector<uint16_t>& tokens,
                     int32_t count = -1) {
  const std::string path = dir.file(name);
  writeBytes(path, concat(llmcHeader(kTokenMagicU16, kTokenVersionU16,
                                     count >= 0 ? count : static_cast<int32_t>(tokens.size())),
                          leBytes(tokens)));
  return path;
}

std::string writeU32(const TempDir& dir, const std::string& name, const std::vector<uint32_t>& tokens) {
  const std::string path = dir.file(name);
  writeBytes(path, concat(llmcHeader(kTokenMagicU32, kTokenVersionU32, static_cast<int32_t>(tokens.size())),
                          leBytes(tokens)));
  return path;
}

std::string writeHeaderless(const TempDir& dir, const std::string& name,
                            const std::vector<uint16_t>& tokens) {
  const std::string path = dir.file(name);
  writeBytes(path, leBytes(tokens));
  return path;
}

std::vector<uint32_t> widen(const std::vector<uint16_t>& v) {
  return std::vector<uint32_t>(v.begin(), v.end());
}

// Deterministic text-like bytes: letters, spaces, newlines and some high bytes,
// compressible but not trivially.
std::vector<uint8_t> textBytes(size_t n, uint32_t seed = 1) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const uint32_t r = x >> 24;
    v[i] = r < 200   ? static_cast<uint8_t>('a' + r % 26)
           : r < 240 ? ' '
           : r < 250 ? '\n'
                     : static_cast<uint8_t>(r);
  }
  return v;
}

std::vector<uint32_t> asTokens(const std::vector<uint8_t>& bytes) {
  return std::vector<uint32_t>(bytes.begin(), bytes.end());
}

// A dictzip (.dict.dz) file: gzip with an FEXTRA "RA" random-access field and
// an FNAME, its deflate stream fully flushed at every `chunk` bytes.
std::vector<uint8_t> dictzip(const std::vector<uint8_t>& text, size_t chunk) {
  std::vector<uint8_t> body;
  std::vector<uint16_t> chunk_sizes;
  z_stream z;
  std::memset(&z, 0, sizeof z);
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(chunk * 2 + 1024);
  for (size_t off = 0; off < text.size(); off += chunk) {
    const size_t n = std::min(chunk, text.size() - off);
    z.next_in = const_cast<Bytef*>(text.data() + off);
    z.avail_in = static_cast<uInt>(n);
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const bool last = off + n == text.size();
    const int rc = deflate(&z, last ? Z_FINISH : Z_FULL_FLUSH);
    REQUIRE(rc == (last ? Z_STREAM_END : Z_OK));
    const size_t produced = out.size() - z.avail_out;
    chunk_sizes.push_back(static_cast<uint16_t>(produced));
    body.insert(body.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(produced));
  }
  deflateEnd(&z);

  auto put16 = [](std::vector<uint8_t>& v, uint32_t x) {
    v.push_back(static_cast<uint8_t>(x));
    v.push_back(static_cast<uint8_t>(x >> 8));
  };
  auto put32 = [&](std::vector<uint8_t>& v, uint32_t x) {
    put16(v, x & 0xffff);
    put16(v, x >> 16);
  };
  std::vector<uint8_t> ra;  // the "RA" subfield's data: version, chunk length, count, sizes
  put16(ra, 1);
  put16(ra, static_cast<uint32_t>(chunk));
  put16(ra, static_cast<uint32_t>(chunk_sizes.size()));
  for (uint16_t s : chunk_sizes) put16(ra, s);
  std::vector<uint8_t> file = {0x1f, 0x8b, 8, 0x04 | 0x08, 0, 0, 0, 0, 2, 3};  // FEXTRA | FNAME
  put16(file, static_cast<uint32_t>(4 + ra.size()));
  file.push_back('R');
  file.push_back('A');
  put16(file, static_cast<uint32_t>(ra.size()));
  file.insert(file.end(), ra.begin(), ra.end());
  for (char c : std::string("test.dict")) file.push_back(static_cast<uint8_t>(c));
  file.push_back(0);
  file.insert(file.end(), body.begin(), body.end());
  put32(file, static_cast<uint32_t>(crc32(0, text.data(), static_cast<uInt>(text.size()))));
  put32(file, static_cast<uint32_t>(text.size()));
  return file;
}

}  // namespace

// ---- token files ---------------------------------------------------------------

TEST_CASE("token corpus: llm.c uint16 and uint32 files read back exactly") {
  TempDir dir;
  const std::vector<uint16_t> t16 = {0, 1, 50256, 464, 65535, 7};
  const std::vector<uint32_t> t32 = {0, 128000, 128255, 9, 100000, 1};

  TokenCorpus a = readTokenFiles({writeU16(dir, "gpt2.bin", t16)}, 65536);
  CHECK(a.tokens == widen(t16));
  CHECK(a.vocab == 65536);
  CHECK(a.describe == "tokens: 1 file, 6 tokens");

  TokenCorpus b = readTokenFiles({writeU32(dir, "llama.bin", t32)}, 128256);
  CHECK(b.tokens == t32);
  CHECK(b.vocab == 128256);

  // The on-disk layout is the documented one: header then little-endian tokens.
  const auto raw = readBytes(dir.file("gpt2.bin"));
  REQUIRE(raw.size() == 1024 + 2 * t16.size());
  CHECK(raw[0] == (20240520 & 0xff));
  CHECK(raw[8] == 6);
  CHECK(raw[1024 + 4] == (50256 & 0xff));
  CHECK(raw[1024 + 5] == (50256 >> 8));
}

TEST_CASE("token corpus: headerless uint16 files, and files are concatenated in order") {
  TempDir dir;
  const std::vector<uint16_t> first = {3, 1, 4, 1, 5};
  const std::vector<uint16_t> second = {9, 2, 6};
  const std::vector<uint16_t> third = {65535};  // one token: shorter than any header
  const std::vector<std::string> paths = {writeHeaderless(dir, "a.bin", first),
                                          writeU16(dir, "b.bin", second),
                                          writeHeaderless(dir, "c.bin", third)};
  TokenCorpus c = readTokenFiles(paths, 65536);
  CHECK(c.tokens == std::vector<uint32_t>{3, 1, 4, 1, 5, 9, 2, 6, 65535});
  CHECK(c.describe == "tokens: 3 files, 9 tokens");

  // Large enough to cross the reader's blocks (1 MiB) and the scan's blocks.
  std::vector<uint16_t> big(1500000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint16_t>((i * 7919) % 50257);
  TokenCorpus d = readTokenFiles({writeHeaderless(dir, "big.bin", big)}, 50257);
  CHECK(d.tokens == widen(big));
  CHECK(d.describe == "tokens: 1 file, 1,500,000 tokens");
}

TEST_CASE("token corpus: a missing or unreadable file is an IoError naming it") {
  TempDir dir;
  const std::string missing = dir.file("nope.bin");
  std::string msg = messageOf<IoError>([&] { readTokenFiles({missing}, 50257); });
  CHECK(contains(msg, missing));
  msg = messageOf<IoError>([&] { readTokenFiles({dir.path()}, 50257); });
  CHECK(contains(msg, dir.path()));
  msg = messageOf<IoError>([&] { readTextFiles({missing}); });
  CHECK(contains(msg, missing));
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = writeHeaderless(dir, "locked.bin", {1, 2});
    std::filesystem::permissions(locked, std::filesystem::perms::none);
    CHECK(contains(messageOf<IoError>([&] { readTokenFiles({locked}, 50257); }), locked));
  }
}

TEST_CASE("token corpus: bad headers and sizes are one-line DataErrors naming the file") {
  TempDir dir;
  auto oneLine = [](const std::string& m) { return m.find('\n') == std::string::npos; };

  SUBCASE("wrong version for a known magic") {
    const std::string p16 = dir.file("v16.bin");
    writeBytes(p16, concat(llmcHeader(kTokenMagicU16, 3, 2), leBytes(std::vector<uint16_t>{1, 2})));
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p16}, 50257); });
    CHECK(contains(msg, p16));
    CHECK(contains(msg, "version 3 at byte offset 4, expected 1"));
    CHECK(oneLine(msg));
    const std::string p32 = dir.file("v32.bin");
    writeBytes(p32, concat(llmcHeader(kTokenMagicU32, 1, 2), leBytes(std::vector<uint32_t>{1, 2})));
    msg = messageOf<DataError>([&] { readTokenFiles({p32}, 50257); });
    CHECK(contains(msg, p32));
    CHECK(contains(msg, "version 1 at byte offset 4, expected 7"));
  }
  SUBCASE("size disagrees with the header's count: both numbers are named") {
    const std::string p = writeU16(dir, "short.bin", {1, 2, 3, 4, 5, 6, 7, 8}, 10);
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p}, 50257); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "token count (byte offset 8) is 10"));
    CHECK(contains(msg, "16 bytes of tokens after the header (8 tokens)"));
    CHECK(oneLine(msg));
    const std::string odd = dir.file("odd-tail.bin");
    writeBytes(odd, concat(llmcHeader(kTokenMagicU32, 7, 2), std::vector<uint8_t>(9, 0)));
    msg = messageOf<DataError>([&] { readTokenFiles({odd}, 50257); });
    CHECK(contains(msg, odd));
    CHECK(contains(msg, "is 2 but the file has 9 bytes"));
    const std::string zero = writeU16(dir, "zero.bin", {}, 0);
    CHECK(contains(messageOf<DataError>([&] { readTokenFiles({zero}, 50257); }), zero));
  }
  SUBCASE("a header cut short") {
    const std::string p = dir.file("cut.bin");
    auto bytes = llmcHeader(kTokenMagicU16, 1, 4);
    bytes.resize(600);
    writeBytes(p, bytes);
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p}, 50257); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "only 600 bytes"));
  }
  SUBCASE("odd byte count in a headerless file") {
    const std::string p = dir.file("odd.bin");
    writeBytes(p, {1, 0, 2, 0, 3});
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p}, 50257); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "odd size of 5 bytes"));
    CHECK(oneLine(msg));
    const std::string one = dir.file("one.bin");
    writeBytes(one, {1});
    CHECK(contains(messageOf<DataError>([&] { readTokenFiles({one}, 50257); }), one));
  }
  SUBCASE("an empty file") {
    const std::string p = dir.file("empty.bin");
    writeBytes(p, {});
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p}, 50257); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "empty file"));
  }
  SUBCASE("the error names the bad file, not the first") {
    const std::string good = writeHeaderless(dir, "good.bin", {1, 2});
    const std::string bad = dir.file("bad.bin");
    writeBytes(bad, {1, 2, 3});
    std::string msg = messageOf<DataError>([&] { readTokenFiles({good, bad}, 50257); });
    CHECK(contains(msg, bad));
    CHECK_FALSE(contains(msg, good));
  }
}

TEST_CASE("token corpus: every token id is checked against the vocab") {
  TempDir dir;
  SUBCASE("llm.c uint16: offset counts the header") {
    const std::string p = writeU16(dir, "t.bin", {5, 50256, 7, 50257, 60000});
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p}, 50257); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "token id 50257 at byte offset 1030"));  // the first bad one
    CHECK(contains(msg, "vocabulary of 50257"));
    CHECK(readTokenFiles({p}, 60001).tokens.size() == 5);  // all < 60001
  }
  SUBCASE("llm.c uint32") {
    const std::string p = writeU32(dir, "t.bin", {1, 2, 128256});
    std::string msg = messageOf<DataError>([&] { readTokenFiles({p}, 128256); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "token id 128256 at byte offset 1032"));
    CHECK(contains(msg, "vocabulary of 128256"));
  }
  SUBCASE("headerless, a bad id deep in a large file of a later path") {
    std::vector<uint16_t> big(20000, 3);
    big[12345] = 256;
    big[15000] = 300;
    const std::string first = writeHeaderless(dir, "first.bin", {1, 2, 3});
    const std::string p = writeHeaderless(dir, "big.bin", big);
    std::string msg = messageOf<DataError>([&] { readTokenFiles({first, p}, 256); });
    CHECK(contains(msg, p));
    CHECK(contains(msg, "token id 256 at byte offset 24690"));
    CHECK(contains(msg, "vocabulary of 256"));
  }
  SUBCASE("the highest valid id passes") {
    const std::string p = writeHeaderless(dir, "t.bin", {0, 99});
    CHECK(readTokenFiles({p}, 100).tokens == std::vector<uint32_t>{0, 99});
  }
}

TEST_CASE("token corpus: arguments from the job are checked") {
  TempDir dir;
  const std::string p = writeHeaderless(dir, "t.bin", {1});
  messageOf<ConfigError>([&] { readTokenFiles({p}, 0); });
  messageOf<ConfigError>([&] { readTokenFiles({}, 50257); });
  messageOf<ConfigError>([&] { readTextFiles({}); });
}

// ---- text files ------------------------------------------------------------------

TEST_CASE("text corpus: plain and gzip files read back as bytes, vocab 256") {
  TempDir dir;
  const std::string utf8 = "héllo, wörld\n\xe2\x82\xac";
  const std::string plain = dir.write("a.txt", utf8);
  TokenCorpus a = readTextFiles({plain});
  CHECK(a.vocab == 256);
  CHECK(a.tokens == asTokens(std::vector<uint8_t>(utf8.begin(), utf8.end())));
  CHECK(a.describe == "text bytes: 1 file, " + std::to_string(utf8.size()) + " tokens");

  // Every byte value, and a file larger than the reader's blocks.
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  const auto big = textBytes(3 * 1024 * 1024 + 17);
  writeBytes(dir.file("all.bin"), all);
  writeBytes(dir.file("big.txt.gz"), big, true);  // written with zlib's gzopen
  writeBytes(dir.file("gzip-without-suffix"), all, true);
  writeBytes(dir.file("plain-with-suffix.gz"), all, false);

  CHECK(readTextFiles({dir.file("all.bin")}).tokens == asTokens(all));
  CHECK(readBytes(dir.file("big.txt.gz"))[0] == 0x1f);
  CHECK(readTextFiles({dir.file("big.txt.gz")}).tokens == asTokens(big));
  CHECK(readTextFiles({dir.file("gzip-without-suffix")}).tokens == asTokens(all));
  CHECK(readTextFiles({dir.file("plain-with-suffix.gz")}).tokens == asTokens(all));

  TokenCorpus c = readTextFiles({plain, dir.file("gzip-without-suffix")});
  CHECK(c.tokens.size() == utf8.size() + 256);
  CHECK(c.tokens[utf8.size()] == 0);
  CHECK(c.tokens.back() == 255);
  CHECK(c.describe == "text bytes: 2 files, " + std::to_string(utf8.size() + 256) + " tokens");
}

TEST_CASE("text corpus: dictzip (.dict.dz) and concatenated gzip members read") {
  TempDir dir;
  const auto text = textBytes(200000, 7);
  const std::string dz = dir.file("test.dict.dz");
  writeBytes(dz, dictzip(text, 58315));  // dictzip's own chunk length
  CHECK(readTextFiles({dz}).tokens == asTokens(text));

  // Two gzip members back to back (cat a.gz b.gz) are one text.
  const auto a = textBytes(1000, 2), b = textBytes(500, 3);
  writeBytes(dir.file("a.gz"), a, true);
  writeBytes(dir.file("b.gz"), b, true);
  writeBytes(dir.file("ab.gz"), concat(readBytes(dir.file("a.gz")), readBytes(dir.file("b.gz"))));
  CHECK(readTextFiles({dir.file("ab.gz")}).tokens == asTokens(concat(a, b)));
}

TEST_CASE("text corpus: truncated or corrupt gzip and empty files are DataErrors naming the file") {
  TempDir dir;
  const auto text = textBytes(300000, 5);
  writeBytes(dir.file("whole.gz"), text, true);
  const auto gz = readBytes(dir.file("whole.gz"));
  REQUIRE(gz.size() > 1000);

  const std::string half = dir.file("half.gz");
  writeBytes(half, std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
  std::string msg = messageOf<DataError>([&] { readTextFiles({half}); });
  CHECK(contains(msg, half));
  CHECK(contains(msg, "truncated gzip file"));
  CHECK(contains(msg, "byte offset " + std::to_string(gz.size() / 2)));
  CHECK(msg.find('\n') == std::string::npos);

  const std::string no_trailer = dir.file("no-trailer.gz");
  writeBytes(no_trailer, std::vector<uint8_t>(gz.begin(), gz.end() - 4));
  CHECK(contains(messageOf<DataError>([&] { readTextFiles({no_trailer}); }), no_trailer));

  const std::string magic_only = dir.file("magic-only.gz");
  writeBytes(magic_only, {0x1f, 0x8b});
  CHECK(contains(messageOf<DataError>([&] { readTextFiles({magic_only}); }), magic_only));

  auto flipped = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) flipped[i] ^= 0x5a;
  const std::string corrupt = dir.file("corrupt.gz");
  writeBytes(corrupt, flipped);
  msg = messageOf<DataError>([&] { readTextFiles({corrupt}); });
  CHECK(contains(msg, corrupt));
  CHECK(msg.find('\n') == std::string::npos);

  auto bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 1;
  const std::string crc = dir.file("bad-crc.gz");
  writeBytes(crc, bad_crc);
  CHECK(contains(messageOf<DataError>([&] { readTextFiles({crc}); }), crc));

  const std::string empty = dir.file("empty.txt");
  writeBytes(empty, {});
  msg = messageOf<DataError>([&] { readTextFiles({empty}); });
  CHECK(contains(msg, empty));
  CHECK(contains(msg, "empty file"));
  const std::string empty_gz = dir.file("empty.txt.gz");
  writeBytes(empty_gz, {}, true);
  CHECK(contains(messageOf<DataError>([&] { readTextFiles({empty_gz}); }), empty_gz));
}

TEST_CASE("text corpus: Debian's gcide.dict.dz reads when installed") {
  const std::string gcide = "/usr/share/dictd/gcide.dict.dz";
  if (!std::filesystem::exists(gcide)) {
    MESSAGE("skipped: " << gcide << " is not installed (package dict-gcide)");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  TokenCorpus c = readTextFiles({gcide});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(c.describe << " in " << seconds << " s");
  CHECK(c.tokens.size() > 10000000);
  CHECK(c.vocab == 256);
}

// ---- split and glob ------------------------------------------------------------

TEST_CASE("token corpus: splitOffEnd gives the last fraction to validation") {
  TokenCorpus all;
  for (uint32_t i = 0; i < 100; ++i) all.tokens.push_back(i);
  all.vocab = 1000;
  all.describe = "tokens: 1 file, 100 tokens";
  auto [train, val] = splitOffEnd(all, 0.1, 5);
  REQUIRE(train.tokens.size() == 90);
  REQUIRE(val.tokens.size() == 10);
  CHECK(train.tokens.front() == 0);
  CHECK(train.tokens.back() == 89);
  CHECK(val.tokens.front() == 90);
  CHECK(val.tokens.back() == 99);
  CHECK(train.vocab == 1000);
  CHECK(val.vocab == 1000);
  CHECK(train.describe == "tokens train: 90 tokens, all but the last 10% of 1 file, 100 tokens");
  CHECK(val.describe == "tokens validation: 10 tokens, the last 10% of 1 file, 100 tokens");

  // Rounded to a whole token: 15 * 0.1 = 1.5 -> 2.
  TokenCorpus small;
  small.tokens.assign(15, 7);
  auto [t2, v2] = splitOffEnd(small, 0.1, 1);
  CHECK(t2.tokens.size() == 13);
  CHECK(v2.tokens.size() == 2);

  std::string msg = messageOf<DataError>([&] { splitOffEnd(all, 0.1, 11); });
  CHECK(contains(msg, "too small for the context"));
  CHECK(contains(msg, "90 train and 10 validation tokens"));
  CHECK(contains(msg, "at least 11"));
  messageOf<DataError>([&] { splitOffEnd(all, 0.001, 1); });  // rounds to 0 validation tokens
  messageOf<ConfigError>([&] { splitOffEnd(all, 0.0, 1); });
  messageOf<ConfigError>([&] { splitOffEnd(all, 1.0, 1); });
}

TEST_CASE("token corpus: expandGlob sorts its matches and names a pattern that matches nothing") {
  TempDir dir;
  for (const char* name : {"shard_10.bin", "shard_02.bin", "shard_01.bin", "other.txt"})
    writeBytes(dir.file(name), {1, 0});
  CHECK(expandGlob(dir.file("shard_*.bin")) == std::vector<std::string>{dir.file("shard_01.bin"),
                                                                        dir.file("shard_02.bin"),
                                                                        dir.file("shard_10.bin")});
  const std::string pattern = dir.file("val_*.bin");
  std::string msg = messageOf<IoError>([&] { expandGlob(pattern); });
  CHECK(contains(msg, "no file matches " + pattern));
}
