#include "backends/cpu/sparse_ops.h"

#include <algorithm>

#include "backends/cpu/gather_panels.h"
#include "core/error.h"
#include "tensor/column_groups.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/kquants.h"

namespace strata {

namespace {

// Plain Q4_0 rows go through the four-row kernel (it loads the activation once for four rows;
// a row alone is bound by those loads). Its rows equal gather_dot_q4_0's bit for bit.
bool gathers_by_four(std::span<const GatherJob> jobs) {
  for (const GatherJob& job : jobs)
    if (job.w->type != DType::Q4_0 || job.w->layout != Layout::Rows) return false;
  return true;
}

// The kernel call behind axpy_row_slice, on row pointers (n elements from each; n_rows and
// n_next <= kAxpyGroup): y[0, n) += sum over r of c[r] * p[r][0, n), while `next` are requested.
void axpy_pointers(const CpuKernels& kernels, DType type, const uint8_t* const* p, const float* c,
                   int n_rows, float* y, int64_t n, const void* const* next, int n_next) {
  switch (type) {
    case DType::F32:
      kernels.axpy_f32(reinterpret_cast<const float* const*>(p), c, n_rows, y, n, next, n_next);
      break;
    case DType::F16:
      kernels.axpy_f16(reinterpret_cast<const uint16_t* const*>(p), c, n_rows, y, n, next, n_next);
      break;
    case DType::BF16:
      kernels.axpy_bf16(reinterpret_cast<const uint16_t* const*>(p), c, n_rows, y, n, next, n_next);
      break;
    case DType::Q8_0:
      kernels.axpy_q8_0(reinterpret_cast<const BlockQ8_0* const*>(p), c, n_rows, y, n, next,
                        n_next);
      break;
    case DType::Q4_0:
      kernels.axpy_q4_0(reinterpret_cast<const BlockQ4_0* const*>(p), c, n_rows, y, n, next,
                        n_next);
      break;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      kernels.axpy_kq[kquant_slot(type)](reinterpret_cast<const void* const*>(p), c, n_rows, y, n,
                                         next, n_next);
      break;
    default:
      if (!is_unit_type(type)) fail("axpy over a {} matrix is not supported", dtype_name(type));
      kernels.axpy_unit[unit_slot(type)](reinterpret_cast<const void* const*>(p), c, n_rows, y, n,
                                         next, n_next);
  }
}

}  // namespace

namespace {

// Items [k0, k1) of the positions `single` (the id list's entries computed token by token), for
// the tokens that need them: the four-row Q4_0 kernel where all four rows are needed, one row at
// a time otherwise. `next`: the caller's next item's rows, requested by the first token's pass.
void single_item(const CpuKernels& kernels, const GatherJob& job, std::span<const int32_t> ids,
                 std::span<const int32_t> single, int64_t k0, int64_t k1,
                 std::span<const PreparedInput> x, const uint8_t* need, int64_t need_stride,
                 const void* const* next, int n_next) {
  const int64_t batch = static_cast<int64_t>(x.size());
  int64_t at[4];
  const uint8_t* rows[4];
  for (int64_t i = k0; i < k1; ++i) {
    at[i - k0] = single[static_cast<size_t>(i)];
    rows[i - k0] = job.w->row(ids[static_cast<size_t>(at[i - k0])]);
  }
  for (int64_t b = 0; b < batch; ++b) {
    float* y = job.y + b * job.y_stride;
    const uint8_t* nb = need == nullptr ? nullptr : need + b * need_stride;
    bool all = k1 - k0 == 4;
    for (int64_t i = 0; all && nb != nullptr && i < k1 - k0; ++i) all = nb[at[i]] != 0;
    if (all) {
      float out[4];
      kernels.gather_dot4_q4_0(reinterpret_cast<const BlockQ4_0* const*>(rows),
                               x[static_cast<size_t>(b)].q8(), job.w->cols, out, next,
                               b == 0 ? n_next : 0);
      for (int i = 0; i < 4; ++i) y[at[i]] = out[i];
      continue;
    }
    for (int64_t i = 0; i < k1 - k0; ++i)
      y[at[i]] = (nb == nullptr || nb[at[i]] != 0)
                     ? dot_row_gathered(kernels, *job.w, ids[static_cast<size_t>(at[i])],
                                        x[static_cast<size_t>(b)],
                                        b == 0 && i < n_next ? next[i] : nullptr)
                     : 0.0f;
  }
}

// The cumulative cost of gather_matmat's work items (panels, then groups of `group` single
// positions; jobs innermost): a single item's products, a panel's at the crossover's price.
void item_weights(const GatherSplit& split, int64_t group, int64_t n_jobs, double crossover,
                  int64_t batch, std::vector<int64_t>& cumulative) {
  const auto n_panel = static_cast<int64_t>(split.panel.size());
  const auto n_single = static_cast<int64_t>(split.single.size());
  cumulative.clear();
  int64_t total = 0;
  const auto panel_weight = static_cast<int64_t>(std::max(1.0, 16.0 * crossover * batch));
  for (int64_t p = 0; p * kPanelRows < n_panel; ++p)
    for (int64_t j = 0; j < n_jobs; ++j) {
      total += panel_weight * std::min(kPanelRows, n_panel - p * kPanelRows);
      cumulative.push_back(total);
    }
  for (int64_t g = 0; g * group < n_single; ++g) {
    int64_t pairs = 0;
    for (int64_t i = g * group; i < std::min(n_single, (g + 1) * group); ++i)
      pairs += split.needing[static_cast<size_t>(split.single[static_cast<size_t>(i)])];
    for (int64_t j = 0; j < n_jobs; ++j) {
      total += 16 * std::max<int64_t>(1, pairs);
      cumulative.push_back(total);
    }
  }
}

}  // namespace

void gather_matmat(const CpuKernels& kernels, std::span<const GatherJob> jobs,
                   std::span<const int32_t> ids, std::span<const PreparedInput> x, ThreadPool& pool,
                   const uint8_t* need, int64_t need_stride) {
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  const int64_t batch = static_cast<int64_t>(x.size());
  const int64_t n_jobs = static_cast<int64_t>(jobs.size());
  if (n_ids == 0) return;
  if (batch > kBatchKernelTokens) {
    // Slices of tokens the batched kernels take, each deciding its panels by its own need.
    std::vector<GatherJob> slice(jobs.begin(), jobs.end());
    for (int64_t t0 = 0; t0 < batch; t0 += kBatchKernelTokens) {
      for (size_t j = 0; j < jobs.size(); ++j) slice[j].y = jobs[j].y + t0 * jobs[j].y_stride;
      gather_matmat(kernels, slice, ids,
                    x.subspan(static_cast<size_t>(t0),
                              static_cast<size_t>(std::min(kBatchKernelTokens, batch - t0))),
                    pool, need == nullptr ? nullptr : need + t0 * need_stride, need_stride);
    }
    return;
  }
  // The rows most of a prompt batch needs go through panels (gather_panels.h), the rest token by
  // token. (The caller's buffers, reached by the workers through references.)
  thread_local GatherSplit callers_split;
  GatherSplit& split = callers_split;
  // Panels are short row ranges: the AMX int8 tiles' activations are packed once for all.
  std::vector<DType> types;
  for (const auto& j : jobs) types.push_back(j.w->type);
  const BatchForms forms =
      batch >= kPanelMinBatch
          ? batch_forms(kernels, x, types, std::any_of(types.begin(), types.end(), amx_reads))
          : BatchForms{};
  const bool panels_read = std::all_of(jobs.begin(), jobs.end(), [&](const GatherJob& j) {
    return panel_reads(j.w->layout) && j.w->type == jobs[0].w->type;
  });
  const double crossover = panels_read ? panel_crossover(jobs[0].w->type, forms) : 2.0;
  split_gather(need, need_stride, n_ids, batch, crossover, split);
  // Work items, jobs innermost: panels of kPanelRows panel positions, then groups of `group`
  // single positions; each thread takes a contiguous run of the (sorted) neuron list and reads
  // every job's rows for it. Weighted by their products (a panel's at the crossover's price).
  const int64_t group = gathers_by_four(jobs) ? 4 : 1;
  const int64_t n_panel = static_cast<int64_t>(split.panel.size());
  const int64_t n_single = static_cast<int64_t>(split.single.size());
  const int64_t panels = (n_panel + kPanelRows - 1) / kPanelRows;
  const int64_t singles = (n_single + group - 1) / group;
  const std::span<const int32_t> single(split.single);
  // Items [i0, i1) of the single positions (item i: group i / n_jobs, job i % n_jobs).
  auto run_singles = [&](int64_t i0, int64_t i1) {
    for (int64_t s = i0; s < i1; ++s) {
      const GatherJob& job = jobs[static_cast<size_t>(s % n_jobs)];
      const int64_t k0 = (s / n_jobs) * group, k1 = std::min(n_single, k0 + group);
      // The next item's rows are elsewhere in memory: request them now. (The gather_dot_*
      // kernels do not prefetch past a row: that would read a neighbour nobody asked for.) The
      // four-row kernel requests them itself, spread over its blocks.
      const void* next[4];
      int n_next = 0;
      if (s + 1 < i1) {
        const MatrixView& nw = *jobs[static_cast<size_t>((s + 1) % n_jobs)].w;
        const int64_t n0 = ((s + 1) / n_jobs) * group, n1 = std::min(n_single, n0 + group);
        for (int64_t k = n0; k < n1; ++k)
          next[n_next++] = nw.row(ids[static_cast<size_t>(single[static_cast<size_t>(k)])]);
      }
      single_item(kernels, job, ids, single, k0, k1, x, need, need_stride, next, n_next);
    }
  };
  if (panels == 0 && split.needing.empty()) {  // decode: items of equal cost
    pool.parallel_for(singles * n_jobs, [&](int64_t i0, int64_t i1, int) { run_singles(i0, i1); });
    return;
  }
  thread_local std::vector<int64_t> callers_weights;
  std::vector<int64_t>& cumulative = callers_weights;
  item_weights(split, group, n_jobs, crossover, batch, cumulative);
  const int64_t first_single = panels * n_jobs;
  pool.parallel_for_weighted(cumulative, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < std::min(i1, first_single); ++i) {
      const GatherJob& job = jobs[static_cast<size_t>(i % n_jobs)];
      const int64_t p0 = (i / n_jobs) * kPanelRows;
      gather_panel(kernels, *job.w, ids,
                   std::span<const int32_t>(split.panel)
                       .subspan(static_cast<size_t>(p0),
                                static_cast<size_t>(std::min(kPanelRows, n_panel - p0))),
                   x, forms, need, need_stride, job.y, job.y_stride);
    }
    if (i1 > first_single)
      run_singles(std::max(i0, first_single) - first_single, i1 - first_single);
  });
}

void axpy_row_slice(const CpuKernels& kernels, const MatrixView& wt, const int64_t* rows,
                    const float* c, int n_rows, float* out, int64_t begin, int64_t end,
                    const int64_t* next_rows, int n_next) {
  constexpr int kMax = kAxpyGroup;
  if (n_rows > kMax || n_next > kMax) fail("axpy_row_slice: at most {} rows per call", kMax);
  const uint64_t offset = row_bytes(wt.type, static_cast<uint64_t>(begin));
  const uint8_t* p[kMax];
  const void* next[kMax];
  for (int r = 0; r < n_rows; ++r) p[r] = wt.row(rows[r]) + offset;
  for (int r = 0; r < n_next; ++r) next[r] = wt.row(next_rows[r]) + offset;
  axpy_pointers(kernels, wt.type, p, c, n_rows, out + begin, end - begin, next, n_next);
}

namespace {

// A run of consecutive list entries of one token in the same bucket of kAxpyBucket neuron ids
// (with an ascending list, one item per bucket): summed into its own partial vector.
struct AxpyItem {
  int64_t token, bucket, first, count;
};

// Scratch of the calling thread, reused across calls. Named through a reference inside the
// lambdas (run by pool threads): a thread_local name there would mean the worker's own copy.
struct AxpyScratch {
  std::vector<int64_t> rows, keys, token_items, cumulative;
  std::vector<float> coefs, partials;
  std::vector<AxpyItem> items;
};

AxpyScratch& axpy_scratch() {
  thread_local AxpyScratch scratch;
  return scratch;
}

// Each token's active (row, coefficient) pairs from t0 on, cut into items, as long as the
// chunk's partials and pairs fit kAxpyScratchBytes (at least one token). Returns the chunk's end.
int64_t axpy_items(AxpyScratch& s, std::span<const int32_t> ids, std::span<const int32_t> keys,
                   const float* c, int64_t c_stride, int64_t t0, int64_t batch, int64_t cols) {
  s.rows.clear(), s.keys.clear(), s.coefs.clear(), s.items.clear(), s.cumulative.clear();
  s.token_items.clear();
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  int64_t b = t0;
  for (; b < batch; ++b) {
    const size_t items_before = s.items.size(), rows_before = s.rows.size();
    const float* cb = c + b * c_stride;
    for (int64_t k = 0; k < n_ids; ++k) {
      if (cb[k] == 0.0f) continue;  // an inactive neuron: its row is never read
      const int64_t bucket = keys[static_cast<size_t>(k)] / kAxpyBucket;
      if (s.items.size() == items_before || s.items.back().bucket != bucket)
        s.items.push_back({b - t0, bucket, static_cast<int64_t>(s.rows.size()), 0});
      s.rows.push_back(ids[static_cast<size_t>(k)]);
      s.keys.push_back(keys[static_cast<size_t>(k)]);
      s.coefs.push_back(cb[k]);
      ++s.items.back().count;
    }
    const uint64_t bytes = s.items.size() * static_cast<uint64_t>(cols) * sizeof(float) +
                           s.rows.size() * (sizeof(int64_t) + sizeof(float));
    if (bytes > kAxpyScratchBytes && b > t0) {  // this token starts the next chunk
      s.items.resize(items_before);
      s.rows.resize(rows_before);
      s.keys.resize(rows_before);
      s.coefs.resize(rows_before);
      break;
    }
    s.token_items.push_back(static_cast<int64_t>(items_before));
  }
  s.token_items.push_back(static_cast<int64_t>(s.items.size()));
  if (s.partials.size() < s.items.size() * static_cast<size_t>(cols))
    s.partials.resize(s.items.size() * static_cast<size_t>(cols));
  for (const AxpyItem& it : s.items) s.cumulative.push_back(it.first + it.count);
  return b;
}

// One group's kept rows of a column-group copy and their quantized input values.
struct ColumnGroupTerms {
  int64_t group = 0;
  float dx = 0.0f;
  int32_t xsum = 0;  // K-quants: the sum of the group's quantized input values
  int n = 0;
  const uint8_t* rows[kColumnGroup];
  int8_t values[kColumnGroup];

  void add(const uint8_t* row, int8_t v) {
    if (n == kColumnGroup) fail("axpy over column groups: an input listed twice");
    rows[n] = row;
    values[n++] = v;
  }
};

// Where a column-group matrix keeps a list entry's row: in a copy (ColumnGroups) its input's,
// in split rows (ColumnGroupSlots) row `row`; and group g's scales, in the copy or its plane.
const uint8_t* group_row(const MatrixView& wt, int64_t row, int64_t input) {
  if (wt.layout == Layout::ColumnGroupSlots) return wt.row(row);
  return has_block_column_groups(wt.type) ? column_group_row(wt.type, wt.data, wt.cols, input)
                                          : k_column_row(wt.type, wt.data, wt.cols, input);
}

const uint16_t* block_group_scales(const MatrixView& wt, int64_t g) {
  return wt.layout == Layout::ColumnGroupSlots ? column_group_plane_scales(wt.scales, wt.cols, g)
                                               : column_group_scales(wt.type, wt.data, wt.cols, g);
}

KColumnScales k_group_scales(const MatrixView& wt, int64_t g) {
  return wt.layout == Layout::ColumnGroupSlots
             ? k_column_plane_scales(wt.type, wt.scales, wt.cols, g)
             : k_column_scales(wt.type, wt.data, wt.cols, g);
}

// The terms of the Q8_0 or Q4_0 group starting at inputs[a] (inputs ascending): its coefficients
// quantized as the dense product quantizes its input (zeros for the inputs not listed), the rows
// whose value is not 0 (a value quantized to 0 adds nothing: its row is never read). Returns the
// end of the group's entries.
int64_t block_group_terms(const CpuKernels& kernels, const MatrixView& wt, const int64_t* rows,
                          const int64_t* inputs, const float* c, int64_t a, int64_t count,
                          ColumnGroupTerms& t) {
  t.group = inputs[a] / kColumnGroup;
  float block[kColumnGroup] = {};
  int64_t b = a;
  for (; b < count && inputs[b] / kColumnGroup == t.group; ++b)
    block[inputs[b] % kColumnGroup] = c[b];
  BlockQ8_0 x;
  kernels.quantize_q8_0(block, &x, kColumnGroup);
  t.dx = f16_to_f32(x.d);
  t.n = 0;
  for (int64_t k = a; k < b; ++k)
    if (const int8_t v = x.qs[inputs[k] % kColumnGroup]; v != 0)
      t.add(group_row(wt, rows[k], inputs[k]), v);
  return b;
}

// A K-quant super-block's groups with kept rows, its coefficients quantized as the dense product
// quantizes its input (quantize_row_q8_K).
struct SuperTerms {
  int64_t super = 0;
  float dx = 0.0f;
  int n = 0;  // groups with kept rows (one without is left out)
  ColumnGroupTerms groups[kQK_K / 16];
};

int64_t k_super_terms(const MatrixView& wt, const int64_t* rows, const int64_t* inputs,
                      const float* c, int64_t a, int64_t count, SuperTerms& t) {
  const KColumnLayout layout = k_column_layout(wt.type);
  t.super = inputs[a] / kQK_K;
  float block[kQK_K] = {};
  int64_t b = a;
  for (; b < count && inputs[b] / kQK_K == t.super; ++b) block[inputs[b] % kQK_K] = c[b];
  BlockQ8_K x;
  quantize_row_q8_K(block, &x, kQK_K);
  t.dx = x.d;
  t.n = 0;
  for (int64_t k = a; k < b; ++k) {
    const int64_t group = inputs[k] / layout.group;
    const int8_t v = x.qs[inputs[k] % kQK_K];
    if (v == 0) continue;
    if (t.n == 0 || t.groups[t.n - 1].group != group) {
      ColumnGroupTerms& g = t.groups[t.n++];
      g.group = group, g.n = 0, g.xsum = 0;
      // The input's sums per 16 values that make up this group.
      const int64_t first = (group % layout.groups()) * (layout.group / 16);
      for (int64_t h = first; h < first + layout.group / 16; ++h) g.xsum += x.bsums[h];
    }
    t.groups[t.n - 1].add(group_row(wt, rows[k], inputs[k]), v);
  }
  return b;
}

// `read(a, terms)` fills terms from entry a and returns the end of its entries (terms.n == 0:
// nothing to compute); run(terms, following) computes one with the next one that has work (or
// null) known, so its rows can be read ahead.
template <class Terms, class Read, class Run>
void in_turn(int64_t count, Read read, Run run) {
  Terms terms[2];
  int cur = 0;
  int64_t a = 0;
  while (a < count && terms[cur].n == 0) a = read(a, terms[cur]);
  while (terms[cur].n > 0) {
    Terms& following = terms[1 - cur];
    following.n = 0;
    while (a < count && following.n == 0) a = read(a, following);
    run(terms[cur], following.n > 0 ? &following : nullptr);
    terms[cur].n = 0;
    cur = 1 - cur;
  }
}

// The first eight rows of `t` (the first repeated if fewer), for reading ahead.
void first_rows(const ColumnGroupTerms& t, const uint8_t** out) {
  for (int k = 0; k < 8; ++k) out[k] = t.rows[k < t.n ? k : 0];
}

// y[0, wt.cols) += the products of `count` rows of a column-group copy (tensor/column_groups.h;
// rows[k] input inputs[k]'s, ascending inputs) with their coefficients: Q8_0 and Q4_0 group by
// group (kernels.axpy_q8_0_group, axpy_q4_0_group), K-quants super-block by super-block
// (axpy_q4_K_super, _q5_K_, _q6_K_), each call told the next one's first rows so it reads them
// ahead.
void axpy_column_groups(const CpuKernels& kernels, const MatrixView& wt, const int64_t* rows,
                        const int64_t* inputs, const float* c, int64_t count, float* y) {
  if (!has_block_column_groups(wt.type)) {
    const auto axpy_super = kernels.axpy_k_super(wt.type);
    in_turn<SuperTerms>(
        count,
        [&](int64_t a, SuperTerms& t) { return k_super_terms(wt, rows, inputs, c, a, count, t); },
        [&](const SuperTerms& t, const SuperTerms* following) {
          const uint8_t* next[8];
          if (following != nullptr) first_rows(following->groups[0], next);
          KColumnTerms groups[kQK_K / 16];
          for (int g = 0; g < t.n; ++g) {
            const ColumnGroupTerms& x = t.groups[g];
            const KColumnScales s = k_group_scales(wt, x.group);
            groups[g] = {x.rows, x.values, x.n, s.sc, s.m, x.xsum};
          }
          const KColumnScales s = k_group_scales(wt, t.super * k_column_layout(wt.type).groups());
          axpy_super(groups, t.n, s.d, s.dmin, t.dx, y, wt.cols,
                     following != nullptr ? next : nullptr);
        });
    return;
  }
  in_turn<ColumnGroupTerms>(
      count,
      [&](int64_t a, ColumnGroupTerms& t) {
        return block_group_terms(kernels, wt, rows, inputs, c, a, count, t);
      },
      [&](const ColumnGroupTerms& t, const ColumnGroupTerms* following) {
        const uint8_t* next[8];
        if (following != nullptr) first_rows(*following, next);
        const uint16_t* scales = block_group_scales(wt, t.group);
        const uint8_t* const* ahead = following != nullptr ? next : nullptr;
        if (wt.type == DType::Q4_0) {
          kernels.axpy_q4_0_group(t.rows, t.values, t.n, scales, t.dx, y, wt.cols, ahead);
          return;
        }
        // The same pointers as int8_t's.
        const int8_t* q8_rows[kColumnGroup];
        const int8_t* q8_next[8];
        for (int k = 0; k < t.n; ++k) q8_rows[k] = reinterpret_cast<const int8_t*>(t.rows[k]);
        for (int k = 0; k < 8 && following != nullptr; ++k)
          q8_next[k] = reinterpret_cast<const int8_t*>(next[k]);
        kernels.axpy_q8_0_group(q8_rows, t.values, t.n, scales, t.dx, y, wt.cols,
                                following != nullptr ? q8_next : nullptr);
      });
}

// Every item's rows summed into its partial vector (whole rows, long sequential reads).
void axpy_partials(const CpuKernels& kernels, const MatrixView& wt, AxpyScratch& s, int64_t cols,
                   ThreadPool& pool) {
  if (s.items.empty()) return;
  pool.parallel_for_weighted(s.cumulative, [&](int64_t i0, int64_t i1, int) {
    // This thread's items cover rows [first, last) in order: each group prefetches the next.
    const AxpyItem& end_item = s.items[static_cast<size_t>(i1 - 1)];
    const int64_t last = end_item.first + end_item.count;
    for (int64_t i = i0; i < i1; ++i) {
      const AxpyItem& it = s.items[static_cast<size_t>(i)];
      float* p = s.partials.data() + i * cols;
      std::fill(p, p + cols, 0.0f);
      if (wt.layout == Layout::ColumnGroups || wt.layout == Layout::ColumnGroupSlots) {
        // A copy's rows are its inputs; split rows name theirs (the neuron list).
        const std::vector<int64_t>& inputs =
            wt.layout == Layout::ColumnGroupSlots ? s.keys : s.rows;
        axpy_column_groups(kernels, wt, s.rows.data() + it.first, inputs.data() + it.first,
                           s.coefs.data() + it.first, it.count, p);
        continue;
      }
      for (int64_t g = 0; g < it.count; g += kAxpyGroup) {
        const int n = static_cast<int>(std::min<int64_t>(kAxpyGroup, it.count - g));
        const int64_t at = it.first + g + n;
        const int n_next = static_cast<int>(std::min<int64_t>(kAxpyGroup, last - at));
        axpy_row_slice(kernels, wt, s.rows.data() + it.first + g, s.coefs.data() + it.first + g, n,
                       p, 0, cols, s.rows.data() + at, n_next);
      }
    }
  });
}

// Tokens [t0, t1): the partials of each token added in item order, over column slices.
void axpy_sum(const AxpyScratch& s, int64_t t0, int64_t t1, int64_t cols, float* out,
              int64_t out_stride, ThreadPool& pool) {
  constexpr int64_t kSlice = 256;
  const int64_t n_slices = (cols + kSlice - 1) / kSlice;
  pool.parallel_for((t1 - t0) * n_slices, [&](int64_t j0, int64_t j1, int) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t b = j / n_slices, begin = (j % n_slices) * kSlice;
      const int64_t end = std::min(cols, begin + kSlice);
      float* y = out + (t0 + b) * out_stride;
      const int64_t first = s.token_items[static_cast<size_t>(b)];
      const int64_t last = s.token_items[static_cast<size_t>(b + 1)];
      if (first == last) {
        std::fill(y + begin, y + end, 0.0f);
        continue;
      }
      const float* p0 = s.partials.data() + first * cols;
      std::copy(p0 + begin, p0 + end, y + begin);
      for (int64_t i = first + 1; i < last; ++i) {
        const float* p = s.partials.data() + i * cols;
        for (int64_t e = begin; e < end; ++e) y[e] += p[e];
      }
    }
  });
}

}  // namespace

uint64_t axpy_scratch_bound(int64_t batch, int64_t n_ids, int64_t cols) {
  // A token's items: at most two runs per bucket; its pairs: one per id.
  const uint64_t items = 2 * static_cast<uint64_t>((n_ids + kAxpyBucket - 1) / kAxpyBucket) + 1;
  const uint64_t token = items * static_cast<uint64_t>(cols) * sizeof(float) +
                         static_cast<uint64_t>(n_ids) * (sizeof(int64_t) + sizeof(float)) +
                         items * sizeof(int64_t) * 4;
  return std::min(std::max(kAxpyScratchBytes, token) + token, static_cast<uint64_t>(batch) * token);
}

void axpy_rows(const CpuKernels& kernels, const MatrixView& wt, std::span<const int32_t> ids,
               const float* c, int64_t c_stride, int64_t batch, float* out, int64_t out_stride,
               ThreadPool& pool, std::span<const int32_t> neurons) {
  // Every computable type has axpy kernels (checked before any work is handed out).
  if (!dtype_info(wt.type).computable)
    fail("axpy over a {} matrix is not supported", dtype_name(wt.type));
  const int64_t cols = wt.cols;
  const bool groups = wt.layout == Layout::ColumnGroups || wt.layout == Layout::ColumnGroupSlots;
  if (groups && (!has_column_groups(wt.type) || cols % kColumnChunk != 0))
    fail("axpy over column groups: a {} copy of {} outputs", dtype_name(wt.type), cols);
  if (wt.layout == Layout::ColumnGroupSlots && (wt.scales == nullptr || neurons.empty()))
    fail("axpy over split column-group rows needs their scale plane and each row's input");
  if (!neurons.empty() && neurons.size() != ids.size())
    fail("axpy_rows: {} neuron ids for {} rows", neurons.size(), ids.size());
  const std::span<const int32_t> keys = neurons.empty() ? ids : neurons;
  // Each token's active (row, coefficient) pairs, cut into items: runs of consecutive list
  // entries in the same bucket of kAxpyBucket neuron ids (with an ascending list, one item per
  // bucket). A thread sums an item's rows (whole rows, long sequential reads) into the item's
  // own partial vector; a token's partials are then added in item order. So a token's result
  // depends only on its active neurons and coefficients: not on the thread count, the rest of
  // the list (dense, gate-first, predicted, a batch's union) or its position in a neuron cache. No
  // two threads ever write the same memory.
  // Tokens go in chunks whose partial vectors and row lists fit kAxpyScratchBytes, so the
  // scratch stays bounded whatever the batch (the placement inventory counts that bound); a
  // token's arithmetic does not depend on its chunk.
  AxpyScratch& scratch = axpy_scratch();
  for (int64_t t0 = 0; t0 < batch;) {
    const int64_t t1 = axpy_items(scratch, ids, keys, c, c_stride, t0, batch, cols);
    axpy_partials(kernels, wt, scratch, cols, pool);
    axpy_sum(scratch, t0, t1, cols, out, out_stride, pool);
    t0 = t1;
  }
}

}  // namespace strata
