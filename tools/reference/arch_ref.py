"""Reference forward passes in PyTorch (float64) of the architectures beside LLaMA, written from
their published model definitions (Hugging Face's modeling_falcon.py and modeling_opt.py), not
from strata's code, over GGUF files with llama.cpp's and PowerInfer's tensor names.

Falcon: LayerNorm with biases; rotary embedding on halves (rotate_half, GPT-NeoX style) over
the whole head; one fused query/key/value matrix, in the GGUF layout llama.cpp's converter
writes (all query heads, then the key heads, then the value heads); multi-query or grouped
attention; attention and MLP in parallel on the layer's input, out = x + (mlp + attn); with two norms
(Falcon-40B) HF's ln_attn is the GGUF's attn_norm_2 and ln_mlp its attn_norm (llama.cpp's
converter's tensor map), with one (Falcon-7B) both read attn_norm; no biases in the
projections. Its GELU: HF's model uses the exact erf form; GGUF falcon files are run by
llama.cpp with the tanh approximation, which strata follows, so the reference takes the tanh
form too (gelu="erf" gives HF's).

OPT: learned positions (row p + 2 of the table, HF's OPTLearnedPositionalEmbedding offset), pre-
norm LayerNorm with biases (do_layer_norm_before), every projection with a bias, ReLU MLP with
biases, the output head tied to the embedding unless output.weight exists, final LayerNorm.
The down projection comes from ffn_down, or from PowerInfer's ffn_down_t (its bias under
either name).

Qwen2 (Hugging Face's modeling_qwen2.py): RMSNorm, q/k/v projections with biases (the output
projection without), rotary embedding on halves (rotate_half) over the whole head, grouped-query
attention, SwiGLU MLP, the output head tied to the embedding unless output.weight exists.
Qwen3 (modeling_qwen3.py): the same without biases, each query and key head RMS-normed
(q_norm, k_norm over head_dim) after its projection and before the rotation; the head size is
attention.key_length.

Qwen3-MoE (modeling_qwen3_moe.py): Qwen3's layer whose MLP is a mixture, as Mixtral's with
norm_topk_prob (the chosen experts' weights renormalized), each expert SwiGLU.

Mixtral (modeling_mixtral.py's MixtralSparseMoeBlock): LLaMA's layer whose MLP is a mixture;
router logits = gate(h), routing weights = softmax over all experts (float), the top k kept and
renormalized to sum to 1; each chosen expert's SwiGLU MLP (w2(silu(w1 h) * w3 h); GGUF: gate,
down, up) weighted and summed. Ties between equal logits go to the lower expert (a stable sort;
torch.topk leaves them unspecified). The experts come stacked (ffn_*_exps) or one tensor each
(ffn_gate.E ...), as the file has them."""
import numpy as np
import torch

from gguf_py import GGUFReader
from llamacpp_extras import finish, rope_tables, scale_of
from llama_ref import (LlamaReference, causal_mask, quantize_q8_0_roundtrip,
                       quantize_q8_k_roundtrip, K_TYPES)


class _Base:
    def __init__(self, path):
        self.g = GGUFReader(path)
        kv = self.g.kv
        arch = kv["general.architecture"]
        self.n_embd = kv[f"{arch}.embedding_length"]
        self.n_layer = kv[f"{arch}.block_count"]
        self.n_head = kv[f"{arch}.attention.head_count"]
        self.n_head_kv = kv.get(f"{arch}.attention.head_count_kv", self.n_head)
        self.head_dim = kv.get(f"{arch}.attention.key_length", self.n_embd // self.n_head)
        self.eps = float(kv.get(f"{arch}.attention.layer_norm_epsilon", 1e-5))
        # strata's own key: llama.cpp's graphs of these families ignore <arch>.attention.sliding_window.
        self.window = kv.get("strata.attention.sliding_window", 0)
        self.base = float(kv.get(f"{arch}.rope.freq_base", 10000.0))
        self.ffn = kv.get("strata.ffn_activation")

    def has(self, name):
        return name in self.g.tensors

    def weight(self, name):
        return torch.from_numpy(self.g.tensor(name).astype(np.float64))

    def linear(self, x, name, bias=None):
        """x through `name` (a .weight) with its bias and scale as llama.cpp applies them; `bias`
        names another bias (PowerInfer's ffn_down_t.bias)."""
        y = x @ self.weight(name).T
        if bias is not None and bias != name[:-len(".weight")] + ".bias" and self.has(bias):
            y = y + self.weight(bias)
        return finish(self.g, name[:-len(".weight")], y) if name.endswith(".weight") else y

    def layer_norm(self, x, name):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight(name + ".weight")
        return y + self.weight(name + ".bias") if self.has(name + ".bias") else y

    def attend(self, q, k, v):
        """q [T, H, d], k/v [T, Hkv, d]: causal softmax attention, [T, H * d]."""
        T = q.shape[0]
        group = self.n_head // self.n_head_kv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / np.sqrt(self.head_dim) + causal_mask(
            T, self.window)
        att = torch.softmax(scores, dim=-1)
        return torch.einsum("hts,shd->thd", att, v).reshape(T, self.n_head * self.head_dim)

    def head(self, x):
        name = "output.weight" if self.has("output.weight") else "token_embd.weight"
        y = x @ self.weight(name).T
        return y + self.weight("output.bias") if self.has("output.bias") else y


class FalconReference(_Base):
    def __init__(self, path, gelu="tanh"):
        super().__init__(path)
        self.gelu = gelu
        self.ffn = self.ffn or "gelu"

    def rotate(self, x, positions):
        """HF's apply_rotary_pos_emb with rotate_half: element i pairs with i + d/2."""
        d = self.head_dim
        cos, sin = rope_tables(self.g, d, positions)
        cos, sin = torch.cat([cos, cos], dim=-1)[:, None, :], torch.cat([sin, sin], dim=-1)[:, None, :]
        half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
        return x * cos + half * sin

    def mlp(self, h, p):
        up = self.linear(h, p + "ffn_up.weight")
        if self.ffn == "relu":
            a = torch.relu(up)
        else:
            a = torch.nn.functional.gelu(up, approximate=self.gelu if self.gelu == "tanh" else "none")
        if self.has(p + "ffn_down.weight"):
            return self.linear(a, p + "ffn_down.weight")
        return a @ self.weight(p + "ffn_down_t.weight")

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        pos = torch.arange(T)
        d, H, Hkv = self.head_dim, self.n_head, self.n_head_kv
        for l in range(self.n_layer):
            p = f"blk.{l}."
            ln_mlp = self.layer_norm(x, p + "attn_norm")
            two = self.has(p + "attn_norm_2.weight")
            ln_attn = self.layer_norm(x, p + "attn_norm_2") if two else ln_mlp
            qkv = self.linear(ln_attn, p + "attn_qkv.weight")
            q = qkv[:, : H * d].view(T, H, d)
            k = qkv[:, H * d: (H + Hkv) * d].view(T, Hkv, d)
            v = qkv[:, (H + Hkv) * d:].view(T, Hkv, d)
            q, k = self.rotate(q, pos), self.rotate(k, pos)
            attn = self.linear(self.attend(q, k, v), p + "attn_output.weight")
            x = x + (self.mlp(ln_mlp, p) + attn)
        return self.head(self.layer_norm(x, "output_norm"))


class OptReference(_Base):
    POSITION_OFFSET = 2

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        x = x + self.weight("position_embd.weight")[torch.arange(T) + self.POSITION_OFFSET]
        d, H = self.head_dim, self.n_head
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.layer_norm(x, p + "attn_norm")
            q = self.linear(h, p + "attn_q.weight", p + "attn_q.bias").view(T, H, d)
            k = self.linear(h, p + "attn_k.weight", p + "attn_k.bias").view(T, self.n_head_kv, d)
            v = self.linear(h, p + "attn_v.weight", p + "attn_v.bias").view(T, self.n_head_kv, d)
            x = x + self.linear(self.attend(q, k, v), p + "attn_output.weight", p + "attn_output.bias")
            h = self.layer_norm(x, p + "ffn_norm")
            a = torch.relu(self.linear(h, p + "ffn_up.weight", p + "ffn_up.bias"))
            if self.has(p + "ffn_down.weight"):  # its bias with it (linear)
                x = x + self.linear(a, p + "ffn_down.weight")
            else:
                bias = p + "ffn_down.bias" if self.has(p + "ffn_down.bias") else p + "ffn_down_t.bias"
                x = x + a @ self.weight(p + "ffn_down_t.weight") + self.weight(bias)
        return self.head(self.layer_norm(x, "output_norm"))


class Qwen2Reference(_Base):
    def __init__(self, path):
        super().__init__(path)
        arch = self.g.kv["general.architecture"]
        self.eps = float(self.g.kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6))

    def head_norm(self, t, name):  # Qwen3's q_norm / k_norm; Qwen2 has none
        return self.rms_norm(t, name) if self.has(name) else t

    def rms_norm(self, x, name):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight(name)

    rotate = FalconReference.rotate  # HF's rotate_half, the same in both definitions

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        pos = torch.arange(T)
        d, H, Hkv = self.head_dim, self.n_head, self.n_head_kv
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.rms_norm(x, p + "attn_norm.weight")
            q = self.linear(h, p + "attn_q.weight", p + "attn_q.bias").view(T, H, d)
            k = self.linear(h, p + "attn_k.weight", p + "attn_k.bias").view(T, Hkv, d)
            v = self.linear(h, p + "attn_v.weight", p + "attn_v.bias").view(T, Hkv, d)
            q, k = self.head_norm(q, p + "attn_q_norm.weight"), self.head_norm(k, p + "attn_k_norm.weight")
            q, k = self.rotate(q, pos), self.rotate(k, pos)
            x = x + self.linear(self.attend(q, k, v), p + "attn_output.weight")
            x = x + self.mlp(p, self.rms_norm(x, p + "ffn_norm.weight"))
        return self.head(self.rms_norm(x, "output_norm.weight"))

    def mlp(self, p, h):
        gate = self.linear(h, p + "ffn_gate.weight")
        a = torch.nn.functional.silu(gate) * self.linear(h, p + "ffn_up.weight")
        return self.linear(a, p + "ffn_down.weight")


# Qwen3: the same forward; it reads attn_q_norm/attn_k_norm where the file has them and adds no
# bias where the file has none.
Qwen3Reference = Qwen2Reference


def moe_mlp(h, logits, k, expert, activate, renormalize=True):
    """A mixture's output for normed inputs h [T, d] (HF's MixtralSparseMoeBlock and
    Qwen3MoeSparseMoeBlock with norm_topk_prob): the softmax of the router's logits, the top k
    (ties to the lower expert: a stable sort), renormalized (Qwen2MoeSparseMoeBlock: not); each
    chosen expert's down(activate(gate, up)) weighted and summed. expert(kind, e, x) is x times
    expert e's kind ("gate", "up", "down") matrix, transposed."""
    probs = torch.softmax(logits, dim=-1)
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]
    chosen = torch.gather(probs, 1, order)
    if renormalize:
        chosen = chosen / chosen.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for t in range(h.shape[0]):
        for s in range(k):
            e = int(order[t, s])
            x = h[t:t + 1]
            a = activate(expert("gate", e, x), expert("up", e, x))
            out[t] += chosen[t, s] * expert("down", e, a)[0]
    return out


class Qwen3MoeReference(Qwen2Reference):
    """Qwen3-MoE (modeling_qwen3_moe.py): Qwen3's attention, the MLP a mixture of SwiGLU
    experts, stacked in ffn_*_exps."""

    def __init__(self, path):
        super().__init__(path)
        arch = self.g.kv["general.architecture"]
        self.k = self.g.kv[f"{arch}.expert_used_count"]

    def mlp(self, p, h):
        def expert(kind, e, x):
            s = scale_of(self.g, p + f"ffn_{kind}_exps")
            y = x @ self.weight(p + f"ffn_{kind}_exps.weight")[e].T
            return y * s[e] if s is not None else y
        logits = self.linear(h, p + "ffn_gate_inp.weight")
        return moe_mlp(h, logits, self.k, expert,
                       lambda g, u: torch.nn.functional.silu(g) * u)


class Qwen2MoeReference(Qwen3MoeReference):
    """Qwen2-MoE (modeling_qwen2_moe.py): Qwen2's attention (q/k/v biases); the MLP a mixture
    of SwiGLU experts whose softmax weights are kept as they are (norm_topk_prob false), plus a
    shared expert weighed by sigmoid(shared_expert_gate(h))."""

    def mlp(self, p, h):
        def expert(kind, e, x):
            s = scale_of(self.g, p + f"ffn_{kind}_exps")
            y = x @ self.weight(p + f"ffn_{kind}_exps.weight")[e].T
            return y * s[e] if s is not None else y
        silu_glu = lambda g, u: torch.nn.functional.silu(g) * u  # noqa: E731
        logits = self.linear(h, p + "ffn_gate_inp.weight")
        routed = moe_mlp(h, logits, self.k, expert, silu_glu, renormalize=False)
        gate = self.weight(p + "ffn_gate_inp_shexp.weight").reshape(-1)
        a = silu_glu(self.linear(h, p + "ffn_gate_shexp.weight"), self.linear(h, p + "ffn_up_shexp.weight"))
        shared = self.linear(a, p + "ffn_down_shexp.weight")
        return routed + torch.sigmoid(h @ gate)[:, None] * shared


class MixtralReference(LlamaReference):
    def __init__(self, path, emulate_q8=False):
        super().__init__(path, emulate_q8=emulate_q8)
        arch = self.g.kv["general.architecture"]
        self.n_expert = self.g.kv[f"{arch}.expert_count"]
        self.k = self.g.kv[f"{arch}.expert_used_count"]
        self.stacked = "blk.0.ffn_up_exps.weight" in self.g.tensors

    def expert_linear(self, p, kind, e, x):
        name = p + (f"ffn_{kind}_exps.weight" if self.stacked else f"ffn_{kind}.{e}.weight")
        w = self.weight(name)
        if self.stacked:
            w = w[e]
        if self.emulate_q8 and self.g.type_name(name) in ("Q8_0", "Q4_0"):
            x = quantize_q8_0_roundtrip(x)
        elif self.emulate_q8 and self.g.type_name(name) in K_TYPES:
            x = quantize_q8_k_roundtrip(x)
        s = scale_of(self.g, p + f"ffn_{kind}_exps") if self.stacked else None
        return x @ w.T * (s[e] if s is not None else 1.0)

    def mlp(self, p, h):
        def expert(kind, e, x):
            if kind == "gate" and self.ffn == "relu":
                return None
            return self.expert_linear(p, kind, e, x)
        logits = self.linear(p + "ffn_gate_inp.weight", h)  # [T, n_expert]
        return moe_mlp(h, logits, self.k, expert, self.activate)


class Phi3Reference(_Base):
    """Phi-3 (modeling_phi3.py) over a GGUF file: RMSNorm; q, k, v (or one attn_qkv, rows q, k,
    v); rotate_half RoPE over the first rope.dimension_count values of each head, LongRoPE's
    divisors where the file has them (rope_factors_long past rope.scaling.original_context_length,
    else rope_factors_short; the context is the tokens') and rope.scaling.attn_factor on cos and
    sin; ffn_up is gate_up_proj (gate rows, then up): down(up * silu(gate)); the head tied where
    output.weight is absent."""

    def __init__(self, path):
        super().__init__(path)
        kv, arch = self.g.kv, "phi3"
        self.eps = float(kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5))
        self.n_rot = kv.get(f"{arch}.rope.dimension_count", self.head_dim)
        self.orig = kv.get(f"{arch}.rope.scaling.original_context_length",
                           kv.get(f"{arch}.context_length"))
        self.mscale = float(kv.get(f"{arch}.rope.scaling.attn_factor", 1.0))

    def rms_norm(self, x, name):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight(name)

    def rotate(self, x, positions):
        r = self.n_rot
        inv = self.base ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
        table = "rope_factors_long.weight" if len(positions) > self.orig else "rope_factors_short.weight"
        if self.has(table):
            inv = inv / self.weight(table)
        ang = positions[:, None].to(torch.float64) * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :] * self.mscale
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :] * self.mscale
        head, rest = x[..., :r], x[..., r:]
        half = torch.cat([-head[..., r // 2:], head[..., : r // 2]], dim=-1)
        return torch.cat([head * cos + half * sin, rest], dim=-1)

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        pos = torch.arange(T)
        d, H, Hkv = self.head_dim, self.n_head, self.n_head_kv
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.rms_norm(x, p + "attn_norm.weight")
            if self.has(p + "attn_qkv.weight"):
                qkv = self.linear(h, p + "attn_qkv.weight")
                q, k, v = qkv[:, :H * d], qkv[:, H * d:(H + Hkv) * d], qkv[:, (H + Hkv) * d:]
            else:
                q, k, v = (self.linear(h, p + f"attn_{n}.weight", p + f"attn_{n}.bias")
                           for n in "qkv")
            q, k = self.rotate(q.view(T, H, d), pos), self.rotate(k.view(T, Hkv, d), pos)
            x = x + self.linear(self.attend(q, k, v.view(T, Hkv, d)), p + "attn_output.weight")
            gu = self.linear(self.rms_norm(x, p + "ffn_norm.weight"), p + "ffn_up.weight")
            f = gu.shape[-1] // 2
            x = x + self.linear(gu[:, f:] * torch.nn.functional.silu(gu[:, :f]),
                                p + "ffn_down.weight")
        return self.head(self.rms_norm(x, "output_norm.weight"))
