#include "planning/bandwidth.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/timer.h"

namespace strata {

namespace {

using Lane = long long __attribute__((vector_size(16)));  // one 16-byte load (SSE2 and up)

// A decode thread's share of a matrix is a run of rows that the kernel reads several at a time:
// the probe reads kStreams parts of each chunk side by side, 64 bytes of each per step.
constexpr int kStreams = 4;
constexpr uint64_t kChunk = uint64_t{1} << 20;  // a unit of work, split into kStreams streams

Lane read_chunk(const uint8_t* p, uint64_t bytes) {
  const uint64_t part = bytes / kStreams / 64 * 64;
  Lane a = {0, 0}, b = {0, 0}, c = {0, 0}, d = {0, 0};
  for (uint64_t off = 0; off < part; off += 64) {
    for (int s = 0; s < kStreams; ++s) {
      const uint8_t* q = p + s * part + off;
      Lane x0, x1, x2, x3;
      std::memcpy(&x0, q, 16);
      std::memcpy(&x1, q + 16, 16);
      std::memcpy(&x2, q + 32, 16);
      std::memcpy(&x3, q + 48, 16);
      a += x0;
      b += x1;
      c += x2;
      d += x3;
    }
  }
  for (uint64_t off = kStreams * part; off < bytes; ++off) a[0] += p[off];
  return a + b + c + d;
}

struct Piece {
  const uint8_t* data;
  uint64_t bytes;
};

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, std::span<const ReadRegion> regions) {
  std::vector<Piece> pieces;
  uint64_t total = 0;
  for (const ReadRegion& r : regions) {
    for (uint64_t off = 0; off < r.bytes; off += kChunk)
      pieces.push_back({r.data + off, std::min(kChunk, r.bytes - off)});
    total += r.bytes;
  }
  if (total == 0) return 0.0;
  std::vector<Lane> sums(pool.size() * 4, Lane{0, 0});  // a cache line apart per thread
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    Timer t;
    pool.parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t b, int64_t e, int th) {
      Lane s = {0, 0};
      for (int64_t i = b; i < e; ++i) s += read_chunk(pieces[i].data, pieces[i].bytes);
      sums[static_cast<size_t>(th) * 4] += s;
    });
    best = std::max(best, static_cast<double>(total) / t.seconds());
  }
  volatile long long sink = sums[0][0];
  (void)sink;
  return best;
}

double measure_read_bandwidth(ThreadPool& pool, uint64_t buffer_bytes) {
  // Huge pages, like the model weights (see core/mapped_file.h): the figure is the memory
  // system's, not the TLB's.
  void* mem =
      ::mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 0.0;
  ::madvise(mem, buffer_bytes, MADV_HUGEPAGE);
  auto* buf = static_cast<uint8_t*>(mem);
  pool.parallel_for(static_cast<int64_t>(buffer_bytes / kChunk), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      std::memset(buf + static_cast<uint64_t>(i) * kChunk, static_cast<int>(i), kChunk);
  });
  const ReadRegion region{buf, buffer_bytes / kChunk * kChunk};
  const double r = measure_read_bandwidth(pool, std::span<const ReadRegion>(&region, 1));
  ::munmap(mem, buffer_bytes);
  return r;
}

std::vector<ReadRegion> resident_matrices(const Model& model) {
  const ModelWeights& w = model.weights;
  std::vector<ReadRegion> out;
  std::set<const uint8_t*> seen;
  auto add = [&](const MatrixView& m) {
    if (m.data == nullptr || m.device != Device::Host || m.bytes() == 0) return;
    if (seen.insert(m.data).second) out.push_back({m.data, m.bytes()});
  };
  for (const LayerWeights& l : w.layers) {
    for (const MatrixView* m : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate,
                                &l.ffn_up, &l.ffn_down, &l.ffn_down_t})
      add(*m);
    add(l.predictor.fc1);
    add(l.predictor.fc2);
    add(l.ffn_gate_inp);
    for (const ExpertMatrices& x : l.experts)
      for (const MatrixView* m : {&x.gate, &x.up, &x.down}) add(*m);
  }
  add(w.output);
  return out;
}

double decode_kernel_rate(Backend& backend, const Model& model, int passes) {
  const ModelConfig& c = model.config;
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t widest = std::max({c.n_embd, q_dim, c.n_ff});
  std::vector<float> x(static_cast<size_t>(widest), 0.5f);
  // Room for the outputs of the largest group (gate and up, or the output head).
  std::vector<float> y(
      static_cast<size_t>(std::max(c.n_vocab, 2 * c.n_ff) + 2 * q_dim + 2 * c.n_embd));
  auto in = backend.make_prepared(1);
  uint64_t bytes = 0;
  // Products of matrices that read the same input, as decode groups them.
  auto multiply = [&](std::initializer_list<const MatrixView*> group, int64_t dim, bool count) {
    std::vector<RowsJob> jobs;
    std::vector<DType> readers;
    size_t out = 0;
    for (const MatrixView* w : group) {
      if (w->data == nullptr || w->device != Device::Host || w->cols != dim) continue;
      jobs.push_back({w, y.data() + out, 0});
      out += static_cast<size_t>(w->rows);
      readers.push_back(w->type);
      if (count) bytes += w->bytes();
    }
    if (jobs.empty()) return;
    backend.prepare(*in, x.data(), dim, 1, std::span<const DType>(readers));
    backend.matmul(jobs, *in);
  };
  auto pass = [&](bool count) {
    for (const LayerWeights& l : model.weights.layers) {
      multiply({&l.attn_q, &l.attn_k, &l.attn_v}, c.n_embd, count);
      multiply({&l.attn_output}, q_dim, count);
      multiply({&l.ffn_gate, &l.ffn_up}, c.n_embd, count);
      multiply({&l.ffn_down}, c.n_ff, count);
      multiply({&l.ffn_gate_inp}, c.n_embd, count);
      for (const ExpertMatrices& x : l.experts) {  // every expert, as a rate over all of them
        multiply({&x.gate, &x.up}, c.n_embd, count);
        multiply({&x.down}, c.n_ff, count);
      }
    }
    multiply({&model.weights.output}, c.n_embd, count);
    backend.synchronize();
  };
  double best = 0;
  for (int i = 0; i < passes; ++i) {
    Timer t;
    pass(i == 0);
    if (bytes == 0) return 0.0;
    best = std::max(best, static_cast<double>(bytes) / t.seconds());
  }
  return best;
}

BandwidthProbe probe_bandwidth(Backend& backend, ThreadPool& pool, const Model& model,
                               uint64_t ram_left) {
  BandwidthProbe p;
  const std::vector<ReadRegion> regions = resident_matrices(model);
  uint64_t resident = 0;
  for (const ReadRegion& r : regions) resident += r.bytes;
  const double mib = static_cast<double>(resident) / (1 << 20);
  if (resident >= kMinProbeBytes) {
    p.memory_bytes_per_s = measure_read_bandwidth(pool, regions);
    p.memory_note = fmt::format("streamed over the model's {:.0f} MiB of matrices", mib);
  } else if (ram_left >= kMinProbeBytes) {
    p.memory_bytes_per_s = measure_read_bandwidth(pool, kMinProbeBytes);
    p.memory_note = fmt::format("streamed over a {} MiB buffer", kMinProbeBytes >> 20);
  } else {
    p.memory_note = fmt::format(
        "not measured: the model's matrices ({:.0f} MiB) are too few to measure memory with, "
        "and the RAM budget leaves {:.0f} MiB, under the probe's {} MiB",
        mib, static_cast<double>(ram_left) / (1 << 20), kMinProbeBytes >> 20);
  }
  if (backend.device() == Device::Host) {
    p.bytes_per_s = decode_kernel_rate(backend, model);
    p.note = fmt::format("the decode kernels alone over the model's matrices{}",
                         resident < kMinProbeBytes ? ", which fit in the caches" : "");
  }
  if (p.bytes_per_s <= 0) {
    p.bytes_per_s = p.memory_bytes_per_s;
    p.note = p.memory_note;
  }
  return p;
}

}  // namespace strata
