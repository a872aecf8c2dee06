// TokenWindowDataset: a token corpus as samples for a language model. Sample
// i is the window of context + 1 tokens starting at i * context: its first
// context tokens are the input (ids held as whole floats, the model's input
// type) and each position's label is the token after it. Consecutive windows
// share one token, so an epoch reads every token of the corpus once as an
// input and once as a label (a trailing part shorter than a window is left
// out: (tokens - 1) / context windows). Which windows an epoch visits, in what
// order, and how ranks share them is the Sampler's, as for images; a
// checkpoint's position therefore resumes at the exact window.
//
// openTokenDataset reads [data] dataset = "tokens" (llm.c / nanoGPT token
// files: files and validation_files globs, ids checked against vocab) or
// "text" (UTF-8 files, plain or gzip, one token per byte; validation is
// validation_files, or the last validation_fraction of files).
//
// Ownership: the corpus is this dataset's. Thread-safety: immutable; get() from
// any number of threads.
#pragma once
#include <memory>

#include "datasets/dataset.h"
#include "datasets/token_corpus.h"

namespace dtrain {

class TokenWindowDataset : public Dataset {
 public:
  // Throws DataError when the corpus holds no whole window (name says which).
  // pad_id >= 0: labels equal to it are padding (-1: none).
  TokenWindowDataset(TokenCorpus corpus, int64_t context, std::string name, int64_t pad_id = -1);

  std::string describe() const override;
  int64_t size() const override { return windows_; }
  Shape sampleShape() const override { return Shape{context_}; }
  int64_t classes() const override { return corpus_.vocab; }
  int64_t labelsPerSample() const override { return context_; }
  // The window's ids; returns its first label (getWithLabels gives them all).
  int32_t get(int64_t index, float* out) const override;
  // A label equal to the padding id is given as -1: the loss ignores it.
  void getWithLabels(int64_t index, float* out, int32_t* labels) const override;
  int64_t countedLabels(int64_t index) const override;
  int64_t tokens() const { return static_cast<int64_t>(corpus_.tokens.size()); }

 private:
  TokenCorpus corpus_;
  int64_t context_;
  int64_t windows_;
  std::string name_;
  int64_t pad_id_;
};

// Whether [data] dataset names a token dataset ("tokens" or "text").
bool isTokenDataset(const std::string& dataset);
// The split's windows of data.context tokens.
std::unique_ptr<Dataset> openTokenDataset(const DataSection& data, Split split);

}  // namespace dtrain
