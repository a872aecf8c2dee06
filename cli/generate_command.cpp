#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "core/errors.h"
#include "core/nn/layer_registry.h"
#include "core/train/model_checkpoint.h"
#include "core/train/sequence_decoder.h"
#include "core/train/trainer.h"
#include "datasets/token_windows.h"
#include "models/model_builder.h"

namespace dtrain::cli {

namespace {

// A byte-level model's prompt is its bytes; a token model's, ids.
std::vector<int32_t> promptIds(const std::string& prompt, bool bytes) {
  std::vector<int32_t> ids;
  if (bytes) {
    for (unsigned char c : prompt) ids.push_back(c);
    if (ids.empty()) ids.push_back('\n');  // a line's start: the corpus's most common context
    return ids;
  }
  std::istringstream in(prompt);
  for (std::string word; in >> word;) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0)
      throw ConfigError("--prompt: '" + word +
                        "' is not a token id; a token model's prompt is ids, e.g. \"464 3290\"");
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) throw ConfigError("--prompt: a token model needs at least one token id to start from");
  return ids;
}

}  // namespace

int runGenerate(const GenerateArgs& args) {
  ResumePoint from = loadResumePointReporting(args.checkpoint);
  const JobConfig& job = from.job;
  if (!isTokenDataset(job.data.dataset))
    throw ConfigError(from.checkpoint.dir + " is a model of [data] dataset \"" + job.data.dataset +
                      "\", not a language model; generate samples from models trained on tokens or text");
  const bool bytes = job.data.dataset == "text";
  const int64_t vocab = bytes ? 256 : job.data.vocab;
  // The trained parameters, in the training model's layout.
  auto trained_model = buildModel(job.model, Shape{job.data.context}, vocab, builtinLayers());
  ParamStore params, buffers;
  trained_model->registerParams(params);
  params.allocate();
  trained_model->registerBuffers(buffers);
  buffers.allocate();
  restoreCheckpoint(from.checkpoint, params, buffers, nullptr);

  SequenceDecoder decoder(job.model, vocab, job.data.context, params, buffers);
  const std::vector<int32_t> prompt = promptIds(args.prompt, bytes);
  SamplingOptions sampling;
  sampling.temperature = args.temperature;
  sampling.top_k = args.top_k;
  sampling.seed = args.seed;
  const std::vector<int32_t> out = decoder.generate(prompt, args.tokens, sampling, !args.no_cache);
  if (bytes) {
    std::string text(out.begin(), out.end());
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
  } else {
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? " " : "", out[i]);
    std::printf("\n");
  }
  return kExitOk;
}

}  // namespace dtrain::cli
