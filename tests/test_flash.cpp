// The flash tier: bundled models give exactly the logits of the same model in RAM (any cache
// size, with evictions), the neuron cache keeps its bookkeeping and contents right, and read
// failures are clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "offline/bundle.h"
#include "runtime/session.h"
#include "test_helpers.h"
#include "tiers/storage_profile.h"

namespace strata {
namespace {

using strata::testing::temp_file;

const std::vector<int32_t> kTokens = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33, 12, 77, 201};

std::string sparse_model(DType type, FfnActivation ffn) {
  return strata::testing::sparse_tiny_model(type, ffn, 9);
}

std::string bundled(const std::string& path) {
  return strata::testing::bundled_model(path);
}

std::vector<std::vector<float>> run(const Model& m, SessionOptions o, bool batched = false) {
  ThreadPool pool(2);
  Session s(m, 64, pool, o);
  std::vector<std::vector<float>> out;
  if (batched) {
    auto all = s.eval(kTokens, true);
    const size_t v = all.size() / kTokens.size();
    for (size_t i = 0; i < kTokens.size(); ++i)
      out.emplace_back(all.begin() + i * v, all.begin() + (i + 1) * v);
    return out;
  }
  for (int32_t t : kTokens) {
    auto l = s.eval(t);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

TEST(Flash, BundledModelGivesTheLogitsOfTheModelInRam) {
  for (FfnActivation ffn : {FfnActivation::ReGLU, FfnActivation::DReLU, FfnActivation::ReLU})
    for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
      const std::string path = sparse_model(type, ffn);
      const auto ram = Model::load(path, false);
      const auto flash = Model::load(bundled(path), false);
      ASSERT_TRUE(flash->weights.bundled);
      const auto expected = run(*ram, {FfnMode::Predict});
      // Every neuron cached, then caches so small that neurons are evicted every token.
      for (int64_t slots : {int64_t{0}, int64_t{160}, int64_t{110}}) {
        SessionOptions o{FfnMode::Predict};
        o.cache_neurons = slots;
        o.flash.window = 2;
        EXPECT_EQ(run(*flash, o), expected)
            << ffn_activation_name(ffn) << " " << dtype_name(type) << " slots " << slots;
      }
      SessionOptions o{FfnMode::Predict};
      EXPECT_EQ(run(*flash, o, true), run(*ram, {FfnMode::Predict}, true)) << "batched";
      // Look-ahead reads change when bundles arrive, never the values.
      o.flash.lookahead = true;
      o.cache_neurons = 110;
      EXPECT_EQ(run(*flash, o), expected) << "look-ahead";
    }
}

// Rows of 4 KiB (F32, n_embd 1024): a bundle is 12 KiB and its gate row one aligned 4 KiB
// head, so split reads apply (the tiny models' bundles are a single 4 KiB block).
TEST(Flash, SplitReadsGiveTheSameLogitsWithFewerBytes) {
  for (FfnActivation ffn : {FfnActivation::ReGLU, FfnActivation::ReLU}) {
    SynthSpec s = synth_preset("tiny");
    s.type = DType::F32;
    s.shape.ffn = ffn;
    s.shape.n_embd = 1024, s.shape.n_head = 8, s.shape.n_head_kv = 8;
    s.shape.n_ff = 384, s.shape.n_layer = 2;
    s.density = 0.15;
    s.predictor_rank = 32;
    s.seed = 5;
    const std::string path = temp_file(std::string("split_") + ffn_activation_name(ffn) + ".gguf");
    write_synthetic_model(s, path);
    const auto ram = Model::load(path, false);
    const auto flash = Model::load(bundled(path), false);
    ASSERT_GT(flash->weights.bundle.bundle_bytes, flash->weights.bundle.head_bytes());
    const auto expected = run(*ram, {FfnMode::Predict});
    auto flash_run = [&](bool split, int64_t slots, uint64_t* bytes) {
      ThreadPool pool(2);
      SessionOptions o{FfnMode::Predict};
      o.flash.split_reads = split;
      o.cache_neurons = slots;
      o.flash.window = 2;
      Session session(*flash, 64, pool, o);
      std::vector<std::vector<float>> out;
      for (int32_t t : kTokens) {
        auto l = session.eval(t);
        out.emplace_back(l.begin(), l.end());
      }
      *bytes = session.flash_stats().bytes_read;
      for (const auto& cache : session.neuron_caches())
        for (int32_t n = 0; n < s.shape.n_ff; ++n) EXPECT_FALSE(cache->is_partial(n));
      return out;
    };
    // Caches short of every neuron (300 and 120 of 384 slots), where the window makes neurons
    // leave and come back: a cache with a slot for every neuron keeps them, and a bundle read
    // whole once costs less than a head now and the rest later.
    for (int64_t slots : {int64_t{300}, int64_t{120}}) {
      uint64_t whole_bytes = 0, split_bytes = 0;
      EXPECT_EQ(flash_run(false, slots, &whole_bytes), expected);
      EXPECT_EQ(flash_run(true, slots, &split_bytes), expected)
          << ffn_activation_name(ffn) << " slots " << slots;
      // The predictor's false positives cost a 4 KiB head instead of a 12 KiB bundle.
      EXPECT_LT(split_bytes, whole_bytes) << ffn_activation_name(ffn) << " slots " << slots;
    }
  }
}

TEST(Flash, NeuronsBeyondTheCacheAreComputedInPasses) {
  // 40 slots per layer while a token needs ~50-80 neurons (and a batch far more): the layer runs
  // in several fetch-compute passes whose outputs are added, equal to RAM within rounding.
  for (DType type : {DType::F16, DType::Q4_0}) {
    const std::string path = sparse_model(type, FfnActivation::ReGLU);
    const auto ram = Model::load(path, false);
    const auto flash = Model::load(bundled(path), false);
    SessionOptions o{FfnMode::Predict};
    o.cache_neurons = 40;
    for (bool batched : {false, true}) {
      const auto a = run(*ram, {FfnMode::Predict}, batched), b = run(*flash, o, batched);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        float scale = 0;
        for (float v : a[i]) scale = std::max(scale, std::fabs(v));
        for (size_t j = 0; j < a[i].size(); ++j)
          ASSERT_NEAR(a[i][j], b[i][j], 1e-5f * scale) << dtype_name(type) << " " << batched;
      }
    }
  }
}

TEST(Flash, StorageProfileDecidesReadMerging) {
  // A disk whose throughput grows fast with the read size: joining is cheaper.
  StorageProfile fast_big;
  for (uint64_t chunk : {4096ull, 65536ull, 1048576ull})
    fast_big.points.push_back({chunk, 64, chunk == 4096 ? 1e8 : chunk == 65536 ? 1.6e9 : 2e9, 0});
  EXPECT_TRUE(fast_big.merge_cheaper(4096, 8192, 4096, 64));
  // A flat one: reading the gap only costs.
  StorageProfile flat;
  for (uint64_t chunk : {4096ull, 1048576ull}) flat.points.push_back({chunk, 64, 1e9, 0});
  EXPECT_FALSE(flat.merge_cheaper(4096, 8192, 4096, 64));
  EXPECT_TRUE(StorageProfile{}.merge_cheaper(4096, 8192, 4096, 64));  // rule: <= 16 KiB
  EXPECT_FALSE(StorageProfile{}.merge_cheaper(4096, 32768, 4096, 64));
  const std::string bad = temp_file("bad.storage.json");
  std::ofstream(bad) << "{\"path\": \"x\", \"points\": []}";
  EXPECT_THROW(StorageProfile::from_json_file(bad), Error);
  const std::string good = temp_file("good.storage.json");
  std::ofstream(good) << fast_big.to_json();
  EXPECT_EQ(StorageProfile::from_json_file(good).points.size(), 3u);

  // Merged reads (gap neurons read too and cached) change nothing in the results.
  const std::string path = sparse_model(DType::Q8_0, FfnActivation::ReGLU);
  const auto ram = Model::load(path, false);
  const auto flash = Model::load(bundled(path), false);
  SessionOptions o{FfnMode::Predict};
  o.flash.storage = &fast_big;
  o.cache_neurons = 200;
  EXPECT_EQ(run(*flash, o), run(*ram, {FfnMode::Predict}));
  ThreadPool pool(2);
  Session s(*flash, 64, pool, o);
  for (int32_t t : kTokens) s.eval(t);  // one token's neurons leave gaps (a batch's fewer)
  const NeuronCacheStats st = s.flash_stats();
  EXPECT_GT(st.bytes_read, st.misses * flash->weights.bundle.bundle_bytes);  // gaps were read
}

// Issue 29: the solver divides by a storage profile's numbers; fuzz_plan found a chunk size of
// 2e115 converted to an integer (undefined behaviour), and inf rates were accepted.
TEST(Flash, StorageProfilesWithImpossibleNumbersAreRefused) {
  const std::string ok =
      R"({"path": "d", "points": [{"chunk_bytes": 4096, "queue_depth": 8, "bytes_per_second": 1e9,
          "reads_per_second": 244140}]})";
  EXPECT_EQ(StorageProfile::from_json(ok, "ok").points.size(), 1u);
  for (
      const char* point :
      {R"({"chunk_bytes": 2e115, "queue_depth": 8, "bytes_per_second": 1e9, "reads_per_second": 1})",
       R"({"chunk_bytes": 4096, "queue_depth": -1, "bytes_per_second": 1e9, "reads_per_second": 1})",
       R"({"chunk_bytes": 4096, "queue_depth": 8, "bytes_per_second": 0, "reads_per_second": 1})",
       R"({"chunk_bytes": 0, "queue_depth": 8, "bytes_per_second": 1e9, "reads_per_second": 1})",
       R"({"chunk_bytes": 4096, "queue_depth": 8, "bytes_per_second": 1e400, "reads_per_second": 1})"}) {
    const std::string text = std::string(R"({"path": "d", "points": [)") + point + "]}";
    EXPECT_THROW(StorageProfile::from_json(text, "bad"), Error) << point;
  }
}

TEST(Flash, CacheKeepsBookkeepingAndContentsRight) {
  const std::string path = bundled(sparse_model(DType::F16, FfnActivation::ReGLU));
  const auto m = Model::load(path, false);
  const BundleLayout& bl = m->weights.bundle;
  FileBundleSource source(path);
  ThreadPool pool(2);
  NeuronCache cache(bl, 40, 2);
  const uint64_t base = m->weights.layers[1].bundles_offset;
  // Reference bundles read plainly.
  const auto file = GgufFile::open(path, LoadMode::Map);
  auto expect_resident = [&](const std::vector<int32_t>& neurons,
                             const std::vector<int32_t>& slots) {
    for (size_t k = 0; k < neurons.size(); ++k) {
      ASSERT_EQ(cache.slot_of(neurons[k]), slots[k]);
      ASSERT_EQ(std::memcmp(cache.data() + slots[k] * bl.bundle_bytes,
                            file->bytes() + base + neurons[k] * bl.bundle_bytes, bl.bundle_bytes),
                0)
          << "neuron " << neurons[k];
    }
  };
  std::vector<int32_t> slots(64);
  const std::vector<int32_t> a = {1, 2, 3, 10, 11, 50}, b = {2, 3, 4, 60}, c = {100, 101};
  cache.fetch(a, slots.data(), source, base, 0, pool);
  expect_resident(a, {slots.begin(), slots.begin() + a.size()});
  EXPECT_EQ(cache.stats().misses, 6u);
  EXPECT_EQ(cache.stats().reads, 3u);  // runs 1-3, 10-11, 50
  cache.fetch(b, slots.data(), source, base, 1, pool);
  expect_resident(b, {slots.begin(), slots.begin() + b.size()});
  EXPECT_EQ(cache.stats().hits, 2u);
  EXPECT_EQ(cache.live(), 8);
  // Token 2 with window 2: neurons last used at token 0 only (1, 10, 11, 50) expire.
  cache.fetch(c, slots.data(), source, base, 2, pool);
  expect_resident(c, {slots.begin(), slots.begin() + c.size()});
  EXPECT_EQ(cache.slot_of(1), -1);
  EXPECT_EQ(cache.slot_of(50), -1);
  EXPECT_NE(cache.slot_of(60), -1);
  EXPECT_EQ(cache.live(), 6);
  // A token needing more than the capacity is a clear error.
  std::vector<int32_t> many;
  for (int32_t i = 120; i < 170; ++i) many.push_back(i);
  EXPECT_THROW(cache.fetch(many, slots.data(), source, base, 3, pool), Error);
  // A batch of 3 tokens ending at token 4 starts at token 2: the window (2) of its first token
  // still covers what tokens 1 and 2 used.
  const std::vector<int32_t> d = {200};
  cache.fetch(d, slots.data(), source, base, 4, pool, 0, 3);
  EXPECT_NE(cache.slot_of(100), -1);
  EXPECT_NE(cache.slot_of(60), -1);
  // A single token at 5 keeps tokens 4 and 5's neurons only: tokens 1 and 2's leave.
  cache.fetch(d, slots.data(), source, base, 5, pool);
  EXPECT_EQ(cache.slot_of(100), -1);
  EXPECT_EQ(cache.slot_of(60), -1);
  EXPECT_NE(cache.slot_of(200), -1);
}

TEST(Flash, ACacheWithASlotForEveryNeuronKeepsEachInItsOwnSlot) {
  const std::string path = bundled(sparse_model(DType::F16, FfnActivation::ReGLU));
  const auto m = Model::load(path, false);
  const BundleLayout& bl = m->weights.bundle;
  FileBundleSource source(path);
  ThreadPool pool(2);
  NeuronCache cache(bl, bl.n_ff, 1);  // window 1: a short cache would forget every token
  ASSERT_TRUE(cache.holds_every_neuron());
  const uint64_t base = m->weights.layers[1].bundles_offset;
  const auto file = GgufFile::open(path, LoadMode::Map);
  std::vector<int32_t> slots(64);
  const std::vector<std::vector<int32_t>> tokens = {{7, 8, 9, 30}, {2, 40, 41}, {8, 9, 41, 60}};
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<int32_t>& need = tokens[t];
    cache.fetch(need, slots.data(), source, base, static_cast<int64_t>(t), pool);
    for (size_t k = 0; k < need.size(); ++k) {
      // Neuron n in slot n: runs land in consecutive slots, products walk the buffer in order.
      ASSERT_EQ(slots[k], need[k]);
      ASSERT_EQ(std::memcmp(cache.data() + need[k] * bl.bundle_bytes,
                            file->bytes() + base + need[k] * bl.bundle_bytes, bl.bundle_bytes),
                0)
          << "neuron " << need[k] << ", token " << t;
    }
  }
  // Nothing expired (window 1) or was evicted: every neuron read once, each run in one read.
  for (int32_t n : {7, 8, 9, 30, 2, 40, 41, 60}) EXPECT_EQ(cache.slot_of(n), n);
  EXPECT_EQ(cache.live(), 8);
  EXPECT_EQ(cache.stats().evictions, 0u);
  EXPECT_EQ(cache.stats().misses, 8u);
  EXPECT_EQ(cache.stats().hits, 3u);
  EXPECT_EQ(cache.stats().bytes_read % bl.bundle_bytes, 0u);
  EXPECT_GE(cache.stats().bytes_read, 8u * bl.bundle_bytes);  // merged reads bring gaps along
  // Every neuron at once fits; more cannot be asked for.
  std::vector<int32_t> all(static_cast<size_t>(bl.n_ff));
  for (int32_t n = 0; n < bl.n_ff; ++n) all[static_cast<size_t>(n)] = n;
  slots.resize(all.size());
  cache.fetch(all, slots.data(), source, base, 3, pool);
  EXPECT_EQ(slots, all);
  EXPECT_EQ(std::memcmp(cache.data(), file->bytes() + base, bl.n_ff * bl.bundle_bytes), 0);
  EXPECT_EQ(cache.stats().bytes_read, static_cast<uint64_t>(bl.n_ff) * bl.bundle_bytes);
}

TEST(Flash, FullCacheEvictsTheNeuronsRecentTokensUsedLeast) {
  const std::string path = bundled(sparse_model(DType::F16, FfnActivation::ReGLU));
  const auto m = Model::load(path, false);
  FileBundleSource source(path);
  ThreadPool pool(2);
  NeuronCache cache(m->weights.bundle, 6, 100);  // window longer than the test: no expiry
  const uint64_t base = m->weights.layers[0].bundles_offset;
  std::vector<int32_t> slots(8);
  // Neurons 1 and 2 are used by tokens 0-3; 7 and 8 only by token 3, 20 and 21 by token 2.
  for (int64_t t = 0; t < 3; ++t) {
    const std::vector<int32_t> need =
        t < 2 ? std::vector<int32_t>{1, 2} : std::vector<int32_t>{1, 2, 20, 21};
    cache.fetch(need, slots.data(), source, base, t, pool);
  }
  cache.fetch(std::vector<int32_t>{1, 2, 7, 8}, slots.data(), source, base, 3, pool);
  EXPECT_EQ(cache.live(), 6);
  // Token 4 needs two new neurons: 20 and 21 (used once, before 7 and 8) leave.
  cache.fetch(std::vector<int32_t>{40, 41}, slots.data(), source, base, 4, pool);
  EXPECT_EQ(cache.slot_of(20), -1);
  EXPECT_EQ(cache.slot_of(21), -1);
  for (int32_t n : {1, 2, 7, 8, 40, 41}) EXPECT_NE(cache.slot_of(n), -1) << n;
  // Two more: 7 and 8 (used once) leave, not 1 and 2 (used four times), though all four were
  // last used by token 3 (plain LRU cannot tell them apart).
  cache.fetch(std::vector<int32_t>{50, 51}, slots.data(), source, base, 5, pool);
  EXPECT_EQ(cache.slot_of(7), -1);
  EXPECT_EQ(cache.slot_of(8), -1);
  EXPECT_NE(cache.slot_of(1), -1);
  EXPECT_NE(cache.slot_of(2), -1);
}

TEST(Flash, PinnedNeuronsStayWhateverTheWindowAndPressure) {
  const std::string path = bundled(sparse_model(DType::F16, FfnActivation::ReGLU));
  const auto m = Model::load(path, false);
  const BundleLayout& bl = m->weights.bundle;
  FileBundleSource source(path);
  ThreadPool pool(2);
  NeuronCache cache(bl, 10, 1);
  const uint64_t base = m->weights.layers[0].bundles_offset;
  const auto file = GgufFile::open(path, LoadMode::Map);
  const std::vector<int32_t> hot = {5, 9, 30};
  cache.pin(hot, source, base, pool);
  EXPECT_EQ(cache.pinned(), 3);
  EXPECT_GT(cache.stats().pin_bytes, 0u);
  EXPECT_EQ(cache.stats().bytes_read, 0u);  // load-time reads are not a token's
  std::vector<int32_t> slots(16);
  // Tokens that fill the 7 free slots with other neurons, window 1: everything unpinned
  // expires or is evicted, the pinned neurons stay (and count as hits when used).
  for (int64_t t = 0; t < 6; ++t) {
    std::vector<int32_t> need = {static_cast<int32_t>(100 + 10 * t), 9};
    for (int32_t i = 0; i < 6; ++i) need.push_back(static_cast<int32_t>(150 + 7 * t + i));
    std::sort(need.begin(), need.end());
    cache.fetch(need, slots.data(), source, base, t, pool);
    for (int32_t n : hot) {
      ASSERT_TRUE(cache.is_pinned(n)) << "token " << t;
      ASSERT_EQ(std::memcmp(cache.data() + cache.slot_of(n) * bl.bundle_bytes,
                            file->bytes() + base + n * bl.bundle_bytes, bl.bundle_bytes),
                0);
    }
  }
  EXPECT_EQ(cache.stats().hits, 6u);  // neuron 9, every token
  // More unpinned neurons than the room left by the pinned ones: a clear error.
  std::vector<int32_t> many;
  for (int32_t i = 200; i < 208; ++i) many.push_back(i);
  EXPECT_THROW(cache.fetch(many, slots.data(), source, base, 7, pool), Error);
  EXPECT_THROW(cache.pin(hot, source, base, pool), Error);  // once only

  // In a session: the logits of the model in RAM, also when pinned neurons leave so little
  // room that layers run in passes.
  const auto ram = Model::load(sparse_model(DType::F16, FfnActivation::ReGLU), false);
  for (int64_t slots_per_layer : {int64_t{120}, int64_t{60}}) {
    SessionOptions o{FfnMode::Predict};
    o.cache_neurons = slots_per_layer;
    o.pinned.assign(static_cast<size_t>(m->config.n_layer), {});
    for (auto& l : o.pinned)
      for (int32_t i = 0; i < 40; ++i) l.push_back(3 * i);
    for (bool batched : {false, true}) {
      const auto a = run(*ram, {FfnMode::Predict}, batched), b = run(*m, o, batched);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        float scale = 0;
        for (float v : a[i]) scale = std::max(scale, std::fabs(v));
        for (size_t j = 0; j < a[i].size(); ++j)
          ASSERT_NEAR(a[i][j], b[i][j], 1e-5f * scale)
              << slots_per_layer << " slots, batched " << batched;
      }
    }
  }
}

// Fails every read after the first `good` ones, as an I/O error or a short read.
class FaultySource final : public BundleSource {
 public:
  FaultySource(const std::string& path, int good, bool short_read)
      : inner_(path), good_(good), short_(short_read) {}
  void read(void* dst, uint64_t bytes, uint64_t offset) override {
    if (good_-- <= 0) {
      if (short_) fail("'{}' ended at offset {} while reading neurons", describe(), offset);
      fail("reading neurons from '{}' at offset {} failed: Input/output error", describe(), offset);
    }
    inner_.read(dst, bytes, offset);
  }
  std::string describe() const override { return "faulty"; }

 private:
  FileBundleSource inner_;
  std::atomic<int> good_;  // read() is called from several I/O threads at once (TSan found it)
  bool short_;
};

TEST(Flash, ReadFailuresAreClearErrorsAndNeverWrongOutput) {
  const std::string path = bundled(sparse_model(DType::Q8_0, FfnActivation::ReGLU));
  const auto m = Model::load(path, false);
  for (bool short_read : {false, true}) {
    FaultySource source(path, 5, short_read);
    ThreadPool pool(2);
    SessionOptions o{FfnMode::Predict};
    o.source = &source;
    Session s(*m, 64, pool, o);
    try {
      for (int32_t t : kTokens) s.eval(t);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(short_read ? "ended" : "Input/output"),
                std::string::npos)
          << e.what();
    }
  }
  // The file truncated after loading: the real source reports it.
  const std::string copy = temp_file("truncated.bundle");
  std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
  const auto mc = Model::load(copy, false);
  ThreadPool pool(1);
  Session s(*mc, 64, pool, {FfnMode::Predict});
  ASSERT_EQ(::truncate(copy.c_str(), static_cast<off_t>(mc->weights.layers[0].bundles_offset)), 0);
  EXPECT_THROW(s.eval(kTokens), Error);
}

// Issue 29: a bundled F16 file whose type id was edited to BF16 (the same bundle size) loaded
// and computed garbage; the type's name, written beside its id, makes the edit an error.
TEST(Flash, EditedBundleTypeIsRefused) {
  const std::string path = bundled(sparse_model(DType::F16, FfnActivation::ReGLU));
  EXPECT_NO_THROW(Model::load(path, false));
  const auto src = GgufFile::open(path);
  const std::string edited = temp_file("edited_type.bundle");
  {
    GgufWriter w(edited, src->alignment());
    for (const auto& [k, v] : src->metadata()) w.set(k, v);
    w.set(kBundleTypeKey, GgufValue::u32(static_cast<uint32_t>(DType::BF16)));
    for (const auto& t : src->tensors()) w.add_tensor(t.name, t.type, t.dims);
    for (const auto& t : src->tensors())
      w.write_tensor_data(std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    w.finish();
  }
  try {
    Model::load(edited, false);
    FAIL() << "an edited bundle type was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("says BF16 but"), std::string::npos) << e.what();
  }
}

TEST(Flash, BundledModelsRefuseModesThatNeedTheDenseFfn) {
  const auto m = Model::load(bundled(sparse_model(DType::F32, FfnActivation::ReGLU)), false);
  ThreadPool pool(1);
  EXPECT_THROW(Session(*m, 8, pool, {FfnMode::Dense}), Error);
  EXPECT_THROW(Session(*m, 8, pool, {FfnMode::GateFirst}), Error);
  EXPECT_THROW(Session(*m, 8, pool, {FfnMode::Predict, true}), Error);
}

}  // namespace
}  // namespace strata
