"""Reference forward pass in PyTorch (float64) of gpt-oss over a GGUF file with llama.cpp's names,
written from Hugging Face's modeling_gpt_oss.py, not from strata's code.

GptOssDecoderLayer: x += attn(input_layernorm(x)); x += mlp(post_attention_layernorm(x)) (GGUF:
attn_norm, post_attention_norm). GptOssAttention: q, k, v, o with biases; rotate_half RoPE;
scores q.k * head_dim^-0.5, the causal mask (on sliding layers, only the last sliding_window
positions); the sinks: each head's logit joins the softmax (concatenated, the max taken over
both) and its probability is dropped. GptOssTopKRouter: logits = W x + b, the top k, their
softmax. GptOssExperts: gate and up (HF interleaves them in gate_up_proj; llama.cpp's converter
writes them as ffn_gate_exps and ffn_up_exps) with their biases, gate clamped above at 7, up to
[-7, 7], glu = gate * sigmoid(1.702 gate), out = down((up + 1) * glu) + down bias. Sliding layers:
the even ones (HF's layer_types), or the file's per-layer sliding_window_pattern. Per-tensor
scales apply to attention only (llamacpp_extras.finish), as llama.cpp's graph does."""
import torch

from neox_ref import NeoxReference


class GptOssReference(NeoxReference):
    def __init__(self, path):
        super().__init__(path)
        kv, a = self.g.kv, "gpt-oss"
        self.n_layer = kv[f"{a}.block_count"]
        self.n_head = kv[f"{a}.attention.head_count"]
        self.n_head_kv = kv.get(f"{a}.attention.head_count_kv", self.n_head)
        self.head_dim = kv[f"{a}.attention.key_length"]
        self.n_rot = kv.get(f"{a}.rope.dimension_count", self.head_dim)
        self.eps = float(kv[f"{a}.attention.layer_norm_rms_epsilon"])
        self.window = kv[f"{a}.attention.sliding_window"]
        pattern = kv.get(f"{a}.attention.sliding_window_pattern", 2)
        if isinstance(pattern, list):
            self.sliding = [bool(p) for p in pattern]
        else:
            self.sliding = [pattern == 0 or l % pattern < pattern - 1 for l in range(self.n_layer)]
        self.k = kv[f"{a}.expert_used_count"]

    def attention(self, h, p, layer, positions):
        T, d, H, Hkv = h.shape[0], self.head_dim, self.n_head, self.n_head_kv
        q = self.rotate(self.proj(h, p + "attn_q").view(T, H, d), positions)
        k = self.rotate(self.proj(h, p + "attn_k").view(T, Hkv, d), positions)
        v = self.proj(h, p + "attn_v").view(T, Hkv, d)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) * d ** -0.5
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        if self.sliding[layer]:
            mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-self.window)
        s = s + mask
        sinks = self.weight(p + "attn_sinks.weight")[:, None, None].expand(H, T, 1)
        combined = torch.cat([s, sinks], dim=-1)
        probs = torch.softmax(combined - combined.max(-1, keepdim=True).values, dim=-1)[..., :-1]
        out = torch.einsum("hts,shd->thd", probs, v).reshape(T, H * d)
        return self.proj(out, p + "attn_output")

    def experts(self, h, p):
        logits = h @ self.weight(p + "ffn_gate_inp.weight").T + self.weight(p + "ffn_gate_inp.bias")
        top = torch.sort(logits, dim=-1, descending=True, stable=True)
        values, order = top.values[:, :self.k], top.indices[:, :self.k]
        weights = torch.softmax(values, dim=-1)
        gate_w, up_w = self.weight(p + "ffn_gate_exps.weight"), self.weight(p + "ffn_up_exps.weight")
        down_w = self.weight(p + "ffn_down_exps.weight")
        gate_b, up_b = self.weight(p + "ffn_gate_exps.bias"), self.weight(p + "ffn_up_exps.bias")
        down_b = self.weight(p + "ffn_down_exps.bias")
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for s in range(self.k):
                e = int(order[t, s])
                gate = (gate_w[e] @ h[t] + gate_b[e]).clamp(max=7.0)
                up = (up_w[e] @ h[t] + up_b[e]).clamp(-7.0, 7.0)
                glu = gate * torch.sigmoid(gate * 1.702)
                out[t] += weights[t, s] * (down_w[e] @ ((up + 1) * glu) + down_b[e])
        return out

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        positions = torch.arange(T)
        for l in range(self.n_layer):
            p = f"blk.{l}."
            x = x + self.attention(self.rms_norm(x, p + "attn_norm.weight"), p, l, positions)
            x = x + self.experts(self.rms_norm(x, p + "post_attention_norm.weight"), p)
        x = self.rms_norm(x, "output_norm.weight")
        return x @ self.weight("output.weight").T
