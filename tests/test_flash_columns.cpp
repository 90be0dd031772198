// The flash tier's column bundles (strata bundle --columns, TEAL input sparsity from flash):
// decode from the bundles gives the bits of the same model's column copies in RAM, caches
// smaller than the columns compute in passes within rounding and read more, a dense FFN and
// prompts come from the same bundles, read failures are clear errors, the RAM budget sizes the
// caches and holds, and what column bundles cannot hold is refused with one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>

#include "core/anonymous_memory.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/column_group_copy.h"
#include "offline/column_bundle.h"
#include "offline/sparsify.h"
#include "offline/synth.h"
#include "placement/column_cache.h"
#include "placement/cost_model.h"
#include "planning/planned_session.h"
#include "tensor/quantize.h"
#include "test_helpers.h"
#include "tiers/flash_column_store.h"

namespace strata {
namespace {

using testing::kquant_tiny_model;
using testing::random_tokens;
using testing::relative_difference;
using testing::temp_file;
using testing::tiny_model;

// The tiny Q8_0 SwiGLU model with one tensor re-quantized to Q4_0 (written once per tensor).
std::string q8_with_q4_0(const std::string& tensor) {
  const std::string path = temp_file("columns_q8_with_q4_0_" + tensor + ".gguf");
  if (std::filesystem::exists(path)) return path;
  const auto q8 = GgufFile::open(tiny_model(DType::Q8_0, FfnActivation::SwiGLU));
  GgufWriter w(path, q8->alignment());
  for (const auto& [k, v] : q8->metadata()) w.set(k, v);
  std::vector<uint8_t> q4;
  for (const auto& t : q8->tensors()) {
    if (t.name != tensor) {
      w.add_tensor(t.name, t.type, t.dims);
      continue;
    }
    std::vector<float> values(static_cast<size_t>(t.dims[0] * t.dims[1]));
    dequantize_row(t.type, t.data, values.data(), static_cast<int64_t>(values.size()));
    q4.resize(row_bytes(DType::Q4_0, values.size()));
    quantize_row(DType::Q4_0, values.data(), q4.data(), static_cast<int64_t>(values.size()));
    w.add_tensor(t.name, DType::Q4_0, t.dims);
  }
  for (const auto& t : q8->tensors())
    w.write_tensor_data(t.name == tensor ? std::span<const uint8_t>(q4)
                                         : std::span<const uint8_t>(t.data, t.n_bytes));
  w.finish();
  return path;
}

// A SwiGLU model calibrated at 50% (written once per name), and its column-bundled copy.
struct Files {
  std::string ram, columns;
};
Files calibrated(const std::string& dense_path, const std::string& name) {
  const std::string ram = temp_file("columns_" + name + ".gguf");
  const std::string columns = temp_file("columns_" + name + ".cb.gguf");
  if (!std::filesystem::exists(columns)) {
    const auto dense = Model::load(dense_path, false);
    ThreadPool pool(2);
    SparsifyOptions o;
    o.levels = {0.5f};
    o.n_ctx = 48;
    o.max_tokens = 96;
    o.allocation = SparsityAllocation::Uniform;
    const SparsifyResult r = calibrate_sparsity(*dense, random_tokens(*dense, 200, 3), o, pool);
    write_model_with_thresholds(*dense, r.thresholds, ram);
    write_column_bundled_model(*Model::load(ram, false), columns);
  }
  return {ram, columns};
}

// The tiny SwiGLU model of `type` (K-quants: 256 inputs and 512 neurons, whole super-blocks
// both ways), calibrated and column-bundled.
Files calibrated(DType type) {
  const std::string dense =
      is_kquant(type) ? kquant_tiny_model(type) : tiny_model(type, FfnActivation::SwiGLU);
  return calibrated(dense, dtype_name(type));
}

SessionOptions teal(double share = 1.0) {
  SessionOptions o;
  o.sparsity.mode = SparsityMode::Teal;
  o.sparsity.level = 0.5f;
  o.column_share = share;
  o.flash.window = 2;
  return o;
}

// Logits of a 12-token prompt in one batch, then 14 tokens decoded one at a time.
std::vector<float> run_columns(const Model& m, SessionOptions o, int threads = 2, bool prompt = true,
                       NeuronCacheStats* flash = nullptr) {
  ThreadPool pool(threads);
  Session s(m, 64, pool, o);
  const auto tokens = random_tokens(m, 26, 11);
  std::vector<float> all;
  size_t i = 0;
  if (prompt) {
    const auto l = s.eval(std::span(tokens).first(12), true);
    all.assign(l.begin(), l.end());
    i = 12;
  }
  for (; i < tokens.size(); ++i) {
    const auto l = s.eval(tokens[i]);
    all.insert(all.end(), l.begin(), l.end());
  }
  if (flash != nullptr) *flash = s.flash_stats();
  return all;
}

TEST(FlashColumns, BundlesHoldEachInputsGateAndUpColumnsAndEachNeuronsDownColumn) {
  const Files f = calibrated(DType::F16);
  const auto ram = Model::load(f.ram, false);
  const auto cb = Model::load(f.columns, false);
  ASSERT_TRUE(cb->weights.column_bundled);
  const ColumnBundleLayout& b = cb->weights.layers[0].column_bundle;
  const ModelConfig& c = ram->config;
  EXPECT_EQ(b.gate_up_bytes % kBundleAlign, 0u);
  EXPECT_EQ(b.down_bytes % kBundleAlign, 0u);
  EXPECT_EQ(cb->weights.layers[1].ffn_up.data, nullptr);  // the FFN lives on flash
  // Read back bundles of the last layer and compare with the RAM model's matrices.
  const LayerWeights& lr = ram->weights.layers.back();
  const LayerWeights& lc = cb->weights.layers.back();
  FileBundleSource source(f.columns);
  AnonymousMemory bundle(b.gate_up_bytes);  // page-aligned: the source reads with O_DIRECT
  std::vector<float> values(static_cast<size_t>(2 * c.n_ff)), row(static_cast<size_t>(c.n_embd));
  for (int64_t j : {int64_t{0}, c.n_embd / 2, c.n_embd - 1}) {
    source.read(bundle.data(), b.gate_up_bytes, lc.gate_up_columns_offset + j * b.gate_up_bytes);
    dequantize_row(b.type, bundle.data(), values.data(), 2 * c.n_ff);
    for (int64_t i : {int64_t{0}, c.n_ff - 1}) {
      dequantize_row(lr.ffn_gate.type, lr.ffn_gate.row(i), row.data(), c.n_embd);
      EXPECT_EQ(values[static_cast<size_t>(i)], row[static_cast<size_t>(j)]);
      dequantize_row(lr.ffn_up.type, lr.ffn_up.row(i), row.data(), c.n_embd);
      EXPECT_EQ(values[static_cast<size_t>(c.n_ff + i)], row[static_cast<size_t>(j)]);
    }
  }
  std::vector<float> down(static_cast<size_t>(c.n_ff));
  for (int64_t i : {int64_t{0}, c.n_ff - 1}) {
    source.read(bundle.data(), b.down_bytes, lc.down_columns_offset + i * b.down_bytes);
    dequantize_row(b.type, bundle.data(), row.data(), c.n_embd);
    for (int64_t r : {int64_t{0}, c.n_embd - 1}) {
      dequantize_row(lr.ffn_down.type, lr.ffn_down.row(r), down.data(), c.n_ff);
      EXPECT_EQ(row[static_cast<size_t>(r)], down[static_cast<size_t>(i)]);
    }
  }
}

// Decode (one token a batch) with every column cached: the products sum the same columns in
// the same order as the RAM model's column copies, so the logits are the same bits.
TEST(FlashColumns, DecodeFromBundlesIsTheColumnCopiesBitForBit) {
  for (DType type : {DType::F32, DType::F16}) {
    const Files f = calibrated(type);
    auto ram = Model::load(f.ram, false);
    auto cb = Model::load(f.columns, false);
    ram->ensure_input_columns();
    cb->ensure_input_columns();  // the attention's copies (its FFN has none: it is on flash)
    ASSERT_EQ(cb->columns[0].ffn_gate_up.data, nullptr);
    NeuronCacheStats stats;
    const auto expected = run_columns(*ram, teal(), 2, false);
    EXPECT_EQ(run_columns(*cb, teal(), 2, false, &stats), expected) << dtype_name(type);
    EXPECT_GT(stats.bytes_read, 0u);
    EXPECT_EQ(run_columns(*cb, teal(), 1, false), expected) << dtype_name(type) << " 1 thread";
    EXPECT_EQ(run_columns(*cb, teal(), 3, false), expected) << dtype_name(type) << " 3 threads";
  }
}

// Quantized FFNs: input j's bundle is input j's row of the RAM model's column-group copy (gate/up
// stacked), the copies' scales stay in RAM as their planes; decode from the bundles with every
// column cached is the RAM copies' bits. Caches of a fraction compute in passes, within the
// input's quantization of one pass (a group's inputs split between passes are quantized apart).
TEST(FlashColumns, QuantizedBundlesAreTheColumnGroupCopiesBitForBit) {
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                     DType::Q6_K}) {
    const Files f = calibrated(type);
    auto ram = Model::load(f.ram, false);
    auto cb = Model::load(f.columns, false);
    ASSERT_TRUE(cb->weights.column_bundled) << dtype_name(type);
    const ColumnBundleLayout& b = cb->weights.layers.back().column_bundle;
    EXPECT_EQ(b.type, type);
    EXPECT_EQ(b.down_type, type);
    ram->ensure_input_columns();
    cb->ensure_input_columns();
    const LayerColumns& copies = ram->columns.back();
    const LayerWeights& lc = cb->weights.layers.back();
    ASSERT_EQ(copies.ffn_gate_up.layout, Layout::ColumnGroups);
    ASSERT_EQ(copies.ffn_down.layout, Layout::ColumnGroups);
    FileBundleSource source(f.columns);
    AnonymousMemory bundle(b.gate_up_bytes);
    const ModelConfig& c = ram->config;
    for (int64_t j : {int64_t{0}, c.n_embd / 2 + 1, c.n_embd - 1}) {
      source.read(bundle.data(), b.gate_up_bytes, lc.gate_up_columns_offset + j * b.gate_up_bytes);
      EXPECT_EQ(std::memcmp(bundle.data(), column_group_input_row(copies.ffn_gate_up, j),
                            2 * b.column_bytes),
                0)
          << dtype_name(type) << " input " << j;
    }
    for (int64_t i : {int64_t{0}, c.n_ff - 1}) {
      source.read(bundle.data(), b.down_bytes, lc.down_columns_offset + i * b.down_bytes);
      EXPECT_EQ(
          std::memcmp(bundle.data(), column_group_input_row(copies.ffn_down, i), b.down_row_bytes),
          0)
          << dtype_name(type) << " neuron " << i;
    }
    for (const auto& [copy, plane, bytes] :
         {std::tuple{&copies.ffn_gate_up, lc.gate_up_column_scales, b.gate_up_plane_bytes},
          std::tuple{&copies.ffn_down, lc.down_column_scales, b.down_plane_bytes}}) {
      std::vector<uint8_t> expected(bytes);
      write_scale_plane(*copy, expected.data());
      ASSERT_NE(plane, nullptr);
      EXPECT_EQ(std::memcmp(plane, expected.data(), bytes), 0) << dtype_name(type);
    }
    NeuronCacheStats whole, small;
    const auto expected = run_columns(*ram, teal(), 2, false);
    EXPECT_EQ(run_columns(*cb, teal(), 2, false, &whole), expected) << dtype_name(type);
    EXPECT_EQ(run_columns(*cb, teal(), 1, false), expected) << dtype_name(type) << " 1 thread";
    EXPECT_EQ(run_columns(*cb, teal(), 3, false), expected) << dtype_name(type) << " 3 threads";
    const auto passes = run_columns(*cb, teal(0.01), 2, false, &small);
    EXPECT_LT(relative_difference(expected, passes), 1e-4) << dtype_name(type);
    EXPECT_GT(small.bytes_read, whole.bytes_read) << dtype_name(type);
    // A prompt's batch reads its union of columns from the same bundles.
    EXPECT_LT(relative_difference(run_columns(*ram, teal()), run_columns(*cb, teal())), 1e-4) << dtype_name(type);
  }
}

// A layer's down of another type than its gate/up (llama.cpp's _M mixtures give some layers'
// ffn_down Q6_K): each layer has its own layout, and decode is still the RAM copies' bits.
TEST(FlashColumns, ALayersDownMayHaveItsOwnType) {
  const Files f = calibrated(q8_with_q4_0("blk.1.ffn_down.weight"), "q8_down1_q4_0");
  auto ram = Model::load(f.ram, false);
  auto cb = Model::load(f.columns, false);
  const ColumnBundleLayout& l0 = cb->weights.layers[0].column_bundle;
  const ColumnBundleLayout& l1 = cb->weights.layers[1].column_bundle;
  EXPECT_EQ(l0.type, DType::Q8_0);
  EXPECT_EQ(l0.down_type, DType::Q8_0);
  EXPECT_EQ(l1.type, DType::Q8_0);
  EXPECT_EQ(l1.down_type, DType::Q4_0);
  EXPECT_LT(l1.down_row_bytes, l0.down_row_bytes);
  ram->ensure_input_columns();
  cb->ensure_input_columns();
  EXPECT_EQ(ram->columns[1].ffn_down.type, DType::Q4_0);
  EXPECT_EQ(run_columns(*cb, teal(), 2, false), run_columns(*ram, teal(), 2, false));
  // The per-layer types are recorded; a list of the wrong length is refused.
  const auto src = GgufFile::open(f.columns);
  const std::string cut = temp_file("columns_types_cut.gguf");
  {
    GgufWriter w(cut, src->alignment());
    for (const auto& [k, v] : src->metadata()) w.set(k, v);
    w.set(kColumnBundleTypesKey,
          GgufValue::array(GgufType::U32, {GgufValue::u32(static_cast<uint32_t>(DType::Q8_0))}));
    for (const auto& t : src->tensors()) w.add_tensor(t.name, t.type, t.dims);
    for (const auto& t : src->tensors()) w.write_tensor_data({t.data, t.n_bytes});
    w.finish();
  }
  try {
    Model::load(cut, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two type ids per layer"), std::string::npos) << e.what();
  }
}

// Caches of a fraction of the columns: a product of more columns than a cache holds runs in
// passes (their sums added), within rounding of one pass, reading more from flash; prompts (a
// batch's union of columns) come from the bundles too; sparsity off is the dense FFN.
TEST(FlashColumns, SmallCachesComputeInPassesAndPromptsAndDenseComeFromTheSameBundles) {
  const Files f = calibrated(DType::F32);
  const auto ram = Model::load(f.ram, false);
  const auto cb = Model::load(f.columns, false);
  // The tiny model: 64 inputs, 192 neurons; at 1% a cache holds the 64-column minimum, so the
  // down products of more than 64 activations run in passes.
  ASSERT_EQ(FlashColumnStore::capacity_for(cb->config.n_ff, 0.01), 64);
  EXPECT_EQ(FlashColumnStore::capacity_for(512, 0.01, 256), 256);  // a pass holds a unit
  NeuronCacheStats whole, small;
  const auto one_pass = run_columns(*cb, teal(1.0), 2, true, &whole);
  const auto passes = run_columns(*cb, teal(0.01), 2, true, &small);
  EXPECT_LT(relative_difference(one_pass, passes), 1e-5);
  EXPECT_GT(small.bytes_read, whole.bytes_read);
  // Against the thresholded row-major products of the RAM model (prompt and decode).
  EXPECT_LT(relative_difference(run_columns(*ram, teal()), one_pass), 1e-4);
  // Sparsity off: every non-zero input's column, the dense model within rounding.
  SessionOptions off = teal(0.01);
  off.sparsity.mode = SparsityMode::Off;
  NeuronCacheStats dense;
  EXPECT_LT(relative_difference(run_columns(*ram, {}), run_columns(*cb, off, 2, true, &dense)), 1e-4);
  // Every token wants every column: the gate/up cache (64 of 64) always hits; the down cache
  // (64 of 192 columns) hits the 64 the last token left, because the passes take the columns
  // held first (in id order, each pass would evict what the next token wants first: no hits).
  const double hit_rate = static_cast<double>(dense.hits) / static_cast<double>(dense.hits + dense.misses);
  EXPECT_GT(hit_rate, 0.45) << hit_rate;
  // CATS: the gate thresholded, its zeros' down columns never read.
  SessionOptions cats = teal();
  cats.sparsity.mode = SparsityMode::Cats;
  EXPECT_LT(relative_difference(run_columns(*ram, cats), run_columns(*cb, cats)), 1e-4);
}

// Fails every read after the first `good` ones.
class FaultyColumnSource final : public BundleSource {
 public:
  FaultyColumnSource(const std::string& path, int good) : inner_(path), good_(good) {}
  void read(void* dst, uint64_t bytes, uint64_t offset) override {
    if (good_-- <= 0)
      fail("reading bundles from '{}' at offset {} failed: Input/output error", describe(),
           offset);
    inner_.read(dst, bytes, offset);
  }
  std::string describe() const override { return "faulty"; }

 private:
  FileBundleSource inner_;
  std::atomic<int> good_;
};

TEST(FlashColumns, ReadFailuresAreClearErrors) {
  const Files f = calibrated(DType::F32);
  const auto cb = Model::load(f.columns, false);
  FaultyColumnSource source(f.columns, 3);
  SessionOptions o = teal();
  o.source = &source;
  try {
    run_columns(*cb, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Input/output error"), std::string::npos) << e.what();
  }
  // The file truncated after loading.
  const std::string copy = temp_file("columns_truncated.gguf");
  std::filesystem::copy_file(f.columns, copy, std::filesystem::copy_options::overwrite_existing);
  const auto mc = Model::load(copy, false);
  ThreadPool pool(1);
  Session s(*mc, 64, pool, teal());
  ASSERT_EQ(::truncate(copy.c_str(),
                       static_cast<off_t>(mc->weights.layers[0].gate_up_columns_offset)),
            0);
  EXPECT_THROW(s.eval(random_tokens(*mc, 4, 1)), Error);
}

TEST(FlashColumns, WhatColumnBundlesCannotHoldIsRefusedWithOneLine) {
  auto expect_error = [](auto&& what, const std::string& text) {
    try {
      what();
      ADD_FAILURE() << "no error, expected: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  // A layer's gate and up of two types (its copy stacks them).
  const auto mixed = Model::load(q8_with_q4_0("blk.1.ffn_gate.weight"), false);
  expect_error([&] { write_column_bundled_model(*mixed, temp_file("mixed.cb.gguf")); },
               "has Q4_0 gate and Q8_0 up weights in one layer");
  // A shape the copies do not fit: 96 inputs (down's outputs not whole chunks of 64).
  SynthSpec odd = synth_preset("tiny");
  odd.type = DType::Q8_0;
  odd.shape.ffn = FfnActivation::SwiGLU;
  odd.shape.n_embd = 96, odd.shape.n_head = 3, odd.shape.n_head_kv = 3, odd.shape.n_ff = 256;
  const std::string odd_path = temp_file("columns_odd_shape.gguf");
  write_synthetic_model(odd, odd_path);
  expect_error(
      [&] { write_column_bundled_model(*Model::load(odd_path, false), temp_file("odd.cb.gguf")); },
      "in whole chunks of the types' column groups");
  const Files f = calibrated(DType::F16);
  const auto cb = Model::load(f.columns, false);
  expect_error([&] { write_column_bundled_model(*cb, temp_file("twice.cb.gguf")); },
               "already bundled");
  ThreadPool pool(1);
  expect_error([&] { Session(*cb, 8, pool, {FfnMode::Predict}); }, "column-bundled");
  // The type id edited (F16 read as BF16: the same bytes per column) or a tensor missing.
  const auto src = GgufFile::open(f.columns);
  auto rewrite = [&](const std::string& name, auto&& edit, const std::string& drop) {
    const std::string path = temp_file(name);
    GgufWriter w(path, src->alignment());
    for (const auto& [k, v] : src->metadata()) w.set(k, v);
    edit(w);
    for (const auto& t : src->tensors())
      if (t.name != drop) w.add_tensor(t.name, t.type, t.dims);
    for (const auto& t : src->tensors())
      if (t.name != drop) w.write_tensor_data({t.data, t.n_bytes});
    w.finish();
    return path;
  };
  const std::string edited = rewrite(
      "columns_bf16.gguf",
      [](GgufWriter& w) { w.set(kBundleTypeKey, GgufValue::u32(static_cast<uint32_t>(DType::BF16))); },
      "");
  expect_error([&] { Model::load(edited, false); }, "says BF16 but");
  const std::string missing =
      rewrite("columns_missing.gguf", [](GgufWriter&) {}, "blk.1.ffn_down_columns");
  expect_error([&] { Model::load(missing, false); }, "lacks the tensor 'blk.1.ffn_down_columns'");
  const std::string kind = rewrite(
      "columns_kind.gguf",
      [](GgufWriter& w) { w.set(kColumnBundleKindKey, GgufValue::str("rows")); }, "");
  expect_error([&] { Model::load(kind, false); }, "is not 'columns'");
}

TEST(FlashColumns, CachesTakeTheLargestShareTheRoomHolds) {
  const ColumnBundleLayout l = ColumnBundleLayout::make(DType::F16, 4096, 11008, true);
  const std::vector<ColumnBundleLayout> layers(32, l);
  const uint64_t whole = FlashColumnStore::bytes(layers, 1.0);
  EXPECT_EQ(plan_column_caches(0, false, layers).share, 1.0);
  EXPECT_EQ(plan_column_caches(whole, true, layers).bytes, whole);
  for (double part : {0.3, 0.5, 0.9}) {
    const uint64_t room = static_cast<uint64_t>(part * static_cast<double>(whole));
    const ColumnCachePlan p = plan_column_caches(room, true, layers);
    EXPECT_LE(p.bytes, room);
    EXPECT_EQ(p.bytes, FlashColumnStore::bytes(layers, p.share));
    EXPECT_GT(FlashColumnStore::bytes(layers, p.share + 2e-4), room) << part;
    EXPECT_NEAR(p.share, part, 0.01);
  }
  EXPECT_THROW(plan_column_caches(1 << 20, true, layers), Error);
  // Bytes from flash: what the caches miss of the columns a token wants (a cache holds at
  // least 64 columns whatever the share), layer by layer.
  const double gu = static_cast<double>(l.gate_up_layer_bytes());
  const double down = static_cast<double>(l.down_layer_bytes());
  const std::vector<ColumnDensity> dense(32);
  EXPECT_DOUBLE_EQ(column_flash_bytes_per_token(layers, 0.0, dense),
                   32 * (gu * (1 - 64.0 / 4096) + down * (1 - 64.0 / 11008)));
  EXPECT_DOUBLE_EQ(column_flash_bytes_per_token(layers, 1.0, dense), 0.0);
  const std::vector<ColumnDensity> half(32, {0.5, 0.5});
  EXPECT_NEAR(column_flash_bytes_per_token(layers, 0.5, half), 32 * (gu + down) / 4,
              32 * (gu + down) * 1e-3);
  std::vector<ColumnDensity> mixed(2, {0.5, 0.0});
  mixed[1] = {0.0, 0.25};
  EXPECT_DOUBLE_EQ(column_flash_bytes_per_token(std::span(layers).first(2), 0.0, mixed),
                   gu / 2 * (1 - 64.0 / 4096) + down / 4 * (1 - 64.0 / 11008));
  EXPECT_THROW(column_flash_bytes_per_token(layers, 0.0, mixed), Error);  // 32 layouts, 2 layers
  // Quantized layers: a pass holds at least a quantization unit (K-quants: 256 inputs), and a
  // layer's down of another type has its own bundles.
  const std::vector<ColumnBundleLayout> q4km = {
      ColumnBundleLayout::make(DType::Q4_K, DType::Q6_K, 4096, 11008, true),
      ColumnBundleLayout::make(DType::Q4_K, DType::Q4_K, 4096, 11008, true)};
  EXPECT_EQ(q4km[0].down_row_bytes, 4096u / 64 * 48);
  EXPECT_EQ(q4km[1].down_row_bytes, 4096u / 64 * 32);
  EXPECT_GT(q4km[0].down_plane_bytes, 0u);
  const std::vector<ColumnDensity> two(2);
  EXPECT_DOUBLE_EQ(column_flash_bytes_per_token(q4km, 0.0, two),
                   2 * static_cast<double>(q4km[0].gate_up_layer_bytes()) * (1 - 256.0 / 4096) +
                       (static_cast<double>(q4km[0].down_layer_bytes()) +
                        static_cast<double>(q4km[1].down_layer_bytes())) *
                           (1 - 256.0 / 11008));
}

// A run under --ram-budget: the plan gives the caches what the rest leaves, the session holds
// that share, and the plan's RAM stays within the budget.
TEST(FlashColumns, TheRamBudgetSizesTheCachesAndHolds) {
  const Files f = calibrated(DType::F32);
  auto cb = Model::load(f.columns, false);
  RunRequest r;
  r.n_ctx = 64;
  r.sparsity.mode = SparsityMode::Teal;
  r.sparsity.level = 0.5f;
  const PlannedRun free_run = make_plan(*cb, r);
  EXPECT_EQ(free_run.session.column_share, 1.0);
  const uint64_t caches = free_run.plan.column_cache_bytes;
  ASSERT_GT(caches, 0u);
  // A budget whose usable part leaves room for about half the caches.
  uint64_t budget = free_run.plan.predicted.ram_bytes;
  while (usable_ram(budget) < free_run.plan.predicted.ram_bytes - caches / 2) budget += 4096;
  r.budgets.ram = budget;
  PlannedRun tight = plan_run(*cb, r);
  EXPECT_LT(tight.session.column_share, 1.0);
  EXPECT_GT(tight.session.column_share, 0.2);
  EXPECT_LE(tight.plan.predicted.ram_bytes, usable_ram(budget));
  // The run under that plan: the bytes it reads a token against the plan's prediction.
  ThreadPool pool(2);
  Session s(*cb, 64, pool, tight.session);
  const auto tokens = random_tokens(*cb, 40, 5);
  s.eval(std::span(tokens).first(8));
  const NeuronCacheStats before = s.flash_stats();
  for (size_t i = 8; i < tokens.size(); ++i) s.eval(tokens[i]);
  const double read = static_cast<double>(s.flash_stats().bytes_read - before.bytes_read) / 32;
  const double predicted = tight.plan.predicted.flash_bytes_per_token;
  EXPECT_NEAR(read / predicted, 1.0, 0.25) << read << " read, " << predicted << " predicted";
  r.budgets.ram = free_run.plan.predicted.ram_bytes - caches;  // nothing left for caches
  EXPECT_THROW(make_plan(*cb, r), Error);
}

}  // namespace
}  // namespace strata
