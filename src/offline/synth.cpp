#include "offline/synth.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/weights.h"
#include "offline/synth_context.h"
#include "offline/synth_fill.h"
#include "offline/synth_sparse.h"
#include "tensor/kquants.h"
#include "tensor/quantize.h"

namespace strata {

SynthSpec synth_preset(const std::string& name) {
  SynthSpec s;
  ModelConfig& c = s.shape;
  c.architecture = "llama";
  c.name = "strata-synthetic";
  if (name == "tiny") {
    c.n_embd = 64, c.n_ff = 192, c.n_layer = 2, c.n_head = 4, c.n_head_kv = 2;
    c.n_vocab = 256, c.n_ctx_train = 256;
    return s;
  }
  if (name == "1b") {
    c.n_embd = 2048, c.n_ff = 5632, c.n_layer = 22, c.n_head = 32, c.n_head_kv = 4;
    c.n_vocab = 32000, c.n_ctx_train = 2048;
  } else if (name == "7b") {
    c.n_embd = 4096, c.n_ff = 11008, c.n_layer = 32, c.n_head = 32, c.n_head_kv = 32;
    c.n_vocab = 32000, c.n_ctx_train = 4096;
  } else if (name == "13b") {
    c.n_embd = 5120, c.n_ff = 13824, c.n_layer = 40, c.n_head = 40, c.n_head_kv = 40;
    c.n_vocab = 32000, c.n_ctx_train = 4096;
  } else if (name == "mixtral") {  // Mixtral-8x7B
    c.n_embd = 4096, c.n_ff = 14336, c.n_layer = 32, c.n_head = 32, c.n_head_kv = 8;
    c.n_vocab = 32000, c.n_ctx_train = 32768, c.n_expert = 8, c.n_expert_used = 2;
    c.rope_freq_base = 1e6f;
  } else if (name == "falcon-7b") {  // 71 query heads on one KV head, one input norm
    c.n_embd = 4544, c.n_ff = 18176, c.n_layer = 32, c.n_head = 71, c.n_head_kv = 1;
    c.n_vocab = 65024, c.n_ctx_train = 2048;
  } else if (name == "falcon-40b") {  // 8 KV groups, two input norms
    c.n_embd = 8192, c.n_ff = 32768, c.n_layer = 60, c.n_head = 128, c.n_head_kv = 8;
    c.n_vocab = 65024, c.n_ctx_train = 2048;
  } else if (name == "opt-6.7b") {
    c.n_embd = 4096, c.n_ff = 16384, c.n_layer = 32, c.n_head = 32, c.n_head_kv = 32;
    c.n_vocab = 50272, c.n_ctx_train = 2048;
  } else {
    fail("unknown preset '{}' (tiny, 1b, 7b, 13b, mixtral, falcon-7b, falcon-40b, opt-6.7b)", name);
  }
  c.name = "strata-synthetic-" + name;
  return s;
}

namespace {

using namespace synth_fill;  // NOLINT: the fillers and generator of this file

// Predictors: F16 unless the weights are quantized (PowerInfer ships Q4_0 predictors with Q4_0
// models); Q8_0 with weights of larger blocks (fc2's rows are `rank` values, rarely whole
// super-blocks).
DType predictor_type(DType weights) {
  if (is_float_type(weights)) return DType::F16;
  return dtype_info(weights).block_size == 32 ? weights : DType::Q8_0;
}

struct PlannedTensor {
  std::string name;
  DType type;
  int64_t cols, rows;  // rows == 0: a norm vector of `cols`
  Fill fill;           // empty: random
  int64_t stack = 1;   // a 3-D tensor of `stack` matrices of rows x cols (experts)
};

// A mixture's FFN: the router (F32, as llama.cpp keeps it) and each expert's matrices, stacked
// or one tensor per expert.
void add_experts(std::vector<PlannedTensor>& plan, const Architecture& a, const ModelConfig& c,
                 DType type, DType expert_type, const std::string& p, bool stacked, Random& rng) {
  const ExpertNames& n = *a.experts;
  plan.push_back({p + n.router, DType::F32, c.n_embd, c.n_expert, {}});
  struct Role {
    const char *stacked, *each;
    int64_t cols, rows;
  };
  std::vector<Role> roles;
  if (ffn_has_gate(c.ffn)) roles.push_back({n.gate, n.gate_each, c.n_embd, c.n_ff});
  roles.push_back({n.up, n.up_each, c.n_embd, c.n_ff});
  roles.push_back({n.down, n.down_each, c.n_ff, c.n_embd});
  for (const Role& r : roles) {
    if (stacked) {
      plan.push_back({p + r.stacked, expert_type, r.cols, r.rows, {}, c.n_expert});
      continue;
    }
    for (int64_t e = 0; e < c.n_expert; ++e)
      plan.push_back({p + fmt::format(fmt::runtime(r.each), e), expert_type, r.cols, r.rows, {}});
  }
  if (n.selection_bias != nullptr)  // GLM-4.5's correction bias: small, to move some choices
    plan.push_back(
        {p + n.selection_bias, DType::F32, c.n_expert, 0, small_values(rng, c.n_expert)});
  if (c.n_ff_shared == 0) return;
  // A shared expert (Qwen2-MoE): its gate one F32 row (where it has one), its FFN of
  // n_ff_shared neurons.
  if (n.shared_gate != nullptr) plan.push_back({p + n.shared_gate, DType::F32, c.n_embd, 1, {}});
  if (ffn_has_gate(c.ffn))
    plan.push_back({p + n.shared_ffn_gate, type, c.n_embd, c.n_ff_shared, {}});
  plan.push_back({p + n.shared_ffn_up, type, c.n_embd, c.n_ff_shared, {}});
  plan.push_back({p + n.shared_ffn_down, type, c.n_ff_shared, c.n_embd, {}});
}

// A dense FFN of n_ff neurons under the architecture's names.
void add_dense_ffn(std::vector<PlannedTensor>& plan, const Architecture& a, const ModelConfig& c,
                   DType type, const std::string& p, int64_t n_ff) {
  if (ffn_has_gate(c.ffn))
    plan.push_back({p + a.gguf_name(LayerMatrix::FfnGate), type, c.n_embd, n_ff, {}});
  plan.push_back({p + a.gguf_name(LayerMatrix::FfnUp), type, c.n_embd, n_ff, {}});
  plan.push_back({p + a.gguf_name(LayerMatrix::FfnDown), type, n_ff, c.n_embd, {}});
}

// A sparse mixture: the generator's layer of n_expert * n_ff neurons cut into experts (expert
// e's neuron j is neuron e * n_ff + j: the stacked tensors' row order), a random router, and
// predictors for every expert's neurons. ffn_down_t is left to the loader (Model::ensure_down_t).
void add_sparse_experts(std::vector<PlannedTensor>& plan, const Architecture& a,
                        const ModelConfig& c, const SynthSpec& s, const std::string& p,
                        std::unique_ptr<SparseLayerGenerator>& gen) {
  const ExpertNames& n = *a.experts;
  plan.push_back({p + n.router, DType::F32, c.n_embd, c.n_expert, {}});
  const Fill gate = [&gen](int64_t i, float* row) { gen->gate_row(i, row); };
  const bool gated = ffn_has_gate(c.ffn);
  if (gated) plan.push_back({p + n.gate, s.type, c.n_embd, c.n_ff, gate, c.n_expert});
  plan.push_back({p + n.up, s.type, c.n_embd, c.n_ff, gated ? Fill{} : gate, c.n_expert});
  // Expert e's down row j: the generator's down row j over expert e's neurons.
  const Fill down = [&gen, &c](int64_t r, float* row) {
    gen->down_row_part(r % c.n_embd, r / c.n_embd * c.n_ff, c.n_ff, row);
  };
  plan.push_back({p + n.down, s.type, c.n_ff, c.n_embd, down, c.n_expert});
  const DType pt = predictor_type(s.type);
  plan.push_back({p + "fc1.weight", pt, c.n_embd, s.predictor_rank,
                  [&gen](int64_t r, float* row) { gen->fc1_row(r, row); }});
  plan.push_back({p + "fc2.weight", pt, s.predictor_rank, c.ffn_neurons(),
                  [&gen](int64_t i, float* row) { gen->fc2_row(i, row); }});
}

// A layer of a model that is sparse by construction, for an architecture with a plain ReLU FFN
// (Falcon, OPT): the generator (made when the layer's first tensor is written) gives the up and
// down_t rows, the small attention output and the FFN's norm (attn_norm in a parallel layer,
// ffn_norm in a sequential one); the biases that would move the anchor dimension or the FFN's
// input (the FFN's norm, attention output, up and down) are zero.
struct SparseLayer {
  std::unique_ptr<SparseLayerGenerator>* gen;
  const SynthSpec* spec;
  int64_t layer;
};

// One layer of a random model of any architecture, from its tensor list: the first name of every
// role it has (a second input norm where the shape has KV groups, as Falcon-40B), ffn_down
// rather than ffn_down_t, no gate for a plain FFN; with `sparse`, as SparseLayer says.
void add_architecture_layer(std::vector<PlannedTensor>& plan, const Architecture& a,
                            const ModelConfig& c, DType type, DType expert_type, int64_t layer,
                            Random& rng, bool stacked, const SparseLayer* sparse = nullptr) {
  const std::string p = fmt::format("blk.{}.", layer);
  const size_t first = plan.size();
  const bool parallel = a.residual == ResidualKind::Parallel;
  const LayerVector ffn_norm = parallel ? LayerVector::AttnNorm : LayerVector::FfnNorm;
  const LayerVector ffn_norm_bias = parallel ? LayerVector::AttnNormBias : LayerVector::FfnNormBias;
  std::unique_ptr<SparseLayerGenerator>* gen = sparse != nullptr ? sparse->gen : nullptr;
  for (const VectorName& v : a.vectors) {
    if (a.gguf_name(v.role) != v.gguf) continue;  // a second name of a role
    const bool second_norm =
        v.role == LayerVector::AttnNorm2 || v.role == LayerVector::AttnNorm2Bias;
    if (second_norm ? c.n_head_kv == 1 : v.presence == Presence::Optional) continue;
    const bool is_bias = std::string_view(v.gguf).ends_with(".bias");
    const int64_t n = layer_vector_length(v.role, c);
    std::string name = p + v.gguf;
    Fill fill = is_bias ? small_values(rng, n) : Fill{};
    if (sparse != nullptr) {
      if (v.role == ffn_norm)
        fill = [gen](int64_t, float* row) {
          std::copy((*gen)->ffn_norm().begin(), (*gen)->ffn_norm().end(), row);
        };
      else if (v.role == ffn_norm_bias || v.role == LayerVector::AttnOutputBias ||
               v.role == LayerVector::FfnUpBias || v.role == LayerVector::FfnDownBias)
        fill = zeros(n);
      else if (!fill)
        fill = random_norm(rng, n);
      // PowerInfer names OPT's down bias after the matrix it follows.
      if (v.role == LayerVector::FfnDownBias && sparse->spec->powerinfer_layout)
        name = p + "ffn_down_t.bias";
    }
    const bool per_expert = v.role == LayerVector::ExpertGateBias ||
                            v.role == LayerVector::ExpertUpBias ||
                            v.role == LayerVector::ExpertDownBias;
    if (per_expert)  // [width, n_expert], as the experts' matrices are stacked
      plan.push_back(
          {name, DType::F32, n / c.n_expert, c.n_expert, small_values(rng, n / c.n_expert)});
    else
      plan.push_back({name, DType::F32, n, 0, fill});
  }
  for (const MatrixName& m : a.matrices) {
    if (m.role == LayerMatrix::FfnGate && !ffn_has_gate(c.ffn)) continue;
    const bool ffn = m.role == LayerMatrix::FfnGate || m.role == LayerMatrix::FfnUp ||
                     m.role == LayerMatrix::FfnDown || m.role == LayerMatrix::FfnDownT;
    if (ffn && c.moe()) continue;  // a mixture's experts (or leading dense FFN), below
    const auto [cols, rows] = layer_matrix_shape(m.role, c);
    if (sparse == nullptr) {
      if (m.role != LayerMatrix::FfnDownT) plan.push_back({p + m.gguf, type, cols, rows, {}});
      continue;
    }
    Fill fill = random_rows(rng, cols);
    if (m.role == LayerMatrix::FfnUp) {
      fill = [gen](int64_t i, float* row) { (*gen)->gate_row(i, row); };
    } else if (m.role == LayerMatrix::FfnDownT) {
      fill = [gen](int64_t i, float* row) { (*gen)->down_t_row(i, row); };
    } else if (m.role == LayerMatrix::FfnDown) {
      if (!sparse->spec->keep_down) continue;
      fill = [gen](int64_t j, float* row) { (*gen)->down_row(j, row); };
    } else if (m.role == LayerMatrix::AttnOutput) {
      const int64_t width = cols;  // clang 14 cannot capture a structured binding
      fill = [gen, width](int64_t r, float* row) { (*gen)->attn_output_row(r, width, row); };
    }
    plan.push_back({p + m.gguf, type, cols, rows, fill});
  }
  if (sparse == nullptr) {
    if (c.routed(layer))
      add_experts(plan, a, c, type, expert_type, p, stacked, rng);
    else if (c.moe())  // a leading dense layer (GLM-4.5): n_ff_dense neurons
      add_dense_ffn(plan, a, c, type, p, c.n_ff_dense);
    return;
  }
  const SynthSpec& s = *sparse->spec;
  const DType pt = predictor_type(type);
  plan.push_back({p + "fc1.weight", pt, c.n_embd, s.predictor_rank,
                  [gen](int64_t r, float* row) { (*gen)->fc1_row(r, row); }});
  plan.push_back({p + "fc2.weight", pt, s.predictor_rank, c.n_ff,
                  [gen](int64_t i, float* row) { (*gen)->fc2_row(i, row); }});
  // The layer's generator, before its first tensor's rows.
  Fill start = plan[first].fill;
  plan[first].fill = [gen, start, &c, &s, layer = sparse->layer](int64_t r, float* row) {
    if (r == 0)
      *gen = std::make_unique<SparseLayerGenerator>(c.n_embd, c.n_ff, s.predictor_rank, s.density,
                                                    s.seed * 1000003 + layer);
    start(r, row);
  };
}

// The spec checked against its architecture, which it returns; `c` gets the head size,
// PowerInfer's bamboo name and the shared expert's size. One line on what no such model has.
const Architecture& checked_architecture(const SynthSpec& s, ModelConfig& c) {
  if (c.n_embd % c.n_head != 0 || c.n_head % c.n_head_kv != 0)
    fail("synthetic model: heads must divide the embedding and kv heads the heads");
  const bool sparse = s.density > 0.0;
  if (sparse && !ffn_is_relu_family(c.ffn))
    fail("--sparsity needs a ReLU-family FFN (--ffn reglu, drelu or relu)");
  if (s.powerinfer_layout && !sparse) fail("the PowerInfer layout needs --sparsity (predictors)");
  if (c.moe() && sparse && (!s.stacked_experts || s.powerinfer_layout || s.keep_down))
    fail(
        "--sparsity with --experts writes stacked experts (not --expert-layout split, "
        "--powerinfer or the extra ffn_down)");
  if (c.moe() && (c.n_expert_used < 1 || c.n_expert_used > c.n_expert || c.n_expert > kMaxExperts))
    fail("synthetic model: {} experts, {} per token: expected 1 <= --top-k <= --experts <= {}",
         c.n_expert, c.n_expert_used, kMaxExperts);
  if (s.context > 0.0 && !sparse) fail("--context needs --sparsity");
  if (s.powerinfer_layout && c.ffn != FfnActivation::ReGLU && c.ffn != FfnActivation::DReLU &&
      c.ffn != FfnActivation::ReLU)
    fail("PowerInfer files are ReGLU (llama), dReLU (bamboo) or ReLU (falcon, opt)");
  if (c.head_dim == 0) c.head_dim = c.n_embd / c.n_head;  // unless the shape names one
  if (c.head_dim % 2 != 0 || c.head_dim > 1024)
    fail("synthetic model: head size {} (even, at most 1024)", c.head_dim);
  c.n_rot = c.head_dim;
  if (s.powerinfer_layout && c.ffn == FfnActivation::DReLU) c.architecture = "bamboo";
  const Architecture* arch = find_architecture(c.architecture);
  if (arch == nullptr) fail("synthetic model: unknown architecture '{}'", c.architecture);
  if (arch->family_defaults != nullptr) arch->family_defaults(c);
  if (c.moe() && arch->experts == nullptr)
    fail("--experts: {} has no mixture-of-experts layers in strata", arch->name);
  if (!c.moe() && arch->always_experts)
    fail("synthetic model: {} models are mixtures of experts (--experts N)", arch->name);
  const bool has_shared = c.moe() && arch->experts->shared_ffn_up != nullptr;
  if (has_shared && c.n_ff_shared == 0) c.n_ff_shared = c.n_ff;  // unless --shared-ff
  if (!has_shared) c.n_ff_shared = 0;
  if (has_shared && sparse)
    fail("--sparsity: {}'s shared expert is not made sparse (so far)", arch->name);
  const bool llama = arch->name == "llama" || arch->name == "bamboo";
  if (!llama && s.context > 0.0)
    fail("--context makes llama-architecture models only (so far), not {}", arch->name);
  if (!llama && sparse && ffn_has_gate(c.ffn))
    fail("--sparsity for {} makes its plain ReLU FFN (--ffn relu), not {}", arch->name,
         ffn_activation_name(c.ffn));
  if (s.powerinfer_layout && !llama && c.ffn != arch->powerinfer_ffn)
    fail("PowerInfer's {} files are {}, not {}", arch->name,
         ffn_activation_name(arch->powerinfer_ffn), ffn_activation_name(c.ffn));
  if (s.powerinfer_layout && arch->positions == PositionKind::Learned && !s.tied_output)
    fail("PowerInfer's {} files tie the output to the embedding: add --tied", arch->name);
  if (ffn_has_gate(c.ffn) && !arch->has(LayerMatrix::FfnGate) && !arch->has(LayerMatrix::FfnGateUp))
    fail("--ffn {}: {} has no gate (its FFN is plain: relu or gelu)", ffn_activation_name(c.ffn),
         arch->name);
  if (arch->positions == PositionKind::RopeNeox && c.n_rot % 2 != 0)
    fail("synthetic model: an odd head size {} cannot be rotated", c.n_rot);
  return *arch;
}

// tokenizer.*: none (token ids only), or another file's vocabulary of the model's size.
void write_tokenizer(const SynthSpec& s, const ModelConfig& c, GgufWriter& w) {
  if (s.tokenizer_from.empty()) {
    w.set("tokenizer.ggml.model", GgufValue::str("none"));
    return;
  }
  const auto tok = GgufFile::open(s.tokenizer_from);
  for (const auto& [key, value] : tok->metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  const GgufValue& tokens = tok->get("tokenizer.ggml.tokens");
  if (static_cast<int64_t>(tokens.items.size()) != c.n_vocab)
    fail("'{}' has {} tokens but the model's vocabulary is {}", s.tokenizer_from,
         tokens.items.size(), c.n_vocab);
}

// What the rows' fills read while the model is written: the spec, the shape, the random stream
// (one, in the order the tensors are planned and then written), and for sparse models the
// generator of the layer being written and layer 0's context attention.
struct SynthState {
  SynthState(const SynthSpec& spec, const ModelConfig& config) : s(spec), c(config) {}
  const SynthSpec& s;
  const ModelConfig& c;
  Random rng{0};
  std::unique_ptr<SparseLayerGenerator> gen;
  std::unique_ptr<ContextAttention> context;
  bool sparse() const { return s.density > 0.0; }
};

// A sparse model's metadata (the density, the predictors' threshold, or PowerInfer's) and layer
// 0's context attention when asked.
void start_sparse_model(SynthState& st, GgufWriter& w) {
  const SynthSpec& s = st.s;
  const ModelConfig& c = st.c;
  if (s.context > 0.0) {
    st.context = std::make_unique<ContextAttention>(c, s.context);
    w.set("strata.synthetic.context", GgufValue::f32(static_cast<float>(s.context)));
  }
  if (!st.sparse()) return;
  const SparseLayerGenerator probe(c.n_embd, std::min<int64_t>(c.n_ff, 64), s.predictor_rank,
                                   s.density, s.seed);
  w.set("strata.synthetic.density", GgufValue::f32(static_cast<float>(s.density)));
  if (s.powerinfer_layout) {
    w.set_powerinfer_magic(true);
    w.erase(kFfnActivationKey);
    w.set("powerinfer.sparse_threshold", GgufValue::f32(probe.threshold()));
  } else {
    std::vector<GgufValue> t(static_cast<size_t>(c.n_layer), GgufValue::f32(probe.threshold()));
    w.set(kPredictorThresholdsKey, GgufValue::array(GgufType::F32, std::move(t)));
  }
}

// The tensors outside the layers: the embedding (sparse: with the anchor dimension), the output
// norm and matrix, learned positions.
void plan_outer_tensors(SynthState& st, const Architecture& arch,
                        std::vector<PlannedTensor>& plan) {
  const SynthSpec& s = st.s;
  const ModelConfig& c = st.c;
  SynthState* state = &st;
  Fill embedding;
  if (st.sparse())
    embedding = [state](int64_t, float* row) {
      const int64_t n = state->c.n_embd;
      const float a = std::sqrt(3.0f / static_cast<float>(n)) *
                      (state->context ? state->context->embedding_scale() : 1.0f);
      for (int64_t j = 0; j < n; ++j) row[j] = a * state->rng.uniform();
      row[0] = SparseLayerGenerator::kAnchor;
    };
  plan.push_back({"token_embd.weight", s.type, c.n_embd, c.n_vocab, embedding});
  plan.push_back({"output_norm.weight", DType::F32, c.n_embd, 0, {}});
  if (arch.output_norm_bias)
    plan.push_back({"output_norm.bias", DType::F32, c.n_embd, 0, small_values(st.rng, c.n_embd)});
  if (!s.tied_output && !arch.head_is_embedding)
    plan.push_back({"output.weight", s.type, c.n_embd, c.n_vocab, {}});
  if (arch.positions != PositionKind::Learned) return;
  // Sparse: small rows that leave the anchor dimension alone (the residual stays near the
  // embedding, as the generator assumes).
  Fill positions;
  if (st.sparse())
    positions = [state](int64_t, float* row) {
      const int64_t n = state->c.n_embd;
      const float a = 0.1f * std::sqrt(3.0f / static_cast<float>(n));
      for (int64_t j = 0; j < n; ++j) row[j] = a * state->rng.uniform();
      row[0] = 0.0f;
    };
  plan.push_back(
      {"position_embd.weight", s.type, c.n_embd, c.n_ctx_train + arch.position_offset, positions});
}

// One dense llama-family layer after its q/k/v: random matrices, or a mixture's experts.
void plan_dense_llama_ffn(SynthState& st, const Architecture& arch, const std::string& p,
                          std::vector<PlannedTensor>& plan) {
  const SynthSpec& s = st.s;
  const ModelConfig& c = st.c;
  plan.push_back({p + "attn_output.weight", s.type, c.n_head * c.head_dim, c.n_embd, {}});
  plan.push_back({p + "ffn_norm.weight", DType::F32, c.n_embd, 0, {}});
  if (c.moe()) {
    add_experts(plan, arch, c, s.type, s.expert_type.value_or(s.type), p, s.stacked_experts,
                st.rng);
    return;
  }
  if (ffn_has_gate(c.ffn)) plan.push_back({p + "ffn_gate.weight", s.type, c.n_embd, c.n_ff, {}});
  plan.push_back({p + "ffn_up.weight", s.type, c.n_embd, c.n_ff, {}});
  plan.push_back({p + "ffn_down.weight", s.type, c.n_ff, c.n_embd, {}});
}

// A sparse llama-family layer after its q/k/v: the generator's attention output (layer 0's
// context attention's), FFN norm, gate (or up), down_t (and down) and predictors, or experts.
void plan_sparse_llama_ffn(SynthState& st, const Architecture& arch, const std::string& p,
                           bool context_layer, std::vector<PlannedTensor>& plan) {
  const SynthSpec& s = st.s;
  const ModelConfig& c = st.c;
  SynthState* state = &st;
  const int64_t q_dim = c.n_head * c.head_dim;
  if (context_layer)
    plan.push_back({p + "attn_output.weight", s.type, q_dim, c.n_embd,
                    [state](int64_t r, float* row) { state->context->o_row(r, row); }});
  else
    plan.push_back(
        {p + "attn_output.weight", s.type, q_dim, c.n_embd,
         [state, q_dim](int64_t r, float* row) { state->gen->attn_output_row(r, q_dim, row); }});
  plan.push_back({p + "ffn_norm.weight", DType::F32, c.n_embd, 0, [state](int64_t, float* row) {
                    std::copy(state->gen->ffn_norm().begin(), state->gen->ffn_norm().end(), row);
                  }});
  if (c.moe()) {
    add_sparse_experts(plan, arch, c, s, p, st.gen);
    return;
  }
  // The neurons' on/off pattern lives in the gate (the up projection for plain ReLU).
  const Fill gate = [state](int64_t i, float* row) { state->gen->gate_row(i, row); };
  if (ffn_has_gate(c.ffn)) plan.push_back({p + "ffn_gate.weight", s.type, c.n_embd, c.n_ff, gate});
  plan.push_back(
      {p + "ffn_up.weight", s.type, c.n_embd, c.n_ff, ffn_has_gate(c.ffn) ? Fill{} : gate});
  if (s.keep_down)
    plan.push_back({p + "ffn_down.weight", s.type, c.n_ff, c.n_embd,
                    [state](int64_t j, float* row) { state->gen->down_row(j, row); }});
  plan.push_back({p + "ffn_down_t.weight", s.type, c.n_embd, c.n_ff,
                  [state](int64_t i, float* row) { state->gen->down_t_row(i, row); }});
  const DType pt = predictor_type(s.type);
  plan.push_back({p + "fc1.weight", pt, c.n_embd, s.predictor_rank,
                  [state](int64_t r, float* row) { state->gen->fc1_row(r, row); }});
  plan.push_back({p + "fc2.weight", pt, s.predictor_rank, c.n_ff,
                  [state](int64_t i, float* row) { state->gen->fc2_row(i, row); }});
}

// One llama-family layer: its norm (a sparse layer's makes the layer's generator when written),
// q/k/v (layer 0's context attention's when asked), then the dense or sparse rest.
void plan_llama_layer(SynthState& st, const Architecture& arch, int64_t l,
                      std::vector<PlannedTensor>& plan) {
  const SynthSpec& s = st.s;
  const ModelConfig& c = st.c;
  SynthState* state = &st;
  const std::string p = fmt::format("blk.{}.", l);
  const bool context_layer = st.context && l == 0;
  Fill start_layer;
  if (st.sparse())
    start_layer = [state, l, context_layer](int64_t, float* row) {
      const SynthSpec& spec = state->s;
      const ModelConfig& config = state->c;
      for (int64_t j = 0; j < config.n_embd; ++j) row[j] = 1.0f + 0.1f * state->rng.uniform();
      if (context_layer) row[0] = 1.0f;  // the anchor sets the attention scores' scale
      state->gen = std::make_unique<SparseLayerGenerator>(config.n_embd, config.ffn_neurons(),
                                                          spec.predictor_rank, spec.density,
                                                          spec.seed * 1000003 + l);
    };
  plan.push_back({p + "attn_norm.weight", DType::F32, c.n_embd, 0, start_layer});
  Fill q_fill, k_fill, v_fill;
  if (context_layer) {
    q_fill = [state](int64_t r, float* row) { state->context->q_row(r, row); };
    k_fill = [state](int64_t r, float* row) { state->context->k_row(r, row); };
    v_fill = [state](int64_t r, float* row) { state->context->v_row(r, row); };
  }
  plan.push_back({p + "attn_q.weight", s.type, c.n_embd, c.n_head * c.head_dim, q_fill});
  plan.push_back({p + "attn_k.weight", s.type, c.n_embd, c.n_head_kv * c.head_dim, k_fill});
  plan.push_back({p + "attn_v.weight", s.type, c.n_embd, c.n_head_kv * c.head_dim, v_fill});
  if (st.sparse())
    plan_sparse_llama_ffn(st, arch, p, context_layer, plan);
  else
    plan_dense_llama_ffn(st, arch, p, plan);
}

// Every planned tensor's header, then its data row by row (norms near 1, matrices uniform with
// variance 1/cols unless filled), reporting bytes written of the total.
void write_planned(const std::vector<PlannedTensor>& plan, GgufWriter& w, Random& rng,
                   const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t total = 0;
  for (const auto& t : plan) {
    if (t.rows == 0) {
      w.add_tensor(t.name, t.type, {t.cols});
      total += row_bytes(t.type, t.cols);
    } else if (t.stack > 1) {
      w.add_tensor(t.name, t.type, {t.cols, t.rows, t.stack});
      total += row_bytes(t.type, t.cols) * static_cast<uint64_t>(t.rows * t.stack);
    } else {
      w.add_tensor(t.name, t.type, {t.cols, t.rows});
      total += row_bytes(t.type, t.cols) * static_cast<uint64_t>(t.rows);
    }
  }
  uint64_t written = 0;
  std::vector<float> row;
  std::vector<uint8_t> buf;
  for (const auto& t : plan) {
    row.resize(t.cols);
    if (t.rows == 0) {
      if (t.fill)
        t.fill(0, row.data());
      else
        for (auto& v : row) v = 1.0f + 0.1f * rng.uniform();
      buf.resize(row_bytes(DType::F32, t.cols));
      quantize_row(DType::F32, row.data(), buf.data(), t.cols);
      w.write_tensor_data(buf);
      written += buf.size();
    } else {
      const float a = std::sqrt(3.0f / static_cast<float>(t.cols));
      const uint64_t rb = row_bytes(t.type, t.cols);
      const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / static_cast<int64_t>(rb));
      const int64_t rows = t.rows * t.stack;
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        buf.resize(rb * n);
        for (int64_t r = 0; r < n; ++r) {
          if (t.fill)
            t.fill(r0 + r, row.data());
          else
            for (auto& v : row) v = a * rng.uniform();
          quantize_row(t.type, row.data(), buf.data() + r * rb, t.cols);
        }
        w.write_tensor_data(buf);
        written += buf.size();
      }
    }
    if (progress) progress(written, total);
  }
}

}  // namespace

void write_synthetic_model(const SynthSpec& s, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress) {
  ModelConfig c = s.shape;
  const Architecture& arch = checked_architecture(s, c);
  GgufWriter w(path);
  write_config(c, w);
  w.set("strata.synthetic", GgufValue::boolean(true));
  write_tokenizer(s, c, w);
  SynthState st(s, c);
  start_sparse_model(st, w);
  st.rng = Random(s.seed);
  std::vector<PlannedTensor> plan;
  plan_outer_tensors(st, arch, plan);
  const bool llama = arch.name == "llama" || arch.name == "bamboo";
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (llama) {
      plan_llama_layer(st, arch, l, plan);
      continue;
    }
    const SparseLayer layer{&st.gen, &s, l};
    add_architecture_layer(plan, arch, c, s.type, s.expert_type.value_or(s.type), l, st.rng,
                           s.stacked_experts, st.sparse() ? &layer : nullptr);
  }
  write_planned(plan, w, st.rng, progress);
  w.finish();
}

}  // namespace strata
