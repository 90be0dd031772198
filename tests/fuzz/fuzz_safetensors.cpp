// The safetensors reader (8-byte length, JSON header, tensor table) on arbitrary bytes: it
// opens or fails with strata::Error; what it opens converts each tensor's first values.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "format/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const strata::fuzz::MemFile file(data, size);
  try {
    const auto f = strata::SafetensorsFile::open(file.path());
    std::vector<float> row(16);
    for (const auto& [name, t] : f->tensors()) {
      const uint64_t n = std::min<uint64_t>(16, t.n_elements());
      strata::safetensor_to_f32(t, 0, static_cast<int64_t>(n), row.data());
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
