// Measures how fast this machine's threads can stream memory: the ceiling for decode speed.
#pragma once

#include "core/thread_pool.h"

namespace strata {

// Bytes per second read by all of the pool's threads from a buffer far larger than the caches
// (best of several passes).
double measure_read_bandwidth(ThreadPool& pool, uint64_t buffer_bytes = uint64_t{1} << 30);

}  // namespace strata
