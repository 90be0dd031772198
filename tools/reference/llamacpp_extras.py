"""What llama.cpp v0.5.0's graphs do with the optional tensors and keys its loaders accept, in
PyTorch (float64), for the references: written from llama.cpp's model definitions
(src/models/<arch>.cpp, llama-graph.cpp's build_qkv/build_ffn/build_moe_ffn, ggml's rope), not
from strata's code.

- Per-tensor scales (<matrix>.scale, [1]; stacked experts [n_expert]) multiply a matrix's
  products. Attention's projections are (W x) s + b (build_qkv, build_attn); a dense FFN's
  (W x + b) s (build_ffn). llama.cpp loads them for every family, but each graph applies only
  some: APPLIED below. <matrix>.input_scale is loaded and read by no graph of these families.
- rope_freqs.weight (llama): theta_i = pos * base^(-2i/n_rot) / rope_freqs[i].
- rope.scaling: linear multiplies theta by 1/factor (factor 0 = none); yarn mixes the scaled and
  the original angle by a ramp over the pairs (ggml_rope_yarn_corr_dims, beta_fast 32,
  beta_slow 1) and scales cos/sin by 1 + 0.1 ln(factor); attn_factor scales cos/sin."""
import math

import numpy as np
import torch

# Which scales each family's graph applies: attention, a dense FFN's, a mixture's experts'.
APPLIED = {"llama": {"attn", "ffn", "exps"}, "falcon": {"attn"}, "qwen2": {"attn"},
           "qwen3": {"attn", "ffn"}, "qwen2moe": {"attn"}, "qwen3moe": {"attn", "exps"}}


def _kind(base):
    stem = base.rsplit(".", 1)[-1]
    if stem.endswith("_exps"):
        return "exps"
    return "attn" if stem.startswith("attn_") else "ffn"


def scale_of(g, base):
    """The scale of matrix `base` (e.g. "blk.0.attn_q") as its family's graph applies it:
    a float64 tensor, or None."""
    arch = g.kv["general.architecture"]
    name = base + ".scale"
    if name not in g.tensors or _kind(base) not in APPLIED.get(arch, {"attn"}):
        return None
    return torch.from_numpy(g.tensor(name).astype(np.float64))


def finish(g, base, y):
    """A projection's output y = x W^T completed with its bias and scale, in llama.cpp's order."""
    s = scale_of(g, base)
    b = torch.from_numpy(g.tensor(base + ".bias").astype(np.float64)) \
        if base + ".bias" in g.tensors else None
    if _kind(base) == "ffn":
        y = y + b if b is not None else y
        return y * s if s is not None else y
    y = y * s if s is not None else y
    return y + b if b is not None else y


def rope_tables(g, n_rot, positions):
    """cos and sin [T, n_rot / 2] of each pair's angle at each position, magnitude included."""
    kv = g.kv
    arch = kv["general.architecture"]
    base = float(kv.get(f"{arch}.rope.freq_base", 10000.0))
    kind = kv.get(f"{arch}.rope.scaling.type", "linear")
    factor = float(kv.get(f"{arch}.rope.scaling.factor", 0.0)) or 1.0
    scale = 1.0 if kind == "none" else 1.0 / factor
    mscale = float(kv.get(f"{arch}.rope.scaling.attn_factor", 1.0))
    i = torch.arange(n_rot // 2, dtype=torch.float64)
    theta = positions[:, None].to(torch.float64) * (base ** (-2.0 * i / n_rot))[None, :]
    if arch == "llama" and "rope_freqs.weight" in g.tensors:
        theta = theta / torch.from_numpy(g.tensor("rope_freqs.weight").astype(np.float64))
    angle = theta * scale
    if kind == "yarn":
        n_ctx = kv.get(f"{arch}.rope.scaling.original_context_length",
                       kv.get(f"{arch}.context_length"))

        def corr(rot):
            return n_rot * math.log(n_ctx / (rot * 2 * math.pi)) / (2 * math.log(base))
        low, high = max(0.0, math.floor(corr(32.0))), min(n_rot - 1.0, math.ceil(corr(1.0)))
        ramp = 1.0 - torch.clamp((i - low) / max(0.001, high - low), 0.0, 1.0)
        angle = angle * (1.0 - ramp) + theta * ramp
        if factor > 1.0:
            mscale *= 1.0 + 0.1 * math.log(factor)
    return torch.cos(angle) * mscale, torch.sin(angle) * mscale
