// Training-free activation sparsity (TEAL, CATS): calibration reaches its levels, the written
// thresholds come back and apply, sparsity 0 is the dense model bit for bit, the thresholded
// session equals the scalar rule applied to its inputs, and calibrations that do not match the
// model are refused with one line.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/down_transpose.h"
#include "offline/sparsify.h"
#include "tensor/column_groups.h"
#include "tensor/kquants.h"
#include "test_helpers.h"

namespace strata {
namespace {

using testing::kquant_tiny_model;
using testing::random_tokens;
using testing::relative_difference;
using testing::temp_file;
using testing::tiny_model;

std::vector<float> logits_of(const Model& m, ThreadPool& pool, const std::vector<int32_t>& tokens,
                             SessionOptions o) {
  Session s(m, 64, pool, o);
  const auto l = s.eval(tokens, true);
  return {l.begin(), l.end()};
}

// The model again with `extra` metadata (replacing keys of the same name).
std::string with_metadata(const Model& m, const std::string& name,
                          const std::vector<std::pair<std::string, GgufValue>>& extra) {
  const std::string path = temp_file(name);
  GgufWriter w(path, m.file->alignment());
  for (const auto& [key, value] : m.file->metadata())
    if (key != "general.alignment") w.set(key, value);
  for (const auto& [key, value] : extra) w.set(key, value);
  for (const auto& t : m.file->tensors()) w.add_tensor(t.name, t.type, t.dims);
  for (const auto& t : m.file->tensors()) w.write_tensor_data({t.data, t.n_bytes});
  w.finish();
  return path;
}

GgufValue floats(std::vector<float> v) {
  std::vector<GgufValue> items;
  for (float x : v) items.push_back(GgufValue::f32(x));
  return GgufValue::array(GgufType::F32, std::move(items));
}

struct Calibrated {
  std::unique_ptr<Model> model;
  SparsifyResult result;
};

Calibrated calibrate(ThreadPool& pool, SparsityAllocation allocation, DType type = DType::F32) {
  // K-quants: rows of whole super-blocks (256 inputs), the tiny shape widened.
  const auto dense = Model::load(
      is_kquant(type) ? kquant_tiny_model(type) : tiny_model(type, FfnActivation::SwiGLU), false);
  EXPECT_EQ(dense->config.ffn, FfnActivation::SwiGLU);
  SparsifyOptions o;
  o.levels = {0.25f, 0.5f};
  o.n_ctx = 48;
  o.max_tokens = 192;
  o.allocation = allocation;
  Calibrated c;
  c.result = calibrate_sparsity(*dense, random_tokens(*dense, 400, 7), o, pool);
  const std::string path =
      temp_file(std::string(dtype_name(type)) + (allocation == SparsityAllocation::Greedy
                                                     ? "_sparsified_greedy.gguf"
                                                     : "_sparsified_uniform.gguf"));
  write_model_with_thresholds(*dense, c.result.thresholds, path);
  c.model = Model::load(path, false);
  return c;
}

TEST(InputSparsity, CalibrationReachesEachLevelInEveryLayer) {
  ThreadPool pool(2);
  for (auto allocation : {SparsityAllocation::Greedy, SparsityAllocation::Uniform}) {
    const Calibrated c = calibrate(pool, allocation);
    const ModelConfig& cfg = c.model->config;
    ASSERT_EQ(c.result.tokens, 192);
    for (size_t li = 0; li < 2; ++li) {
      const double level = c.result.thresholds.levels[li];
      double prev_error = -1;
      for (const LayerSparsity& s : c.result.layers[li]) {
        double skipped = 0, all = 0;
        for (MatrixInput k : kAllMatrixInputs) {
          const auto w = static_cast<double>(matrix_input_weights(k, cfg));
          skipped += w * s.sparsity[static_cast<size_t>(k)];
          all += w;
          // The threshold is the magnitude below which that share of the values lies.
          EXPECT_EQ(s.threshold[static_cast<size_t>(k)] > 0, s.sparsity[static_cast<size_t>(k)] > 0);
        }
        EXPECT_NEAR(skipped / all, level, 1e-6);
        EXPECT_GT(s.error, 0.0);
        EXPECT_GT(s.cats_threshold, 0.0f);  // SwiGLU: silu(gate) is never exactly 0
        prev_error = std::max(prev_error, s.error);
      }
      EXPECT_GT(prev_error, 0.0);
    }
    // More sparsity costs more error, layer by layer.
    for (size_t l = 0; l < c.result.layers[0].size(); ++l)
      EXPECT_LT(c.result.layers[0][l].error, c.result.layers[1][l].error);
  }
}

TEST(InputSparsity, TheWrittenThresholdsComeBackAndKeepTheirShareOnTheSameText) {
  ThreadPool pool(2);
  const Calibrated c = calibrate(pool, SparsityAllocation::Greedy);
  const InputThresholds& t = c.model->sparsity;
  ASSERT_EQ(t.levels, c.result.thresholds.levels);
  ASSERT_EQ(t.teal, c.result.thresholds.teal);
  ASSERT_EQ(t.cats, c.result.thresholds.cats);
  EXPECT_EQ(t.tokens, 192u);
  // The shares kept on the calibration text, per level, layer and input.
  ASSERT_EQ(t.teal_kept.size(), t.teal.size());
  for (size_t l = 0; l < c.result.layers[1].size(); ++l)
    for (size_t i = 0; i < kMatrixInputs; ++i)
      EXPECT_FLOAT_EQ(t.teal_kept[t.teal.size() / 2 + l][i],
                      static_cast<float>(1 - c.result.layers[1][l].sparsity[i]));
  // A session at level 0.5 reading the calibration text keeps what calibration said it would
  // (calibration's windows are the text's first 4 x 48 tokens, each starting afresh).
  SessionOptions o;
  o.sparsity.mode = SparsityMode::Teal;
  o.sparsity.level = 0.5f;
  Session s(*c.model, 48, pool, o);
  const auto tokens = random_tokens(*c.model, 400, 7);
  s.eval(std::span(tokens).first(48), true);
  const auto& d = s.input_density();
  const auto& expect = c.result.layers[1];
  // Layer 0's inputs are the calibration's exactly; the rest read a residual stream that the
  // earlier layers' sparsity changed a little.
  for (MatrixInput k : kAllMatrixInputs) {
    const auto i = static_cast<size_t>(k);
    if (d[0].seen[i] == 0) continue;
    const double kept = static_cast<double>(d[0].kept[i]) / static_cast<double>(d[0].seen[i]);
    if (k == MatrixInput::Attention || k == MatrixInput::Ffn) {
      EXPECT_NEAR(kept, 1 - expect[0].sparsity[i], 0.15) << matrix_input_name(k);
    }
  }
  uint64_t seen = 0;
  for (const auto& layer : d)
    for (uint64_t v : layer.seen) seen += v;
  EXPECT_GT(seen, 0u);
}

TEST(InputSparsity, ZeroThresholdsAreTheDenseModelBitForBit) {
  ThreadPool pool(2);
  const Calibrated c = calibrate(pool, SparsityAllocation::Uniform);
  const auto tokens = random_tokens(*c.model, 20, 11);
  const std::vector<float> dense = logits_of(*c.model, pool, tokens, {});
  SessionOptions o;
  o.sparsity.mode = SparsityMode::Teal;
  o.sparsity.level = 0.25f;
  Session s(*c.model, 64, pool, o);
  for (int64_t l = 0; l < c.model->config.n_layer; ++l) s.sparsifier().set_layer(l, {}, 0.0f);
  const auto zero = s.eval(tokens, true);
  ASSERT_EQ(std::vector<float>(zero.begin(), zero.end()), dense);
  // The level's own thresholds change the logits, a little.
  const std::vector<float> sparse = logits_of(*c.model, pool, tokens, o);
  double diff = 0;
  for (size_t i = 0; i < dense.size(); ++i) diff = std::max<double>(diff, std::abs(sparse[i] - dense[i]));
  EXPECT_GT(diff, 0.0);
}

// One layer's attention input thresholded by the session equals the rule applied to what an
// observer saw, and CATS zeroes the gate where |silu(gate)| is at most its threshold.
TEST(InputSparsity, TheSessionThresholdsWhatTheObserverSees) {
  ThreadPool pool(2);
  const Calibrated c = calibrate(pool, SparsityAllocation::Greedy);
  for (SparsityMode mode : {SparsityMode::Teal, SparsityMode::Cats}) {
    SessionOptions o;
    o.sparsity.mode = mode;
    o.sparsity.level = 0.5f;
    Session s(*c.model, 64, pool, o);
    std::vector<uint64_t> expect_kept(kSparsityPoints, 0), seen(kSparsityPoints, 0);
    s.set_input_observer([&](int64_t layer, int point, int64_t n, int64_t width, const float* x) {
      if (layer != 1) return;
      const InputThresholdRow& row = c.model->sparsity.teal_row(1, 1);
      const float t = point == kGatePoint ? c.model->sparsity.cats_value(1, 1)
                                          : row[static_cast<size_t>(point)];
      for (int64_t i = 0; i < n * width; ++i) {
        const double v = point == kGatePoint ? x[i] / (1.0 + std::exp(-static_cast<double>(x[i])))
                                             : x[i];
        expect_kept[static_cast<size_t>(point)] += std::abs(v) > t;
        seen[static_cast<size_t>(point)] += 1;
      }
    });
    s.eval(random_tokens(*c.model, 30, 13));
    const InputDensity& d = s.input_density()[1];
    for (int p = 0; p < kSparsityPoints; ++p) {
      const bool applies = mode == SparsityMode::Teal ? p < kMatrixInputs : p == kGatePoint;
      if (!applies) {
        EXPECT_EQ(d.seen[static_cast<size_t>(p)], 0u) << p;
        continue;
      }
      EXPECT_EQ(d.seen[static_cast<size_t>(p)], seen[static_cast<size_t>(p)]) << p;
      // Float against double silu may part on a value at the threshold itself: a few at most.
      EXPECT_NEAR(static_cast<double>(d.kept[static_cast<size_t>(p)]),
                  static_cast<double>(expect_kept[static_cast<size_t>(p)]), 2.0)
          << p;
      EXPECT_LT(d.kept[static_cast<size_t>(p)], d.seen[static_cast<size_t>(p)]);
    }
  }
}

// Decode through the column copies (input-sparse products) against the thresholded row-major
// products: equal within rounding for float weights (exact transposes; the additions run in
// another order), a prompt's batch taking the row-major path in the same session; the same bits
// for any thread count.
TEST(InputSparsity, InputSparseProductsEqualTheThresholdedDenseProducts) {
  // Q8_0, Q4_0 and Q4_K/Q5_K/Q6_K: column groups (tensor/column_groups.h), the file's values
  // regrouped.
  for (DType type :
       {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const bool groups = has_column_groups(type);
    ThreadPool pool(2);
    const Calibrated c = calibrate(pool, SparsityAllocation::Greedy, type);
    auto columns = Model::load(c.model->file->path(), false);
    EXPECT_GT(columns->ensure_input_columns(), 0u);
    ASSERT_EQ(columns->columns.size(), static_cast<size_t>(columns->config.n_layer));
    // q/k/v and gate/up of one type: each fused into one copy, the parts' views left empty.
    const Layout layout = groups ? Layout::ColumnGroups : Layout::Rows;
    for (const LayerColumns& lc : columns->columns) {
      EXPECT_EQ(lc.attn_qkv.layout, layout);
      EXPECT_EQ(lc.ffn_gate_up.layout, layout);
      EXPECT_EQ(lc.attn_output.layout, layout);
      EXPECT_NE(lc.ffn_down.data, nullptr);
      EXPECT_EQ(lc.ffn_down.layout, layout);
      EXPECT_NE(lc.attn_qkv.data, nullptr);
      const ModelConfig& mc = columns->config;
      EXPECT_EQ(lc.attn_qkv.cols, (mc.n_head + 2 * mc.n_head_kv) * mc.head_dim);
      EXPECT_EQ(lc.attn_qkv.rows, mc.n_embd);
      EXPECT_EQ(lc.attn_q.data, nullptr);
      EXPECT_NE(lc.ffn_gate_up.data, nullptr);
      EXPECT_EQ(lc.ffn_gate_up.cols, 2 * columns->config.n_ff);
      EXPECT_EQ(lc.ffn_up.data, nullptr);
    }
    SessionOptions o;
    o.sparsity.mode = SparsityMode::Teal;
    o.sparsity.level = 0.5f;
    const auto tokens = random_tokens(*c.model, 24, 17);
    auto decode = [&](const Model& m, int threads) {
      ThreadPool own(threads);
      Session s(m, 64, own, o);
      std::vector<float> all;
      // Row-major: 16 > kColumnProductsMaxBatch tokens.
      const auto prompt = s.eval(std::span(tokens).first(16));
      all.insert(all.end(), prompt.begin(), prompt.end());
      // A batch of kColumnProductsMaxBatch tokens: the union of their columns.
      const auto pair = s.eval(std::span(tokens).subspan(16, kColumnProductsMaxBatch));
      all.insert(all.end(), pair.begin(), pair.end());
      for (size_t i = 16 + kColumnProductsMaxBatch; i < tokens.size(); ++i) {
        const auto l = s.eval(tokens[i]);
        all.insert(all.end(), l.begin(), l.end());
      }
      uint64_t kept = 0;
      for (const InputDensity& d : s.input_density())
        for (uint64_t k : d.kept) kept += k;
      EXPECT_GT(kept, 0u);
      return all;
    };
    const std::vector<float> rows = decode(*c.model, 2), cols = decode(*columns, 2);
    ASSERT_EQ(rows.size(), cols.size());
    double scale = 0, diff = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      scale = std::max<double>(scale, std::abs(rows[i]));
      diff = std::max<double>(diff, std::abs(rows[i] - cols[i]));
    }
    EXPECT_LT(diff / scale, 1e-4) << dtype_name(type);
    EXPECT_EQ(decode(*columns, 1), cols) << dtype_name(type);
    EXPECT_EQ(decode(*columns, 3), cols) << dtype_name(type);
    // The decode steps did take the other path: their sums ran in another order (column
    // groups compute the row-major kernels' integers and float steps: K-quants' always, Q8_0's and
    // Q4_0's on a tiny model's few blocks, bit for bit; there the proof is that a changed copy
    // changes the result: its first scales zeroed).
    if (!groups) {
      EXPECT_GT(diff, 0.0) << dtype_name(type);
    } else {
      auto* scales = const_cast<uint8_t*>(columns->columns[0].ffn_down.data);
      std::fill(scales, scales + 2 * columns->columns[0].ffn_down.cols, uint8_t{0});
      EXPECT_NE(decode(*columns, 2), cols);
    }
  }
}

// TEAL's column products on a GPU: the device uploads its layers' column copies (float types
// transposed, Q8_0 and K-quants as column groups, which its axpy decodes: block_math.h's
// axpy_weight) and runs the same ops (sparsify with a mask, select_union, select_columns, axpy)
// in its memory. Decode through them equals the device's own row-major products within rounding,
// in another order of sums (so the path was taken), and the CPU's column products within 1e-4
// (float types; quantized ones as far as the two devices' row-major runs are apart); the copies'
// bytes are held on the device; the same bits every run.
void expect_device_columns(Backend& gpu) {
  ThreadPool pool(2);
  SessionOptions o;
  o.sparsity.mode = SparsityMode::Teal;
  o.sparsity.level = 0.5f;
  struct Run {
    std::vector<float> logits;
    uint64_t held = 0;  // the device's bytes while the session lives
  };
  auto decode = [&](const Model& m, Backend& be, const std::vector<int32_t>& tokens) {
    const uint64_t before = be.allocated();
    Session s(m, 64, be, o);
    Run r;
    r.held = be.allocated() - before;
    const auto prompt = s.eval(std::span(tokens).first(8));  // row-major: a batch of 8
    r.logits.assign(prompt.begin(), prompt.end());
    for (size_t i = 8; i < tokens.size(); ++i) {
      const auto l = s.eval(tokens[i]);
      r.logits.insert(r.logits.end(), l.begin(), l.end());
    }
    return r;
  };
  for (DType type :
       {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q3_K, DType::Q4_K, DType::Q6_K}) {
    const Calibrated c = calibrate(pool, SparsityAllocation::Uniform, type);
    auto columns = Model::load(c.model->file->path(), false);
    uint64_t copies = 0;
    for (const LayerWeights& l : columns->weights.layers) copies += Model::column_copies_bytes(l);
    EXPECT_GT(columns->ensure_input_columns(), 0u);
    EXPECT_EQ(columns->columns[0].ffn_gate_up.layout,
              is_float_type(type) ? Layout::Rows : Layout::ColumnGroups);
    const auto tokens = random_tokens(*c.model, 14, 5);
    CpuBackend cpu(pool);
    const Run on_cpu = decode(*columns, cpu, tokens);
    const Run gpu_columns = decode(*columns, gpu, tokens);
    const Run gpu_rows = decode(*c.model, gpu, tokens);
    // Quantized: the CPU's 8-bit activations move values across the thresholds, so the two
    // devices' TEAL runs part by 0.14-0.34 of the logits' scale whatever reads the weights (rows
    // 1.391e-1/3.442e-1/3.328e-1 for Q8_0/Q4_K/Q6_K, columns the same): the columns add nothing.
    const double rows_gap =
        relative_difference(gpu_rows.logits, decode(*c.model, cpu, tokens).logits);
    const double cpu_tolerance = is_float_type(type) ? 1e-4 : 1.01 * rows_gap + 1e-4;
    EXPECT_LT(relative_difference(gpu_columns.logits, on_cpu.logits), cpu_tolerance)
        << dtype_name(type);
    EXPECT_LT(relative_difference(gpu_columns.logits, gpu_rows.logits), 1e-4) << dtype_name(type);
    EXPECT_GT(relative_difference(gpu_columns.logits, gpu_rows.logits), 0.0) << dtype_name(type);
    // The copies, and the workspace's column buffers.
    const uint64_t buffers = Session::workspace_bytes(*columns, 64, FfnMode::Dense, true) -
                             Session::workspace_bytes(*columns, 64, FfnMode::Dense, false);
    EXPECT_EQ(gpu_columns.held - gpu_rows.held, copies + buffers) << dtype_name(type);
    EXPECT_EQ(decode(*columns, gpu, tokens).logits, gpu_columns.logits) << dtype_name(type);
    // Layer 0 on the CPU beside the device: its own column products over the model's copies.
    if (is_float_type(type)) {
      const SessionOptions whole = o;
      o.host_backend = &cpu;
      o.host_layers.assign(static_cast<size_t>(columns->config.n_layer), 0);
      o.host_layers[0] = 1;
      const Run mixed = decode(*columns, gpu, tokens);
      EXPECT_LT(relative_difference(mixed.logits, gpu_columns.logits), 1e-4) << dtype_name(type);
      // It read layer 0's copies: zeroing one changes its logits.
      const MatrixView& down = columns->columns[0].ffn_down;
      std::fill_n(const_cast<uint8_t*>(down.data), down.bytes(), uint8_t{0});
      EXPECT_GT(relative_difference(decode(*columns, gpu, tokens).logits, mixed.logits), 1e-3)
          << dtype_name(type);
      o = whole;
    }
  }
}

TEST(InputSparsity, ColumnProductsOnTheEmulatedGpuAreTheCpusAndItsRowMajorOnes) {
  auto gpu = make_cuda_emu_backend({});
  expect_device_columns(*gpu);
}

TEST(InputSparsity, ColumnProductsOnAGpuAreTheCpusAndItsRowMajorOnes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  auto gpu = make_cuda_backend({});
  expect_device_columns(*gpu);
}

TEST(InputSparsity, ColumnCopiesFuseOnlyWhenTheirTransposedRowsShareOneType) {
  std::vector<uint8_t> bytes(8);
  auto m = [&](DType type, int64_t rows) {
    return MatrixView{type, bytes.data(), 256, rows, row_bytes(type, 256)};
  };
  const MatrixView f16[3] = {m(DType::F16, 4096), m(DType::F16, 1024), m(DType::F16, 1024)};
  EXPECT_TRUE(column_copies_fuse(f16));
  // Q4_K_M's attn_v is Q6_K: two types.
  const MatrixView mixed[3] = {m(DType::Q4_K, 4096), m(DType::Q4_K, 1024), m(DType::Q6_K, 1024)};
  EXPECT_FALSE(column_copies_fuse(mixed));
  // 4096 + 32 outputs: not whole super-blocks, so that part transposes to Q8_0.
  const MatrixView uneven[2] = {m(DType::Q4_K, 4096), m(DType::Q4_K, 4096 + 32)};
  EXPECT_FALSE(column_copies_fuse(uneven));
  const MatrixView missing[2] = {m(DType::F16, 4096), MatrixView{}};
  EXPECT_FALSE(column_copies_fuse(missing));
}

TEST(InputSparsity, EveryComputedTypeHasColumnProductsAndMatricesThatFitNoneStayRowMajor) {
  EXPECT_TRUE(column_products_pay(DType::F16));
  EXPECT_TRUE(column_products_pay(DType::BF16));
  EXPECT_FALSE(column_products_pay(DType::Q8_0));  // transposed rows: Q8_0 has column groups
  EXPECT_FALSE(column_products_pay(DType::Q4_K));
  for (DType type :
       {DType::Q8_0, DType::Q4_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    EXPECT_TRUE(has_column_groups(type)) << dtype_name(type);
  // A Q8_0 model whose q/k/v (3 heads of 32 and 3 of KV: 288 outputs), attention output and
  // down projection (96 outputs) are not whole 64-output chunks: those keep no copy and multiply
  // their rows; gate/up (2 x 256 outputs) gets its column groups.
  SynthSpec spec = synth_preset("tiny");
  spec.type = DType::Q8_0;
  spec.shape.ffn = FfnActivation::SwiGLU;
  spec.shape.n_embd = 96, spec.shape.n_head = 3, spec.shape.n_head_kv = 3, spec.shape.n_ff = 256;
  spec.seed = 5;
  const std::string dense_path = temp_file("q8_0_odd_shape.gguf");
  write_synthetic_model(spec, dense_path);
  const auto dense = Model::load(dense_path, false);
  ThreadPool pool(2);
  SparsifyOptions so;
  so.levels = {0.5f};
  so.n_ctx = 48;
  so.max_tokens = 96;
  const SparsifyResult calibrated =
      calibrate_sparsity(*dense, random_tokens(*dense, 200, 7), so, pool);
  const std::string path = temp_file("q8_0_odd_shape_sparsified.gguf");
  write_model_with_thresholds(*dense, calibrated.thresholds, path);
  const auto rows = Model::load(path, false);
  auto columns = Model::load(path, false);
  EXPECT_GT(columns->ensure_input_columns(), 0u);
  for (const LayerColumns& lc : columns->columns) {
    EXPECT_FALSE(lc.attention());
    EXPECT_EQ(lc.attn_output.data, nullptr);
    EXPECT_EQ(lc.ffn_down.data, nullptr);
    EXPECT_TRUE(lc.ffn(true));
    EXPECT_EQ(lc.ffn_gate_up.layout, Layout::ColumnGroups);
  }
  SessionOptions o;
  o.sparsity.mode = SparsityMode::Teal;
  o.sparsity.level = 0.5f;
  const auto tokens = random_tokens(*rows, 8, 3);
  auto decode = [&](const Model& m, int threads) {
    ThreadPool own(threads);
    Session s(m, 16, own, o);
    std::vector<float> all;
    for (int32_t t : tokens) {
      const auto l = s.eval(t);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  // Row-major where there is no copy, gate/up through its columns: the row-major run within
  // rounding, the same bits for any thread count.
  const std::vector<float> mixed = decode(*columns, 2);
  EXPECT_LT(relative_difference(mixed, decode(*rows, 2)), 1e-4);
  EXPECT_EQ(decode(*columns, 1), mixed);
  EXPECT_EQ(decode(*columns, 3), mixed);
}

TEST(InputSparsity, RunsThatCannotApplyAreRefusedWithOneLine) {
  ThreadPool pool(1);
  const auto dense = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  auto refused = [&](const Model& m, SessionOptions o, const std::string& words) {
    try {
      Session s(m, 16, pool, o);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(words), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  SessionOptions teal;
  teal.sparsity.mode = SparsityMode::Teal;
  refused(*dense, teal, "carries no sparsity thresholds");
  const Calibrated c = calibrate(pool, SparsityAllocation::Uniform);
  refused(*c.model, teal, "choose one with --sparsity");  // two levels, none chosen
  teal.sparsity.level = 0.3f;
  refused(*c.model, teal, "no thresholds for sparsity 0.3 (it has 0.25, 0.5)");
  teal.sparsity.level = 0.5f;
  SessionOptions gate_first = teal;
  gate_first.ffn = FfnMode::GateFirst;
  refused(*c.model, gate_first, "use --ffn dense");
  const auto relu = Model::load(tiny_model(DType::F32, FfnActivation::ReLU), false);
  SessionOptions cats;
  cats.sparsity.mode = SparsityMode::Cats;
  refused(*relu, cats, "has none");
  EXPECT_THROW(parse_sparsity_mode("sometimes"), Error);
}

TEST(InputSparsity, CalibrationsThatDoNotMatchTheModelAreRefused) {
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  const int64_t layers = m->config.n_layer;
  const std::vector<float> teal(static_cast<size_t>(layers * kMatrixInputs), 0.1f);
  const std::vector<float> cats(static_cast<size_t>(layers), 0.1f);
  auto bad = [&](const std::string& name,
                 const std::vector<std::pair<std::string, GgufValue>>& keys,
                 const std::string& words) {
    const std::string path = with_metadata(*m, name, keys);
    try {
      Model::load(path, false);
      ADD_FAILURE() << "loaded " << name;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(words), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  const GgufValue one_level = floats({0.5f});
  bad("short.gguf",
      {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats({0.1f})},
       {kSparsityCatsKey, floats(cats)}},
      "does not match the model");
  std::vector<float> negative = teal;
  negative[3] = -1.0f;
  bad("negative.gguf",
      {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats(negative)},
       {kSparsityCatsKey, floats(cats)}},
      "thresholds are finite, >= 0");
  std::vector<float> nan = teal;
  nan[0] = std::nanf("");
  bad("nan.gguf",
      {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats(nan)},
       {kSparsityCatsKey, floats(cats)}},
      "thresholds are finite");
  bad("no_cats.gguf", {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats(teal)}},
      "is missing");
  bad("no_levels.gguf", {{kSparsityTealKey, floats(teal)}}, "without strata.sparsity.levels");
  std::vector<float> teal2 = teal, cats2 = cats;
  teal2.insert(teal2.end(), teal.begin(), teal.end());
  cats2.insert(cats2.end(), cats.begin(), cats.end());
  bad("descending.gguf",
      {{kSparsityLevelsKey, floats({0.5f, 0.4f})}, {kSparsityTealKey, floats(teal2)},
       {kSparsityCatsKey, floats(cats2)}},
      "must ascend");
  bad("text.gguf",
      {{kSparsityLevelsKey, GgufValue::str("half")}, {kSparsityTealKey, floats(teal)},
       {kSparsityCatsKey, floats(cats)}},
      "non-empty array");
  // The shares kept: optional, of the thresholds' length, each in [0, 1].
  std::vector<float> over = teal;
  over[1] = 1.5f;
  bad("kept_over.gguf",
      {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats(teal)},
       {kSparsityCatsKey, floats(cats)}, {kSparsityTealKeptKey, floats(over)}},
      "shares are at most 1");
  bad("kept_short.gguf",
      {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats(teal)},
       {kSparsityCatsKey, floats(cats)}, {kSparsityTealKeptKey, floats({0.5f})}},
      "does not match the model");
  // A good one loads (without the shares kept: files calibrated before them).
  const std::string good = with_metadata(
      *m, "good.gguf",
      {{kSparsityLevelsKey, one_level}, {kSparsityTealKey, floats(teal)},
       {kSparsityCatsKey, floats(cats)}});
  EXPECT_EQ(Model::load(good, false)->sparsity.levels, std::vector<float>{0.5f});
}

}  // namespace
}  // namespace strata
