// LoRA adapters (model/lora_adapter.h, runtime/lora_products.h): the flag lists, the loader's
// checks of llama.cpp's adapter files, the products against a scalar reference, and the
// sessions that refuse them. Logits against the adapters merged into the weights:
// tools/reference/check_lora.py (ctest reference_lora).
#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/refdev/reference_device.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "planning/model_inventory.h"
#include "runtime/lora_products.h"
#include "tensor/half.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::temp_file;
using strata::testing::tiny_model;

TEST(LoraList, FilesScalesAndCommaLists) {
  auto one = parse_lora_list("a.gguf", false, "--lora");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].path, "a.gguf");
  EXPECT_EQ(one[0].scale, 1.0f);
  // A path may hold ':' (the text after the last one is a scale only when it is a number).
  auto two = parse_lora_list("a.gguf:0.5,dir:x/b.gguf", false, "--lora");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].path, "a.gguf");
  EXPECT_FLOAT_EQ(two[0].scale, 0.5f);
  EXPECT_EQ(two[1].path, "dir:x/b.gguf");
  EXPECT_EQ(two[1].scale, 1.0f);
  EXPECT_FLOAT_EQ(parse_lora_list("c.gguf:-2", true, "--lora-scaled")[0].scale, -2.0f);
  try {
    parse_lora_list("c.gguf", true, "--lora-scaled");
    FAIL() << "a scale is required";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lora-scaled 'c.gguf'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_lora_list("a.gguf,,b.gguf", false, "--lora"), Error);
  EXPECT_THROW(parse_lora_list(":1", false, "--lora"), Error);
}

struct LoraTestTensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order
  float value = 0.01f;
};

// An adapter file in convert_lora_to_gguf.py's layout; `kv` replaces its header's values.
std::string lora_write_adapter(const std::string& name, const std::vector<LoraTestTensor>& tensors,
                          const std::vector<std::pair<std::string, GgufValue>>& kv = {}) {
  const std::string path = temp_file(name);
  GgufWriter w(path);
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("general.type", GgufValue::str("adapter"));
  w.set("adapter.type", GgufValue::str("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(8.0f));
  for (const auto& [key, value] : kv) w.set(key, value);
  for (const LoraTestTensor& t : tensors) w.add_tensor(t.name, DType::F32, t.dims);
  for (const LoraTestTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    const std::vector<float> v(static_cast<size_t>(n), t.value);
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)});
  }
  w.finish();
  return path;
}

// The tiny model's q of layer 0 takes 64 inputs to 64 outputs; a rank-4 pair for it.
std::vector<LoraTestTensor> lora_q_pair(float a = 0.01f, float b = 0.02f, int64_t rank = 4) {
  return {{"blk.0.attn_q.weight.lora_a", {64, rank}, a},
          {"blk.0.attn_q.weight.lora_b", {rank, 64}, b}};
}

std::string lora_load_error(const Model& m, const std::string& path) {
  try {
    const LoraFile f{path, 1.0f};
    load_lora_adapters(std::span(&f, 1), m);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LoraAdapterFile, RefusesWhatLlamaCppRefusesAndWhatStrataDoesNotAdapt) {
  auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {lora_write_adapter("lora_type.gguf", lora_q_pair(), {{"general.type", GgufValue::str("model")}}),
       "general.type is 'model'"},
      {lora_write_adapter("lora_arch.gguf", lora_q_pair(),
                     {{"general.architecture", GgufValue::str("falcon")}}),
       "is for 'falcon', the model is 'llama'"},
      {lora_write_adapter("lora_kind.gguf", lora_q_pair(), {{"adapter.type", GgufValue::str("ia3")}}),
       "adapter.type is 'ia3'"},
      {lora_write_adapter("lora_alora.gguf", lora_q_pair(),
                     {{"adapter.alora.invocation_tokens",
                       GgufValue::array(GgufType::U32, {GgufValue::u32(5)})}}),
       "activated LoRA"},
      {lora_write_adapter("lora_half.gguf", {lora_q_pair()[0]}), "lacks its lora_b"},
      {lora_write_adapter("lora_shape.gguf", {{"blk.0.attn_q.weight.lora_a", {32, 4}},
                                         {"blk.0.attn_q.weight.lora_b", {4, 64}}}),
       "wrong base model"},
      {lora_write_adapter("lora_rank.gguf", {{"blk.0.attn_q.weight.lora_a", {64, 4}},
                                        {"blk.0.attn_q.weight.lora_b", {3, 64}}}),
       "not transposed"},
      {lora_write_adapter("lora_embd.gguf", {{"token_embd.weight.lora_a", {64, 4}},
                                        {"token_embd.weight.lora_b", {4, 256}}}),
       "token embedding"},
      {lora_write_adapter("lora_exps.gguf", {{"blk.0.ffn_up_exps.weight.lora_a", {64, 4}},
                                        {"blk.0.ffn_up_exps.weight.lora_b", {4, 64}}}),
       "mixture of experts"},
      {lora_write_adapter("lora_layer.gguf", {{"blk.9.attn_q.weight.lora_a", {64, 4}},
                                         {"blk.9.attn_q.weight.lora_b", {4, 64}}}),
       "not a matrix of a layer"},
      {lora_write_adapter("lora_other.gguf", {{"blk.0.attn_norm.weight.lora_a", {64, 4}},
                                         {"blk.0.attn_norm.weight.lora_b", {4, 64}}}),
       "does not adapt 'blk.0.attn_norm.weight'"},
      {lora_write_adapter("lora_suffix.gguf", {{"blk.0.attn_q.weight.lora_c", {64, 4}}}),
       "neither a lora_a nor a lora_b"},
      {lora_write_adapter("lora_empty.gguf", {{"blk.0.attn_norm.weight", {64}}}), "no lora_a/lora_b"},
  };
  for (const auto& [path, message] : cases)
    EXPECT_NE(lora_load_error(*m, path).find(message), std::string::npos)
        << path << ": " << lora_load_error(*m, path);
  EXPECT_NE(lora_load_error(*m, temp_file("lora_missing.gguf")), "");
}

TEST(LoraAdapterFile, AdaptersOnOneMatrixStackTheirRanksWithTheirScalesInB) {
  auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  // alpha 8: s = scale * 8 / rank. A norm vector beside the pairs is skipped, as llama.cpp does.
  auto first = lora_q_pair(0.01f, 0.02f, 4);
  first.push_back({"blk.0.attn_norm.weight", {64}, 1.0f});
  const LoraFile files[] = {{lora_write_adapter("lora_first.gguf", first), 1.0f},
                            {lora_write_adapter("lora_second.gguf", lora_q_pair(0.03f, 0.5f, 2)), 0.25f}};
  const LoraAdapters adapters = load_lora_adapters(files, *m);
  EXPECT_EQ(adapters.matrices(), 1);
  EXPECT_EQ(adapters.find(0, LayerMatrix::AttnK), nullptr);
  EXPECT_EQ(adapters.find_output(), nullptr);
  const LoraPair* q = adapters.find(0, LayerMatrix::AttnQ);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->rank, 6);
  EXPECT_EQ(q->n_in, 64);
  EXPECT_EQ(q->n_out, 64);
  ASSERT_EQ(q->type, DType::F32);  // the files' type
  const auto* a = reinterpret_cast<const float*>(q->a.data());
  const auto* b_t = reinterpret_cast<const float*>(q->b_t.data());  // B's columns
  EXPECT_FLOAT_EQ(a[0], 0.01f);
  EXPECT_FLOAT_EQ(a[4 * 64], 0.03f);  // the second adapter's first row
  for (int64_t j : {0, 63}) {
    EXPECT_FLOAT_EQ(b_t[j], 0.02f);
    EXPECT_FLOAT_EQ(b_t[4 * 64 + j], 0.5f);
  }
  EXPECT_TRUE(q->b.empty());  // only ffn_gate's and ffn_up's are read by neuron
  // s = scale * alpha / rank, on each adapter's columns.
  ASSERT_EQ(q->scale.size(), 6u);
  EXPECT_FLOAT_EQ(q->scale[0], 8.0f / 4);
  EXPECT_FLOAT_EQ(q->scale[3], 8.0f / 4);
  EXPECT_FLOAT_EQ(q->scale[4], 0.25f * 8 / 2);
  EXPECT_TRUE(q->a_t.empty());  // only ffn_down's is read by column
}

// A random pair (F32 or F16 values, a scale per column) and the scalar B (scale * (A x)).
struct LoraPairFixture {
  LoraAdapters adapters;
  std::vector<float> a, b;  // the values, as the pair holds them
  LoraPairFixture(int64_t rank, int64_t n_in, int64_t n_out, DType type) {
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.0f, 1.0f);
    LoraPair p;
    p.rank = rank, p.n_in = n_in, p.n_out = n_out, p.type = type;
    auto put = [&](std::vector<uint8_t>& bytes, std::vector<float>& values, float v) {
      const uint16_t h = f32_to_f16(v);
      values.push_back(type == DType::F16 ? f16_to_f32(h) : v);
      const auto* raw = type == DType::F16 ? reinterpret_cast<const uint8_t*>(&h)
                                           : reinterpret_cast<const uint8_t*>(&v);
      bytes.insert(bytes.end(), raw, raw + (type == DType::F16 ? 2 : 4));
    };
    for (int64_t i = 0; i < rank * n_in; ++i) put(p.a, a, d(rng));
    for (int64_t i = 0; i < n_out * rank; ++i) put(p.b, b, d(rng));
    std::vector<float> unused;
    for (int64_t i = 0; i < n_in; ++i)
      for (int64_t r = 0; r < rank; ++r) put(p.a_t, unused, a[r * n_in + i]);
    for (int64_t r = 0; r < rank; ++r)
      for (int64_t j = 0; j < n_out; ++j) put(p.b_t, unused, b[j * rank + r]);
    for (int64_t r = 0; r < rank; ++r) p.scale.push_back(r < 2 ? 0.5f : 2.0f);
    adapters.files = {"x"};
    adapters.layers.resize(1);
    adapters.layers[0][static_cast<size_t>(LayerMatrix::FfnDown)] = std::move(p);
  }
  const LoraPair& pair() const { return *adapters.find(0, LayerMatrix::FfnDown); }
  std::vector<double> product(const float* x) const {  // B (scale * (A x))
    const LoraPair& p = pair();
    std::vector<double> t(static_cast<size_t>(p.rank)), y(static_cast<size_t>(p.n_out));
    for (int64_t r = 0; r < p.rank; ++r) {
      for (int64_t i = 0; i < p.n_in; ++i) t[r] += double{a[r * p.n_in + i]} * x[i];
      t[r] *= p.scale[r];
    }
    for (int64_t j = 0; j < p.n_out; ++j)
      for (int64_t r = 0; r < p.rank; ++r) y[j] += double{b[j * p.rank + r]} * t[r];
    return y;
  }
};

std::vector<float> lora_random_rows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

class LoraProductsOfType : public ::testing::TestWithParam<DType> {};

TEST_P(LoraProductsOfType, WholeRowsListedRowsAndListedColumnsEqualTheScalarProduct) {
  const int64_t rank = 5, n_in = 70, n_out = 40, n = 3;
  LoraPairFixture f(rank, n_in, n_out, GetParam());
  ThreadPool pool(2);
  CpuBackend cpu(pool);
  LoraProducts lora(f.adapters, cpu, 8);
  const LoraPair* p = lora.find(0, LayerMatrix::FfnDown);
  ASSERT_NE(p, nullptr);
  const std::vector<float> x = lora_random_rows(n * n_in, 1);
  // Whole rows, onto y with a wider stride (its other values kept).
  const int64_t stride = n_out + 3;
  std::vector<float> y(static_cast<size_t>(n * stride), 1.0f);
  lora.add(p, x.data(), n, y.data(), stride);
  for (int64_t b = 0; b < n; ++b) {
    const auto want = f.product(x.data() + b * n_in);
    for (int64_t j = 0; j < n_out; ++j)
      EXPECT_NEAR(y[b * stride + j], 1.0 + want[j], 1e-4) << b << " " << j;
    for (int64_t j = n_out; j < stride; ++j) EXPECT_EQ(y[b * stride + j], 1.0f);
  }
  // Listed output rows (compact), where `need` asks.
  const std::vector<int32_t> ids = {2, 9, 10, 33, 39};
  const int64_t k = static_cast<int64_t>(ids.size());
  std::vector<uint8_t> need(static_cast<size_t>(n * k), 1);
  need[1] = 0;  // token 0 does not need neuron 9
  std::vector<float> rows(static_cast<size_t>(n * k), 0.0f);
  lora.add_rows(p, x.data(), n, ids, need.data(), k, rows.data());
  for (int64_t b = 0; b < n; ++b) {
    const auto want = f.product(x.data() + b * n_in);
    for (int64_t i = 0; i < k; ++i)
      EXPECT_NEAR(rows[b * k + i], need[b * k + i] ? want[ids[i]] : 0.0, 1e-4) << b << " " << i;
  }
  // Listed input columns: c over the listed inputs, the rest zero.
  const std::vector<float> c = lora_random_rows(n * k, 2);
  std::vector<float> out(static_cast<size_t>(n * n_out), 0.5f);
  lora.add_columns(p, ids, c.data(), k, n, out.data(), n_out);
  for (int64_t b = 0; b < n; ++b) {
    std::vector<float> dense(static_cast<size_t>(n_in), 0.0f);
    for (int64_t i = 0; i < k; ++i) dense[ids[i]] = c[b * k + i];
    const auto want = f.product(dense.data());
    for (int64_t j = 0; j < n_out; ++j) EXPECT_NEAR(out[b * n_out + j], 0.5 + want[j], 1e-4);
  }
  EXPECT_THROW(lora.add(p, x.data(), 9, y.data(), stride), Error);  // more rows than made for
}

INSTANTIATE_TEST_SUITE_P(Types, LoraProductsOfType, ::testing::Values(DType::F32, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(LoraProducts, SessionsRefuseAdaptersWhereTheyCannotApplyThem) {
  auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  const LoraFile f{lora_write_adapter("lora_session.gguf", lora_q_pair()), 1.0f};
  m->lora = load_lora_adapters(std::span(&f, 1), *m);
  ReferenceDevice dev;
  try {
    Session s(*m, 16, dev, {});
    FAIL() << "a device session with adapters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lora"), std::string::npos) << e.what();
  }
  // On the CPU the adapter moves the logits.
  ThreadPool pool(2);
  Session with(*m, 16, pool, {});
  const int32_t tokens[] = {1, 5, 9};
  const auto a = with.eval(tokens);
  const std::vector<float> adapted(a.begin(), a.end());
  const Inventory held = take_inventory(*m, {16, FfnMode::Dense, {DType::F32, DType::F32}});
  m->lora = {};
  Session without(*m, 16, pool, {});
  const auto b = without.eval(tokens);
  EXPECT_GT(strata::testing::relative_difference(adapted, {b.begin(), b.end()}), 1e-4);
  // Plans count the adapters and their buffers (a --ram-budget holds them too).
  const Inventory bare = take_inventory(*m, {16, FfnMode::Dense, {DType::F32, DType::F32}});
  EXPECT_GE(held.fixed_ram_bytes, bare.fixed_ram_bytes + 2 * 64 * 4 * sizeof(float));
}

}  // namespace
}  // namespace strata
