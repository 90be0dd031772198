"""Reference forward pass of a GGUF llama model in PyTorch (float64), written independently
of strata from the model definition: RMSNorm, rotary embedding on adjacent pairs (the GGUF
layout), causal multi-head attention with grouped-query heads, and the FFN variants
swiglu / reglu / drelu / geglu / relu.

With emulate_q8=True, the input of every product with a Q8_0/Q4_0 weight is first rounded
through Q8_0 blocks (ggml's reference quantizer: scale = max|x|/127 stored as f16, round half
away from zero), which is what strata's quantized kernels compute with. Without it, the result
is the exact product of the dequantized weights. For K-quant weights (Q2_K..Q6_K) the input is
rounded through Q8_K super-blocks instead (256 values, scale = max|x|/127 kept as f32, round half
away from zero, clamped to +-127), as strata's K-quant kernels compute with."""
import numpy as np
import torch

from gguf_py import GGUFReader
from llamacpp_extras import finish, rope_tables


def _int8_roundtrip(x, block, f16_scale):
    """x: float64 tensor [..., n]; the values int8 blocks of `block` elements represent (scale
    max|x|/127 in f32, kept as f16 when f16_scale, round half away from zero, +-127)."""
    xf = x.to(torch.float32)
    shape = xf.shape
    b = xf.reshape(-1, block)
    amax = b.abs().max(dim=1, keepdim=True).values
    d = amax / 127.0
    inv = torch.where(d != 0, 1.0 / d, torch.zeros_like(d))
    scaled = b * inv
    q = torch.clamp(torch.sign(scaled) * torch.floor(scaled.abs() + 0.5), -127, 127)
    if f16_scale:
        d = d.to(torch.float16).to(torch.float32)
    return (q * d).reshape(shape).to(torch.float64)


def quantize_q8_0_roundtrip(x):
    """The values Q8_0 blocks (32 elements, f16 scale) of activations x represent, rounded as
    llama.cpp's x86 CPU (and strata) round them: x * (127 / max|x|) in f32, half to even,
    d = max|x| / 127 kept as f16."""
    xf = x.to(torch.float32)
    shape = xf.shape
    b = xf.reshape(-1, 32)
    amax = b.abs().max(dim=1, keepdim=True).values
    inv = torch.where(amax != 0, torch.tensor(127.0, dtype=torch.float32) / amax, torch.zeros_like(amax))
    q = torch.round((b * inv).to(torch.float32))
    d = (amax / 127.0).to(torch.float16).to(torch.float32)
    return (q * d).reshape(shape).to(torch.float64)


def quantize_q8_k_roundtrip(x):
    """The values Q8_K super-blocks (256 elements, f32 scale) of x represent, rounded as
    llama.cpp's quantize_row_q8_K_ref (and strata) round: iscale = -127 / (the signed value of
    largest magnitude, the first of equal ones), round half to even, at most 127, d = 1 / iscale."""
    xf = x.to(torch.float32)
    shape = xf.shape
    b = xf.reshape(-1, 256)
    at = b.abs().argmax(dim=1, keepdim=True)
    mx = torch.gather(b, 1, at)
    safe = torch.where(mx != 0, mx, torch.ones_like(mx))
    iscale = (torch.tensor(-127.0, dtype=torch.float32) / safe).to(torch.float32)
    q = torch.clamp(torch.round((b * iscale).to(torch.float32)), max=127)
    d = (1.0 / iscale).to(torch.float32)
    out = torch.where(mx != 0, q * d, torch.zeros_like(b))
    return out.reshape(shape).to(torch.float64)


K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")


def causal_mask(T, window=0):
    """[T, T] additive mask: query t sees keys s <= t, and with a sliding window (Mistral's)
    only the last `window` of them, t - window < s."""
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    if window:
        mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-window)
    return mask


class LlamaReference:
    def __init__(self, path, emulate_q8=False, sparse_down=False):
        """sparse_down: the down projection from ffn_down_t (PowerInfer's transposed rows, which
        strata's sparse FFN adds scaled by each neuron's activation, unquantized)."""
        g = GGUFReader(path)
        self.sparse_down = sparse_down or "blk.0.ffn_down.weight" not in g.tensors
        self.g = g
        kv = g.kv
        arch = kv["general.architecture"]
        self.n_embd = kv[f"{arch}.embedding_length"]
        self.n_layer = kv[f"{arch}.block_count"]
        self.n_head = kv[f"{arch}.attention.head_count"]
        self.n_head_kv = kv.get(f"{arch}.attention.head_count_kv", self.n_head)
        self.head_dim = self.n_embd // self.n_head
        self.n_rot = kv.get(f"{arch}.rope.dimension_count", self.head_dim)
        self.base = float(kv.get(f"{arch}.rope.freq_base", 10000.0))
        self.eps = float(kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5))
        self.ffn = kv.get("strata.ffn_activation", "swiglu")
        self.window = kv.get("strata.attention.sliding_window", 0)  # strata's key (config.h)
        self.emulate_q8 = emulate_q8
        self.sparsity = None  # set_sparsity: (mode, teal [layer][4], cats [layer])
        self.layer = 0  # the layer hidden() is computing

    def set_sparsity(self, mode, level):
        """Training-free activation sparsity as strata sparsify wrote it: TEAL zeroes the values
        of each matrix input (attention input, attention output, FFN input, FFN activations)
        whose magnitude is at most the layer's threshold; CATS zeroes the gate where
        |act(gate)| is at most the layer's threshold."""
        kv = self.g.kv
        levels = list(kv["strata.sparsity.levels"])
        at = min(range(len(levels)), key=lambda i: abs(levels[i] - level))
        teal = list(kv["strata.sparsity.teal_thresholds"])
        cats = list(kv["strata.sparsity.cats_thresholds"])
        n = self.n_layer
        self.sparsity = (mode, [teal[(at * n + l) * 4:(at * n + l) * 4 + 4] for l in range(n)],
                         cats[at * n:(at + 1) * n])

    def sparse_input(self, layer, which, x):
        if self.sparsity is None or self.sparsity[0] != "teal":
            return x
        t = self.sparsity[1][layer][which]
        return torch.where(x.abs() > t, x, torch.zeros_like(x))

    def sparse_gate(self, layer, gate):
        if self.sparsity is None or self.sparsity[0] != "cats" or gate is None:
            return gate
        g = {"swiglu": torch.nn.functional.silu, "reglu": torch.relu, "drelu": torch.relu,
             "geglu": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}[self.ffn](gate)
        return torch.where(g.abs() > self.sparsity[2][layer], gate, torch.zeros_like(gate))

    def weight(self, name):
        return torch.from_numpy(self.g.tensor(name).astype(np.float64))

    def linear(self, name, x):
        if self.emulate_q8 and self.g.type_name(name) in ("Q8_0", "Q4_0"):
            x = quantize_q8_0_roundtrip(x)
        elif self.emulate_q8 and self.g.type_name(name) in K_TYPES:
            x = quantize_q8_k_roundtrip(x)
        return x @ self.weight(name).T

    def rms_norm(self, x, name):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight(name)

    def proj(self, p, stem, x):
        """x through blk.N.<stem>.weight with its bias and scale as llama.cpp applies them."""
        return finish(self.g, p + stem, self.linear(p + stem + ".weight", x))

    def qkv(self, p, h):
        """q, k and v from separate projections or one fused attn_qkv (rows q, k, v)."""
        if p + "attn_qkv.weight" not in self.g.tensors:
            return (self.proj(p, "attn_q", h), self.proj(p, "attn_k", h),
                    self.proj(p, "attn_v", h))
        qkv = self.proj(p, "attn_qkv", h)
        q_dim, kv_dim = self.n_head * self.head_dim, self.n_head_kv * self.head_dim
        return qkv[:, :q_dim], qkv[:, q_dim:q_dim + kv_dim], qkv[:, q_dim + kv_dim:]

    def rope(self, x, positions):
        # x: [T, heads, head_dim]; rotate pairs (2i, 2i+1) of the first n_rot dims.
        cos, sin = rope_tables(self.g, self.n_rot, positions)
        cos, sin = cos[:, None, :], sin[:, None, :]
        out = x.clone()
        a, b = x[..., 0:self.n_rot:2], x[..., 1:self.n_rot:2]
        out[..., 0:self.n_rot:2] = a * cos - b * sin
        out[..., 1:self.n_rot:2] = a * sin + b * cos
        return out

    def activate(self, gate, up):
        if self.ffn == "relu":
            return torch.relu(up)
        if self.ffn == "swiglu":
            return torch.nn.functional.silu(gate) * up
        if self.ffn == "reglu":
            return torch.relu(gate) * up
        if self.ffn == "drelu":
            return torch.relu(gate) * torch.relu(up)
        if self.ffn == "geglu":  # Gemma's gated GELU, the tanh form
            return torch.nn.functional.gelu(gate, approximate="tanh") * up
        raise ValueError(f"unknown ffn {self.ffn}")

    def mlp(self, p, h):
        """The layer's FFN output for its normed input h (of layer self.layer, for sparsity)."""
        layer = self.layer
        h = self.sparse_input(layer, 2, h)
        up = self.proj(p, "ffn_up", h)
        gate = None if self.ffn == "relu" else self.proj(p, "ffn_gate", h)
        gate = self.sparse_gate(layer, gate)
        a = self.sparse_input(layer, 3, self.activate(gate, up))
        if self.sparse_down:
            return a @ self.weight(p + "ffn_down_t.weight")
        return self.proj(p, "ffn_down", a)

    def forward(self, tokens):
        """Logits [T, vocab] for every position of the token sequence."""
        head = "output.weight" if "output.weight" in self.g.tensors else "token_embd.weight"
        return self.linear(head, self.hidden(tokens))

    def hidden(self, tokens):
        """The final hidden states [T, n_embd] (after the output norm) of every position."""
        T = len(tokens)
        emb = self.weight("token_embd.weight")
        x = emb[torch.tensor(tokens)]
        pos = torch.arange(T)
        mask = causal_mask(T, self.window)
        group = self.n_head // self.n_head_kv
        hd = self.head_dim
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.sparse_input(l, 0, self.rms_norm(x, p + "attn_norm.weight"))
            q, k, v = self.qkv(p, h)
            q, k = q.reshape(T, self.n_head, hd), k.reshape(T, self.n_head_kv, hd)
            v = v.reshape(T, self.n_head_kv, hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            scores = torch.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
            att = torch.softmax(scores, dim=-1)
            o = torch.einsum("hts,shd->thd", att, v).reshape(T, self.n_head * hd)
            x = x + self.proj(p, "attn_output", self.sparse_input(l, 1, o))
            self.layer = l
            x = x + self.mlp(p, self.rms_norm(x, p + "ffn_norm.weight"))
        return self.rms_norm(x, "output_norm.weight")
