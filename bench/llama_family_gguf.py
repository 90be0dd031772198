#!/usr/bin/env python3
"""Writes a random-weight GGUF file of a mainstream family with llama.cpp's own GGUF writer (its
gguf-py, from a llama.cpp checkout that this repository does not build or hold), so strata can
be compared with llama.cpp on a file neither strata's writer nor its converter made: greedy
text, perplexity (bench/compare_llama_families.sh). The tokenizer is copied from a GGUF file
(the shipped model's SentencePiece vocabulary). Shapes, at a small width:
  mixtral  llama with experts: ffn_gate_inp and stacked ffn_{gate,up,down}_exps, 8 experts,
           2 per token, 4 query heads per KV head, rope base 1e6 (Mixtral-8x7B's layout)
  qwen2    q/k/v biases, NeoX rotation, KV groups (Qwen2.5's layout)
  llama    the mixtral shape with one dense FFN (a control: what the experts add)
Usage: llama_family_gguf.py LLAMA_CPP_DIR SHAPE OUT.gguf TOKENIZER.gguf [--layers N] [--seed S]
       [--router-scale X] [--experts-used K]"""
import argparse
import os
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("llama_cpp")
ap.add_argument("shape", choices=["mixtral", "qwen2", "llama"])
ap.add_argument("out")
ap.add_argument("tokenizer")
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--router-scale", type=float, default=4.0,
                help="router logits' scale: larger, fewer near-ties between experts")
ap.add_argument("--experts-used", type=int, default=2,
                help="experts per token (8: every expert, so no routing choice to flip)")
a = ap.parse_args()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_gguf_py import add_tokenizer, import_gguf, tokenizer_reader  # noqa: E402

gguf = import_gguf(a.llama_cpp)
field = tokenizer_reader(gguf, a.tokenizer)
tokens = field("tokenizer.ggml.tokens")
n_vocab = len(tokens)
n_embd, n_head, n_head_kv, n_ff, n_expert = 256, 8, 2, 512, 8
n_used = a.experts_used
hd = n_embd // n_head
rng = np.random.default_rng(a.seed)

arch = "qwen2" if a.shape == "qwen2" else "llama"
w = gguf.GGUFWriter(a.out, arch)
w.add_name(f"random {a.shape} shape")
w.add_context_length(4096)
w.add_embedding_length(n_embd)
w.add_feed_forward_length(n_ff)
w.add_block_count(a.layers)
w.add_head_count(n_head)
w.add_head_count_kv(n_head_kv)
w.add_rope_dimension_count(hd)
w.add_rope_freq_base(1e6)
w.add_layer_norm_rms_eps(1e-5)
if a.shape == "mixtral":
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
add_tokenizer(w, field)


def matrix(name, *shape, scale=1.0):
    # Uniform with variance 1/cols keeps each product near unit scale.
    m = rng.uniform(-1, 1, size=shape) * np.sqrt(3.0 / shape[-1]) * scale
    w.add_tensor(name, m.astype(np.float16))


def vector(name, n, around, spread=0.1):
    w.add_tensor(name, (around + spread * rng.uniform(-1, 1, size=n)).astype(np.float32))


matrix("token_embd.weight", n_vocab, n_embd)
vector("output_norm.weight", n_embd, 1.0)
matrix("output.weight", n_vocab, n_embd)
for l in range(a.layers):
    p = f"blk.{l}."
    vector(p + "attn_norm.weight", n_embd, 1.0)
    for name, rows in [("attn_q", n_head * hd), ("attn_k", n_head_kv * hd),
                       ("attn_v", n_head_kv * hd)]:
        matrix(p + name + ".weight", rows, n_embd)
        if a.shape == "qwen2":
            vector(p + name + ".bias", rows, 0.0, 0.3)
    matrix(p + "attn_output.weight", n_embd, n_head * hd)
    vector(p + "ffn_norm.weight", n_embd, 1.0)
    if a.shape == "mixtral":
        # The router F32, as llama.cpp's converter writes it; scaled so choices are clear-cut.
        r = rng.uniform(-1, 1, size=(n_expert, n_embd)) * np.sqrt(3.0 / n_embd) * a.router_scale
        w.add_tensor(p + "ffn_gate_inp.weight", r.astype(np.float32))
        matrix(p + "ffn_gate_exps.weight", n_expert, n_ff, n_embd)
        matrix(p + "ffn_up_exps.weight", n_expert, n_ff, n_embd)
        matrix(p + "ffn_down_exps.weight", n_expert, n_embd, n_ff)
    else:
        matrix(p + "ffn_gate.weight", n_ff, n_embd)
        matrix(p + "ffn_up.weight", n_ff, n_embd)
        matrix(p + "ffn_down.weight", n_embd, n_ff)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {a.out}: {a.shape} shape ({arch}), {a.layers} layers, embd {n_embd}, "
      f"{n_head} heads on {n_head_kv} KV heads, vocab {n_vocab}")
