"""Reference forward pass in PyTorch (float64) of Gemma 2 and Gemma 3 (text) over GGUF files with
llama.cpp's names, written from Hugging Face's modeling_gemma2.py and modeling_gemma3.py, not from
strata's code.

The embedding times sqrt(hidden_size) (HF's normalizer); per layer: input_layernorm (GGUF
attn_norm), attention, post_attention_layernorm (post_attention_norm) before the residual add,
pre_feedforward_layernorm (ffn_norm), the MLP down(gelu_pytorch_tanh(gate) * up),
post_feedforward_layernorm (post_ffw_norm) before its add. HF's RMSNorm multiplies by (1 + w);
llama.cpp's converter stores 1 + w, so the stored weight multiplies here. Attention: q, k, v
projections; Gemma 3 RMS-norms each query and key head (q_norm, k_norm) before the rotation;
rotate_half RoPE; scores q.k * query_pre_attn_scalar^-0.5 (head_dim, except the 27B models:
hidden / heads), soft-capped as cap * tanh(s / cap) with attn_logit_softcapping (Gemma 2); the
causal mask, and on sliding layers only the last sliding_window positions (HF's
sliding_window_mask); grouped-query heads. Sliding layers: Gemma 2's even layers; Gemma 3's
layer_types, every layer but each sixth; a file's sliding_window_pattern (a period or one flag per
layer) says which. Gemma 3's sliding layers rotate with rope_local_base_freq unscaled, its global
layers with rope_theta and the rope scaling (linear). Per-tensor scales (llama.cpp's `.scale`
tensors) multiply attention's projections only, as llama.cpp's Gemma graphs apply them. The logits soft-capped with
final_logit_softcapping where the model has one (Gemma 2: 30 by default)."""
import math

import numpy as np
import torch

from gguf_py import GGUFReader
from llama_ref import quantize_q8_0_roundtrip
from llamacpp_extras import finish


class GemmaReference:
    def __init__(self, path, query_pre_attn_scalar=None, emulate_q8=False):
        """emulate_q8: a Q8_0 weight's input rounded through Q8_0 blocks first, as the CPU
        kernels of strata and llama.cpp compute (llama_ref.quantize_q8_0_roundtrip)."""
        self.emulate_q8 = emulate_q8
        self.g = GGUFReader(path)
        kv = self.g.kv
        self.arch = a = kv["general.architecture"]
        self.n_embd = kv[f"{a}.embedding_length"]
        self.n_layer = kv[f"{a}.block_count"]
        self.n_head = kv[f"{a}.attention.head_count"]
        self.n_head_kv = kv.get(f"{a}.attention.head_count_kv", self.n_head)
        self.head_dim = kv.get(f"{a}.attention.key_length", self.n_embd // self.n_head)
        self.eps = float(kv.get(f"{a}.attention.layer_norm_rms_epsilon", 1e-6))
        gemma2 = a == "gemma2"
        self.window = kv.get(f"{a}.attention.sliding_window", 4096 if gemma2 else 0)
        pattern = kv.get(f"{a}.attention.sliding_window_pattern", 2 if gemma2 else 6)
        if isinstance(pattern, list):
            self.sliding = [bool(p) for p in pattern]
        else:  # HF: layer_types, every pattern-th layer global
            self.sliding = [pattern == 0 or (l + 1) % pattern != 0 for l in range(self.n_layer)]
        if not self.window:
            self.sliding = [False] * self.n_layer
        self.theta = float(kv.get(f"{a}.rope.freq_base", 10000.0))
        factor = float(kv.get(f"{a}.rope.scaling.factor", 0.0)) or 1.0
        self.scale = 1.0 / factor if kv.get(f"{a}.rope.scaling.type", "linear") == "linear" else 1.0
        if gemma2:  # one RoPE for every layer
            self.local_theta, self.local_scale = self.theta, self.scale
        else:
            self.local_theta, self.local_scale = float(kv.get(f"{a}.rope.freq_base_swa", 10000.0)), 1.0
        self.attn_cap = float(kv.get(f"{a}.attn_logit_softcapping", 50.0)) if gemma2 else 0.0
        self.final_cap = float(kv.get(f"{a}.final_logit_softcapping", 30.0 if gemma2 else 0.0))
        self.query_scalar = query_pre_attn_scalar or self.head_dim

    def has(self, name):
        return name in self.g.tensors

    def weight(self, name):
        return torch.from_numpy(self.g.tensor(name).astype(np.float64))

    def linear(self, x, stem):
        """Attention's projections with their bias and per-tensor scale (FP8/NVFP4 conversions'
        scale2) as llama.cpp applies them; its Gemma graphs apply no FFN scale."""
        if self.emulate_q8 and self.g.type_name(stem + ".weight") == "Q8_0":
            x = quantize_q8_0_roundtrip(x)
        y = x @ self.weight(stem + ".weight").T
        if stem.split(".")[-1].startswith("attn_"):
            return finish(self.g, stem, y)
        return y + self.weight(stem + ".bias") if self.has(stem + ".bias") else y

    def rms_norm(self, x, name):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight(name)

    def rotate(self, x, positions, theta, scale):
        d = self.head_dim
        inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angle = positions[:, None].to(torch.float64) * scale * inv[None, :]
        cos = torch.cat([angle.cos(), angle.cos()], dim=-1)[:, None, :]
        sin = torch.cat([angle.sin(), angle.sin()], dim=-1)[:, None, :]
        half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
        return x * cos + half * sin

    def attention(self, h, p, layer, positions):
        T, d = h.shape[0], self.head_dim
        q = self.linear(h, p + "attn_q").view(T, self.n_head, d)
        k = self.linear(h, p + "attn_k").view(T, self.n_head_kv, d)
        v = self.linear(h, p + "attn_v").view(T, self.n_head_kv, d)
        if self.has(p + "attn_q_norm.weight"):
            q = self.rms_norm(q, p + "attn_q_norm.weight")
            k = self.rms_norm(k, p + "attn_k_norm.weight")
        local = self.sliding[layer]
        theta, scale = (self.local_theta, self.local_scale) if local else (self.theta, self.scale)
        q, k = self.rotate(q, positions, theta, scale), self.rotate(k, positions, theta, scale)
        group = self.n_head // self.n_head_kv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) * self.query_scalar ** -0.5
        if self.attn_cap:
            s = torch.tanh(s / self.attn_cap) * self.attn_cap
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        if local:
            mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-self.window)
        att = torch.softmax(s + mask, dim=-1)
        out = torch.einsum("hts,shd->thd", att, v).reshape(T, self.n_head * d)
        return self.linear(out, p + "attn_output")

    def mlp(self, h, p):
        gate = torch.nn.functional.gelu(self.linear(h, p + "ffn_gate"), approximate="tanh")
        return self.linear(gate * self.linear(h, p + "ffn_up"), p + "ffn_down")

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        x = x * torch.tensor(math.sqrt(self.n_embd), dtype=torch.float32).to(torch.float64)
        positions = torch.arange(T)
        for l in range(self.n_layer):
            p = f"blk.{l}."
            a = self.attention(self.rms_norm(x, p + "attn_norm.weight"), p, l, positions)
            x = x + self.rms_norm(a, p + "post_attention_norm.weight")
            m = self.mlp(self.rms_norm(x, p + "ffn_norm.weight"), p)
            x = x + self.rms_norm(m, p + "post_ffw_norm.weight")
        x = self.rms_norm(x, "output_norm.weight")
        head = "output.weight" if self.has("output.weight") and self.arch != "gemma2" else "token_embd.weight"
        if self.emulate_q8 and self.g.type_name(head) == "Q8_0":
            x = quantize_q8_0_roundtrip(x)
        logits = x @ self.weight(head).T
        if self.final_cap:
            logits = torch.tanh(logits / self.final_cap) * self.final_cap
        return logits
