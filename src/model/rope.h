// Rotary position angles as llama.cpp computes them (ggml's rope with YaRN): pair i of a head
// turns by theta_i = pos * base^(-2i / n_rot) / factor_i, where factor_i is the file's
// rope_freqs (Llama 3.1's long-context divisors; 1 without), then scaled by the file's
// rope.scaling: linear interpolation multiplies theta by freq_scale (1 / rope.scaling.factor);
// YaRN mixes the interpolated and the original angle by a ramp over the pairs and scales the
// magnitude by 1 + 0.1 ln(factor). rope.scaling.attn_factor scales cos and sin (so q.k by its
// square). One pure function, the whole policy; the session fills its table with it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace strata {

enum class RopeScalingType { None, Linear, Yarn };

// The keys under "<arch>.rope.scaling." as llama.cpp reads them, with its defaults.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::Linear;  // llama.cpp's default without the key
  float freq_scale = 1.0f;                         // 1 / factor; factor 0 or absent means 1
  float attn_factor = 1.0f;                        // attn_factor
  int64_t n_ctx_orig = 0;                     // original_context_length (absent: context_length)
  float beta_fast = 32.0f, beta_slow = 1.0f;  // YaRN's ramp (llama.cpp's fixed defaults)
};

const char* rope_scaling_name(RopeScalingType t);

struct RopeParams {
  int64_t n_rot = 0;
  float freq_base = 10000.0f;
  RopeScaling scaling;
  std::span<const float> freq_factors;  // n_rot / 2 divisors, or empty
};

// cos and sin of each of the n_rot / 2 pairs at `pos`, magnitude included.
void rope_angles(const RopeParams& p, int64_t pos, float* cos, float* sin);

}  // namespace strata
