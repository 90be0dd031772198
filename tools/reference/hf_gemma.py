"""Gemma 2 and Gemma 3 (text) as Hugging Face defines them (modeling_gemma2.py,
modeling_gemma3.py) on checkpoint tensors under HF's names: random tiny checkpoints and their
forward pass in float64, for checking `strata convert` (the norms' 1 + w, the four norms'
names, the windows and RoPE per layer type, the caps) independently of strata's code and of
the GGUF-side reference (gemma_ref.py).

Gemma2RMSNorm / Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w). The embedding times
sqrt(hidden_size); attention scores q.k * query_pre_attn_scalar^-0.5, Gemma 2's soft-capped
(attn_logit_softcapping); sliding layers (Gemma 2: even layers; Gemma 3: layer_types) see the
last sliding_window positions; Gemma 3's sliding layers rotate with rope_local_base_freq, its
full layers with rope_theta and rope_scaling (linear); q_norm and k_norm per head before the
rotation (Gemma 3). MLP down(gelu_tanh(gate) * up); post-norms before each residual add; the
logits soft-capped with final_logit_softcapping where set."""
import math

import numpy as np
import torch


def _normal(shape, gen, scale=0.2):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).numpy()


def gemma_config(version, hidden=64, heads=4, kv_heads=2, head_dim=32, layers=4, vocab=2000,
                 window=3, **kw):
    cfg = dict(architectures=[f"Gemma{version}ForCausalLM"], model_type=f"gemma{version}",
               hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv_heads, head_dim=head_dim, intermediate_size=2 * hidden,
               vocab_size=vocab, rms_norm_eps=1e-6, max_position_embeddings=64,
               hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=head_dim,
               sliding_window=window, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    if version == 2:
        cfg.update(rope_theta=10000.0, attn_logit_softcapping=5.0, final_logit_softcapping=3.0)
    else:
        cfg.update(rope_theta=1e6, rope_local_base_freq=10000.0, final_logit_softcapping=None,
                   attn_logit_softcapping=None, sliding_window_pattern=3)
    cfg.update(kw)
    return cfg


def _sliding(cfg):
    L = cfg["num_hidden_layers"]
    if cfg["model_type"] == "gemma2":
        return [l % 2 == 0 for l in range(L)]
    if cfg.get("layer_types"):
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    return [(l + 1) % cfg.get("sliding_window_pattern", 6) != 0 for l in range(L)]


def gemma_state(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    d, L, f, hd = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"], cfg["head_dim"]
    q_dim, kv_dim = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    s = {"model.embed_tokens.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         "model.norm.weight": _normal((d,), g, 0.3)}
    for l in range(L):
        p = f"model.layers.{l}."
        for n in ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"]:
            s[p + n + ".weight"] = _normal((d,), g, 0.3)  # HF's w; the norm multiplies by 1 + w
        for name, rows in [("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)]:
            s[p + f"self_attn.{name}.weight"] = _normal((rows, d), g)
        if cfg["model_type"] == "gemma3":
            s[p + "self_attn.q_norm.weight"] = _normal((hd,), g, 0.3)
            s[p + "self_attn.k_norm.weight"] = _normal((hd,), g, 0.3)
        s[p + "self_attn.o_proj.weight"] = _normal((d, q_dim), g)
        s[p + "mlp.gate_proj.weight"] = _normal((f, d), g)
        s[p + "mlp.up_proj.weight"] = _normal((f, d), g)
        s[p + "mlp.down_proj.weight"] = _normal((d, f), g)
    return s


def gemma_forward(state, cfg, tokens):
    W = {k: torch.from_numpy(v) for k, v in state.items()}
    d, H, Hkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    T, eps = len(tokens), cfg["rms_norm_eps"]
    gemma3 = cfg["model_type"] == "gemma3"
    sliding = _sliding(cfg)

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)

    def rope(theta, factor):
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)) / factor
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], -1)
        return emb.cos(), emb.sin()

    scaling = cfg.get("rope_scaling") or {}
    factor = scaling.get("factor", 1.0) if scaling.get("rope_type", scaling.get("type")) == "linear" else 1.0
    full = rope(cfg["rope_theta"], factor)
    local = rope(cfg.get("rope_local_base_freq", cfg["rope_theta"]), 1.0) if gemma3 else full

    def rot(t, cs):
        cos, sin = cs
        half = torch.cat([-t[..., hd // 2:], t[..., : hd // 2]], dim=-1)
        return t * cos + half * sin

    x = W["model.embed_tokens.weight"][torch.tensor(tokens)] * torch.tensor(d ** 0.5, dtype=torch.float32).item()
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).view(T, H, hd).transpose(0, 1)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).view(T, Hkv, hd).transpose(0, 1)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(T, Hkv, hd).transpose(0, 1)
        if gemma3:
            q, k = rms(q, W[p + "self_attn.q_norm.weight"]), rms(k, W[p + "self_attn.k_norm.weight"])
        cs = local if sliding[l] else full
        q, k = rot(q, cs), rot(k, cs)
        k, v = k.repeat_interleave(H // Hkv, 0), v.repeat_interleave(H // Hkv, 0)
        s = q @ k.transpose(-1, -2) * cfg["query_pre_attn_scalar"] ** -0.5
        if cfg.get("attn_logit_softcapping"):
            c = cfg["attn_logit_softcapping"]
            s = torch.tanh(s / c) * c
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        if sliding[l]:
            mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-cfg["sliding_window"])
        a = (torch.softmax(s + mask, dim=-1) @ v).transpose(0, 1).reshape(T, H * hd)
        x = x + rms(a @ W[p + "self_attn.o_proj.weight"].T, W[p + "post_attention_layernorm.weight"])
        h = rms(x, W[p + "pre_feedforward_layernorm.weight"])
        m = torch.nn.functional.gelu(h @ W[p + "mlp.gate_proj.weight"].T, approximate="tanh")
        m = (m * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
        x = x + rms(m, W[p + "post_feedforward_layernorm.weight"])
    logits = rms(x, W["model.norm.weight"]) @ W["model.embed_tokens.weight"].T
    if cfg.get("final_logit_softcapping"):
        c = cfg["final_logit_softcapping"]
        logits = torch.tanh(logits / c) * c
    return logits


# Gemma 3's multimodal checkpoints (Gemma3ForConditionalGeneration: 4B, 12B, 27B): the text
# model's keys in text_config, its tensors under "language_model.model." (transformers before
# 4.52) or "model.language_model." (since), a vision tower beside them, and an embedding with
# rows past the tokenizer's (262208 of 262144), which llama.cpp's converter cuts off.
MULTIMODAL_PREFIXES = {"old": "language_model.model.", "new": "model.language_model."}


def gemma3_multimodal_config(layout="old", extra_rows=64, **kw):
    text = gemma_config(3, **kw)
    del text["architectures"]
    text["vocab_size"] += extra_rows
    return dict(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3",
                text_config=text, vision_config={"hidden_size": 16},
                mm_tokens_per_image=4, _layout=layout, _tokenizer_size=text["vocab_size"] - extra_rows)


def gemma3_multimodal_state(cfg, seed):
    prefix = MULTIMODAL_PREFIXES[cfg["_layout"]]
    g = torch.Generator().manual_seed(seed + 1000)
    s = {prefix + k[len("model."):]: v for k, v in gemma_state(cfg["text_config"], seed).items()}
    s["vision_tower.vision_model.embeddings.patch_embedding.weight"] = _normal((16, 3, 2, 2), g)
    s["multi_modal_projector.mm_input_projection_weight"] = _normal((16, 64), g)
    return s


def gemma3_multimodal_forward(state, cfg, tokens):
    """The text model on the tokenizer's vocabulary (the cut embedding), as the GGUF holds it."""
    prefix, n = MULTIMODAL_PREFIXES[cfg["_layout"]], cfg["_tokenizer_size"]
    text = dict(cfg["text_config"], vocab_size=n)
    s = {"model." + k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    s["model.embed_tokens.weight"] = s["model.embed_tokens.weight"][:n]
    return gemma_forward(s, text, tokens)
