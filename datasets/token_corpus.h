// Token corpora for language-model (GPT) training, read whole into memory as
// uint32 token ids.
//
// Token files follow llm.c: a 1024-byte header of 256 little-endian int32
// ([0] magic, [1] version, [2] token count, the rest unused), then the tokens:
// magic 20240520 / version 1 for uint16 tokens (GPT-2), magic 20240801 /
// version 7 for uint32 tokens (Llama 3). A file whose first int32 is neither
// magic is a headerless file of little-endian uint16 tokens (nanoGPT's
// train.bin). Text files (plain, or gzip-compressed: detected by the 1f 8b
// magic, so .gz, dictd's .dict.dz and unsuffixed gzip all read) are tokenised
// as bytes, vocabulary 256.
//
// Every error is one line that starts with or names the file, says what is
// wrong (with the byte offset where one applies) and what to do: IoError when a
// file cannot be found, opened or read; DataError when its content is wrong;
// ConfigError for arguments that come from the job (vocab, fraction).
// Ownership: results are returned by value. Thread-safety: free functions with
// no shared state. All block on file I/O.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// llm.c token file header: 256 int32, magic and version per token width.
constexpr int64_t kTokenHeaderBytes = 1024;
constexpr int32_t kTokenMagicU16 = 20240520;
constexpr int32_t kTokenVersionU16 = 1;
constexpr int32_t kTokenMagicU32 = 20240801;
constexpr int32_t kTokenVersionU32 = 7;

// Tokens of one split, in memory, as uint32 ids.
struct TokenCorpus {
  std::vector<uint32_t> tokens;
  int64_t vocab = 0;     // byte text: 256; token files: the job's vocab
  std::string describe;  // "tokens: 3 files, 1,234,567 tokens"; splitOffEnd adds the split's name
};

// The files matching a glob(3) pattern, sorted by byte order of their paths.
// Throws IoError "no file matches PATTERN" when none does, and IoError when a
// directory on the way cannot be read.
std::vector<std::string> expandGlob(const std::string& pattern);

// Reads llm.c or headerless token files, concatenated in the order given.
// Every token is checked against `vocab` (ids must be < vocab): an id out of
// range is a DataError naming the file, the byte offset of the token, the id
// and the vocabulary. Other DataErrors: an empty file, a wrong version for a
// known magic, a file size that disagrees with the header's token count, an
// odd byte count in a headerless file. Throws ConfigError when `paths` is empty
// or vocab is not in [1, 2^32].
TokenCorpus readTokenFiles(const std::vector<std::string>& paths, int64_t vocab);

// Reads text files (any bytes; UTF-8 usually), plain or gzip-compressed,
// concatenated in the order given, one token per byte: vocab 256. An empty file
// (or one that decompresses to nothing) and corrupt or truncated gzip data are
// DataErrors. Throws ConfigError when `paths` is empty.
TokenCorpus readTextFiles(const std::vector<std::string>& paths);

// Splits one corpus in two: the last `fraction` of its tokens (rounded to a
// whole token) become validation, the rest train; both keep the vocab. Each
// part must hold at least `min_tokens` tokens (a model of context C needs
// C + 1), else DataError saying the corpus is too small for the context.
// Throws ConfigError unless 0 < fraction < 1. The train part keeps the
// original buffer's capacity (no copy of the larger part).
std::pair<TokenCorpus, TokenCorpus> splitOffEnd(TokenCorpus all, double fraction, int64_t min_tokens);

}  // namespace dtrain
