#!/usr/bin/env python3
"""Writes a random-weight GGUF file of one of issue 57's families with llama.cpp's own GGUF
writer (its gguf-py, from a llama.cpp checkout this repository neither builds nor holds), under
llama.cpp's tensor names and keys, so strata and llama.cpp can be compared on a file neither
strata's writer nor its converter made (bench/compare_llama_families.sh: greedy text,
perplexity; quantized by llama-quantize). The tokenizer is copied from a GGUF file (the shipped
model's SentencePiece vocabulary). Shapes, at a small width (256, 8 heads of 32 on 2 KV heads):
  gemma2   GeGLU, sandwich norms, a window of 64 on every other layer, caps 50/30, head = embedding
  gemma3   Gemma 2's layer with q/k norms, no attention cap, 5 of 6 layers windowed (64) at RoPE
           base 1e4, the others at 1e6
  phi3     one fused attn_qkv, ffn_up holding gate and up, NeoX rotation over half of each head
  gpt-oss  q/k/v/o biases, attention sinks, a window of 64 on every other layer, 8 experts
           (2 a token) with a router bias and expert biases, clamped SwiGLU
  glm4moe  layer 0 dense, then 8 experts (2 a token) chosen by sigmoid scores with the correction
           bias, normalized, one ungated shared expert, q/k/v biases, RoPE over half of each head
Usage: llama_family2026_gguf.py LLAMA_CPP_DIR SHAPE OUT.gguf TOKENIZER.gguf [--layers N]
       [--seed S]"""
import argparse
import os
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("llama_cpp")
ap.add_argument("shape", choices=["gemma2", "gemma3", "phi3", "gpt-oss", "glm4moe"])
ap.add_argument("out")
ap.add_argument("tokenizer")
ap.add_argument("--layers", type=int, default=6)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_gguf_py import add_tokenizer, import_gguf, tokenizer_reader  # noqa: E402

gguf = import_gguf(a.llama_cpp)
field = tokenizer_reader(gguf, a.tokenizer)
n_vocab = len(field("tokenizer.ggml.tokens"))
n_embd, n_head, n_head_kv, n_ff, n_expert, n_used, window = 256, 8, 2, 512, 8, 2, 64
hd = n_embd // n_head
rng = np.random.default_rng(a.seed)
shape, L = a.shape, a.layers

w = gguf.GGUFWriter(a.out, shape)
w.add_name(f"random {shape} shape")
w.add_context_length(4096)
w.add_embedding_length(n_embd)
w.add_feed_forward_length(n_ff)
w.add_block_count(L)
w.add_head_count(n_head)
w.add_head_count_kv(n_head_kv)
w.add_key_length(hd)
w.add_value_length(hd)
w.add_layer_norm_rms_eps(1e-6)
partial = shape in ("phi3", "glm4moe")
w.add_rope_dimension_count(hd // 2 if partial else hd)
w.add_rope_freq_base(1e6 if shape == "gemma3" else 10000.0)
if shape == "gemma2":
    w.add_sliding_window(window)
    w.add_attn_logit_softcapping(50.0)
    w.add_final_logit_softcapping(30.0)
if shape == "gemma3":
    w.add_sliding_window(window)
if shape == "gpt-oss":
    w.add_sliding_window(window)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(n_ff)
if shape == "glm4moe":
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(n_ff // 2)
    w.add_expert_shared_count(1)
    w.add_leading_dense_block_count(1)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_expert_weights_norm(True)
    w.add_expert_weights_scale(1.0)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
add_tokenizer(w, field)


def matrix(name, *shape, scale=1.0):
    # Uniform with variance 1/cols keeps each product near unit scale.
    m = rng.uniform(-1, 1, size=shape) * np.sqrt(3.0 / shape[-1]) * scale
    w.add_tensor(name, m.astype(np.float16))


def vector(name, *shape, around=0.0, spread=0.1):
    w.add_tensor(name, (around + spread * rng.uniform(-1, 1, size=shape)).astype(np.float32))


def norm(name, n):
    vector(name, n, around=1.0)


gemma = shape.startswith("gemma")
matrix("token_embd.weight", n_vocab, n_embd)
norm("output_norm.weight", n_embd)
if not gemma:
    matrix("output.weight", n_vocab, n_embd)
for l in range(L):
    p = f"blk.{l}."
    norm(p + "attn_norm.weight", n_embd)
    if shape == "phi3":
        matrix(p + "attn_qkv.weight", (n_head + 2 * n_head_kv) * hd, n_embd)
    else:
        for name, rows in [("attn_q", n_head * hd), ("attn_k", n_head_kv * hd),
                           ("attn_v", n_head_kv * hd)]:
            matrix(p + name + ".weight", rows, n_embd)
            if shape in ("gpt-oss", "glm4moe"):
                vector(p + name + ".bias", rows, spread=0.3)
    if shape == "gemma3":
        norm(p + "attn_q_norm.weight", hd)
        norm(p + "attn_k_norm.weight", hd)
    matrix(p + "attn_output.weight", n_embd, n_head * hd)
    if shape == "gpt-oss":
        vector(p + "attn_output.bias", n_embd)
        vector(p + "attn_sinks.weight", n_head, spread=1.0)
    if gemma:
        norm(p + "post_attention_norm.weight", n_embd)
        norm(p + "ffn_norm.weight", n_embd)
    elif shape in ("gpt-oss", "glm4moe"):
        norm(p + "post_attention_norm.weight", n_embd)
    else:
        norm(p + "ffn_norm.weight", n_embd)
    if shape == "phi3":
        matrix(p + "ffn_up.weight", 2 * n_ff, n_embd)
        matrix(p + "ffn_down.weight", n_embd, n_ff)
    elif shape == "gpt-oss":
        # The router F32 (scaled so its choices are clear-cut), its bias, the experts.
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.uniform(-1, 1, size=(n_expert, n_embd)) *
                                                 np.sqrt(3.0 / n_embd) * 4).astype(np.float32))
        vector(p + "ffn_gate_inp.bias", n_expert)
        for name, rows, cols in [("gate", n_ff, n_embd), ("up", n_ff, n_embd),
                                 ("down", n_embd, n_ff)]:
            matrix(p + f"ffn_{name}_exps.weight", n_expert, rows, cols)
            vector(p + f"ffn_{name}_exps.bias", n_expert, rows)
    elif shape == "glm4moe" and l >= 1:
        f = n_ff // 2
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.uniform(-1, 1, size=(n_expert, n_embd)) *
                                                 np.sqrt(3.0 / n_embd) * 4).astype(np.float32))
        vector(p + "exp_probs_b.bias", n_expert)
        matrix(p + "ffn_gate_exps.weight", n_expert, f, n_embd)
        matrix(p + "ffn_up_exps.weight", n_expert, f, n_embd)
        matrix(p + "ffn_down_exps.weight", n_expert, n_embd, f)
        matrix(p + "ffn_gate_shexp.weight", f, n_embd)
        matrix(p + "ffn_up_shexp.weight", f, n_embd)
        matrix(p + "ffn_down_shexp.weight", n_embd, f)
    else:
        matrix(p + "ffn_gate.weight", n_ff, n_embd)
        matrix(p + "ffn_up.weight", n_ff, n_embd)
        matrix(p + "ffn_down.weight", n_embd, n_ff)
    if gemma:
        norm(p + "post_ffw_norm.weight", n_embd)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {a.out}: {shape} shape, {L} layers, embd {n_embd}, {n_head} heads on {n_head_kv} "
      f"KV heads, vocab {n_vocab}")
