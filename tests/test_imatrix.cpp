// Importance matrices: llama-imatrix's two formats read alike (its own files of the shipped
// model, tests/data/strata-tiny.imatrix.{gguf,dat}, written by llama.cpp v0.5.0's llama-imatrix
// over the same text), written back as it writes them, malformed files refused by name; the
// K-quants weigh their rounding by the importance; strata quantize --imatrix applies it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "core/error.h"
#include "format/imatrix_file.h"
#include "model/model.h"
#include "offline/imatrix.h"
#include "offline/quantize.h"
#include "offline/text_windows.h"
#include "tensor/quantize.h"
#include "test_helpers.h"

namespace strata {
namespace {

using testing::data_file;
using testing::temp_file;

TEST(Imatrix, LlamaImatrixFormatsReadAlike) {
  const Imatrix g = read_imatrix(data_file("strata-tiny.imatrix.gguf"));
  const Imatrix d = read_imatrix(data_file("strata-tiny.imatrix.dat"));
  EXPECT_FALSE(g.legacy);
  EXPECT_TRUE(d.legacy);
  EXPECT_EQ(g.chunk_count, 4);
  EXPECT_EQ(g.chunk_size, 128);
  ASSERT_EQ(g.datasets, std::vector<std::string>{"text.txt"});
  EXPECT_EQ(d.datasets, g.datasets);
  ASSERT_EQ(g.entries.size(), 42u);  // 6 layers x 7 matrices
  ASSERT_EQ(d.entries.size(), g.entries.size());
  for (const auto& [name, e] : g.entries) {
    const std::vector<float> a = g.importance(name), b = d.importance(name);
    ASSERT_EQ(a.size(), name.find("ffn_down") != std::string::npos ? 1024u : 256u) << name;
    ASSERT_EQ(b.size(), a.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_GT(a[i], 0.0f) << name << " " << i;
      EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << name << " " << i;
    }
  }
  EXPECT_TRUE(g.importance("blk.0.no_such.weight").empty());
}

TEST(Imatrix, WritesWhatItReadsAsGguf) {
  Imatrix m;
  m.datasets = {"a.txt", "b.txt"};
  m.chunk_count = 7, m.chunk_size = 512;
  m.entries["blk.0.ffn_up.weight"] = {{1, 2, 3, 4}, {2}};
  // A stacked mixture: two experts, the second never routed to (importance 1, as llama-quantize).
  m.entries["blk.0.ffn_up_exps.weight"] = {{4, 8, 9, 9}, {4, 0}};
  const std::string path = temp_file("written.imatrix.gguf");
  write_imatrix(path, m);
  const Imatrix r = read_imatrix(path);
  EXPECT_EQ(r.datasets, m.datasets);
  EXPECT_EQ(r.chunk_count, 7);
  EXPECT_EQ(r.importance("blk.0.ffn_up.weight"), (std::vector<float>{0.5f, 1, 1.5f, 2}));
  EXPECT_EQ(r.importance("blk.0.ffn_up_exps.weight"), (std::vector<float>{1, 2, 1, 1}));
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string i32(int32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}

TEST(Imatrix, MalformedFilesAreRefusedByName) {
  const std::string path = temp_file("bad.imatrix.dat");
  const auto refused = [&](const std::string& bytes, const std::string& what) {
    write_bytes(path, bytes);
    try {
      read_imatrix(path);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused("", "ends inside the entry count");
  refused(i32(0), "has no entries");
  refused(i32(1) + i32(-5), "name of -5 bytes");
  refused(i32(1) + i32(3) + "abc" + i32(1) + i32(1000), "ends inside values");
  refused(i32(2000000000) + i32(1) + "a" + i32(1) + i32(1) + i32(0), "ends inside");
}

// Sum over values of importance x squared error of a row's round trip.
double weighted_error(DType t, const std::vector<float>& x, const std::vector<float>& w,
                      const float* importance) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  std::vector<float> y(x.size());
  const auto n = static_cast<int64_t>(x.size());
  quantize_row(t, x.data(), q.data(), n, importance);
  dequantize_row(t, q.data(), y.data(), n);
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double{w[i]} * (y[i] - x[i]) * (y[i] - x[i]);
  return e;
}

TEST(Imatrix, KQuantsWeighTheirRoundingByImportance) {
  const int64_t n = 4096;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n), w(n), ones(n, 1.0f);
  // A few columns carry most of the input's energy, as in real models.
  for (int64_t i = 0; i < n; ++i) x[i] = g(rng), w[i] = i % 16 == 3 ? 50.0f : 0.2f;
  for (const DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(t));
    const double plain = weighted_error(t, x, w, nullptr);
    const double weighted = weighted_error(t, x, w, w.data());
    EXPECT_LT(weighted, 0.9 * plain);
    // Uniform importance is the plain quantizer, byte for byte.
    std::vector<uint8_t> a(row_bytes(t, n)), b(row_bytes(t, n));
    quantize_row(t, x.data(), a.data(), n);
    quantize_row(t, x.data(), b.data(), n, ones.data());
    EXPECT_EQ(a, b);
  }
}

// strata quantize --imatrix on the shipped model with llama-imatrix's file of it: every matrix
// the file covers is weighted (6 layers x 7; the output head and embeddings are not in it), the
// file differs from the unweighted one; an entry of the wrong width is refused naming it.
TEST(Imatrix, QuantizeWeighsTheMatricesTheFileCovers) {
  QuantizeOptions o;
  o.input = testing::source_file("models/strata-tiny.gguf");
  o.recipe = QuantRecipe::Q4_K_M;
  o.threads = 2;
  o.output = temp_file("tiny-q4km-plain.gguf");
  EXPECT_EQ(quantize_model(o).weighted, 0);
  o.output = temp_file("tiny-q4km-imatrix.gguf");
  o.imatrix = data_file("strata-tiny.imatrix.gguf");
  EXPECT_EQ(quantize_model(o).weighted, 42);
  std::ifstream a(temp_file("tiny-q4km-plain.gguf"), std::ios::binary),
      b(o.output, std::ios::binary);
  const std::string plain((std::istreambuf_iterator<char>(a)), {}),
      weighted((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(plain.size(), weighted.size());
  EXPECT_NE(plain, weighted);

  Imatrix wrong;
  wrong.entries["blk.2.attn_q.weight"] = {std::vector<float>(100, 1.0f), {1}};
  o.imatrix = temp_file("wrong.imatrix.gguf");
  write_imatrix(o.imatrix, wrong);
  try {
    quantize_model(o);
    ADD_FAILURE() << "a 100-wide entry for a 256-column matrix was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.2.attn_q.weight' has 100 values"), std::string::npos)
        << e.what();
  }
}

// The lattice mixtures as llama-quantize makes them: IQ2_M is refused without an importance
// matrix (as is a 2-bit type asked for by --tensor-type, naming the tensor), and with one every
// matrix is weighted, the file holds IQ2_S and IQ3_S matrices and a Q5_K head, and its logits
// stay near the F16 model's (cosine above 0.9 at the last of five tokens).
TEST(Imatrix, LatticeMixturesNeedAndUseAnImportanceMatrix) {
  QuantizeOptions o;
  o.input = testing::source_file("models/strata-tiny.gguf");
  o.recipe = QuantRecipe::IQ2_M;
  o.threads = 2;
  o.output = temp_file("tiny-iq2m.gguf");
  EXPECT_THROW(quantize_model(o), Error);
  QuantizeOptions manual = o;
  manual.recipe = QuantRecipe::Q8_0;
  add_tensor_type_override(manual.overrides, "ffn_up=iq2_s");
  try {
    quantize_model(manual);
    ADD_FAILURE() << "IQ2_S without an importance matrix was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.0.ffn_up.weight' as IQ2_S needs an importance"),
              std::string::npos)
        << e.what();
  }
  o.imatrix = data_file("strata-tiny.imatrix.gguf");
  EXPECT_EQ(quantize_model(o).weighted, 42);
  const auto m = Model::load(o.output);
  std::map<DType, int> types;
  for (const LayerWeights& l : m->weights.layers)
    for (const MatrixView* v : {&l.attn_q, &l.attn_v, &l.attn_output, &l.ffn_up, &l.ffn_down})
      ++types[v->type];
  EXPECT_GT(types[DType::IQ2_S], 0);
  EXPECT_GT(types[DType::IQ3_S], 0);
  EXPECT_EQ(m->weights.output.type, DType::Q5_K);
  const std::vector<float> f16 = testing::last_logits(o.input, FfnMode::Dense);
  const std::vector<float> iq = testing::last_logits(o.output, FfnMode::Dense);
  ASSERT_EQ(f16.size(), iq.size());
  double dot = 0, ff = 0, qq = 0;
  for (size_t i = 0; i < f16.size(); ++i)
    dot += double{f16[i]} * iq[i], ff += double{f16[i]} * f16[i], qq += double{iq[i]} * iq[i];
  std::printf("IQ2_M logits: cosine %.4f to F16's\n", dot / std::sqrt(ff * qq));
  EXPECT_GT(dot / std::sqrt(ff * qq), 0.9);
}

// strata imatrix against llama-imatrix on the same text, windows and model: the shipped model's
// layer-0 inputs of q/k/v, attn_output and gate/up (llama.cpp runs the model's FFN as SwiGLU, not
// its ReGLU, so ffn_down's input and every later layer differ by design), over the first 20 kB
// of the held-out text in 4 windows of 128 tokens, each from BOS, as tests/data's file was made
// (`llama-imatrix -m models/strata-tiny.gguf -f text -c 128 --chunks 4`).
TEST(Imatrix, CollectsWhatLlamaImatrixCollects) {
  auto model = Model::load(testing::source_file("models/strata-tiny.gguf"));
  std::ifstream in(testing::source_file("models/strata-tiny-heldout.txt"), std::ios::binary);
  std::string text(20000, '\0');
  in.read(text.data(), 20000);
  const std::string path = temp_file("imatrix-text.txt");
  std::ofstream(path, std::ios::binary) << text;
  ThreadPool pool(2);
  ImatrixOptions o;
  o.n_ctx = 128, o.max_tokens = 4 * 128, o.dataset = "text.txt";
  const Imatrix mine = collect_imatrix(*model, tokenize_text_file(*model, path), o, pool);
  const Imatrix llama = read_imatrix(data_file("strata-tiny.imatrix.gguf"));
  EXPECT_EQ(mine.entries.size(), llama.entries.size());  // every matrix of every layer
  EXPECT_EQ(mine.chunk_count, 4);
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                           "blk.0.ffn_up.weight"}) {
    SCOPED_TRACE(name);
    const ImatrixEntry& a = mine.entries.at(name);
    const ImatrixEntry& b = llama.entries.at(name);
    EXPECT_EQ(a.counts, b.counts);
    ASSERT_EQ(a.sums.size(), b.sums.size());
    for (size_t i = 0; i < a.sums.size(); ++i) EXPECT_NEAR(a.sums[i], b.sums[i], 1e-2 * b.sums[i]);
  }
  // Written in the legacy format and read back: the same importance.
  const std::string dat = temp_file("mine.imatrix.dat");
  write_imatrix_legacy(dat, mine);
  const Imatrix back = read_imatrix(dat);
  for (const auto& [name, e] : mine.entries) {
    const std::vector<float> x = mine.importance(name), y = back.importance(name);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5 * x[i] + 1e-30);
  }
}

}  // namespace
}  // namespace strata
