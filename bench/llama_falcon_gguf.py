#!/usr/bin/env python3
"""Writes a random-weight falcon GGUF file with llama.cpp's own GGUF writer (its gguf-py, from a
llama.cpp checkout that this repository does not build or hold), so strata can be compared with
llama.cpp on a file neither strata's writer nor its converter made: greedy text, perplexity
(bench/compare_llama_families.sh). The tokenizer is copied from a GGUF file (the shipped
model's SentencePiece vocabulary). Shapes: "7b" (one KV head, one input norm, as Falcon-7B) and
"40b" (KV groups, attn_norm_2, as Falcon-40B), at a small width.
Usage: llama_falcon_gguf.py LLAMA_CPP_DIR SHAPE OUT.gguf TOKENIZER.gguf [--layers N] [--width W]"""
import argparse
import os
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("llama_cpp")
ap.add_argument("shape", choices=["7b", "40b"])
ap.add_argument("out")
ap.add_argument("tokenizer")
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--head-dim", type=int, default=32)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_gguf_py import add_tokenizer, import_gguf, tokenizer_reader  # noqa: E402

gguf = import_gguf(a.llama_cpp)
field = tokenizer_reader(gguf, a.tokenizer)
tokens = field("tokenizer.ggml.tokens")
n_vocab, hd = len(tokens), a.head_dim
if a.shape == "7b":
    n_head, n_head_kv = 71, 1
else:
    n_head, n_head_kv = 16, 8
n_embd = n_head * hd
n_ff = 4 * n_embd
rng = np.random.default_rng(a.seed)

w = gguf.GGUFWriter(a.out, "falcon")
w.add_name(f"random falcon-{a.shape} shape")
w.add_context_length(2048)
w.add_embedding_length(n_embd)
w.add_feed_forward_length(n_ff)
w.add_block_count(a.layers)
w.add_head_count(n_head)
w.add_head_count_kv(n_head_kv)
w.add_layer_norm_eps(1e-5)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
add_tokenizer(w, field)


def matrix(name, rows, cols):
    # Uniform with variance 1/cols keeps each product near unit scale.
    m = rng.uniform(-1, 1, size=(rows, cols)) * np.sqrt(3.0 / cols)
    w.add_tensor(name, m.astype(np.float16))


def vector(name, n, around):
    w.add_tensor(name, (around + 0.1 * rng.uniform(-1, 1, size=n)).astype(np.float32))


matrix("token_embd.weight", n_vocab, n_embd)
vector("output_norm.weight", n_embd, 1.0)
vector("output_norm.bias", n_embd, 0.0)
matrix("output.weight", n_vocab, n_embd)
for l in range(a.layers):
    p = f"blk.{l}."
    vector(p + "attn_norm.weight", n_embd, 1.0)
    vector(p + "attn_norm.bias", n_embd, 0.0)
    if a.shape == "40b":
        vector(p + "attn_norm_2.weight", n_embd, 1.0)
        vector(p + "attn_norm_2.bias", n_embd, 0.0)
    matrix(p + "attn_qkv.weight", (n_head + 2 * n_head_kv) * hd, n_embd)
    matrix(p + "attn_output.weight", n_embd, n_head * hd)
    matrix(p + "ffn_up.weight", n_ff, n_embd)
    matrix(p + "ffn_down.weight", n_embd, n_ff)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {a.out}: falcon {a.shape} shape, {a.layers} layers, embd {n_embd}, "
      f"{n_head} heads on {n_head_kv} KV heads, vocab {n_vocab}")
