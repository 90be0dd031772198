#!/usr/bin/env python3
"""A Llama-3.1-shaped random model written with llama.cpp's own gguf-py
(PYTHONPATH=LLAMA_CPP/gguf-py): head size 128, theta 500000, grouped KV heads, and rope_freqs from
Llama 3.1's rope_scaling (factor 8, low/high frequency factors 1 and 4, original context 8192)
computed as llama.cpp's convert_hf_to_gguf does; llama.cpp's test vocabulary of 128 ids.
Usage: llama31_model.py OUT.gguf"""
import math, sys
import numpy as np
import gguf
path = sys.argv[1]
rng = np.random.default_rng(31)
V, D, H, KV, F, L = 128, 256, 2, 1, 512, 2
hd = D // H
w = gguf.GGUFWriter(path, "llama")
w.add_context_length(131072); w.add_embedding_length(D); w.add_block_count(L)
w.add_feed_forward_length(F); w.add_head_count(H); w.add_head_count_kv(KV)
w.add_rope_freq_base(500000.0); w.add_layer_norm_rms_eps(1e-5); w.add_rope_dimension_count(hd)
w.add_vocab_size(V)
w.add_tokenizer_model("test"); w.add_token_list([f"tok_{i}" for i in range(V)]); w.add_token_scores([0.0] * V)
def t(name, *shape, s=0.05):
    w.add_tensor(name, rng.normal(0, s, size=shape).astype(np.float32))
t("token_embd.weight", V, D, s=1.0); t("output_norm.weight", D, s=0.1); t("output.weight", V, D)
base, factor, low, high, old = 500000.0, 8.0, 1.0, 4.0, 8192
freqs = 1.0 / (base ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
rf = []
for f in freqs:
    wl = 2 * math.pi / f
    if wl < old / high: rf.append(1.0)
    elif wl > old / low: rf.append(factor)
    else:
        sm = (old / wl - low) / (high - low); rf.append(1 / ((1 - sm) / factor + sm))
w.add_tensor("rope_freqs.weight", np.array(rf, dtype=np.float32))
for l in range(L):
    p = f"blk.{l}."
    w.add_tensor(p + "attn_norm.weight", (1 + rng.normal(0, 0.1, D)).astype(np.float32))
    w.add_tensor(p + "ffn_norm.weight", (1 + rng.normal(0, 0.1, D)).astype(np.float32))
    t(p + "attn_q.weight", H * hd, D, s=0.2); t(p + "attn_k.weight", KV * hd, D, s=0.2)
    t(p + "attn_v.weight", KV * hd, D); t(p + "attn_output.weight", D, H * hd)
    t(p + "ffn_gate.weight", F, D); t(p + "ffn_up.weight", F, D); t(p + "ffn_down.weight", D, F)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
