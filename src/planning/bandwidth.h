// Measures how fast this machine's threads can stream memory: the ceiling for decode speed
// that `strata bench` reports decode against.
//
// What decode reaches is the reference (issue 29): the probe reads as a dense decode does, all
// threads, each streaming its share of several matrix rows at once with 16-byte loads, over a
// working set far beyond the last-level cache. Where it can, it reads the model's own resident
// matrices (no memory beyond the run's budget); a scratch buffer is used only when they are
// too small, and only when the budget leaves room for it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace strata {

struct ReadRegion {
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// Bytes per second all of the pool's threads read from `regions` (best of several passes).
double measure_read_bandwidth(ThreadPool& pool, std::span<const ReadRegion> regions);

// The same over a scratch buffer of `buffer_bytes` (huge pages), 0.0 when it cannot be had.
double measure_read_bandwidth(ThreadPool& pool, uint64_t buffer_bytes);

// The matrices a decode step reads whole from RAM: attention, predictors, the FFN when it is
// resident, the output head. Each once (a tied head is the embedding, which stays unread
// otherwise), host memory only.
std::vector<ReadRegion> resident_matrices(const Model& model);

// Smallest working set the probe trusts: well beyond any last-level cache strata runs on
// (AMD's 3D V-cache parts have up to 96 MiB per CCD).
inline constexpr uint64_t kMinProbeBytes = uint64_t{256} << 20;

// What decode can reach: bytes per second of weights the backend's own products read when
// they multiply one token by every matrix a dense decode multiplies whole (attention, the FFN
// when resident, the output head), layer by layer as decode does, with its threads and its
// kernels, over the model's own matrices (no memory beyond the run's). Best of `passes`.
// 0.0 when the model has no such matrices.
double decode_kernel_rate(Backend& backend, const Model& model, int passes = 5);

struct BandwidthProbe {
  // The limit decode is measured against: decode_kernel_rate on the CPU, else the memory's.
  double bytes_per_s = 0;         // 0: not measured
  std::string note;               // how it was measured
  double memory_bytes_per_s = 0;  // the memory streamed (measure_read_bandwidth), 0: not
  std::string memory_note;        // how, or why not
};

// A run's probe: the decode kernels' rate (a CPU backend), and the memory streamed over the
// model's resident matrices when they are at least kMinProbeBytes, else over a scratch buffer
// of that size when `ram_left` (the RAM budget minus what the run holds; UINT64_MAX without a
// budget) has room for it, else not at all.
BandwidthProbe probe_bandwidth(Backend& backend, ThreadPool& pool, const Model& model,
                               uint64_t ram_left);

}  // namespace strata
