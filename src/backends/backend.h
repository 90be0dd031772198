// The device seam: every op of a layer's forward pass, at the granularity the forward pass
// uses, behind one interface. The session is a loop over layers that calls these ops; which
// device runs them is the backend's business (the CPU backend today, CUDA next). Pointers
// passed to an op address memory of the backend's device (`Buffer::device`, `MatrixView::device`);
// the caller owns them and keeps them alive until the op's work is done.
//
// Asynchrony: a backend may queue an op and return before it ran (a GPU stream). Results may be
// read only after synchronize(); events recorded between ops time them as the device ran them
// (the CPU backend runs every op on the calling thread and its pool, so it is always
// synchronous and an event is the time of its recording).
//
// Contracts shared by every backend (tests/test_backend_ops.cpp checks each op of each
// backend against the scalar reference in backends/reference_ops.h):
//   - a batch is n rows (tokens) of fixed width, row-major, stride = width unless stated;
//   - pointers and spans address the backend's memory, except where an op says "host": the
//     TokenPlaces arrays and dequantize_row's row (read before the op returns);
//   - select_union returns a count, so it waits for the work queued before it; other counts
//     (keep_needed's) are added to counters in the backend's memory, read once per pass;
//   - results never depend on the thread count or the order in which work is split;
//   - gather and axpy over a neuron list equal the dense product on those neurons; axpy adds a
//     token's terms in buckets fixed by the neuron ids (kAxpyBucket, sparse_ops.h) and the
//     buckets' partial sums in bucket order, so the result depends only on which neurons the
//     token uses, never on the rest of the list. A list split into segments (several passes of
//     a cache, several stores) adds the segments' sums in segment order: equal within rounding,
//     and bit for bit when every bucket lies wholly in one segment.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/ffn_activation.h"
#include "tensor/matrix.h"

namespace strata {

// How a weight is used, which decides the layout a backend gives it: matrices multiplied
// whole (attention, output, dense FFN, predictors) may be re-laid out (the CPU backend
// interleaves Q4_0/Q8_0 rows by 16); matrices read row by row (the sparse FFN's gate/up/down_t)
// keep the file's rows.
enum class WeightUse { Whole, Rows };

// A product's weight and where its output goes: y[b * y_stride + r] for token b and row r (or
// the k-th row of a gather's list).
struct RowsJob {
  const MatrixView* w;
  float* y;
  int64_t y_stride;
};

// Activations made ready once for every product that reads them (the CPU backend quantizes
// them to Q8 blocks when a quantized weight reads them). Made by the backend, opaque to callers.
class PreparedRows {
 public:
  virtual ~PreparedRows() = default;
  virtual int64_t rows() const = 0;
};

// One layer's KV cache: position p's key of KV head h is at k + (p * kv_dim + h * head_dim)
// elements of k_type (F32 or F16); the same for values.
struct KvLayer {
  void* k = nullptr;
  void* v = nullptr;
  DType k_type = DType::F32, v_type = DType::F32;
  int64_t kv_dim = 0;
};

struct HeadShape {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// The ops a family's recipe adds to some layers beyond what every model's layer does
// (model/layer_ops.h says which layer needs which). Every backend answers which it computes
// (Backend::supports, AcceleratorProvider::supports); the plan keeps a layer needing one its
// device lacks on the CPU, which computes them all, so a new op runs on the CPU first and on a
// device once its kernels exist. A new op is a row here and a branch of the layer block.
enum class LayerOp : uint8_t {
  AttentionSoftCap,  // ScoreRule::softcap > 0 (Gemma 2)
  AttentionSinks,    // ScoreRule::sinks (gpt-oss)
  Count
};
const char* layer_op_name(LayerOp op);

// How attention's scores are made from q . k: times `scale`, then, when softcap > 0, soft-capped
// as softcap * tanh(s / softcap) (Gemma 2's attention logits).
// `sinks` (null: none): one logit per query head, in the backend's memory, that joins each
// softmax's denominator and carries no value (gpt-oss's attention sinks).
struct ScoreRule {
  float scale = 1.0f;
  float softcap = 0.0f;
  const float* sinks = nullptr;
  static ScoreRule plain(int64_t head_dim) { return {1.0f / std::sqrt(float(head_dim)), 0.0f}; }
};

// Which elements of a head RoPE rotates together: adjacent pairs (2i, 2i + 1) as GGUF llama
// files expect, or NeoX's halves (i, i + half) as llama.cpp's falcon (and GPT-NeoX) files do.
enum class RopeStyle { Adjacent, Neox };

// Rotation angles of a batch: cos/sin [n][half], theta_i = pos * base^(-2i / n_rot) (made by the
// session, the same for every backend); pair i of a head is rotated by theta_i.
struct RopeTable {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t half = 0;
  RopeStyle style = RopeStyle::Adjacent;
};

// Where each token of a batch sits in the KV cache (host arrays of n entries): token b is at
// position pos[b] of its sequence, whose cached rows start at row base[b] of the layer's cache
// (a server's sequence slots share one cache, a range each). Its key and value go to row
// base[b] + pos[b] and it attends to rows base[b] .. base[b] + pos[b]. Tokens of one sequence
// come in position order, so a token sees the batch's earlier tokens of its own sequence and
// never another sequence's. A sliding window attends from a later row: base[b] is then the
// window's first row and origin[b] the sequence's first (null: base), which a backend may use to
// make a token's arithmetic the same wherever its window starts.
struct TokenPlaces {
  const int64_t* pos = nullptr;
  const int64_t* base = nullptr;
  const int64_t* origin = nullptr;
};

// A point on the backend's timeline (see the header comment).
struct Event {
  double seconds = 0;   // host clock at recording (synchronous backends)
  uint64_t ticket = 0;  // asynchronous backends: which of their recorded points
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // for reports: "cpu avx512-vnni, 2 threads"

  // Memory of this device, zeroed and counted: allocated() is what is held now. A device with
  // a budget (--vram-budget) fails with a one-line error naming `what` when it would not fit;
  // the CPU backend throws std::bad_alloc (its callers name what and which flag lowers it).
  // The CPU backend's allocations are huge-page advised and populated.
  virtual Buffer allocate(uint64_t bytes, std::string_view what) = 0;
  Buffer allocate(uint64_t bytes) { return allocate(bytes, "a buffer"); }
  virtual void release(const Buffer& buffer) = 0;
  virtual uint64_t allocated() const = 0;
  // Host memory to this device's memory, in order with the ops queued before and after (the
  // host bytes may be reused as soon as it returns), and back: download waits for every op
  // queued before it and returns when the bytes are in `host`.
  virtual void upload(void* dst, const void* host, uint64_t bytes) = 0;
  virtual void download(void* host, const void* src, uint64_t bytes) = 0;

  // Whether this backend's kernels read weights of this type (the CPU's: every type strata
  // computes). A device may decline a type: planning keeps the layers holding it on the CPU
  // (planning/device_plan.h) and a session refuses them with one line (runtime/session.cpp).
  virtual bool reads_weights(DType type) const { return dtype_info(type).computable; }
  // Whether it computes `op` (the CPU computes every one).
  virtual bool supports(LayerOp op) const { return true; }

  // The layout this backend wants for a weight used this way (the model rewrites it in place).
  virtual Layout preferred_layout(const MatrixView& w, WeightUse use) const = 0;

  // --- ops ---
  // Rows of x (n rows of dim) made ready for products; `readers`: the types of the weights that
  // will read them. `p` must come from make_prepared(max_rows >= n).
  virtual std::unique_ptr<PreparedRows> make_prepared(int64_t max_rows) = 0;
  virtual void prepare(PreparedRows& p, const float* x, int64_t dim, int64_t n,
                       std::span<const DType> readers) = 0;
  void prepare(PreparedRows& p, const float* x, int64_t dim, int64_t n,
               std::initializer_list<DType> readers) {
    prepare(p, x, dim, n, std::span<const DType>(readers.begin(), readers.size()));
  }
  // out[b] = x[b] / rms(x[b]) * weight (the sum of squares in double); out may be x (each
  // row's sum is taken before any of its values is written).
  virtual void rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim,
                        float eps) = 0;
  // out[b] = (x[b] - mean) / sqrt(variance + eps) * weight + bias (bias may be null), the mean
  // and variance in double.
  virtual void layer_norm(const float* x, const float* weight, const float* bias, float* out,
                          int64_t n, int64_t dim, float eps) = 0;
  // x[b * dim + i] += bias[i] for n rows (a projection's bias).
  virtual void add_bias(float* x, const float* bias, int64_t n, int64_t dim) = 0;
  // y[b * stride + k] += bias[ids[k]] for n rows: the biases of the listed neurons, added to
  // their compact values (the sparse FFN's up rows).
  virtual void add_bias_of(float* y, const float* bias, std::span<const int32_t> ids, int64_t n,
                           int64_t stride) = 0;
  // Every job's y = W x_b for the prepared batch: each weight row is read once per batch.
  virtual void matmul(std::span<const RowsJob> jobs, const PreparedRows& x) = 0;
  // y[b][k] = W.row(rows[k]) . x_b for every job; with `need` ([n][need_stride] by k), products
  // where need == 0 are skipped and written as 0.
  virtual void gather(std::span<const RowsJob> jobs, std::span<const int32_t> rows,
                      const PreparedRows& x, const uint8_t* need, int64_t need_stride) = 0;
  // out[b] = sum over k of c[b * c_stride + k] * wt.row(rows[k]), c == 0 skipped; `neurons`:
  // each entry's neuron id when rows are slots of a cache or store (they fix the order of
  // additions; empty: the rows are the ids). Every id is below `id_bound` (the layer's n_ff).
  virtual void axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c,
                    int64_t c_stride, int64_t n, float* out, int64_t out_stride,
                    std::span<const int32_t> neurons, int64_t id_bound) = 0;
  // Rotates the heads of q (n rows of q_dim) and k (n rows of kv_dim), the pairs of
  // rope.style, and stores k and v (n rows of kv_dim) at each token's cache row
  // (TokenPlaces), converted to the cache's element types.
  virtual void rope_and_store(float* q, float* k, const float* v, int64_t n, const HeadShape& s,
                              const RopeTable& rope, const KvLayer& kv, const TokenPlaces& at) = 0;
  // out[b] (q_dim) = causal softmax attention of token b over its sequence's cached rows up to
  // its own (TokenPlaces), grouped-query heads, scores made by `rule`; scores: scratch of n *
  // n_head * n_ctx floats, n_ctx at least every token's pos + 1.
  virtual void attention(const float* q, int64_t n, const HeadShape& s, const ScoreRule& rule,
                         const KvLayer& kv, const TokenPlaces& at, int64_t n_ctx, float* scores,
                         float* out) = 0;
  // h[i] = act(gate[i], up[i]) for count values (gate unused for the plain FFNs, relu and gelu;
  // h may alias up).
  virtual void activation(FfnActivation act, const float* gate, const float* up, float* h,
                          int64_t count) = 0;
  virtual void relu(float* x, int64_t count) = 0;
  // mask[i] = scores[i] >= threshold (strict: >).
  virtual void threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                         int64_t count) = 0;
  // Neuron selection of a batch: from mask ([n][ff]), the union of the selected neurons as
  // ascending ids, and need[b * ff + k] = mask[b][ids[k]]. Returns the number of ids;
  // *selected receives the number of (token, neuron) pairs selected.
  virtual int64_t select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids,
                               uint8_t* need, uint64_t* selected) = 0;
  // out[b * stride + k] = full[b * stride + ids[k]]: the selected entries of dense rows.
  virtual void select_columns(const float* full, std::span<const int32_t> ids, int64_t n,
                              int64_t stride, float* out) = 0;
  // Zeroes h[b * stride + k] for k in [begin, end) where need[b * stride + k] == 0 (another
  // token's neuron; need may be null: keep all) and adds how many of those are non-zero to
  // *nonzero (a counter in this backend's memory).
  virtual void keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride, int64_t begin,
                           int64_t end, uint64_t* nonzero) = 0;
  // Training-free input sparsity (tensor/input_sparsity.h), in place over count values, adding
  // how many values are non-zero afterwards to *kept (a counter in this backend's memory):
  // TEAL: x[i] = teal_keep(x[i], threshold), a product's input before it is prepared, and with
  // `mask` (else null) mask[i] = x[i] != 0 afterwards (the columns an input-sparse product reads);
  // CATS: gate[i] = cats_keep(act, gate[i], threshold), the gate before the activation.
  virtual void sparsify(float* x, int64_t count, float threshold, uint64_t* kept,
                        uint8_t* mask) = 0;
  virtual void sparsify_gate(FfnActivation act, float* gate, int64_t count, float threshold,
                             uint64_t* kept) = 0;
  virtual void add(float* x, const float* y, int64_t count) = 0;  // x += y
  virtual void scale(float* x, float factor, int64_t count) = 0;  // x *= factor (Gemma's input)
  // A mixture of experts' output: out[b * dim + j] = mix_value over s < k of
  // weights[b * k + s] * y[(b * k + s) * dim + j] (tensor/expert_mix.h: the choice's order,
  // fused multiply-adds): token b's k expert outputs, weighted by the router, summed.
  virtual void mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                           float* out) = 0;
  // A mixture's two levels of selection, the layer seen as one FFN of n_expert * expert_ff
  // neurons and weights[b * n_expert + e] token b's dense expert weights (0: not chosen;
  // tensor/expert_mix.h's neuron_expert_weight):
  // mask[b * stride + i] = 0 for i < stride where token b's weight of neuron i is 0 (the
  // router's choice before the neurons' own selection);
  virtual void mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                             int64_t expert_ff, int64_t n_expert) = 0;
  // h[b * stride + k] *= token b's weight of neuron ids[k], for n rows (the listed neurons'
  // activations weighted as the router says, before the down projection sums them).
  virtual void scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights,
                               int64_t n, int64_t stride, int64_t expert_ff, int64_t n_expert) = 0;
  // bytes from src to dst, both in this device's memory, not overlapping (KV rows of one
  // sequence copied to another).
  virtual void copy(void* dst, const void* src, uint64_t bytes) = 0;
  // out = the host row of `type` elements as f32 (embedding lookup).
  virtual void dequantize_row(DType type, const uint8_t* row, float* out, int64_t n) = 0;

  // --- the timeline ---
  virtual Event record() = 0;
  virtual double elapsed(const Event& from, const Event& to) const = 0;  // seconds
  virtual void synchronize() = 0;
};

}  // namespace strata
