"""GLM-4.5 as Hugging Face defines it (modeling_glm4_moe.py) on checkpoint tensors under HF's
names: a random tiny checkpoint and its forward pass in float64, for checking `strata convert`
(partial rotary, q/k/v biases, q/k norms, the leading dense layers, the sigmoid router with its
correction bias, normalized and scaled weights, the shared experts) independently of strata's
code.

Glm4MoeAttention: q/k/v with biases (attention_bias), q_norm/k_norm over head_dim (use_qk_norm)
before rotate_half RoPE over the first head_dim * partial_rotary_factor dimensions. The MLP:
Glm4MoeMLP (down(silu(gate x) * up x)) on layers below first_k_dense_replace, else Glm4MoeMoE:
router_logits = mlp.gate(x); scores = sigmoid; the top k of scores + e_score_correction_bias;
weights = the chosen scores, / (sum + 1e-20) when norm_topk_prob, * routed_scaling_factor; plus
shared_experts (a Glm4MoeMLP of moe_intermediate_size * n_shared_experts). The MTP layer after
num_hidden_layers is not run (HF's generation does not either)."""
import math

import numpy as np
import torch


def _normal(shape, gen, scale=0.2):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).numpy()


def glm4moe_config(hidden=64, heads=4, kv_heads=2, head_dim=32, layers=3, vocab=2000, experts=6,
                   k=2, **kw):
    cfg = dict(architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", hidden_size=hidden,
               num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
               head_dim=head_dim, intermediate_size=3 * hidden, moe_intermediate_size=hidden // 2,
               n_routed_experts=experts, num_experts_per_tok=k, n_shared_experts=1,
               first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=2.5,
               n_group=1, topk_group=1, partial_rotary_factor=0.5, attention_bias=True,
               use_qk_norm=True, vocab_size=vocab, rms_norm_eps=1e-5, rope_theta=10000.0,
               max_position_embeddings=64, hidden_act="silu", tie_word_embeddings=False,
               num_nextn_predict_layers=0, bos_token_id=1, eos_token_id=2)
    cfg.update(kw)
    return cfg


def glm4moe_state(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    d, L, hd = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["head_dim"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    fe, E = cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    s = {"model.embed_tokens.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         "model.norm.weight": 1 + _normal((d,), g, 0.1),
         "lm_head.weight": _normal((cfg["vocab_size"], d), g)}

    def mlp(p, ff):
        s[p + "gate_proj.weight"] = _normal((ff, d), g)
        s[p + "up_proj.weight"] = _normal((ff, d), g)
        s[p + "down_proj.weight"] = _normal((d, ff), g)

    for l in range(L):
        p = f"model.layers.{l}."
        s[p + "input_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        s[p + "post_attention_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        for name, rows in (("q_proj", H * hd), ("k_proj", Hkv * hd), ("v_proj", Hkv * hd)):
            s[p + f"self_attn.{name}.weight"] = _normal((rows, d), g)
            if cfg["attention_bias"]:
                s[p + f"self_attn.{name}.bias"] = _normal((rows,), g, 0.1)
        if cfg["use_qk_norm"]:
            s[p + "self_attn.q_norm.weight"] = 1 + _normal((hd,), g, 0.1)
            s[p + "self_attn.k_norm.weight"] = 1 + _normal((hd,), g, 0.1)
        s[p + "self_attn.o_proj.weight"] = _normal((d, H * hd), g)
        if l < cfg["first_k_dense_replace"]:
            mlp(p + "mlp.", cfg["intermediate_size"])
            continue
        s[p + "mlp.gate.weight"] = _normal((E, d), g, 0.5)
        s[p + "mlp.gate.e_score_correction_bias"] = _normal((E,), g, 0.1)
        for e in range(E):
            mlp(p + f"mlp.experts.{e}.", fe)
        mlp(p + "mlp.shared_experts.", fe * cfg["n_shared_experts"])
    return s


def glm4moe_forward(state, cfg, tokens):
    W = {k: torch.from_numpy(v) for k, v in state.items()}
    H, Hkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    T, eps, k = len(tokens), cfg["rms_norm_eps"], cfg["num_experts_per_tok"]
    rot = int(hd * cfg.get("partial_rotary_factor", 0.5))
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos(), emb.sin()

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rope(t):  # [heads, T, hd]
        r, rest = t[..., :rot], t[..., rot:]
        half = torch.cat([-r[..., rot // 2:], r[..., : rot // 2]], dim=-1)
        return torch.cat([r * cos + half * sin, rest], dim=-1)

    def lin(x, p):
        y = x @ W[p + ".weight"].T
        return y + W[p + ".bias"] if p + ".bias" in W else y

    def mlp(x, p):
        return (torch.nn.functional.silu(lin(x, p + "gate_proj")) * lin(x, p + "up_proj")) @ \
            W[p + "down_proj.weight"].T

    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = lin(h, p + "self_attn.q_proj").view(T, H, hd)
        kk = lin(h, p + "self_attn.k_proj").view(T, Hkv, hd)
        v = lin(h, p + "self_attn.v_proj").view(T, Hkv, hd).transpose(0, 1)
        if cfg["use_qk_norm"]:
            q, kk = rms(q, W[p + "self_attn.q_norm.weight"]), rms(kk, W[p + "self_attn.k_norm.weight"])
        q, kk = rope(q.transpose(0, 1)), rope(kk.transpose(0, 1))
        kk, v = kk.repeat_interleave(H // Hkv, 0), v.repeat_interleave(H // Hkv, 0)
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        a = torch.softmax(q @ kk.transpose(-1, -2) / math.sqrt(hd) + mask, dim=-1) @ v
        x = x + a.transpose(0, 1).reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        if l < cfg["first_k_dense_replace"]:
            x = x + mlp(h, p + "mlp.")
            continue
        scores = torch.sigmoid(h @ W[p + "mlp.gate.weight"].T)
        choice = scores + W[p + "mlp.gate.e_score_correction_bias"]
        order = torch.sort(choice, dim=-1, descending=True, stable=True).indices[:, :k]
        weights = scores.gather(-1, order)
        if cfg["norm_topk_prob"]:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        weights = weights * cfg["routed_scaling_factor"]
        out = mlp(h, p + "mlp.shared_experts.")
        for t in range(T):
            for s in range(k):
                out[t] += weights[t, s] * mlp(h[t:t + 1], p + f"mlp.experts.{int(order[t, s])}.")[0]
        x = x + out
    return rms(x, W["model.norm.weight"]) @ W["lm_head.weight"].T
