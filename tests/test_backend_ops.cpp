// The products of every available backend (backends/registry.h) against the scalar reference
// (backends/reference_ops.h): matmul, gather and axpy, for every weight type and layout, with
// edge shapes: rows not a multiple of 16, one token and a 64-token batch, empty and full neuron
// lists. Tolerances are relative to the sum of |terms| of each output (what rounding can move):
// 1e-5 for float weights and for the axpy, 1e-4 for F16/BF16 products (f32 accumulation), 1e-2
// for Q8_0/Q4_0 and K-quant products, whose activations the backend quantizes to Q8_0 blocks or
// Q8_K super-blocks (the reference does not). K-quant rows are whole super-blocks (256 values).
// The layer's other ops are in test_backend_layer_ops.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend_ops_testing.h"
#include "backends/reference_ops.h"
#include "backends/registry.h"
#include "device_memory.h"
#include "tensor/half.h"

namespace strata {
namespace {

using namespace strata::testing;

TEST_P(BackendOps, MatmulEqualsTheReferenceForEveryTypeLayoutAndBatch) {
  for (auto& [name, be] : backends)
    for (const Case& c : product_cases())
      for (int64_t rows : {37, 64})
        for (int64_t n : {1, 5, 64}) {
          if (c.interleaved && rows % kInterleavedRows != 0) continue;
          const int64_t cols = row_length(c.type, 256);
          const Weights w = random_weights(c.type, rows, cols, 11, c.interleaved);
          // A layout only for the backends that ask for it (the CUDA kernels read rows).
          if (c.interleaved &&
              be->preferred_layout(w.view, WeightUse::Whole) != Layout::Interleaved16)
            continue;
          const std::vector<float> x = random_rows(n, cols, 12);
          const DeviceMatrix dw(*be, w.view);
          const OnDevice<float> dx(*be, x), dy(*be, static_cast<size_t>(n * rows), 0.0f);
          auto in = be->make_prepared(n);
          const DType readers[1] = {c.type};
          be->prepare(*in, dx.get(), cols, n, readers);
          std::vector<float> ref(static_cast<size_t>(n * rows));
          const RowsJob job{&dw.view, dy.get(), rows};
          be->matmul(std::span(&job, 1), *in);
          const std::vector<float> y = dy.read();
          reference::matmul(w.view, x.data(), n, ref.data(), rows);
          for (int64_t b = 0; b < n; ++b)
            for (int64_t r = 0; r < rows; ++r) {
              const double tol = product_tolerance(c.type, name, n, true) *
                                     magnitude(w.view, r, x.data() + b * cols) +
                                 1e-6;
              ASSERT_NEAR(y[static_cast<size_t>(b * rows + r)],
                          ref[static_cast<size_t>(b * rows + r)], tol)
                  << name << " " << dtype_name(c.type) << (c.interleaved ? " interleaved" : "")
                  << " rows " << rows << " batch " << n << " at " << b << "," << r;
            }
        }
}

// A batch of more than 8 tokens with one activation far above f16's range (65504): every
// backend's products stay finite and right (the CUDA GEMM once made its f16 inputs inf).
TEST_P(BackendOps, MatmulOfABatchWithAHugeActivationStaysRight) {
  const int64_t rows = 48, cols = 256, n = 16;
  for (auto& [name, be] : backends)
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K}) {
      const int64_t length = row_length(t, cols);
      const Weights w = random_weights(t, rows, length, 13, false);
      std::vector<float> x = random_rows(n, length, 14);
      x[static_cast<size_t>(5 * length + 7)] = 1e5f;
      const DeviceMatrix dw(*be, w.view);
      const OnDevice<float> dx(*be, x), dy(*be, static_cast<size_t>(n * rows), 0.0f);
      auto in = be->make_prepared(n);
      const DType readers[1] = {t};
      be->prepare(*in, dx.get(), length, n, readers);
      const RowsJob job{&dw.view, dy.get(), rows};
      be->matmul(std::span(&job, 1), *in);
      const std::vector<float> y = dy.read();
      std::vector<float> ref(y.size());
      reference::matmul(w.view, x.data(), n, ref.data(), rows);
      // The CPU backends round activations to 8-bit blocks for quantized weights (as
      // llama.cpp does): a block holding 1e5 keeps little of its other values, so there only
      // finiteness is theirs to meet.
      const bool rounded = !name.starts_with("cuda") && t != DType::F32 && t != DType::F16;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t r = 0; r < rows; ++r) {
          if (rounded) {
            ASSERT_TRUE(std::isfinite(y[static_cast<size_t>(b * rows + r)])) << name;
            continue;
          }
          const double tol =
              product_tolerance(t, name, n, true) * magnitude(w.view, r, x.data() + b * length) +
              1e-6;
          ASSERT_NEAR(y[static_cast<size_t>(b * rows + r)], ref[static_cast<size_t>(b * rows + r)],
                      tol)
              << name << " " << dtype_name(t) << " token " << b;
        }
    }
}

TEST_P(BackendOps, GatherEqualsTheReferenceWithEmptyPartialAndFullLists) {
  const int64_t rows = 300;
  for (auto& [name, be] : backends)
    for (DType t : kRowTypes)
      for (int64_t n : {1, 64}) {
        const int64_t cols = row_length(t, 128);
        const Weights w = random_weights(t, rows, cols, 21, false);
        const std::vector<float> x = random_rows(n, cols, 22);
        std::vector<int32_t> partial;
        for (int32_t i = 0; i < rows; i += 3) partial.push_back(i);
        std::vector<int32_t> full(static_cast<size_t>(rows));
        for (int32_t i = 0; i < rows; ++i) full[static_cast<size_t>(i)] = i;
        for (const std::vector<int32_t>& ids : {std::vector<int32_t>{}, partial, full}) {
          const int64_t stride = rows;
          std::vector<uint8_t> need(static_cast<size_t>(n * stride));
          std::mt19937 rng(5);
          for (auto& v : need) v = rng() % 4 != 0;
          const DeviceMatrix dw(*be, w.view);
          const OnDevice<float> dx(*be, x), dy(*be, static_cast<size_t>(n * stride), -1.0f);
          const OnDevice<int32_t> dids(*be, ids);
          const OnDevice<uint8_t> dneed(*be, need);
          auto in = be->make_prepared(n);
          const DType readers[1] = {t};
          be->prepare(*in, dx.get(), cols, n, readers);
          std::vector<float> ref(static_cast<size_t>(n * stride), -1.0f);
          const RowsJob job{&dw.view, dy.get(), stride};
          be->gather(std::span(&job, 1), dids.span(), *in, dneed.get(), stride);
          const std::vector<float> y = dy.read();
          reference::gather(w.view, ids, x.data(), n, need.data(), stride, ref.data(), stride);
          for (int64_t b = 0; b < n; ++b)
            for (size_t k = 0; k < ids.size(); ++k) {
              const size_t at = static_cast<size_t>(b * stride) + k;
              if (need[at] == 0) {
                ASSERT_EQ(y[at], 0.0f) << name << " skipped product not zero";
                continue;
              }
              const double tol = product_tolerance(t, name, n, false) *
                                     magnitude(w.view, ids[k], x.data() + b * cols) +
                                 1e-6;
              ASSERT_NEAR(y[at], ref[at], tol) << name << " " << dtype_name(t) << " batch " << n;
            }
        }
      }
}

TEST_P(BackendOps, AxpyEqualsTheReferenceAndIgnoresTheRestOfTheList) {
  const int64_t neurons = 700;
  for (auto& [name, be] : backends)
    for (DType t : kRowTypes)
      for (int64_t n : {1, 64}) {
        const int64_t dim = row_length(t, 96);
        const Weights wt = random_weights(t, neurons, dim, 31, false);
        std::vector<int32_t> ids;
        for (int32_t i = 0; i < neurons; i += 2) ids.push_back(i);
        const int64_t stride = neurons;
        const std::vector<float> c = random_rows(n, stride, 32, /*zeros=*/0.5);
        const DeviceMatrix dwt(*be, wt.view);
        const OnDevice<int32_t> dids(*be, ids);
        const OnDevice<float> dc(*be, c), dout(*be, static_cast<size_t>(n * dim), 0.0f);
        be->axpy(dwt.view, dids.span(), dc.get(), stride, n, dout.get(), dim, {}, neurons);
        const std::vector<float> out = dout.read();
        std::vector<float> ref(out.size());
        reference::axpy(wt.view, ids, c.data(), stride, n, ref.data(), dim);
        std::vector<std::vector<float>> rows_f32;
        for (int32_t id : ids) rows_f32.push_back(reference::weight_row(wt.view, id));
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < dim; ++i) {
            double scale = 0;
            for (size_t k = 0; k < ids.size(); ++k)
              scale += std::abs(c[static_cast<size_t>(b * stride) + k] *
                                rows_f32[k][static_cast<size_t>(i)]);
            ASSERT_NEAR(out[static_cast<size_t>(b * dim + i)],
                        ref[static_cast<size_t>(b * dim + i)], 1e-5 * scale + 1e-6)
                << name << " " << dtype_name(t);
          }
        // A token's sum depends only on its own neurons: more zero-weighted entries in the
        // list change nothing, bit for bit.
        std::vector<int32_t> more;
        std::vector<float> c_more(static_cast<size_t>(n * 2 * stride), 0.0f);
        for (int32_t i = 0; i < neurons; ++i) more.push_back(i);
        for (int64_t b = 0; b < n; ++b)
          for (size_t k = 0; k < ids.size(); ++k)
            c_more[static_cast<size_t>(b * stride) + static_cast<size_t>(ids[k])] =
                c[static_cast<size_t>(b * stride) + k];
        const OnDevice<int32_t> dmore(*be, more);
        const OnDevice<float> dc_more(*be, c_more), dout_more(*be, out.size(), 0.0f);
        be->axpy(dwt.view, dmore.span(), dc_more.get(), stride, n, dout_more.get(), dim, {},
                 neurons);
        ASSERT_EQ(dout_more.read(), out) << name << " " << dtype_name(t);
      }
}

// No terms: every token's output is 0 (written), whatever the id bound, even 0 (the CUDA axpy
// once divided by it).
TEST_P(BackendOps, AxpyOfAnEmptyListWritesZeros) {
  const int64_t dim = 96, n = 3;
  for (auto& [name, be] : backends)
    for (int64_t id_bound : {0, 300}) {
      const Weights wt = random_weights(DType::F16, 4, dim, 35, false);
      const DeviceMatrix dwt(*be, wt.view);
      const OnDevice<float> dc(*be, static_cast<size_t>(n), 1.0f),
          dout(*be, static_cast<size_t>(n * dim), -1.0f);
      be->axpy(dwt.view, {}, dc.get(), 1, n, dout.get(), dim, {}, id_bound);
      EXPECT_EQ(dout.read(), std::vector<float>(static_cast<size_t>(n * dim), 0.0f))
          << name << " id bound " << id_bound;
    }
}

// A list of two ascending runs (a neuron cache's passes) equals the reference; on the CUDA
// backends, whose partials go in bucket order, the same bits as the ascending list when each
// bucket of ids lies in one run (the CPU adds its runs' partials in list order: within rounding).
TEST_P(BackendOps, AxpyOfTwoAscendingRunsEqualsTheAscendingList) {
  const int64_t neurons = 1024, dim = 64, n = 2;
  for (auto& [name, be] : backends)
    for (DType t : {DType::F32, DType::Q4_0}) {
      const Weights wt = random_weights(t, neurons, dim, 36, false);
      std::vector<int32_t> first, second;  // buckets 0 and 2, then 1 and 3
      for (int32_t i = 0; i < neurons; i += 5) (i / 256 % 2 == 0 ? first : second).push_back(i);
      std::vector<int32_t> runs = first, sorted;
      runs.insert(runs.end(), second.begin(), second.end());
      for (int32_t i = 0; i < neurons; i += 5) sorted.push_back(i);
      const int64_t stride = static_cast<int64_t>(runs.size());
      const std::vector<float> c_runs = random_rows(n, stride, 37, 0.3);
      std::vector<float> c_sorted(c_runs.size());
      for (int64_t b = 0; b < n; ++b)
        for (size_t k = 0; k < runs.size(); ++k) {
          const size_t at = static_cast<size_t>(
              std::lower_bound(sorted.begin(), sorted.end(), runs[k]) - sorted.begin());
          c_sorted[static_cast<size_t>(b * stride) + at] =
              c_runs[static_cast<size_t>(b * stride) + k];
        }
      const DeviceMatrix dwt(*be, wt.view);
      const OnDevice<int32_t> druns(*be, runs), dsorted(*be, sorted);
      const OnDevice<float> dcr(*be, c_runs), dcs(*be, c_sorted),
          dout_runs(*be, static_cast<size_t>(n * dim), 0.0f),
          dout_sorted(*be, static_cast<size_t>(n * dim), 0.0f);
      be->axpy(dwt.view, druns.span(), dcr.get(), stride, n, dout_runs.get(), dim, {}, neurons);
      be->axpy(dwt.view, dsorted.span(), dcs.get(), stride, n, dout_sorted.get(), dim, {}, neurons);
      const std::vector<float> got = dout_runs.read(), want = dout_sorted.read();
      std::vector<float> ref(got.size());
      reference::axpy(wt.view, runs, c_runs.data(), stride, n, ref.data(), dim);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-4 * (std::abs(ref[i]) + 1)) << name << " " << dtype_name(t);
      if (name.starts_with("cuda")) {
        EXPECT_EQ(got, want) << name << " " << dtype_name(t);
      }
    }
}

// Rows that are slots of a compacted store (a VRAM store, a neuron cache) with their neuron ids
// beside them: the ids fix the order of additions, so the sum is the one over the full matrix's
// rows, bit for bit.
TEST_P(BackendOps, AxpyOverSlotsWithTheirNeuronIdsEqualsTheFullMatrix) {
  const int64_t neurons = 600, dim = 128, n = 3;
  for (auto& [name, be] : backends)
    for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0}) {
      const Weights full = random_weights(t, neurons, dim, 71, false);
      std::vector<int32_t> ids, slots;
      for (int32_t i = 1; i < neurons; i += 3) ids.push_back(i);
      // The compacted rows: slot k holds neuron ids[k].
      Weights compact = full;
      compact.bytes.assign(
          full.bytes.begin(),
          full.bytes.begin() + static_cast<long>(ids.size() * full.view.row_bytes));
      for (size_t k = 0; k < ids.size(); ++k) {
        std::copy_n(full.view.row(ids[k]), full.view.row_bytes,
                    compact.bytes.data() + k * full.view.row_bytes);
        slots.push_back(static_cast<int32_t>(k));
      }
      compact.view.data = compact.bytes.data();
      compact.view.rows = static_cast<int64_t>(ids.size());
      const std::vector<float> c = random_rows(n, static_cast<int64_t>(ids.size()), 72, 0.3);
      const DeviceMatrix dfull(*be, full.view), dcompact(*be, compact.view);
      const OnDevice<int32_t> dids(*be, ids), dslots(*be, slots);
      const OnDevice<float> dc(*be, c), da(*be, static_cast<size_t>(n * dim), 0.0f),
          db(*be, static_cast<size_t>(n * dim), 0.0f);
      const int64_t stride = static_cast<int64_t>(ids.size());
      be->axpy(dfull.view, dids.span(), dc.get(), stride, n, da.get(), dim, {}, neurons);
      be->axpy(dcompact.view, dslots.span(), dc.get(), stride, n, db.get(), dim, dids.span(),
               neurons);
      ASSERT_EQ(db.read(), da.read()) << name << " " << dtype_name(t);
    }
}

// A batch whose partial sums exceed the axpy's scratch bound (kAxpyScratchBytes) goes in
// chunks of tokens: each token's result is what it gives alone, bit for bit.
TEST_P(BackendOps, AxpyOfALargeBatchInChunksEqualsTokensAlone) {
  const int64_t neurons = 4096, dim = 4096, n = 64;
  const Weights wt = random_weights(DType::F16, neurons, dim, 61, false);
  std::vector<int32_t> ids(static_cast<size_t>(neurons));
  for (int32_t i = 0; i < neurons; ++i) ids[static_cast<size_t>(i)] = i;
  const std::vector<float> c = random_rows(n, neurons, 62, /*zeros=*/0.5);
  for (auto& [name, be] : backends) {
    const DeviceMatrix dwt(*be, wt.view);
    const OnDevice<int32_t> dids(*be, ids);
    const OnDevice<float> dc(*be, c), dbatch(*be, static_cast<size_t>(n * dim), 0.0f),
        dalone(*be, static_cast<size_t>(dim), 0.0f);
    be->axpy(dwt.view, dids.span(), dc.get(), neurons, n, dbatch.get(), dim, {}, neurons);
    const std::vector<float> batch = dbatch.read();
    for (int64_t b = 0; b < n; ++b) {
      be->axpy(dwt.view, dids.span(), dc.get() + b * neurons, neurons, 1, dalone.get(), dim, {},
               neurons);
      const std::vector<float> alone = dalone.read();
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + b * dim))
          << name << " token " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Every, BackendOps, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace strata
