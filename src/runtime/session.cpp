#include "runtime/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"
#include "kernels/cpu/sparse_ops.h"
#include "runtime/attention.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace strata {

void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double{x[i]} * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

namespace {

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

}  // namespace

const char* ffn_mode_name(FfnMode m) {
  switch (m) {
    case FfnMode::Dense:
      return "dense";
    case FfnMode::Predict:
      return "predict";
    case FfnMode::GateFirst:
      return "gate-first";
  }
  return "?";
}

const uint8_t* Session::embedding_row(int32_t token) {
  const MatrixView& e = model_.weights.token_embd;
  if (embedding_fd_ < 0) return e.row(token);
  // A bundled model's table stays in the file (Model::load leaves it unread): one row per token.
  const uint64_t at = static_cast<uint64_t>(e.row(token) - model_.file->bytes());
  uint64_t done = 0;
  while (done < e.row_bytes) {
    const ssize_t n = ::pread(embedding_fd_, embedding_row_.data() + done, e.row_bytes - done,
                              static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail("cannot read the embedding of token {} from '{}': {}", token, model_.file->path(),
           n < 0 ? std::strerror(errno) : "the file is shorter than at load");
    done += static_cast<uint64_t>(n);
  }
  return embedding_row_.data();
}

Session::Session(const Model& model, int64_t n_ctx, ThreadPool& pool, SessionOptions options)
    : model_(model),
      c_(model.config),
      kernels_(best_kernels()),
      pool_(pool),
      n_ctx_(n_ctx),
      options_(options) {
  if (n_ctx <= 0) fail("context size must be positive, got {}", n_ctx);
  if (model.config.n_head / model.config.n_head_kv > kMaxHeadsPerGroup)
    fail("{} query heads per key/value head: at most {} are supported",
         model.config.n_head / model.config.n_head_kv, kMaxHeadsPerGroup);
  const ModelWeights& mw = model.weights;
  check_options(model, options);
  if (options.ffn != FfnMode::Dense && !mw.has_down_t && !mw.bundled)
    fail("the sparse FFN needs ffn_down_t in every layer (Model::ensure_down_t)");
  const int64_t kv_dim = c_.n_head_kv * c_.head_dim, q_dim = c_.n_head * c_.head_dim;
  const int64_t B = kMaxBatch;
  const uint64_t kv_values = static_cast<uint64_t>(c_.n_layer * n_ctx * kv_dim);
  try {
    k_cache_ = AnonymousMemory(kv_values * dtype_info(options.k_type).block_bytes);
    v_cache_ = AnonymousMemory(kv_values * dtype_info(options.v_type).block_bytes);
    // Populated up front (decode then only writes), so it must fit now.
    const uint64_t need = k_cache_.size() + v_cache_.size();
    const uint64_t available = AnonymousMemory::available();
    if (need > available)
      fail(
          "the KV cache for a context of {} tokens needs {:.2f} GB, more than the {:.2f} GB of "
          "memory available; lower -c (or --cache-type-k/-v f16)",
          n_ctx, static_cast<double>(need) / 1e9, static_cast<double>(available) / 1e9);
    k_cache_.populate(pool_);
    v_cache_.populate(pool_);
  } catch (const std::bad_alloc&) {
    fail("cannot allocate the KV cache for a context of {} tokens ({:.1f} GB); lower -c", n_ctx,
         static_cast<double>(kv_cache_bytes(c_, n_ctx, options.k_type, options.v_type)) / 1e9);
  }
  // A bundled model's embedding table (250 MB at 7B F16) is read a row per token, never kept
  // (unless the output head shares it).
  if (mw.bundled && mw.token_embd.data != mw.output.data) {
    embedding_fd_ = ::open(model.file->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (embedding_fd_ < 0) fail("cannot open '{}': {}", model.file->path(), std::strerror(errno));
    embedding_row_.resize(mw.token_embd.row_bytes);
  }
  x_.resize(B * c_.n_embd);
  xn_.resize(B * c_.n_embd);
  q_.resize(B * q_dim);
  k_.resize(B * kv_dim);
  v_.resize(B * kv_dim);
  attn_.resize(B * q_dim);
  proj_.resize(B * c_.n_embd);
  gate_.resize(B * c_.n_ff);
  up_.resize(B * c_.n_ff);
  scores_.resize(static_cast<size_t>(B * c_.n_head * n_ctx));
  rope_cos_.resize(B * c_.n_rot / 2);
  rope_sin_.resize(B * c_.n_rot / 2);
  inputs_.resize(B);
  ffn_stats_.assign(c_.n_layer, {});
  if (options.ffn != FfnMode::Dense) {
    mask_.resize(B * c_.n_ff);
    need_.resize(B * c_.n_ff);
    ids_.resize(c_.n_ff);
    gate_c_.resize(B * c_.n_ff);
    up_c_.resize(B * c_.n_ff);
    h_c_.resize(B * c_.n_ff);
  }
  if (mw.bundled) {
    if (options.source != nullptr) {
      source_ = options.source;
    } else {
      own_source_ = open_bundle_source(model.file->path());
      source_ = own_source_.get();
    }
    const int64_t slots =
        options.cache_neurons > 0 ? std::min(options.cache_neurons, c_.n_ff) : c_.n_ff;
    for (int64_t l = 0; l < c_.n_layer; ++l)
      caches_.push_back(std::make_unique<NeuronCache>(mw.bundle, slots, options.window));
    // Blocking reads need threads to be in flight together; io_uring keeps its own queue.
    const bool own_queue = source_->queue_depth() > 0;
    io_pool_ = std::make_unique<ThreadPool>(own_queue ? 1 : std::max(1, options.io_threads));
    const int depth = own_queue ? source_->queue_depth() : io_pool_->size();
    for (auto& cache : caches_) cache->set_read_planning(options.storage, depth);
    if (!options.pinned.empty()) {
      if (static_cast<int64_t>(options.pinned.size()) != c_.n_layer)
        fail("pinned neurons for {} layers given, the model has {}", options.pinned.size(),
             c_.n_layer);
      for (int64_t l = 0; l < c_.n_layer; ++l)
        if (!options.pinned[l].empty())
          caches_[l]->pin(options.pinned[l], *source_, mw.layers[l].bundles_offset, *io_pool_);
    }
    slots_.resize(c_.n_ff);
    pass_out_.resize(B * c_.n_embd);
  }
  if (options.ffn == FfnMode::Predict) {
    int64_t max_rank = 0;
    for (const auto& l : mw.layers) max_rank = std::max(max_rank, l.predictor.rank());
    pred_hidden_.resize(B * max_rank);
    pred_scores_.resize(B * c_.n_ff);
  }
}

uint64_t Session::kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type) {
  const uint64_t values = static_cast<uint64_t>(c.n_layer * n_ctx * c.n_head_kv * c.head_dim);
  return values * (dtype_info(k_type).block_bytes + dtype_info(v_type).block_bytes);
}

void Session::check_options(const Model& model, const SessionOptions& options) {
  const ModelWeights& mw = model.weights;
  for (DType t : {options.k_type, options.v_type})
    if (t != DType::F32 && t != DType::F16)
      fail("the KV cache holds f32 or f16, not {}", dtype_name(t));
  if (options.check_predictor && options.ffn != FfnMode::Predict)
    fail("--check-predictor needs --ffn predict (and a model with predictors)");
  if (options.ffn == FfnMode::Predict && !mw.has_predictors)
    fail(
        "--ffn predict needs activation predictors, which '{}' lacks (make them with strata "
        "train-predictors, or use --ffn gate-first for an exact sparse FFN)",
        model.file->path());
  if (options.ffn == FfnMode::GateFirst && model.config.ffn == FfnActivation::SwiGLU)
    fail("--ffn gate-first needs a ReLU-family FFN (reglu, drelu, relu); '{}' is swiglu",
         model.file->path());
  if (mw.bundled && options.ffn != FfnMode::Predict)
    fail("'{}' is bundled for the flash tier: it runs with --ffn predict and needs predictors",
         model.file->path());
  if (mw.bundled && options.check_predictor)
    fail("--check-predictor needs the dense FFN, which a bundled model keeps on flash");
}

std::vector<uint64_t> Session::ffn_zeros() const {
  std::vector<uint64_t> zeros;
  for (const FfnLayerStats& s : ffn_stats_) zeros.push_back(ffn_activations_ - s.nonzero);
  return zeros;
}

Session::~Session() {
  finish_lookahead();
  if (embedding_fd_ >= 0) ::close(embedding_fd_);
}

void Session::start_lookahead(int64_t l) {
  // The predictor of layer l on the residual before layer l's attention: a guess at the
  // neurons its real prediction (after attention) will want.
  predict_neurons(l, 1);
  lookahead_ids_.clear();
  for (int64_t i = 0; i < c_.n_ff; ++i)
    if (mask_[i] != 0) lookahead_ids_.push_back(static_cast<int32_t>(i));
  NeuronCache& cache = *caches_[static_cast<size_t>(l)];
  if (static_cast<int64_t>(lookahead_ids_.size()) > cache.capacity())
    lookahead_ids_.resize(static_cast<size_t>(cache.capacity()));
  lookahead_slots_.resize(lookahead_ids_.size());
  const uint64_t offset = model_.weights.layers[l].bundles_offset;
  // Marked as used by the previous token: what the real prediction then needs becomes this
  // token's (hits), wrong guesses stay evictable by this token's own fetch.
  const int64_t token = clock_ - 1;
  lookahead_thread_ = std::thread([this, &cache, offset, token] {
    try {
      cache.fetch(lookahead_ids_, lookahead_slots_.data(), *source_, offset, token, *io_pool_);
    } catch (const std::exception&) {
      // A failed guess is harmless: the layer's own fetch reads again and reports failures.
    }
  });
}

void Session::finish_lookahead() {
  if (lookahead_thread_.joinable()) lookahead_thread_.join();
}

NeuronCacheStats Session::flash_stats() const {
  NeuronCacheStats t;
  for (const auto& c : caches_) {
    const NeuronCacheStats& s = c->stats();
    t.hits += s.hits, t.misses += s.misses, t.bytes_read += s.bytes_read, t.reads += s.reads;
    t.read_seconds += s.read_seconds, t.evictions += s.evictions, t.pin_bytes += s.pin_bytes;
  }
  return t;
}

void Session::set_ffn_observer(FfnObserver observer) {
  if (observer && options_.ffn != FfnMode::Dense)
    fail("FFN observers need the dense FFN (they see every activation)");
  observer_ = std::move(observer);
}

void Session::ffn_activation(const float* gate, const float* up, float* h, int64_t count) const {
  switch (c_.ffn) {
    case FfnActivation::SwiGLU:
      for (int64_t i = 0; i < count; ++i) h[i] = silu(gate[i]) * up[i];
      break;
    case FfnActivation::ReGLU:
      for (int64_t i = 0; i < count; ++i) h[i] = gate[i] > 0.0f ? gate[i] * up[i] : 0.0f;
      break;
    case FfnActivation::DReLU:
      for (int64_t i = 0; i < count; ++i)
        h[i] = (gate[i] > 0.0f && up[i] > 0.0f) ? gate[i] * up[i] : 0.0f;
      break;
    case FfnActivation::ReLU:
      for (int64_t i = 0; i < count; ++i) h[i] = std::max(up[i], 0.0f);
      break;
  }
}

std::span<const float> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) fail("no tokens to evaluate");
  for (int32_t t : tokens)
    if (t < 0 || t >= c_.n_vocab)
      fail("token id {} is outside the vocabulary (size {})", t, c_.n_vocab);
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx_)
    fail("context is full ({} tokens); use a larger -c", n_ctx_);
  const int64_t n = static_cast<int64_t>(tokens.size());
  tokens_evaluated_ += static_cast<uint64_t>(n);
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * c_.n_vocab));
  for (int64_t start = 0; start < n; start += kMaxBatch) {
    const int64_t b = std::min(kMaxBatch, n - start);
    forward(tokens.subspan(start, b), logits_.data() + (all_logits ? start * c_.n_vocab : 0),
            all_logits);
  }
  return logits_;
}

void Session::prepare_inputs(const float* rows, int64_t dim, int64_t n, bool need_q8) {
  for (int64_t b = 0; b < n; ++b) inputs_[b].prepare(kernels_, rows + b * dim, dim, need_q8);
}

void Session::forward(std::span<const int32_t> tokens, float* logits, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t half = c_.n_rot / 2;
  for (int64_t b = 0; b < n; ++b) {
    dequantize_row(model_.weights.token_embd.type, embedding_row(tokens[b]),
                   x_.data() + b * c_.n_embd, c_.n_embd);
    // Rotation angles for this position: theta_i = pos * base^(-2i / n_rot).
    const double pos = static_cast<double>(n_past_ + b);
    for (int64_t i = 0; i < half; ++i) {
      const double theta =
          pos * std::pow(static_cast<double>(c_.rope_freq_base),
                         -2.0 * static_cast<double>(i) / static_cast<double>(c_.n_rot));
      rope_cos_[b * half + i] = static_cast<float>(std::cos(theta));
      rope_sin_[b * half + i] = static_cast<float>(std::sin(theta));
    }
  }

  for (int64_t l = 0; l < c_.n_layer; ++l) {
    Timer t;
    attention_block(l, n);
    times_.attention += t.seconds();
    t.reset();
    const double predictor_before = times_.predictor;
    ffn_block(l, n);
    times_.ffn += t.seconds() - (times_.predictor - predictor_before);
    if (!caches_.empty() && options_.lookahead && n == 1 && l + 1 < c_.n_layer) {
      Timer p;
      start_lookahead(l + 1);
      times_.predictor += p.seconds();
    }
  }

  Timer t;
  const MatrixView& out = model_.weights.output;
  const int64_t first = all_logits ? 0 : n - 1;  // only the last token's logits unless asked
  for (int64_t b = first; b < n; ++b)
    rms_norm(x_.data() + b * c_.n_embd, model_.weights.output_norm.data(),
             xn_.data() + (b - first) * c_.n_embd, c_.n_embd, c_.rms_eps);
  prepare_inputs(xn_.data(), c_.n_embd, n - first, needs_q8_input(out.type));
  matmat_multi(kernels_, {{&out, logits, c_.n_vocab}},
               std::span<const PreparedInput>(inputs_.data(), n - first), pool_);
  times_.output += t.seconds();
  n_past_ += n;
  clock_ += n;
}

void Session::attention_block(int64_t l, int64_t n) {
  const LayerWeights& w = model_.weights.layers[l];
  const int64_t hd = c_.head_dim, kv_dim = c_.n_head_kv * hd, q_dim = c_.n_head * hd;
  const int64_t half = c_.n_rot / 2;
  for (int64_t b = 0; b < n; ++b)
    rms_norm(x_.data() + b * c_.n_embd, w.attn_norm.data(), xn_.data() + b * c_.n_embd, c_.n_embd,
             c_.rms_eps);
  prepare_inputs(xn_.data(), c_.n_embd, n,
                 needs_q8_input(w.attn_q.type) || needs_q8_input(w.attn_k.type) ||
                     needs_q8_input(w.attn_v.type));
  const std::span<const PreparedInput> in(inputs_.data(), n);
  matmat_multi(kernels_,
               {{&w.attn_q, q_.data(), q_dim},
                {&w.attn_k, k_.data(), kv_dim},
                {&w.attn_v, v_.data(), kv_dim}},
               in, pool_);

  // Rotary embedding on adjacent pairs (x[2i], x[2i+1]) of each head, as GGUF llama files
  // expect (their converter permutes q/k rows so this matches the HF layout).
  const bool k16 = options_.k_type == DType::F16, v16 = options_.v_type == DType::F16;
  // Element offsets; the caches hold F32 or F16 elements.
  const uint64_t layer_at = static_cast<uint64_t>(l * n_ctx_ * kv_dim);
  float* k_layer = k16 ? nullptr : reinterpret_cast<float*>(k_cache_.data()) + layer_at;
  float* v_layer = v16 ? nullptr : reinterpret_cast<float*>(v_cache_.data()) + layer_at;
  uint16_t* k_layer16 = k16 ? reinterpret_cast<uint16_t*>(k_cache_.data()) + layer_at : nullptr;
  uint16_t* v_layer16 = v16 ? reinterpret_cast<uint16_t*>(v_cache_.data()) + layer_at : nullptr;
  for (int64_t b = 0; b < n; ++b) {
    const float* cs = rope_cos_.data() + b * half;
    const float* sn = rope_sin_.data() + b * half;
    auto rotate = [&](float* head) {
      for (int64_t i = 0; i < half; ++i) {
        const float a = head[2 * i], c = head[2 * i + 1];
        head[2 * i] = a * cs[i] - c * sn[i];
        head[2 * i + 1] = a * sn[i] + c * cs[i];
      }
    };
    for (int64_t h = 0; h < c_.n_head; ++h) rotate(q_.data() + b * q_dim + h * hd);
    for (int64_t h = 0; h < c_.n_head_kv; ++h) rotate(k_.data() + b * kv_dim + h * hd);
    const int64_t pos = n_past_ + b;
    const float* kb = k_.data() + b * kv_dim;
    const float* vb = v_.data() + b * kv_dim;
    if (k16)
      for (int64_t i = 0; i < kv_dim; ++i) k_layer16[pos * kv_dim + i] = f32_to_f16(kb[i]);
    else
      std::copy_n(kb, kv_dim, k_layer + pos * kv_dim);
    if (v16)
      for (int64_t i = 0; i < kv_dim; ++i) v_layer16[pos * kv_dim + i] = f32_to_f16(vb[i]);
    else
      std::copy_n(vb, kv_dim, v_layer + pos * kv_dim);
  }

  // Each token's query heads attend to every cached position up to its own, a group of heads
  // sharing a KV head at a time (runtime/attention.h).
  const int group = static_cast<int>(c_.n_head / c_.n_head_kv);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  pool_.parallel_for(n * c_.n_head_kv, [&](int64_t t0, int64_t t1, int) {
    const float* q[kMaxHeadsPerGroup];
    float* out[kMaxHeadsPerGroup];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / c_.n_head_kv, kvh = t % c_.n_head_kv;
      for (int g = 0; g < group; ++g) {
        q[g] = q_.data() + b * q_dim + (kvh * group + g) * hd;
        out[g] = attn_.data() + b * q_dim + (kvh * group + g) * hd;
      }
      const int64_t at = kvh * hd;
      const CachedHead kv{k16 ? static_cast<const void*>(k_layer16 + at) : k_layer + at,
                          v16 ? static_cast<const void*>(v_layer16 + at) : v_layer + at, k16, v16,
                          kv_dim};
      attend_group(kernels_, q, group, hd, kv, n_past_ + b + 1, scale,
                   scores_.data() + (b * c_.n_head + kvh * group) * n_ctx_, out);
    }
  });

  prepare_inputs(attn_.data(), q_dim, n, needs_q8_input(w.attn_output.type));
  matmat_multi(kernels_, {{&w.attn_output, proj_.data(), c_.n_embd}}, in, pool_);
  for (int64_t i = 0; i < n * c_.n_embd; ++i) x_[i] += proj_[i];
}

void Session::ffn_block(int64_t l, int64_t n) {
  const LayerWeights& w = model_.weights.layers[l];
  const int64_t ff = c_.n_ff;
  if (options_.ffn != FfnMode::Dense) {
    sparse_ffn(l, n);
    for (int64_t i = 0; i < n * c_.n_embd; ++i) x_[i] += proj_[i];
    return;
  }
  for (int64_t b = 0; b < n; ++b)
    rms_norm(x_.data() + b * c_.n_embd, w.ffn_norm.data(), xn_.data() + b * c_.n_embd, c_.n_embd,
             c_.rms_eps);
  const bool gated = ffn_has_gate(c_.ffn);
  prepare_inputs(xn_.data(), c_.n_embd, n,
                 needs_q8_input(w.ffn_up.type) || (gated && needs_q8_input(w.ffn_gate.type)));
  const std::span<const PreparedInput> in(inputs_.data(), n);
  if (gated) {
    matmat_multi(kernels_, {{&w.ffn_gate, gate_.data(), ff}, {&w.ffn_up, up_.data(), ff}}, in,
                 pool_);
  } else {
    matmat_multi(kernels_, {{&w.ffn_up, up_.data(), ff}}, in, pool_);
  }
  float* h = up_.data();
  const int64_t total = n * ff;
  ffn_activation(gate_.data(), up_.data(), h, total);
  uint64_t zeros = 0;
  for (int64_t i = 0; i < total; ++i) zeros += h[i] == 0.0f;
  if (l == 0) ffn_activations_ += static_cast<uint64_t>(total);
  ffn_stats_[l].computed += static_cast<uint64_t>(total);
  ffn_stats_[l].nonzero += static_cast<uint64_t>(total) - zeros;
  if (observer_) observer_(l, n, x_.data(), h);
  if (w.ffn_down.data != nullptr) {
    prepare_inputs(h, ff, n, needs_q8_input(w.ffn_down.type));
    matmat_multi(kernels_, {{&w.ffn_down, proj_.data(), c_.n_embd}}, in, pool_);
  } else {
    // Only ffn_down_t in the file (PowerInfer): every neuron through the axpy.
    ids_.resize(ff);
    std::iota(ids_.begin(), ids_.end(), 0);
    axpy_rows(kernels_, w.ffn_down_t, ids_, h, ff, n, proj_.data(), c_.n_embd, pool_);
  }
  for (int64_t i = 0; i < n * c_.n_embd; ++i) x_[i] += proj_[i];
}

}  // namespace strata
