// A session's checks before it holds anything: the options against the model (modes, input
// sparsity, the KV types, bundles), the layout of its devices (layers on the CPU, a split FFN),
// and on a device the weight types its backend reads. Each fails with one line.
#include <fmt/format.h>

#include "core/error.h"
#include "model/layer_ops.h"
#include "runtime/kv_cache.h"
#include "runtime/session.h"

namespace strata {

void Session::check_options(const Model& model, const SessionOptions& options) {
  const ModelWeights& mw = model.weights;
  if (options.sparsity.mode != SparsityMode::Off && options.ffn != FfnMode::Dense)
    fail("--sparsity-mode {} thresholds the dense FFN's inputs; use --ffn dense",
         sparsity_mode_name(options.sparsity.mode));
  InputSparsifier::check(model, options.sparsity.mode, options.sparsity.level);
  if (mw.column_bundled && options.ffn != FfnMode::Dense)
    fail(
        "'{}' is column-bundled for the flash tier: its FFN runs dense (--ffn dense), sparse "
        "through --sparsity-mode teal or cats",
        model.file->path());
  if (mw.column_bundled && (!options.vram_neurons.empty() || options.check_predictor))
    fail("'{}' is column-bundled: its FFN runs on the CPU from the flash tier", model.file->path());
  KvCache::check_types(model.config, options.kv.k, options.kv.v);
  if (options.check_predictor && options.ffn != FfnMode::Predict)
    fail("--check-predictor needs --ffn predict (and a model with predictors)");
  if ((model.config.n_ff_shared > 0 || model.config.n_dense_lead > 0) &&
      options.ffn != FfnMode::Dense)
    fail(
        "--ffn {}: '{}' has a shared expert or leading dense layers (Qwen2-MoE, GLM-4.5), which "
        "the sparse modes do not compute yet; use --ffn dense",
        ffn_mode_name(options.ffn), model.file->path());
  if (model.config.moe() && options.ffn != FfnMode::Dense &&
      !model.weights.layers.empty() &&
      !model.weights.layers[0].vec(LayerVector::ExpertUpBias).empty())
    fail("--ffn {}: '{}' has expert biases (gpt-oss), which the sparse modes do not add yet; use "
         "--ffn dense",
         ffn_mode_name(options.ffn), model.file->path());
  if (model.config.moe() && options.check_predictor)
    fail("--check-predictor: '{}' is a mixture of experts, whose predictions it does not count",
         model.file->path());
  if (model.config.moe() && options.ffn != FfnMode::Dense && !mw.bundled)
    for (const LayerWeights& l : mw.layers)
      if (expert_neuron_rows(l.experts, &ExpertMatrices::up).data == nullptr)
        fail(
            "--ffn {}: '{}' holds each expert in its own tensors (an older layout); the sparse "
            "modes read a layer's experts as one stacked matrix (ffn_up_exps)",
            ffn_mode_name(options.ffn), model.file->path());
  if (options.ffn == FfnMode::Predict && !mw.has_predictors)
    fail(
        "--ffn predict needs activation predictors, which '{}' lacks (make them with strata "
        "train-predictors, or use --ffn gate-first for an exact sparse FFN)",
        model.file->path());
  if (options.ffn == FfnMode::GateFirst && !ffn_is_relu_family(model.config.ffn))
    fail("--ffn gate-first needs a ReLU-family FFN (reglu, drelu, relu); '{}' is {}",
         model.file->path(), ffn_activation_name(model.config.ffn));
  if (mw.bundled && options.ffn != FfnMode::Predict)
    fail("'{}' is bundled for the flash tier: it runs with --ffn predict and needs predictors",
         model.file->path());
  if (mw.bundled && options.check_predictor)
    fail("--check-predictor needs the dense FFN, which a bundled model keeps on flash");
}

void Session::check_layout() const {
  const ModelWeights& mw = model_.weights;
  if (options_.ffn != FfnMode::Dense && !mw.has_down_t && !mw.bundled)
    fail("the sparse FFN needs ffn_down_t in every layer (Model::ensure_down_t)");
  const bool host = backend_.device() == Device::Host;
  if (!host && options_.check_predictor)
    fail("--check-predictor counts on the host; run it without a GPU");
  const bool split = !options_.vram_neurons.empty();
  int64_t cpu_layers = 0;
  for (uint8_t h : options_.host_layers) cpu_layers += h != 0;
  if (cpu_layers > 0 || options_.output_on_host) {
    if (host || options_.host_backend == nullptr)
      fail("layers on the CPU beside a device need a device session and the CPU backend");
    if (static_cast<int64_t>(options_.host_layers.size()) != c_.n_layer)
      fail("layers on the CPU: one flag for each of the {} layers", c_.n_layer);
    if (cpu_layers == c_.n_layer) fail("every layer on the CPU: run without a GPU");
  }
  if (mw.column_bundled && !host)
    fail("a column-bundled model's FFN runs on the CPU from the flash tier; run it without a GPU");
  if (mw.bundled && !host && !split)
    fail("a bundled model's FFN on a device is split: its plan names the neurons in VRAM");
  if (split) {
    if (options_.ffn != FfnMode::Predict && !experts_split())
      fail(
          "a split FFN (neurons in VRAM, the rest in RAM or on flash) runs in predict mode, or "
          "is a mixture's dense experts split whole");
    if (static_cast<int64_t>(options_.vram_neurons.size()) != c_.n_layer)
      fail("a split FFN needs VRAM neurons for each of the {} layers", c_.n_layer);
    if (!host && options_.host_backend == nullptr)
      fail("a split FFN on a device needs the CPU backend for its RAM part");
  }
}

void Session::check_lora() const {
  const LoraAdapters& lora = model_.lora;
  if (lora.empty()) return;
  const ModelWeights& mw = model_.weights;
  if (backend_.device() != Device::Host || !options_.vram_neurons.empty())
    fail("--lora: adapters run on the CPU in strata; run without a GPU (-ngl 0)");
  if (mw.bundled || mw.column_bundled)
    fail("--lora: '{}' keeps its FFN on the flash tier; adapters apply to a model in RAM",
         model_.file->path());
  if (options_.sparsity.mode != SparsityMode::Off)
    fail("--lora with --sparsity-mode {}: the input-sparse products do not take adapters yet",
         sparsity_mode_name(options_.sparsity.mode));
}

void Session::check_weight_types() const {
  if (backend_.device() == Device::Host) return;
  auto check = [&](const MatrixView& m, const std::string& what) {
    if (m.data != nullptr && !backend_.reads_weights(m.type))
      fail(
          "{} is {}, which the {} backend has no kernels for (a planned run keeps such layers "
          "on the CPU)",
          what, dtype_name(m.type), backend_.name());
  };
  const ModelWeights& w = model_.weights;
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    if (on_cpu(l)) continue;
    for (const LayerOp op : layer_ops(c_, l))
      if (!backend_.supports(op))
        fail(
            "layer {} needs the {}, which the {} backend does not compute (a planned run keeps "
            "such layers on the CPU)",
            l, layer_op_name(op), backend_.name());
    const LayerWeights& layer = w.layers[static_cast<size_t>(l)];
    for (const LayerMatrixSlot& slot : kLayerMatrixSlots)
      check(layer.*slot.member, fmt::format("layer {}'s {}", l, slot.name));
    for_each_expert_matrix(layer, [&](const MatrixView& m, const std::string& name) {
      check(m, fmt::format("layer {}'s {}", l, name));
    });
  }
  if (!options_.output_on_host) check(w.output, "the output matrix");
}

}  // namespace strata
