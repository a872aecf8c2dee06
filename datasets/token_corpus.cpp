#include "datasets/token_corpus.h"

#include <glob.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/errors.h"
#include "core/io/file_source.h"
#include "core/io/fs_ops.h"

// Token files are little-endian; the reader copies their bytes straight into
// native integers, which is only right on a little-endian host (every host
// dtrain builds for: x86-64, and AArch64 as Linux runs it).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "datasets/token_corpus.cpp reads little-endian token files with memcpy");

namespace dtrain {

namespace {

// Files are read in blocks of this many bytes (uint16 tokens and text are
// widened to uint32 from such a block; uint32 tokens go straight to the result).
constexpr size_t kBlockBytes = size_t{1} << 20;

// The max-scan works on fixed-size blocks so that the compiler vectorises the
// inner loop even where its cost model rejects loops of unknown length.
constexpr size_t kScanBlock = 4096;

// The largest deflate expansion (about 1032:1) bounds a plausible gzip size hint.
constexpr uint64_t kMaxDeflateRatio = 1032;

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string describeFiles(const std::string& kind, size_t files, size_t tokens) {
  return kind + ": " + grouped(static_cast<int64_t>(files)) + (files == 1 ? " file, " : " files, ") +
         grouped(static_cast<int64_t>(tokens)) + " tokens";
}

// Opens a corpus file; the IoError (missing, unreadable, a directory) names it.
std::unique_ptr<FileSource> openCorpusFile(const std::string& path) {
  try {
    return std::make_unique<FileSource>(path);
  } catch (const IoError& e) {
    throw IoError(std::string(e.what()) + " (check the corpus path in the job file)");
  }
}

uint32_t maxOf(const uint32_t* p, size_t n) {
  uint32_t m = 0;
  size_t i = 0;
  for (; i + kScanBlock <= n; i += kScanBlock) {
    const uint32_t* b = p + i;
    uint32_t bm = 0;
    for (size_t j = 0; j < kScanBlock; ++j) bm = b[j] > bm ? b[j] : bm;
    m = std::max(m, bm);
  }
  for (; i < n; ++i) m = std::max(m, p[i]);
  return m;
}

// Appends n widened values: a loop the compiler vectorises.
template <class T>
void appendWidened(std::vector<uint32_t>& out, const T* src, size_t n) {
  const size_t base = out.size();
  out.resize(base + n);
  uint32_t* dst = out.data() + base;
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

// ---- llm.c and headerless token files ---------------------------------------

struct TokenLayout {
  int64_t header_bytes = 0;  // 0 (headerless) or kTokenHeaderBytes
  int64_t token_bytes = 2;   // 2 or 4
  int64_t count = 0;         // tokens in the file, > 0
};

const char* const kRecreate = "; re-create the file with the data-preparation script";

// Reads and checks the header (if any) against the file size.
TokenLayout inspectTokenFile(const FileSource& src) {
  const std::string& path = src.path();
  const int64_t size = static_cast<int64_t>(src.size());
  if (size == 0)
    throw DataError(path +
                    ": empty file (0 bytes); expected llm.c tokens (1024-byte header with magic 20240520 or "
                    "20240801) or headerless uint16 tokens" +
                    kRecreate);
  int32_t head[kTokenHeaderBytes / 4] = {};
  if (size >= 4) src.readAt(head, 4, 0);
  const int32_t magic = head[0];
  TokenLayout l;
  if (size >= 4 && (magic == kTokenMagicU16 || magic == kTokenMagicU32)) {
    const bool u16 = magic == kTokenMagicU16;
    const std::string what =
        "llm.c token file (magic " + std::to_string(magic) + ", " + (u16 ? "uint16" : "uint32") + " tokens)";
    if (size < kTokenHeaderBytes)
      throw DataError(path + ": " + what + " is only " + std::to_string(size) + " bytes, shorter than its " +
                      std::to_string(kTokenHeaderBytes) + "-byte header: the file is truncated" + kRecreate);
    src.readAt(head, sizeof head, 0);
    const int32_t want_version = u16 ? kTokenVersionU16 : kTokenVersionU32;
    if (head[1] != want_version)
      throw DataError(path + ": " + what + " has version " + std::to_string(head[1]) +
                      " at byte offset 4, expected " + std::to_string(want_version) +
                      "; the file is corrupt or from an unsupported llm.c version" + kRecreate);
    l.header_bytes = kTokenHeaderBytes;
    l.token_bytes = u16 ? 2 : 4;
    l.count = head[2];
    const int64_t data_bytes = size - kTokenHeaderBytes;
    if (l.count <= 0 || data_bytes != l.count * l.token_bytes) {
      std::string has = std::to_string(data_bytes) + " bytes of tokens after the header";
      if (data_bytes % l.token_bytes == 0)
        has += " (" + std::to_string(data_bytes / l.token_bytes) + " tokens)";
      else
        has += " (not a whole number of " + std::to_string(l.token_bytes) + "-byte tokens)";
      throw DataError(path + ": " + what + ": the header's token count (byte offset 8) is " +
                      std::to_string(l.count) + " but the file has " + has +
                      ": it is truncated, over-long or corrupt" + kRecreate);
    }
    return l;
  }
  if (size % 2 != 0) {
    const std::string why = size >= 4 ? "its first int32, " + std::to_string(magic) +
                                            ", is not an llm.c magic (20240520 or 20240801)"
                                      : "too short for an llm.c header";
    throw DataError(path + ": odd size of " + std::to_string(size) + " bytes for a headerless token file (" +
                    why + ", so it must hold uint16 tokens, 2 bytes each): the file is truncated or not a " +
                    "token file" + kRecreate);
  }
  l.count = size / 2;
  return l;
}

void appendTokenFile(const FileSource& src, const TokenLayout& l, std::vector<uint32_t>& out) {
  const size_t base = out.size();
  const size_t count = static_cast<size_t>(l.count);
  if (l.token_bytes == 4) {
    out.resize(base + count);
    src.readAt(out.data() + base, count * 4, static_cast<uint64_t>(l.header_bytes));
    return;
  }
  std::vector<uint16_t> block(kBlockBytes / 2);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(block.size(), count - done);
    src.readAt(block.data(), n * 2, static_cast<uint64_t>(l.header_bytes) + done * 2);
    appendWidened(out, block.data(), n);
    done += n;
  }
}

// Every token of the file (the `count` ids at `tokens`) must be < vocab.
void checkTokenIds(const std::string& path, const TokenLayout& l, const uint32_t* tokens, int64_t vocab) {
  const size_t count = static_cast<size_t>(l.count);
  if (static_cast<uint64_t>(vocab) > uint64_t{0xffffffff} || maxOf(tokens, count) < vocab) return;
  const uint32_t* bad = std::find_if(tokens, tokens + count, [&](uint32_t t) { return t >= vocab; });
  const int64_t index = bad - tokens;
  throw DataError(path + ": token id " + std::to_string(*bad) + " at byte offset " +
                  std::to_string(l.header_bytes + index * l.token_bytes) +
                  " is out of range for the vocabulary of " + std::to_string(vocab) +
                  " (ids must be < vocab): set the job's vocab to the tokenizer's size (at least " +
                  std::to_string(int64_t{*bad} + 1) +
                  ") or re-tokenise the corpus with the model's tokenizer");
}

// ---- text files --------------------------------------------------------------

bool isGzip(const FileSource& src) {
  if (src.size() < 2) return false;
  unsigned char magic[2];
  src.readAt(magic, 2, 0);
  return magic[0] == 0x1f && magic[1] == 0x8b;
}

// How many bytes the file will give: its size, or for gzip the size its
// trailer records (modulo 2^32, of the last member only: a hint, never trusted).
uint64_t textSizeHint(const FileSource& src) {
  if (!isGzip(src)) return src.size();
  if (src.size() < 18) return 0;
  unsigned char isize[4];
  src.readAt(isize, 4, src.size() - 4);
  uint64_t hint =
      uint64_t{isize[0]} | uint64_t{isize[1]} << 8 | uint64_t{isize[2]} << 16 | uint64_t{isize[3]} << 24;
  return std::min(hint, src.size() * kMaxDeflateRatio);
}

const char* const kRecompress = "; re-download or re-compress the file";

struct GzCloser {
  void operator()(gzFile_s* gz) const { gzclose(gz); }
};

void appendGzipText(const FileSource& src, std::vector<uint32_t>& out) {
  const std::string& path = src.path();
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  if (!gz) throwIoError("cannot open", path, errno != 0 ? errno : ENOMEM);
  gzbuffer(gz.get(), 1 << 18);  // fewer, larger reads than zlib's 8 KiB default
  std::vector<unsigned char> block(kBlockBytes);
  int64_t text_bytes = 0;
  for (;;) {
    const int r = gzread(gz.get(), block.data(), static_cast<unsigned>(block.size()));
    if (r < 0) {
      int errnum = Z_OK;
      const char* msg = gzerror(gz.get(), &errnum);
      if (errnum == Z_ERRNO) throwIoError("cannot read", path, errno);
      throw DataError(path + ": corrupt gzip data (" + (msg ? msg : "unknown zlib error") +
                      ") near compressed byte offset " + std::to_string(gzoffset(gz.get())) + ", after " +
                      std::to_string(text_bytes) + " bytes of text" + kRecompress);
    }
    if (r == 0) break;
    appendWidened(out, block.data(), static_cast<size_t>(r));
    text_bytes += r;
  }
  int errnum = Z_OK;
  gzerror(gz.get(), &errnum);
  if (errnum == Z_BUF_ERROR)
    throw DataError(path + ": truncated gzip file: the compressed data ends at byte offset " +
                    std::to_string(src.size()) + " before the end of its stream, after " +
                    std::to_string(text_bytes) + " bytes of text" + kRecompress);
  if (text_bytes == 0)
    throw DataError(path + ": gzip file holds no text (it decompresses to 0 bytes); a text corpus needs at " +
                    "least one byte: check the path or re-create the file");
}

void appendPlainText(const FileSource& src, std::vector<uint32_t>& out) {
  std::vector<unsigned char> block(kBlockBytes);
  for (uint64_t done = 0; done < src.size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), src.size() - done));
    src.readAt(block.data(), n, done);
    appendWidened(out, block.data(), n);
    done += n;
  }
}

}  // namespace

std::vector<std::string> expandGlob(const std::string& pattern) {
  glob_t g;
  std::memset(&g, 0, sizeof g);
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::unique_ptr<glob_t, void (*)(glob_t*)> guard(&g, globfree);
  if (rc == GLOB_NOMATCH)
    throw IoError("no file matches " + pattern + " (check the path and the pattern in the job file)");
  if (rc == GLOB_NOSPACE) throw std::bad_alloc();
  if (rc != 0) throw IoError("cannot expand " + pattern + ": a directory on its path cannot be read");
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  std::sort(paths.begin(), paths.end());  // byte order, whatever the locale
  return paths;
}

TokenCorpus readTokenFiles(const std::vector<std::string>& paths, int64_t vocab) {
  if (paths.empty()) throw ConfigError("token corpus: no token files given (check the job's data paths)");
  if (vocab < 1 || vocab > int64_t{1} << 32)
    throw ConfigError("token corpus: vocab must be between 1 and 2^32, got " + std::to_string(vocab));
  // First every header, so a bad file fails before gigabytes are read, and
  // the result is allocated once. The second pass checks the headers again:
  // the first is only a size hint.
  uint64_t total = 0;
  for (const std::string& path : paths)
    total += static_cast<uint64_t>(inspectTokenFile(*openCorpusFile(path)).count);
  TokenCorpus c;
  c.vocab = vocab;
  c.tokens.reserve(static_cast<size_t>(total));
  for (const std::string& path : paths) {
    auto src = openCorpusFile(path);
    const TokenLayout l = inspectTokenFile(*src);
    const size_t base = c.tokens.size();
    appendTokenFile(*src, l, c.tokens);
    checkTokenIds(path, l, c.tokens.data() + base, vocab);
  }
  c.describe = describeFiles("tokens", paths.size(), c.tokens.size());
  return c;
}

TokenCorpus readTextFiles(const std::vector<std::string>& paths) {
  if (paths.empty()) throw ConfigError("text corpus: no text files given (check the job's data paths)");
  uint64_t total = 0;
  for (const std::string& path : paths) total += textSizeHint(*openCorpusFile(path));
  TokenCorpus c;
  c.vocab = 256;
  c.tokens.reserve(static_cast<size_t>(total));
  for (const std::string& path : paths) {
    auto src = openCorpusFile(path);
    if (src->size() == 0)
      throw DataError(path +
                      ": empty file (0 bytes); a text corpus needs at least one byte: check the path " +
                      "or re-create the file");
    if (isGzip(*src))
      appendGzipText(*src, c.tokens);
    else
      appendPlainText(*src, c.tokens);
  }
  c.describe = describeFiles("text bytes", paths.size(), c.tokens.size());
  return c;
}

std::pair<TokenCorpus, TokenCorpus> splitOffEnd(TokenCorpus all, double fraction, int64_t min_tokens) {
  if (!(fraction > 0 && fraction < 1))
    throw ConfigError("validation fraction must be between 0 and 1 (both excluded), got " +
                      std::to_string(fraction));
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g%%", fraction * 100);
  const int64_t n = static_cast<int64_t>(all.tokens.size());
  const int64_t val = std::llround(static_cast<double>(n) * fraction);
  const int64_t train = n - val;
  const int64_t need = std::max<int64_t>(min_tokens, 1);
  if (train < need || val < need)
    throw DataError(all.describe + ": too small for the context: the last " + pct +
                    " for validation leaves " + std::to_string(train) + " train and " + std::to_string(val) +
                    " validation tokens, and each part needs at least " + std::to_string(need) +
                    "; use a larger corpus, a shorter context or another validation fraction");

  // "tokens: 3 files, 1,234 tokens" -> kind "tokens", what "3 files, 1,234 tokens".
  const size_t colon = all.describe.find(": ");
  const std::string kind = colon == std::string::npos ? "tokens" : all.describe.substr(0, colon);
  const std::string what = colon == std::string::npos ? all.describe : all.describe.substr(colon + 2);

  TokenCorpus v;
  v.vocab = all.vocab;
  v.tokens.assign(all.tokens.begin() + train, all.tokens.end());
  v.describe = kind + " validation: " + grouped(val) + " tokens, the last " + pct + " of " + what;
  TokenCorpus t;
  t.vocab = all.vocab;
  all.tokens.resize(static_cast<size_t>(train));
  t.tokens = std::move(all.tokens);
  t.describe = kind + " train: " + grouped(train) + " tokens, all but the last " + pct + " of " + what;
  return {std::move(t), std::move(v)};
}

}  // namespace dtrain
