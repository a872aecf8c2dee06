#include "datasets/token_windows.h"

#include "core/errors.h"

namespace dtrain {

TokenWindowDataset::TokenWindowDataset(TokenCorpus corpus, int64_t context, std::string name, int64_t pad_id)
    : corpus_(std::move(corpus)), context_(context), name_(std::move(name)), pad_id_(pad_id) {
  if (context_ < 1) throw ConfigError("[data] context must be >= 1 (got " + std::to_string(context_) + ")");
  const int64_t n = static_cast<int64_t>(corpus_.tokens.size());
  windows_ = n > 0 ? (n - 1) / context_ : 0;
  if (windows_ == 0)
    throw DataError(name_ + ": " + std::to_string(n) + " tokens hold no window of " +
                    std::to_string(context_ + 1) +
                    " tokens (context + 1); use more data or a shorter [data] context");
}

std::string TokenWindowDataset::describe() const {
  return name_ + ": " + corpus_.describe + ", " + std::to_string(windows_) + " windows of " +
         std::to_string(context_) + " tokens, vocab " + std::to_string(corpus_.vocab);
}

int32_t TokenWindowDataset::get(int64_t index, float* out) const {
  if (index < 0 || index >= windows_)
    throw Error(name_ + ": window " + std::to_string(index) + " is outside [0, " + std::to_string(windows_) +
                ")");
  const uint32_t* t = corpus_.tokens.data() + index * context_;
  for (int64_t i = 0; i < context_; ++i) out[i] = static_cast<float>(t[i]);
  return static_cast<int32_t>(t[1]);
}

void TokenWindowDataset::getWithLabels(int64_t index, float* out, int32_t* labels) const {
  get(index, out);
  const uint32_t* next = corpus_.tokens.data() + index * context_ + 1;
  for (int64_t i = 0; i < context_; ++i)
    labels[i] = static_cast<int64_t>(next[i]) == pad_id_ ? -1 : static_cast<int32_t>(next[i]);
}

int64_t TokenWindowDataset::countedLabels(int64_t index) const {
  if (pad_id_ < 0) return context_;
  const uint32_t* next = corpus_.tokens.data() + index * context_ + 1;
  int64_t counted = 0;
  for (int64_t i = 0; i < context_; ++i) counted += static_cast<int64_t>(next[i]) != pad_id_;
  return counted;
}

bool isTokenDataset(const std::string& dataset) { return dataset == "tokens" || dataset == "text"; }

namespace {

TokenCorpus readCorpus(const DataSection& data, const std::string& pattern) {
  const std::vector<std::string> paths = expandGlob(pattern);
  return data.dataset == "text" ? readTextFiles(paths) : readTokenFiles(paths, data.vocab);
}

}  // namespace

std::unique_ptr<Dataset> openTokenDataset(const DataSection& data, Split split) {
  const std::string name = data.dataset + " " + (split == Split::Train ? "train" : "validation");
  if (data.files.empty())
    throw ConfigError("[data] dataset = \"" + data.dataset + "\" needs files = \"PATH or GLOB\"");
  if (!data.validation_files.empty())
    return std::make_unique<TokenWindowDataset>(
        readCorpus(data, split == Split::Train ? data.files : data.validation_files), data.context, name,
        data.pad_id);
  // One corpus split at its end: validation never overlaps what is trained on.
  auto [train, validation] =
      splitOffEnd(readCorpus(data, data.files), data.validation_fraction, data.context + 1);
  return std::make_unique<TokenWindowDataset>(
      split == Split::Train ? std::move(train) : std::move(validation), data.context, name, data.pad_id);
}

}  // namespace dtrain
