// `kiln demo` (the main job): trains a small Llama-style character-level language model on
// public-domain books, shows a progress bar, evaluates held-out loss against the unigram
// baseline, saves a safetensors checkpoint and samples text from the trained model.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include "kiln/kiln.h"
#include "kiln/nn/nn.h"
#include "kiln/optim/optim.h"
#include "tools/commands.h"
#include "tools/demo/corpus.h"
#include "tools/demo/lm_options.h"
#include "tools/demo/progress.h"
#include "tools/demo/tiny_llama.h"

namespace kiln::demo {

namespace {

// Random windows of the token stream: x = ids[o : o+T], y = ids[o+1 : o+T+1].
struct Batcher {
  const std::vector<int64_t>& ids;
  int64_t begin, end;  // the split's range in ids
  Generator gen;

  std::pair<Tensor, Tensor> next(int64_t B, int64_t T, Device d) {
    Tensor offsets = randint(begin, end - T - 1, {B}, TensorOptions(DType::I64), &gen);
    std::vector<int64_t> xs, ys;
    xs.reserve(size_t(B * T));
    ys.reserve(size_t(B * T));
    for (int64_t o : offsets.to_vector<int64_t>())
      for (int64_t t = 0; t < T; ++t) {
        xs.push_back(ids[size_t(o + t)]);
        ys.push_back(ids[size_t(o + t + 1)]);
      }
    return {tensor_from(xs, {B, T}, TensorOptions(d)), tensor_from(ys, {B, T}, TensorOptions(d))};
  }
};

// Cross-entropy (nats/char) of the held-out text under the training text's char frequencies.
double unigram_baseline(const std::vector<int64_t>& ids, int64_t split, int64_t vocab) {
  std::vector<double> counts(size_t(vocab), 1.0);  // add-one smoothing
  for (int64_t i = 0; i < split; ++i) counts[size_t(ids[size_t(i)])] += 1;
  double total = double(split) + double(vocab);
  double nll = 0;
  for (size_t i = size_t(split); i < ids.size(); ++i) nll -= std::log(counts[size_t(ids[i])] / total);
  return nll / double(ids.size() - size_t(split));
}

void progress(int64_t step, int64_t steps, double loss, double tok_s, double eta) {
  std::string bar = progress_bar(step, steps);
  std::printf("\rstep %5lld/%lld %s loss %.3f | %6.0f tok/s | ETA %s   ", (long long)step,
              (long long)steps, bar.c_str(), loss, tok_s, format_duration(eta).c_str());
  std::fflush(stdout);
}

double evaluate(TinyLlama& model, Batcher& batches, int64_t rounds, int64_t B, int64_t T,
                Device d) {
  autograd::NoGradGuard ng;
  model.eval();
  double total = 0;
  for (int64_t r = 0; r < rounds; ++r) {
    auto [x, y] = batches.next(B, T, d);
    Tensor logits = model.forward(x);
    total += nn::functional::cross_entropy(logits.view({B * T, -1}), y.view({B * T})).item<double>();
  }
  model.train();
  return total / double(rounds);
}

std::string sample(TinyLlama& model, const CharVocab& vocab, const std::string& prompt,
                   int64_t n, double temperature, int64_t top_k, Generator& gen, Device d) {
  autograd::NoGradGuard ng;
  model.eval();
  std::vector<int64_t> ids = vocab.encode(prompt);
  int64_t ctx = model.config().context;
  for (int64_t i = 0; i < n; ++i) {
    int64_t start = std::max<int64_t>(0, int64_t(ids.size()) - ctx);
    std::vector<int64_t> window(ids.begin() + start, ids.end());
    Tensor x = tensor_from(window, {1, int64_t(window.size())}, TensorOptions(d));
    Tensor logits = model.forward(x).select(1, -1).squeeze(0) / temperature;
    if (top_k > 0 && top_k < logits.size(0)) {
      Tensor kth = std::get<0>(topk(logits, top_k)).select(0, -1);
      logits = masked_fill(logits, lt(logits, kth), -INFINITY);
    }
    Tensor probs = softmax(logits, 0);
    ids.push_back(multinomial(probs, 1, false, &gen).item<int64_t>());
  }
  return vocab.decode(std::vector<int64_t>(ids.begin() + int64_t(prompt.size()), ids.end()));
}

}  // namespace

int run_lm_demo(const LmOptions& o) {
  Device d = Device::parse(o.device);
  manual_seed(o.seed);
  auto files = o.text.empty() ? default_corpus_files() : std::vector<std::string>{o.text};
  std::string text = load_corpus(files);
  CharVocab vocab(text);
  std::vector<int64_t> ids = vocab.encode(text);
  int64_t split = int64_t(double(ids.size()) * 0.9);
  LlamaConfig cfg;
  cfg.vocab = vocab.size();
  cfg.dim = o.dim;
  cfg.layers = o.layers;
  cfg.heads = o.heads;
  cfg.context = o.context;
  TinyLlama model(cfg);
  model.to(d);
  std::printf("kiln demo: character-level Llama-style model (RMSNorm, RoPE, SwiGLU)\n");
  std::printf("  corpus: %zu characters, vocabulary %lld (90%% train / 10%% held out)\n",
              text.size(), (long long)cfg.vocab);
  std::printf("  model: %lld layers, dim %lld, %lld heads, context %lld, %lld parameters, device %s\n",
              (long long)cfg.layers, (long long)cfg.dim, (long long)cfg.heads,
              (long long)cfg.context, (long long)model.num_parameters(), d.str().c_str());
  std::printf("  training: %lld steps of %lld x %lld tokens, AdamW lr %.g, cosine schedule\n",
              (long long)o.steps, (long long)o.batch, (long long)o.context, o.lr);

  optim::AdamWOptions aopt;
  aopt.lr = o.lr;
  aopt.weight_decay = 0.01;
  optim::AdamW opt(model.parameters(), aopt);
  optim::CosineAnnealingLR sched(opt, o.steps, o.lr * 0.1);
  Batcher train{ids, 0, split, Generator(o.seed + 1)};
  Batcher held{ids, split, int64_t(ids.size()), Generator(o.seed + 2)};

  auto t0 = std::chrono::steady_clock::now();
  double smoothed = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    auto [x, y] = train.next(o.batch, o.context, d);
    Tensor logits = model.forward(x);
    Tensor loss = nn::functional::cross_entropy(logits.view({o.batch * o.context, -1}),
                                                y.view({o.batch * o.context}));
    opt.zero_grad();
    backward(loss);
    nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched.step();
    double l = loss.item<double>();
    smoothed = step == 1 ? l : 0.9 * smoothed + 0.1 * l;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tok_s = double(step * o.batch * o.context) / elapsed;
    progress(step, o.steps, smoothed, tok_s, elapsed / double(step) * double(o.steps - step));
  }
  double train_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n");
  double held_loss = evaluate(model, held, o.eval_batches, o.batch, o.context, d);
  double baseline = unigram_baseline(ids, split, cfg.vocab);
  std::printf("held-out loss %.3f nats/char vs unigram baseline %.3f (%.0f%% of it); "
              "training took %s, %.0f tokens/s\n",
              held_loss, baseline, 100 * held_loss / baseline, format_duration(train_secs).c_str(),
              double(o.steps * o.batch * o.context) / train_secs);
  save_checkpoint(model, o.out);
  std::printf("checkpoint: %s\n", o.out.c_str());
  Generator gen(o.seed + 3);
  std::string prompt = "The ";
  std::string text_out = sample(model, vocab, prompt, o.sample_chars, o.temperature, o.top_k, gen, d);
  std::printf("sample (temperature %.2f, top-k %lld):\n%s%s\n", o.temperature,
              (long long)o.top_k, prompt.c_str(), text_out.c_str());
  return held_loss < baseline ? 0 : 1;
}

}  // namespace kiln::demo
