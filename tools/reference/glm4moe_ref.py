"""Reference forward pass in PyTorch (float64) of GLM-4.5 (glm4moe) over a GGUF file with
llama.cpp's names, written from Hugging Face's modeling_glm4_moe.py, not from strata's code.

Glm4MoeDecoderLayer: x += attn(input_layernorm(x)); x += mlp(post_attention_layernorm(x)) (GGUF:
attn_norm, post_attention_norm). Glm4MoeAttention: q, k, v with biases where present, q_norm and
k_norm (RMSNorm over head_dim) where present (use_qk_norm), rotate_half RoPE on the first
rotary_dim = head_dim * partial_rotary_factor dimensions of each head (rope.dimension_count), the
rest passed through; scores q.k * head_dim^-0.5, causal. The MLP: dense (Glm4MoeMLP, SwiGLU) on the
first first_k_dense_replace layers (leading_dense_block_count), else Glm4MoeMoE:
Glm4MoeTopkRouter's scores = sigmoid(W x), chosen by scores + e_score_correction_bias
(exp_probs_b) in the top k (ties to the lower id here; torch.topk leaves them unspecified), the
weights the unbiased scores of the chosen, divided by their sum (+ 1e-20) when norm_topk_prob
(expert_weights_norm), times routed_scaling_factor (expert_weights_scale); plus the shared
experts, one SwiGLU MLP, unweighted. Per-tensor scales apply to attention only
(llamacpp_extras.finish), as llama.cpp's graph does."""
import torch

from neox_ref import NeoxReference


class Glm4MoeReference(NeoxReference):
    def __init__(self, path):
        super().__init__(path)
        kv, a = self.g.kv, "glm4moe"
        nextn = kv.get(f"{a}.nextn_predict_layers", 0)
        self.n_layer = kv[f"{a}.block_count"] - nextn
        self.n_head = kv[f"{a}.attention.head_count"]
        self.n_head_kv = kv.get(f"{a}.attention.head_count_kv", self.n_head)
        self.head_dim = kv[f"{a}.attention.key_length"]
        self.n_rot = kv.get(f"{a}.rope.dimension_count", self.head_dim)
        self.eps = float(kv[f"{a}.attention.layer_norm_rms_epsilon"])
        self.k = kv[f"{a}.expert_used_count"]
        self.dense_lead = kv.get(f"{a}.leading_dense_block_count", 0)
        self.norm_topk = bool(kv.get(f"{a}.expert_weights_norm", False))
        scale = float(kv.get(f"{a}.expert_weights_scale", 0.0))
        self.scaling = scale if scale != 0.0 else 1.0

    def attention(self, h, p, positions):
        T, d, H, Hkv = h.shape[0], self.head_dim, self.n_head, self.n_head_kv
        q = self.proj(h, p + "attn_q").view(T, H, d)
        k = self.proj(h, p + "attn_k").view(T, Hkv, d)
        if self.has(p + "attn_q_norm.weight"):
            q = self.rms_norm(q, p + "attn_q_norm.weight")
            k = self.rms_norm(k, p + "attn_k_norm.weight")
        q, k = self.rotate(q, positions), self.rotate(k, positions)
        v = self.proj(h, p + "attn_v").view(T, Hkv, d)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) * d ** -0.5
        s = s + torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        out = torch.einsum("hts,shd->thd", torch.softmax(s, dim=-1), v).reshape(T, H * d)
        return self.proj(out, p + "attn_output")

    def mlp(self, x, gate, up, down):
        return torch.nn.functional.silu(x @ gate.T) * (x @ up.T) @ down.T

    def moe(self, h, p):
        scores = torch.sigmoid(h @ self.weight(p + "ffn_gate_inp.weight").T)
        choice = scores + self.weight(p + "exp_probs_b.bias")
        order = torch.sort(choice, dim=-1, descending=True, stable=True).indices[:, :self.k]
        weights = scores.gather(-1, order)
        if self.norm_topk:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        weights = weights * self.scaling
        gate_w, up_w = self.weight(p + "ffn_gate_exps.weight"), self.weight(p + "ffn_up_exps.weight")
        down_w = self.weight(p + "ffn_down_exps.weight")
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for s in range(self.k):
                e = int(order[t, s])
                out[t] += weights[t, s] * self.mlp(h[t], gate_w[e], up_w[e], down_w[e])
        shared = [self.weight(p + f"ffn_{m}_shexp.weight") for m in ("gate", "up", "down")]
        return out + self.mlp(h, *shared)

    def forward(self, tokens):
        T = len(tokens)
        x = self.weight("token_embd.weight")[torch.tensor(tokens)]
        positions = torch.arange(T)
        for l in range(self.n_layer):
            p = f"blk.{l}."
            x = x + self.attention(self.rms_norm(x, p + "attn_norm.weight"), p, positions)
            h = self.rms_norm(x, p + "post_attention_norm.weight")
            if l < self.dense_lead:
                dense = [self.weight(p + f"ffn_{m}.weight") for m in ("gate", "up", "down")]
                x = x + self.mlp(h, *dense)
            else:
                x = x + self.moe(h, p)
        x = self.rms_norm(x, "output_norm.weight")
        head = "output.weight" if self.has("output.weight") else "token_embd.weight"
        return x @ self.weight(head).T
