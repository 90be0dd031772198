"""Phi-3 as Hugging Face defines it (modeling_phi3.py) on checkpoint tensors under HF's names: a
random tiny checkpoint and its forward pass in float64, for checking `strata convert` (the fused
qkv_proj and gate_up_proj, partial rotary dimensions, LongRoPE) independently of strata's code.

Phi3Attention: qkv_proj's rows are the queries, then the keys, then the values; rotate_half RoPE
over the first rotary_ndims = head_dim * partial_rotary_factor of each head. LongRoPE
(Phi3LongRoPEScaledRotaryEmbedding): inv_freq = 1 / (ext_factors * base^(2i / rotary_ndims)),
ext_factors the long_factor where the sequence is longer than original_max_position_embeddings,
else short_factor (here the caller says which, as llama.cpp decides by its context size), and cos
and sin times sqrt(1 + ln(s) / ln(original)) with s = max_position_embeddings / original.
Phi3MLP: gate_up_proj's rows are the gate, then up; down(up * silu(gate))."""
import math

import numpy as np
import torch


def _normal(shape, gen, scale=0.2):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).numpy()


def phi3_config(hidden=64, heads=4, kv_heads=2, layers=2, vocab=2000, partial=1.0, longrope=0,
                **kw):
    """longrope: LongRoPE with this original_max_position_embeddings (0: none)."""
    cfg = dict(architectures=["Phi3ForCausalLM"], model_type="phi3", hidden_size=hidden,
               num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
               intermediate_size=2 * hidden, vocab_size=vocab, rms_norm_eps=1e-5,
               rope_theta=10000.0, max_position_embeddings=64, hidden_act="silu",
               partial_rotary_factor=partial, tie_word_embeddings=False, bos_token_id=1,
               eos_token_id=2, sliding_window=None)
    if longrope:
        half = int(partial * hidden) // heads // 2
        g = torch.Generator().manual_seed(77)
        cfg["original_max_position_embeddings"] = longrope
        cfg["rope_scaling"] = {
            "type": "longrope",
            "long_factor": (1 + torch.rand(half, generator=g, dtype=torch.float64) * 4).tolist(),
            "short_factor": (1 + torch.rand(half, generator=g, dtype=torch.float64)).tolist()}
    cfg.update(kw)
    return cfg


def phi3_state(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    d, L, f = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    hd = d // cfg["num_attention_heads"]
    qkv = (cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) * hd
    s = {"model.embed_tokens.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         "model.norm.weight": 1 + _normal((d,), g, 0.1),
         "lm_head.weight": _normal((cfg["vocab_size"], d), g)}
    for l in range(L):
        p = f"model.layers.{l}."
        s[p + "input_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        s[p + "post_attention_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        s[p + "self_attn.qkv_proj.weight"] = _normal((qkv, d), g)
        s[p + "self_attn.o_proj.weight"] = _normal((d, cfg["num_attention_heads"] * hd), g)
        s[p + "mlp.gate_up_proj.weight"] = _normal((2 * f, d), g)
        s[p + "mlp.down_proj.weight"] = _normal((d, f), g)
    return s


def phi3_forward(state, cfg, tokens, long_context=False):
    W = {k: torch.from_numpy(v) for k, v in state.items()}
    d, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, T, eps, f = d // H, len(tokens), cfg["rms_norm_eps"], cfg["intermediate_size"]
    rot = int(hd * cfg.get("partial_rotary_factor", 1.0))
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    mscale = 1.0
    if cfg.get("rope_scaling"):
        rs = cfg["rope_scaling"]
        ext = torch.tensor(rs["long_factor" if long_context else "short_factor"], dtype=torch.float64)
        inv = inv / ext
        orig = cfg["original_max_position_embeddings"]
        scale = cfg["max_position_embeddings"] / orig
        mscale = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1 else 1.0
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos() * mscale, emb.sin() * mscale

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rope(t):  # [heads, T, hd]: the first `rot` dims, rotate_half
        r, rest = t[..., :rot], t[..., rot:]
        half = torch.cat([-r[..., rot // 2:], r[..., : rot // 2]], dim=-1)
        return torch.cat([r * cos + half * sin, rest], dim=-1)

    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"])
        qkv = h @ W[p + "self_attn.qkv_proj.weight"].T
        q = qkv[:, : H * hd].view(T, H, hd).transpose(0, 1)
        k = qkv[:, H * hd: (H + Hkv) * hd].view(T, Hkv, hd).transpose(0, 1)
        v = qkv[:, (H + Hkv) * hd:].view(T, Hkv, hd).transpose(0, 1)
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(H // Hkv, 0), v.repeat_interleave(H // Hkv, 0)
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, dim=-1) @ v
        x = x + a.transpose(0, 1).reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        gu = h @ W[p + "mlp.gate_up_proj.weight"].T
        x = x + (gu[:, f:] * torch.nn.functional.silu(gu[:, :f])) @ W[p + "mlp.down_proj.weight"].T
    return rms(x, W["model.norm.weight"]) @ W["lm_head.weight"].T
