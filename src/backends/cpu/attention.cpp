#include "backends/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace strata {

namespace {

// The partial sums of a row's exponentials added in a fixed tree.
float total_of(float* sum) {
  for (int w = kAttentionSumLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) sum[j] += sum[j + w];
  return sum[0];
}

// n rows of a head in a block-typed cache (rows `stride` elements apart) to F32, hd apart.
void dequantize_panel(DType type, const uint8_t* rows, int64_t stride, int n, int64_t hd, std::vector<float>& out) {
  const auto dequantize = dtype_info(type).dequantize;
  const uint64_t row_stride = row_bytes(type, static_cast<uint64_t>(stride));
  for (int r = 0; r < n; ++r) dequantize(rows + r * row_stride, out.data() + r * hd, hd);
}

}  // namespace

void attend_rows(const CpuKernels& k, std::span<const QueryRow> rows, const CachedHead& kv,
                 int64_t origin, int64_t hd, float scale, float softcap) {
  constexpr int64_t kPanel = kAttentionPanel;
  constexpr int64_t kState = 1 + kAttentionSumLanes;  // a row's maximum and partial sums
  thread_local std::vector<float> kt, vp, deq, state;
  thread_local std::vector<AttentionRow> seen;
  kt.resize(static_cast<size_t>(kPanel * hd));
  vp.resize(static_cast<size_t>(kPanel * hd));
  deq.resize(static_cast<size_t>(kPanel * hd));
  state.assign(rows.size() * kState, 0.0f);
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::fill(rows[i].out, rows[i].out + hd, 0.0f);
    state[i * kState] = rows[i].sink;  // -inf, or the sink: exp(sink - sink) in the sums
    if (rows[i].sink != -INFINITY) state[i * kState + 1] = 1.0f;
    lo = std::min(lo, rows[i].first);
    hi = std::max(hi, rows[i].last);
  }
  origin = std::min(origin, lo);
  const bool k_f16 = kv.k_type == DType::F16, v_f16 = kv.v_type == DType::F16;
  const bool k_blocks = !k_f16 && kv.k_type != DType::F32, v_blocks = !v_f16 && kv.v_type != DType::F32;
  for (int64_t start = origin + (lo - origin) / kPanel * kPanel; start <= hi; start += kPanel) {
    seen.clear();
    for (size_t i = 0; i < rows.size(); ++i) {
      const QueryRow& r = rows[i];
      if (r.first >= start + kPanel || r.last < start) continue;
      float* s = &state[i * kState];
      seen.push_back({r.q, r.out, s, s + 1, static_cast<int>(std::max(r.first, start) - start),
                      static_cast<int>(std::min(r.last + 1, start + kPanel) - start)});
    }
    if (seen.empty()) continue;
    const int n_pos = static_cast<int>(std::min(kPanel, hi + 1 - start));
    const uint64_t at = static_cast<uint64_t>(start * kv.stride);
    const uint8_t* kp = static_cast<const uint8_t*>(kv.k) + row_bytes(kv.k_type, at);
    if (k_blocks) {  // dequantized, then transposed as F32 rows
      dequantize_panel(kv.k_type, kp, kv.stride, n_pos, hd, deq);
      k.load_panel(reinterpret_cast<const uint8_t*>(deq.data()), false, hd, n_pos, hd, /*transpose=*/true, kt.data());
    } else {
      k.load_panel(kp, k_f16, kv.stride, n_pos, hd, /*transpose=*/true, kt.data());
    }
    const uint8_t* v = static_cast<const uint8_t*>(kv.v) + row_bytes(kv.v_type, at);
    if (v_blocks)
      dequantize_panel(kv.v_type, v, kv.stride, n_pos, hd, vp);
    else if (v_f16)  // widened once for all the rows
      k.load_panel(v, true, kv.stride, n_pos, hd, /*transpose=*/false, vp.data());
    const bool v_direct = !v_blocks && !v_f16;
    const float* vf = v_direct ? reinterpret_cast<const float*>(v) : vp.data();
    const int64_t v_stride = v_direct ? kv.stride : hd;
    k.attend_panel(kt.data(), vf, v_stride, hd, scale, softcap, seen.data(), static_cast<int>(seen.size()));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const float inv = 1.0f / total_of(&state[i * kState + 1]);
    for (int64_t d = 0; d < hd; ++d) rows[i].out[d] *= inv;
  }
}

std::vector<TokenRun> attention_runs(const int64_t* origin, int64_t n, int max_tokens) {
  std::vector<TokenRun> runs;
  for (int64_t b = 0; b < n; ++b)
    if (runs.empty() || origin[b] != origin[runs.back().begin] ||
        b - runs.back().begin >= max_tokens)
      runs.push_back({b, b + 1});
    else
      runs.back().end = b + 1;
  return runs;
}

}  // namespace strata
