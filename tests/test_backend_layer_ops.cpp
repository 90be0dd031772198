// The layer's ops other than the products on every available backend against the scalar
// reference: RMSNorm, RoPE with the KV append, attention over a cache of sequences, the
// activations, neuron selection and the elementwise ops; memory and the timeline; and the
// reference device's GPU rules. The suite is instantiated in test_backend_ops.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend_ops_testing.h"
#include "backends/refdev/reference_device.h"
#include "backends/reference_ops.h"
#include "core/error.h"
#include "device_memory.h"
#include "tensor/block_quant_math.h"
#include "tensor/half.h"

namespace strata {
namespace {

using namespace strata::testing;

// A batch's places in a cache of sequences (TokenPlaces): one sequence at `first`, or (mixed)
// tokens alternating between two sequences whose ranges start at rows 0 and n_ctx, each at its
// own `first` (3 and 9), in position order.
struct BatchPlaces {
  std::vector<int64_t> pos, base;
  TokenPlaces view() const { return {pos.data(), base.data()}; }
};

BatchPlaces batch_places(int64_t n, int64_t first, bool mixed, int64_t n_ctx) {
  BatchPlaces p;
  for (int64_t b = 0; b < n; ++b) {
    const bool second = mixed && b % 2 == 1;
    p.pos.push_back(mixed ? (second ? 9 : 3) + b / 2 : first + b);
    p.base.push_back(second ? n_ctx : 0);
  }
  return p;
}

// Element i of a KV cache of `type` (F32, F16, or Q8_0/Q4_0 blocks).
float kv_element(DType type, const std::vector<uint8_t>& cache, int64_t i) {
  if (type == DType::F32) return reinterpret_cast<const float*>(cache.data())[i];
  if (type == DType::F16) return f16_to_f32(reinterpret_cast<const uint16_t*>(cache.data())[i]);
  return block_value(type, cache.data(), i);
}

// How far two stores of one key may be apart: a rotation differing in its last bit rounds to
// the neighbouring F16 value, or (blocks) to the neighbouring step of the block's scale.
double kv_key_slack(DType type, const std::vector<uint8_t>& cache, int64_t i, float value) {
  if (type == DType::F32 || type == DType::F16) return 1e-3 * std::abs(value) + 1e-6;
  const uint64_t block_bytes = type == DType::Q8_0 ? 34 : 18;
  return 1.001 * std::abs(block_scale(cache.data() + (i / kQK) * block_bytes)) + 1e-6;
}

TEST_P(BackendOps, NormRopeKvAndAttentionEqualTheReference) {
  const HeadShape s{8, 2, 32};
  const int64_t n_ctx = 70, half = 8, prior_rows = 2 * n_ctx;
  struct Case {
    int64_t n, first;
    bool mixed;
  };
  for (auto& [name, be] : backends)
    for (DType kv_type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0})
      // Cache rows as wide as the heads, and wider (a cache laid out for more than the batch's
      // rows hold: the rows of k and v are the heads' width, the cache's its own).
      for (const int64_t row : {s.kv_dim(), s.kv_dim() + 32})
        for (const Case& cs_ :
             {Case{1, 5, false}, Case{64, 3, false}, Case{64, 0, true}, Case{2, 0, true}}) {
          // The block caches differ from F16's only in how a row is stored and read: a token
          // alone and a batch of two sequences cover that (the emulated GPU's time halved).
          if (!is_float_type(kv_type) && (cs_.n == 2 || !cs_.mixed) && cs_.n != 1) continue;
          const int64_t n = cs_.n;
          const BatchPlaces places = batch_places(n, cs_.first, cs_.mixed, n_ctx);
          const std::string what = name + (cs_.mixed ? " two sequences" : " one sequence") +
                                   " cache rows of " + std::to_string(row) + " " +
                                   dtype_name(kv_type);
          std::vector<float> x = random_rows(n, 64, 41), w = random_rows(1, 64, 42);
          std::vector<float> ref(x.size());
          {
            const OnDevice<float> dx(*be, x), dw(*be, w), dout(*be, x.size(), 0.0f);
            be->rms_norm(dx.get(), dw.get(), dout.get(), n, 64, 1e-5f);
            reference::rms_norm(x.data(), w.data(), ref.data(), n, 64, 1e-5f);
            const std::vector<float> out = dout.read();
            for (size_t i = 0; i < out.size(); ++i)
              ASSERT_NEAR(out[i], ref[i], 1e-5 * std::abs(ref[i]) + 1e-6) << name;
          }
          // RoPE and the KV append, then attention over each token's sequence up to its position.
          std::vector<float> cs(static_cast<size_t>(n * half)), sn(cs.size());
          for (int64_t b = 0; b < n; ++b)
            for (int64_t i = 0; i < half; ++i) {
              const double theta =
                  places.pos[static_cast<size_t>(b)] * std::pow(10000.0, -2.0 * i / 16.0);
              cs[static_cast<size_t>(b * half + i)] = static_cast<float>(std::cos(theta));
              sn[static_cast<size_t>(b * half + i)] = static_cast<float>(std::sin(theta));
            }
          std::vector<uint8_t> kc(row_bytes(kv_type, static_cast<uint64_t>(prior_rows * row))),
              vc(kc.size());
          // Every row before the batch holds something (stored unrotated by the reference), so
          // a token that read another sequence's rows, or rows past its own, would differ.
          {
            const KvLayer host_kv{kc.data(), vc.data(), kv_type, kv_type, row};
            const std::vector<float> prior = random_rows(prior_rows, 2 * s.kv_dim(), 43);
            std::vector<float> pk(prior.begin(), prior.begin() + prior_rows * s.kv_dim());
            std::vector<float> pv(prior.begin() + prior_rows * s.kv_dim(), prior.end());
            std::vector<float> q0(static_cast<size_t>(prior_rows * s.q_dim()));
            std::vector<float> one(static_cast<size_t>(prior_rows * half), 1.0f),
                zero(one.size(), 0.0f);
            BatchPlaces all;
            for (int64_t r = 0; r < prior_rows; ++r) all.pos.push_back(r), all.base.push_back(0);
            reference::rope_and_store(q0.data(), pk.data(), pv.data(), prior_rows, s,
                                      {one.data(), zero.data(), half}, host_kv, all.view());
          }
          std::vector<uint8_t> kc_ref = kc, vc_ref = vc;
          const KvLayer kv_ref{kc_ref.data(), vc_ref.data(), kv_type, kv_type, row};
          const OnDevice<uint8_t> dkc(*be, kc), dvc(*be, vc);
          const KvLayer kv{dkc.get(), dvc.get(), kv_type, kv_type, row};
          std::vector<float> q = random_rows(n, s.q_dim(), 44), k = random_rows(n, s.kv_dim(), 45),
                             v = random_rows(n, s.kv_dim(), 46);
          std::vector<float> q_ref = q, k_ref = k;
          const OnDevice<float> dq(*be, q), dk(*be, k), dv(*be, v), dcs(*be, cs), dsn(*be, sn);
          be->rope_and_store(dq.get(), dk.get(), dv.get(), n, s, {dcs.get(), dsn.get(), half}, kv,
                             places.view());
          reference::rope_and_store(q_ref.data(), k_ref.data(), v.data(), n, s,
                                    {cs.data(), sn.data(), half}, kv_ref, places.view());
          q = dq.read();
          kc = dkc.read();
          vc = dvc.read();
          for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(q[i], q_ref[i], 1e-5) << what;
          // Keys are rotated (rounding may differ in the last bit, then F16's); values are copied.
          for (int64_t i = 0; i < prior_rows * row; ++i) {
            const float a = kv_element(kv_type, kc, i), r = kv_element(kv_type, kc_ref, i);
            ASSERT_NEAR(a, r, kv_key_slack(kv_type, kc_ref, i, r)) << what << " key " << i;
          }
          ASSERT_EQ(vc, vc_ref) << what << " values stored differently";
          // The plain rule, Gemma 2's (another scale and a soft cap small enough to bend every
          // score: scores here reach ~3) and gpt-oss's sinks (one logit per query head, in the
          // backend's memory; large enough to take much of each softmax). The rule does not
          // depend on how the cache stores a row: the other two on the default F16 cache only
          // (the emulated GPU under TSan takes 100 s for all of them everywhere).
          std::vector<float> sink_values(static_cast<size_t>(s.n_head));
          for (size_t h = 0; h < sink_values.size(); ++h)
            sink_values[h] = 0.5f * static_cast<float>(h) - 0.25f;
          const OnDevice<float> dsinks(*be, sink_values);
          const ScoreRule with_sinks{ScoreRule::plain(s.head_dim).scale, 0.0f, dsinks.get()};
          const bool every_rule = kv_type == DType::F16 && row == s.kv_dim();
          std::vector<ScoreRule> rules = {ScoreRule::plain(s.head_dim)};
          if (every_rule) rules.insert(rules.end(), {ScoreRule{0.3f, 1.5f}, with_sinks});
          for (const ScoreRule& rule : rules) {
            const OnDevice<float> dscores(*be, static_cast<size_t>(n * s.n_head * n_ctx), 0.0f),
                datt(*be, static_cast<size_t>(n * s.q_dim()), 0.0f);
            be->attention(dq.get(), n, s, rule, kv, places.view(), n_ctx, dscores.get(),
                          datt.get());
            const std::vector<float> att = datt.read();
            std::vector<float> att_ref(att.size());
            // Over the backend's own cache: its keys' last-bit differences are checked above.
            const KvLayer stored{kc.data(), vc.data(), kv_type, kv_type, row};
            ScoreRule host_rule = rule;  // the reference reads the sinks from host memory
            if (rule.sinks != nullptr) host_rule.sinks = sink_values.data();
            reference::attention(q.data(), n, s, host_rule, stored, places.view(),
                                 att_ref.data());
            for (size_t i = 0; i < att.size(); ++i)
              ASSERT_NEAR(att[i], att_ref[i], 1e-4)
                  << what << " attention, soft cap " << rule.softcap;
          }
        }
}

// A mixture's weighted sum of each token's expert outputs: the same bits on every backend (one
// function, fused multiply-adds in the choice's order), for one and several tokens and k.
TEST_P(BackendOps, MixExpertsEqualsTheReferenceBitForBit) {
  const int64_t dim = 300;
  for (auto& [name, be] : backends)
    for (const int64_t n : {int64_t{1}, int64_t{7}})
      for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}}) {
        const std::vector<float> y = random_rows(n * k, dim, 71);
        std::vector<float> weights = random_rows(n, k, 72);
        for (float& v : weights) v = std::abs(v);
        const OnDevice<float> dy(*be, y), dw(*be, weights), dout(*be, n * dim, -1.0f);
        be->mix_experts(dy.get(), dw.get(), n, k, dim, dout.get());
        std::vector<float> expect(static_cast<size_t>(n * dim));
        reference::mix_experts(y.data(), weights.data(), n, k, dim, expect.data());
        ASSERT_EQ(dout.read(), expect) << name << " mix_experts n " << n << " k " << k;
        // And what it means: token b's sum of its k rows, weighted.
        for (int64_t b = 0; b < n; ++b) {
          double sum = 0;
          for (int64_t s = 0; s < k; ++s)
            sum += double{weights[static_cast<size_t>(b * k + s)]} *
                   y[static_cast<size_t>((b * k + s) * dim + 5)];
          ASSERT_NEAR(expect[static_cast<size_t>(b * dim + 5)], sum, 1e-5) << name;
        }
      }
}

// A mixture's two levels of selection on every backend: the router's choice clears the mask of
// an unchosen expert's neurons, and the listed neurons' activations are weighted by their
// expert's routing weight, bit for bit as the reference.
TEST_P(BackendOps, ExpertMaskAndScaleEqualTheReference) {
  const int64_t n_expert = 5, expert_ff = 48, stride = n_expert * expert_ff;
  for (auto& [name, be] : backends)
    for (const int64_t n : {int64_t{1}, int64_t{3}}) {
      // Token b chose experts (b, b + 2) with weights 0.25 / 0.75; the others weigh 0.
      std::vector<float> weights(static_cast<size_t>(n * n_expert), 0.0f);
      for (int64_t b = 0; b < n; ++b) {
        weights[static_cast<size_t>(b * n_expert + b)] = 0.25f;
        weights[static_cast<size_t>(b * n_expert + (b + 2) % n_expert)] = 0.75f;
      }
      std::vector<uint8_t> mask(static_cast<size_t>(n * stride));
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 + 3) % 5 != 0;
      const OnDevice<float> dw(*be, weights);
      const OnDevice<uint8_t> dmask(*be, mask);
      be->mask_unchosen(dmask.get(), dw.get(), n, stride, expert_ff, n_expert);
      std::vector<uint8_t> expect_mask = mask;
      reference::mask_unchosen(expect_mask.data(), weights.data(), n, stride, expert_ff, n_expert);
      ASSERT_EQ(dmask.read(), expect_mask) << name << " mask_unchosen n " << n;
      int64_t kept = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < stride; ++i) {
          const bool chosen = weights[static_cast<size_t>(b * n_expert + i / expert_ff)] != 0;
          const uint8_t m = expect_mask[static_cast<size_t>(b * stride + i)];
          ASSERT_EQ(m, chosen ? mask[static_cast<size_t>(b * stride + i)] : 0) << name;
          kept += m;
        }
      ASSERT_GT(kept, 0);
      // Scale a compact list of neurons from several experts (a segment at offset 10).
      const std::vector<int32_t> ids{1, 47, 48, 100, 150, 239};
      const int64_t offset = 10, h_stride = 300;
      std::vector<float> h = random_rows(n, h_stride, 73);
      const OnDevice<int32_t> dids(*be, ids);
      const OnDevice<float> dh(*be, h);
      be->scale_by_expert(dh.get() + offset, dids.span(), dw.get(), n, h_stride, expert_ff,
                          n_expert);
      std::vector<float> expect = h;
      reference::scale_by_expert(expect.data() + offset, ids, weights.data(), n, h_stride,
                                 expert_ff, n_expert);
      ASSERT_EQ(dh.read(), expect) << name << " scale_by_expert n " << n;
      for (int64_t b = 0; b < n; ++b)
        for (size_t k = 0; k < ids.size(); ++k) {
          const float w = weights[static_cast<size_t>(b * n_expert + ids[k] / expert_ff)];
          const size_t at = static_cast<size_t>(b * h_stride + offset) + k;
          ASSERT_EQ(expect[at], h[at] * w) << name;
        }
      ASSERT_EQ(expect[0], h[0]);  // outside the list: untouched
    }
}

// The ops other architectures add (Falcon, OPT): LayerNorm with and without a bias, a
// projection's bias, the listed neurons' biases, and RoPE on NeoX's pairs.
TEST_P(BackendOps, LayerNormBiasesAndNeoxRopeEqualTheReference) {
  const int64_t dim = 300;  // more than a CUDA block's threads: the strided loops and the tree
  for (auto& [name, be] : backends)
    for (const int64_t n : {int64_t{1}, int64_t{5}}) {
      // Rows far from zero mean: a variance taken around 0 would be wrong by far.
      std::vector<float> x = random_rows(n, dim, 61);
      for (float& v : x) v = 3.0f + 0.5f * v;
      const std::vector<float> w = random_rows(1, dim, 62), bias = random_rows(1, dim, 63);
      for (const bool with_bias : {false, true}) {
        const OnDevice<float> dx(*be, x), dw(*be, w), db(*be, bias), dout(*be, x.size(), 0.0f);
        be->layer_norm(dx.get(), dw.get(), with_bias ? db.get() : nullptr, dout.get(), n, dim,
                       1e-5f);
        std::vector<float> ref(x.size());
        reference::layer_norm(x.data(), w.data(), with_bias ? bias.data() : nullptr, ref.data(), n,
                              dim, 1e-5f);
        const std::vector<float> out = dout.read();
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], ref[i], 2e-5 * std::abs(ref[i]) + 2e-6) << name << " layer_norm";
      }
      const OnDevice<float> dsum(*be, x), db(*be, bias);
      be->add_bias(dsum.get(), db.get(), n, dim);
      const std::vector<float> sum = dsum.read();
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < dim; ++i)
          ASSERT_EQ(sum[static_cast<size_t>(b * dim + i)],
                    x[static_cast<size_t>(b * dim + i)] + bias[static_cast<size_t>(i)])
              << name << " add_bias";
      // Neuron biases onto compact rows of stride dim: ids in any order, the rest untouched.
      const std::vector<int32_t> ids{7, 0, 299, 150, 3};
      const OnDevice<int32_t> dids(*be, ids);
      const OnDevice<float> dy(*be, x);
      be->add_bias_of(dy.get(), db.get(), dids.span(), n, dim);
      std::vector<float> expect = x;
      reference::add_bias_of(expect.data(), bias.data(), ids, n, dim);
      ASSERT_EQ(dy.read(), expect) << name << " add_bias_of";
    }
  // RoPE NeoX: pairs (i, i + half) of the first 2 * half elements of each head, the rest kept.
  const HeadShape s{4, 2, 16};
  const int64_t n = 3, half = 6;  // 12 of 16 values rotated
  std::vector<float> cs(static_cast<size_t>(n * half)), sn(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    cs[i] = static_cast<float>(std::cos(0.3 * static_cast<double>(i) + 0.1));
    sn[i] = static_cast<float>(std::sin(0.3 * static_cast<double>(i) + 0.1));
  }
  const BatchPlaces places = batch_places(n, 2, false, 8);
  for (auto& [name, be] : backends) {
    std::vector<float> q = random_rows(n, s.q_dim(), 64), k = random_rows(n, s.kv_dim(), 65),
                       v = random_rows(n, s.kv_dim(), 66);
    std::vector<float> q_ref = q, k_ref = k;
    std::vector<float> kc(static_cast<size_t>(8 * s.kv_dim())), vc(kc.size());
    std::vector<float> kc_ref = kc, vc_ref = vc;
    const OnDevice<float> dq(*be, q), dk(*be, k), dv(*be, v), dcs(*be, cs), dsn(*be, sn),
        dkc(*be, kc), dvc(*be, vc);
    const RopeTable neox{dcs.get(), dsn.get(), half, RopeStyle::Neox};
    be->rope_and_store(dq.get(), dk.get(), dv.get(), n, s, neox,
                       {dkc.get(), dvc.get(), DType::F32, DType::F32, s.kv_dim()}, places.view());
    reference::rope_and_store(
        q_ref.data(), k_ref.data(), v.data(), n, s, {cs.data(), sn.data(), half, RopeStyle::Neox},
        {kc_ref.data(), vc_ref.data(), DType::F32, DType::F32, s.kv_dim()}, places.view());
    const std::vector<float> qd = dq.read(), kd = dkc.read();
    for (size_t i = 0; i < qd.size(); ++i) ASSERT_NEAR(qd[i], q_ref[i], 1e-5) << name << " neox q";
    for (size_t i = 0; i < kd.size(); ++i) ASSERT_NEAR(kd[i], kc_ref[i], 1e-5) << name << " neox k";
    // The last values of each head were not rotated, and NeoX is not the adjacent rotation.
    for (int64_t b = 0; b < n; ++b)
      for (int64_t h = 0; h < s.n_head; ++h)
        for (int64_t i = 2 * half; i < s.head_dim; ++i) {
          const size_t at = static_cast<size_t>(b * s.q_dim() + h * s.head_dim + i);
          ASSERT_EQ(qd[at], q[at]) << name;
        }
    std::vector<float> q_adj = q, k_adj = k;
    reference::rope_and_store(
        q_adj.data(), k_adj.data(), v.data(), n, s, {cs.data(), sn.data(), half},
        {kc.data(), vc.data(), DType::F32, DType::F32, s.kv_dim()}, places.view());
    ASSERT_NE(q_adj, q_ref);
  }
}

TEST_P(BackendOps, ActivationsSelectionAndElementwiseOpsEqualTheReference) {
  const int64_t n = 3, ff = 50;
  const std::vector<float> gate = random_rows(n, ff, 51), up = random_rows(n, ff, 52);
  for (auto& [name, be] : backends) {
    const OnDevice<float> dgate(*be, gate), dup(*be, up);
    for (FfnActivation act : kFfnActivations) {
      const OnDevice<float> dh(*be, gate.size(), 0.0f);
      std::vector<float> ref(gate.size());
      be->activation(act, dgate.get(), dup.get(), dh.get(), n * ff);
      reference::activation(act, gate.data(), up.data(), ref.data(), n * ff);
      const std::vector<float> h = dh.read();
      for (size_t i = 0; i < h.size(); ++i)
        ASSERT_NEAR(h[i], ref[i], 1e-6 * std::abs(ref[i]) + 1e-7) << name;
    }
    const OnDevice<uint8_t> dmask(*be, static_cast<size_t>(n * ff), uint8_t{7}),
        dneed(*be, static_cast<size_t>(n * ff), uint8_t{7});
    const OnDevice<int32_t> dids(*be, static_cast<size_t>(ff), -1);
    be->threshold(dgate.get(), 0.0f, true, dmask.get(), n * ff);
    const std::vector<uint8_t> mask = dmask.read();
    for (size_t i = 0; i < mask.size(); ++i) ASSERT_EQ(mask[i], gate[i] > 0.0f);
    uint64_t selected = 0;
    const int64_t count = be->select_union(dmask.get(), n, ff, dids.get(), dneed.get(), &selected);
    const std::vector<int32_t> ids = dids.read();
    const std::vector<uint8_t> need = dneed.read();
    uint64_t expected = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < ff; ++i) {
      bool any = false;
      for (int64_t b = 0; b < n; ++b) any = any || mask[static_cast<size_t>(b * ff + i)];
      if (!any) continue;
      ASSERT_EQ(ids[static_cast<size_t>(k)], i);
      for (int64_t b = 0; b < n; ++b) {
        ASSERT_EQ(need[static_cast<size_t>(b * ff + k)], mask[static_cast<size_t>(b * ff + i)]);
        expected += mask[static_cast<size_t>(b * ff + i)];
      }
      ++k;
    }
    ASSERT_EQ(count, k);
    ASSERT_EQ(selected, expected);
    const OnDevice<float> dcols(*be, static_cast<size_t>(n * ff), 0.0f);
    be->select_columns(dup.get(), dids.span().first(static_cast<size_t>(count)), n, ff,
                       dcols.get());
    const std::vector<float> cols = dcols.read();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < count; ++j)
        ASSERT_EQ(cols[static_cast<size_t>(b * ff + j)],
                  up[static_cast<size_t>(b * ff + ids[static_cast<size_t>(j)])]);
    const OnDevice<uint64_t> dnonzero(*be, 1, uint64_t{5});
    be->keep_needed(dcols.get(), dneed.get(), n, ff, 0, count, dnonzero.get());
    const uint64_t nonzero = dnonzero.read()[0] - 5;  // added to what the counter held
    const std::vector<float> h = dcols.read();
    uint64_t expect_nonzero = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < count; ++j) {
        const size_t at = static_cast<size_t>(b * ff + j);
        ASSERT_EQ(h[at], need[at] ? cols[at] : 0.0f);
        expect_nonzero += h[at] != 0.0f;
      }
    ASSERT_EQ(nonzero, expect_nonzero);
    const OnDevice<float> dsum(*be, gate);
    be->add(dsum.get(), dup.get(), n * ff);
    const std::vector<float> sum = dsum.read();
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], gate[i] + up[i]);
    // copy (KV rows of one sequence to another) and dequantize_row (embedding lookup).
    const OnDevice<float> dcopy(*be, gate.size(), 0.0f);
    be->copy(dcopy.get(), dgate.get(), gate.size() * sizeof(float));
    ASSERT_EQ(dcopy.read(), gate) << name;
    for (DType t : kRowTypes) {
      const int64_t len = row_length(t, 64);
      const Weights row = random_weights(t, 1, len, 53, false);
      std::vector<float> expect(static_cast<size_t>(len));
      dequantize_row(t, row.view.data, expect.data(), len);
      const OnDevice<float> dout(*be, expect.size(), 0.0f);
      be->dequantize_row(t, row.view.data, dout.get(), len);
      ASSERT_EQ(dout.read(), expect) << name << " " << dtype_name(t);
    }
  }
}

// TEAL and CATS against the written-out reference: the values left, their count added to the
// counter, a threshold of 0 changing nothing, every activation's gate function.
TEST_P(BackendOps, InputSparsityEqualsTheReference) {
  const int64_t count = 3 * 70;
  std::vector<float> x = random_rows(3, 70, 54);
  x[5] = 0.0f;  // an exact zero stays and is not counted
  for (auto& [name, be] : backends) {
    for (const float t : {0.0f, 0.3f, 1.1f}) {
      const OnDevice<float> dx(*be, x);
      const OnDevice<uint64_t> dkept(*be, 1, uint64_t{9});
      const OnDevice<uint8_t> dmask(*be, static_cast<size_t>(count), uint8_t{7});
      be->sparsify(dx.get(), count, t, dkept.get(), t == 0.3f ? nullptr : dmask.get());
      std::vector<float> expect = x;
      const uint64_t kept = reference::sparsify(expect.data(), count, t);
      ASSERT_EQ(dx.read(), expect) << name << " " << t;
      const std::vector<uint8_t> mask = dmask.read();
      for (int64_t i = 0; i < count; ++i)  // untouched without a mask
        ASSERT_EQ(mask[static_cast<size_t>(i)], t == 0.3f ? 7 : expect[static_cast<size_t>(i)] != 0.0f);
      ASSERT_EQ(dkept.read()[0] - 9, kept) << name;
      if (t == 0.0f) {
        ASSERT_EQ(expect, x);
      }
      if (t == 1.1f) {
        ASSERT_LT(kept, static_cast<uint64_t>(count / 2));  // N(0,1): ~27% left
      }
      for (FfnActivation act : kFfnActivations) {
        const OnDevice<float> dg(*be, x);
        const OnDevice<uint64_t> dgk(*be, 1, uint64_t{0});
        be->sparsify_gate(act, dg.get(), count, t, dgk.get());
        std::vector<float> g = x;
        const uint64_t gk = reference::sparsify_gate(act, g.data(), count, t);
        ASSERT_EQ(dg.read(), g) << name << " " << t;
        ASSERT_EQ(dgk.read()[0], gk) << name;
      }
    }
  }
}

TEST_P(BackendOps, MemoryIsCountedAndTheTimelineMovesForward) {
  for (auto& [name, be] : backends) {
    const uint64_t before = be->allocated();
    const Buffer b = be->allocate(3 << 20);
    EXPECT_EQ(b.device, be->device());
    EXPECT_GE(be->allocated() - before, 3u << 20) << name;
    std::vector<uint8_t> back(b.bytes, 1);
    be->download(back.data(), b.data, b.bytes);
    for (uint64_t i = 0; i < b.bytes; i += 4096) ASSERT_EQ(back[i], 0) << "not zeroed";
    be->release(b);
    EXPECT_EQ(be->allocated(), before) << name;
    const Event e0 = be->record();
    const Event e1 = be->record();
    EXPECT_GE(be->elapsed(e0, e1), 0.0);
  }
}

// The reference device holds code above it to a GPU's rules: host memory passed to an op, and
// allocations past its budget, are one-line errors naming what went wrong.
TEST(ReferenceDevice, RefusesHostMemoryAndAllocationsPastItsBudget) {
  ReferenceDeviceOptions o;
  o.budget = 1 << 20;
  ReferenceDevice dev(o);
  std::vector<float> host(64, 1.0f);
  const OnDevice<float> y(dev, host);
  try {
    dev.add(y.get(), host.data(), 64);
    FAIL() << "host memory was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
  try {
    dev.allocate(2 << 20, "layer 3 attn_q");
    FAIL() << "an allocation past the budget was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 3 attn_q needs 2.0 MiB"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dev.allocated(), 256u);
}

// Ops are queued: the result is there after download (which waits), and a failing op's error
// comes out of synchronize().
TEST(ReferenceDevice, RunsOpsInOrderOnItsOwnThread) {
  ReferenceDevice dev;
  const std::vector<float> ones(4096, 1.0f);
  const OnDevice<float> x(dev, ones), y(dev, ones);
  for (int i = 0; i < 100; ++i) dev.add(x.get(), y.get(), 4096);
  EXPECT_EQ(x.read(), std::vector<float>(4096, 101.0f));
  const Event a = dev.record();
  dev.add(x.get(), y.get(), 4096);
  const Event b = dev.record();
  dev.synchronize();
  EXPECT_GE(dev.elapsed(a, b), 0.0);
}

}  // namespace
}  // namespace strata
