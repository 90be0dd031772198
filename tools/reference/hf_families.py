"""Falcon, OPT and Qwen2 as Hugging Face defines them (modeling_falcon.py, modeling_opt.py,
modeling_qwen2.py), on
checkpoint tensors under HF's names: random tiny checkpoints and their forward pass in float64,
for checking `strata convert` (the fused query_key_value's layouts, every name mapping, OPT's
position offset) independently of strata's code and of the GGUF-side references.

Falcon layouts (FalconAttention._split_heads): new_decoder_architecture views the fused rows as
[kv groups][q heads of the group + 2][head_dim] (the group's queries, its key, its value);
multi_query as [heads + 2][head_dim] (all queries, the one key, the one value). Rotary embedding
on halves (rotate_half). The MLP's GELU here is the tanh form, as in GGUF falcon files run by
llama.cpp and strata (HF's Falcon uses the erf form).

Qwen2 (Qwen2Attention, Qwen2MLP): RMSNorm, q/k/v projections with biases, o_proj without,
rotary embedding on halves (rotate_half) of each head, grouped-query attention, SwiGLU.
Qwen3 (Qwen3Attention): no projection biases; q_norm and k_norm (RMSNorm over head_dim) on each
head after its projection, before the rotation; head_dim its own key (here unlike hidden/heads)."""
import math

import numpy as np
import torch


def _normal(shape, gen, scale=0.2):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).numpy()


def falcon_config(new_layout, hidden=64, heads=4, kv_heads=2, layers=2, vocab=2000, act="gelu"):
    cfg = dict(architectures=["FalconForCausalLM"], model_type="falcon", hidden_size=hidden,
               num_hidden_layers=layers, num_attention_heads=heads, vocab_size=vocab,
               layer_norm_epsilon=1e-5, rope_theta=10000.0, max_position_embeddings=64,
               parallel_attn=True, bias=False, alibi=False, activation=act,
               new_decoder_architecture=new_layout, multi_query=not new_layout,
               tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    if new_layout:
        cfg["num_kv_heads"] = kv_heads
    return cfg


def falcon_state(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    Hkv = cfg["num_kv_heads"] if cfg["new_decoder_architecture"] else 1
    hd = d // H
    s = {"transformer.word_embeddings.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         "transformer.ln_f.weight": 1 + _normal((d,), g, 0.1), "transformer.ln_f.bias": _normal((d,), g, 0.1)}
    norms = ["ln_attn", "ln_mlp"] if cfg["new_decoder_architecture"] else ["input_layernorm"]
    for l in range(L):
        p = f"transformer.h.{l}."
        for n in norms:
            s[p + n + ".weight"] = 1 + _normal((d,), g, 0.1)
            s[p + n + ".bias"] = _normal((d,), g, 0.1)
        s[p + "self_attention.query_key_value.weight"] = _normal(((H + 2 * Hkv) * hd, d), g)
        s[p + "self_attention.dense.weight"] = _normal((d, H * hd), g)
        s[p + "mlp.dense_h_to_4h.weight"] = _normal((4 * d, d), g)
        s[p + "mlp.dense_4h_to_h.weight"] = _normal((d, 4 * d), g)
    return s


def _ln(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), torch.from_numpy(w), torch.from_numpy(b), eps)


def rope_frequencies(cfg, hd):
    """The rotary inverse frequencies [hd / 2] and the cos/sin scale of a config, as
    transformers' modeling_rope_utils computes them: default; "linear" (positions / factor);
    "llama3" (Meta's apply_scaling: low frequencies / factor, a smooth blend to the high ones);
    "yarn" (a ramp between interpolated and extrapolated frequencies over the correction range
    of beta_fast 32 and beta_slow 1 rotations, cos/sin scaled by 0.1 ln(factor) + 1)."""
    base = cfg["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return inv, 1.0
    factor = rs["factor"]
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        low, high = rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return torch.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]

        def corr(rot):
            return hd * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = max(math.floor(corr(32)), 0), min(math.ceil(corr(1)), hd - 1)
        hi = hi + 0.001 if lo == hi else hi
        extrapolate = 1 - torch.clamp((torch.arange(hd // 2, dtype=torch.float64) - lo) / (hi - lo), 0, 1)
        inv = inv / factor * (1 - extrapolate) + inv * extrapolate
        return inv, (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
    raise ValueError(f"rope_scaling {kind}")


def _rope_cos_sin(cfg, hd, T):
    inv, scale = rope_frequencies(cfg, hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    return emb.cos() * scale, emb.sin() * scale


def _causal(q, k, v, window=None):
    """Causal attention; with a sliding window (Mistral's `sliding_window`) query i sees keys
    j > i - window only."""
    T, hd = q.shape[1], q.shape[-1]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    if window:
        mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-window)
    att = torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(hd) + mask, dim=-1)
    return att @ v  # [H, T, hd]


def falcon_forward(state, cfg, tokens):
    W = {k: torch.from_numpy(v) for k, v in state.items()}
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    new = cfg["new_decoder_architecture"]
    Hkv = cfg["num_kv_heads"] if new else 1
    hd, T, eps = d // H, len(tokens), cfg["layer_norm_epsilon"]
    x = W["transformer.word_embeddings.weight"][torch.tensor(tokens)]
    cos, sin = _rope_cos_sin(cfg, hd, T)

    def rot(t):  # [heads, T, hd]
        half = torch.cat([-t[..., hd // 2:], t[..., : hd // 2]], dim=-1)
        return t * cos + half * sin

    for l in range(cfg["num_hidden_layers"]):
        p = f"transformer.h.{l}."
        if new:
            a_in = _ln(x, state[p + "ln_attn.weight"], state[p + "ln_attn.bias"], eps)
            m_in = _ln(x, state[p + "ln_mlp.weight"], state[p + "ln_mlp.bias"], eps)
        else:
            a_in = m_in = _ln(x, state[p + "input_layernorm.weight"], state[p + "input_layernorm.bias"], eps)
        fused = a_in @ W[p + "self_attention.query_key_value.weight"].T
        if new:
            qkv = fused.view(T, Hkv, H // Hkv + 2, hd)
            q = qkv[:, :, :-2].reshape(T, H, hd)
            k, v = qkv[:, :, -2], qkv[:, :, -1]
        else:
            qkv = fused.view(T, H + 2, hd)
            q, k, v = qkv[:, :-2], qkv[:, -2:-1], qkv[:, -1:]
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        q, k = rot(q), rot(k)
        k = k.repeat_interleave(H // k.shape[0], dim=0)
        v = v.repeat_interleave(H // v.shape[0], dim=0)
        o = _causal(q, k, v).transpose(0, 1).reshape(T, H * hd)
        attn = o @ W[p + "self_attention.dense.weight"].T
        up = m_in @ W[p + "mlp.dense_h_to_4h.weight"].T
        act = torch.relu(up) if cfg["activation"] == "relu" else torch.nn.functional.gelu(up, approximate="tanh")
        x = x + (act @ W[p + "mlp.dense_4h_to_h.weight"].T + attn)
    x = _ln(x, state["transformer.ln_f.weight"], state["transformer.ln_f.bias"], eps)
    return x @ W["transformer.word_embeddings.weight"].T


def opt_config(hidden=64, heads=4, layers=2, vocab=2000, ffn=128):
    return dict(architectures=["OPTForCausalLM"], model_type="opt", hidden_size=hidden,
                num_hidden_layers=layers, num_attention_heads=heads, ffn_dim=ffn,
                vocab_size=vocab, max_position_embeddings=64, do_layer_norm_before=True,
                word_embed_proj_dim=hidden, activation_function="relu", enable_bias=True,
                layer_norm_elementwise_affine=True, tie_word_embeddings=True,
                bos_token_id=1, eos_token_id=2)


def opt_state(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    d, f, L = cfg["hidden_size"], cfg["ffn_dim"], cfg["num_hidden_layers"]
    D = "model.decoder."
    s = {D + "embed_tokens.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         D + "embed_positions.weight": _normal((cfg["max_position_embeddings"] + 2, d), g, 0.5),
         D + "final_layer_norm.weight": 1 + _normal((d,), g, 0.1),
         D + "final_layer_norm.bias": _normal((d,), g, 0.1)}
    for l in range(L):
        p = f"{D}layers.{l}."
        for n in ["self_attn_layer_norm", "final_layer_norm"]:
            s[p + n + ".weight"] = 1 + _normal((d,), g, 0.1)
            s[p + n + ".bias"] = _normal((d,), g, 0.1)
        for n, rows, cols in [("self_attn.q_proj", d, d), ("self_attn.k_proj", d, d),
                              ("self_attn.v_proj", d, d), ("self_attn.out_proj", d, d),
                              ("fc1", f, d), ("fc2", d, f)]:
            s[p + n + ".weight"] = _normal((rows, cols), g)
            s[p + n + ".bias"] = _normal((rows,), g, 0.1)
    return s


def opt_forward(state, cfg, tokens):
    W = {k: torch.from_numpy(v) for k, v in state.items()}
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd, T, D = d // H, len(tokens), "model.decoder."

    def lin(x, n):
        return x @ W[n + ".weight"].T + W[n + ".bias"]

    def ln(x, n):
        return _ln(x, state[n + ".weight"], state[n + ".bias"], 1e-5)

    # OPTLearnedPositionalEmbedding: positions from the attention mask, offset by 2.
    x = W[D + "embed_tokens.weight"][torch.tensor(tokens)] + W[D + "embed_positions.weight"][torch.arange(T) + 2]
    for l in range(cfg["num_hidden_layers"]):
        p = f"{D}layers.{l}."
        h = ln(x, p + "self_attn_layer_norm")
        q = (lin(h, p + "self_attn.q_proj")).view(T, H, hd).transpose(0, 1)
        k = lin(h, p + "self_attn.k_proj").view(T, H, hd).transpose(0, 1)
        v = lin(h, p + "self_attn.v_proj").view(T, H, hd).transpose(0, 1)
        o = _causal(q, k, v).transpose(0, 1).reshape(T, d)
        x = x + lin(o, p + "self_attn.out_proj")
        h = ln(x, p + "final_layer_norm")
        x = x + lin(torch.relu(lin(h, p + "fc1")), p + "fc2")
    x = ln(x, D + "final_layer_norm")
    return x @ W[D + "embed_tokens.weight"].T


def qwen2_config(hidden=64, heads=4, kv_heads=2, layers=2, vocab=2000, ffn=128, tied=False):
    return dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=hidden,
                num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                intermediate_size=ffn, vocab_size=vocab, max_position_embeddings=64,
                rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu",
                use_sliding_window=False, tie_word_embeddings=tied, bos_token_id=1,
                eos_token_id=2)


def mistral_config(sliding_window=4, **kw):
    """MistralForCausalLM: LLaMA's layer without biases, attention over a sliding window."""
    cfg = qwen2_config(**kw)
    del cfg["use_sliding_window"]
    cfg.update(architectures=["MistralForCausalLM"], model_type="mistral",
               sliding_window=sliding_window, rms_norm_eps=1e-5)
    return cfg


def qwen3_config(hidden=64, heads=4, kv_heads=2, head_dim=32, **kw):
    cfg = qwen2_config(hidden=hidden, heads=heads, kv_heads=kv_heads, **kw)
    cfg.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=head_dim)
    return cfg


def _head_dim(cfg):
    return cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])


def qwen2_state(cfg, seed):
    """Qwen2's tensors, or Qwen3's (model_type qwen3: no biases, q_norm and k_norm), or
    Mistral's (no biases)."""
    g = torch.Generator().manual_seed(seed)
    d, L, f = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    hd, qwen3 = _head_dim(cfg), cfg["model_type"] == "qwen3"
    biases = cfg["model_type"] == "qwen2"
    q_dim, kv_dim = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    s = {"model.embed_tokens.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         "model.norm.weight": 1 + _normal((d,), g, 0.1)}
    if not cfg["tie_word_embeddings"]:
        s["lm_head.weight"] = _normal((cfg["vocab_size"], d), g)
    for l in range(L):
        p = f"model.layers.{l}."
        s[p + "input_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        s[p + "post_attention_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        for name, rows in [("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)]:
            s[p + f"self_attn.{name}.weight"] = _normal((rows, d), g)
            if biases:
                s[p + f"self_attn.{name}.bias"] = _normal((rows,), g, 0.5)
        if qwen3:
            s[p + "self_attn.q_norm.weight"] = 1 + _normal((hd,), g, 0.3)
            s[p + "self_attn.k_norm.weight"] = 1 + _normal((hd,), g, 0.3)
        s[p + "self_attn.o_proj.weight"] = _normal((d, q_dim), g)
        s[p + "mlp.gate_proj.weight"] = _normal((f, d), g)
        s[p + "mlp.up_proj.weight"] = _normal((f, d), g)
        s[p + "mlp.down_proj.weight"] = _normal((d, f), g)
    return s


def _dense_mlp(W, p, h):
    a = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
    return a @ W[p + "mlp.down_proj.weight"].T


def qwen2_forward(state, cfg, tokens, mlp=_dense_mlp):
    """Qwen2's forward pass, or Qwen3's where the state has q_norm/k_norm and no biases; `mlp`
    computes a layer's MLP from its normed input (Qwen3-MoE's sparse block). Mistral's and
    Mixtral's `sliding_window` (Qwen2's use_sliding_window is false here) masks older keys."""
    window = None if "use_sliding_window" in cfg else cfg.get("sliding_window")
    W = {k: torch.from_numpy(v) for k, v in state.items()}
    d, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, T, eps = _head_dim(cfg), len(tokens), cfg["rms_norm_eps"]
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    cos, sin = _rope_cos_sin(cfg, hd, T)

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rot(t):  # [heads, T, hd]
        half = torch.cat([-t[..., hd // 2:], t[..., : hd // 2]], dim=-1)
        return t * cos + half * sin

    def proj(h, p, name, heads, norm=None):
        y = h @ W[p + f"self_attn.{name}.weight"].T
        if p + f"self_attn.{name}.bias" in W:
            y = y + W[p + f"self_attn.{name}.bias"]
        y = y.view(T, heads, hd)
        if norm is not None and p + f"self_attn.{norm}.weight" in W:  # Qwen3, per head
            y = rms(y, W[p + f"self_attn.{norm}.weight"])
        return y.transpose(0, 1)

    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q, k = proj(h, p, "q_proj", H, "q_norm"), proj(h, p, "k_proj", Hkv, "k_norm")
        v = proj(h, p, "v_proj", Hkv)
        q, k = rot(q), rot(k)
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)
        o = _causal(q, k, v, window).transpose(0, 1).reshape(T, H * hd)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        x = x + mlp(W, p, rms(x, W[p + "post_attention_layernorm.weight"]))
    x = rms(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.T


def qwen3moe_config(experts=4, k=2, moe_ffn=48, **kw):
    cfg = qwen3_config(**kw)
    cfg.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=experts,
               num_experts_per_tok=k, moe_intermediate_size=moe_ffn, norm_topk_prob=True,
               decoder_sparse_step=1, mlp_only_layers=[])
    return cfg


def qwen3moe_state(cfg, seed):
    """Qwen3's attention tensors, and per layer mlp.gate (the router) and mlp.experts.E.*."""
    s = qwen2_state(dict(cfg, model_type="qwen3"), seed)
    g = torch.Generator().manual_seed(seed + 1000)
    d, f, E = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["num_experts"]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}.mlp."
        for name in ("gate_proj", "up_proj", "down_proj"):
            del s[p + name + ".weight"]
        s[p + "gate.weight"] = _normal((E, d), g, 1.0)
        for e in range(E):
            s[p + f"experts.{e}.gate_proj.weight"] = _normal((f, d), g)
            s[p + f"experts.{e}.up_proj.weight"] = _normal((f, d), g)
            s[p + f"experts.{e}.down_proj.weight"] = _normal((d, f), g)
    return s


def _sparse_moe(router, experts, gate, up, down, k, renormalize=True):
    """HF's sparse MoE block (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock with
    norm_topk_prob): softmax of the router's logits, top k, renormalized (Qwen2MoeSparseMoeBlock
    without norm_topk_prob: not); each chosen expert's SwiGLU. Names under the layer's prefix:
    the router, the experts' prefix, their matrices."""
    def moe(W, p, h):
        probs = torch.softmax(h @ W[p + router].T, dim=-1)
        weights, chosen = torch.topk(probs, k, dim=-1)
        if renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for s in range(k):
                e = p + experts + f"{int(chosen[t, s])}."
                a = torch.nn.functional.silu(h[t] @ W[e + gate].T) * (h[t] @ W[e + up].T)
                out[t] += weights[t, s] * (a @ W[e + down].T)
        return out
    return moe


def qwen3moe_forward(state, cfg, tokens):
    """Qwen3MoeForCausalLM's forward: Qwen3's attention and Qwen3MoeSparseMoeBlock with
    norm_topk_prob."""
    return qwen2_forward(state, cfg, tokens,
                         _sparse_moe("mlp.gate.weight", "mlp.experts.", "gate_proj.weight",
                                     "up_proj.weight", "down_proj.weight",
                                     cfg["num_experts_per_tok"]))


def qwen2moe_config(experts=4, k=2, moe_ffn=48, shared_ffn=80, **kw):
    cfg = qwen2_config(**kw)
    cfg.update(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", num_experts=experts,
               num_experts_per_tok=k, moe_intermediate_size=moe_ffn,
               shared_expert_intermediate_size=shared_ffn, norm_topk_prob=False,
               decoder_sparse_step=1, mlp_only_layers=[])
    return cfg


def qwen2moe_state(cfg, seed):
    """Qwen2's attention tensors (q/k/v biases), per layer mlp.gate (the router),
    mlp.experts.E.*, mlp.shared_expert.* and mlp.shared_expert_gate ([1, hidden])."""
    s = qwen3moe_state(dict(cfg, moe_intermediate_size=cfg["moe_intermediate_size"]), seed)
    # qwen3moe_state made Qwen3's attention; Qwen2's has biases and no head norms.
    attn = qwen2_state(dict(cfg, model_type="qwen2"), seed)
    s = {k: v for k, v in s.items() if "q_norm" not in k and "k_norm" not in k}
    s.update({k: v for k, v in attn.items() if "self_attn" in k})
    g = torch.Generator().manual_seed(seed + 2000)
    d, f = cfg["hidden_size"], cfg["shared_expert_intermediate_size"]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}.mlp."
        s[p + "shared_expert_gate.weight"] = _normal((1, d), g, 1.0)
        s[p + "shared_expert.gate_proj.weight"] = _normal((f, d), g)
        s[p + "shared_expert.up_proj.weight"] = _normal((f, d), g)
        s[p + "shared_expert.down_proj.weight"] = _normal((d, f), g)
    return s


def qwen2moe_forward(state, cfg, tokens):
    """Qwen2MoeForCausalLM's forward: Qwen2's attention; the sparse block's routed experts
    (softmax weights as they are) plus the shared expert times sigmoid(shared_expert_gate)."""
    routed = _sparse_moe("mlp.gate.weight", "mlp.experts.", "gate_proj.weight", "up_proj.weight",
                         "down_proj.weight", cfg["num_experts_per_tok"], renormalize=False)

    def mlp(W, p, h):
        e = p + "mlp.shared_expert."
        a = torch.nn.functional.silu(h @ W[e + "gate_proj.weight"].T) * (h @ W[e + "up_proj.weight"].T)
        shared = a @ W[e + "down_proj.weight"].T
        return routed(W, p, h) + torch.sigmoid(h @ W[p + "mlp.shared_expert_gate.weight"].T) * shared
    return qwen2_forward(state, cfg, tokens, mlp)


def mixtral_config(hidden=64, heads=4, kv_heads=2, layers=2, vocab=2000, ffn=96, experts=4, k=2,
                   sliding_window=None):
    return dict(architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_size=hidden,
                num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                intermediate_size=ffn, vocab_size=vocab, max_position_embeddings=64,
                rms_norm_eps=1e-5, rope_theta=1000000.0, hidden_act="silu",
                sliding_window=sliding_window,
                num_local_experts=experts, num_experts_per_tok=k, router_jitter_noise=0.0,
                tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)


def mixtral_state(cfg, seed):
    """Mixtral's tensors (modeling_mixtral.py): LLaMA's attention, block_sparse_moe per layer."""
    g = torch.Generator().manual_seed(seed)
    d, L, f, E = (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"],
                  cfg["num_local_experts"])
    hd = d // cfg["num_attention_heads"]
    q_dim, kv_dim = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    s = {"model.embed_tokens.weight": _normal((cfg["vocab_size"], d), g, 0.5),
         "model.norm.weight": 1 + _normal((d,), g, 0.1),
         "lm_head.weight": _normal((cfg["vocab_size"], d), g)}
    for l in range(L):
        p = f"model.layers.{l}."
        s[p + "input_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        s[p + "post_attention_layernorm.weight"] = 1 + _normal((d,), g, 0.1)
        for name, rows in [("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)]:
            s[p + f"self_attn.{name}.weight"] = _normal((rows, d), g)
        s[p + "self_attn.o_proj.weight"] = _normal((d, q_dim), g)
        m = p + "block_sparse_moe."
        s[m + "gate.weight"] = _normal((E, d), g, 1.0)  # a router that prefers some experts
        for e in range(E):
            s[m + f"experts.{e}.w1.weight"] = _normal((f, d), g)
            s[m + f"experts.{e}.w3.weight"] = _normal((f, d), g)
            s[m + f"experts.{e}.w2.weight"] = _normal((d, f), g)
    return s


def mixtral_forward(state, cfg, tokens):
    """MixtralForCausalLM's forward: LLaMA's attention (rotate_half RoPE, grouped KV heads, no
    biases: qwen2_forward's without them) and the sparse MoE block."""
    return qwen2_forward(state, cfg, tokens,
                         _sparse_moe("block_sparse_moe.gate.weight", "block_sparse_moe.experts.",
                                     "w1.weight", "w3.weight", "w2.weight",
                                     cfg["num_experts_per_tok"]))
