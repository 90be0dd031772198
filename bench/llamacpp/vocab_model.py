#!/usr/bin/env python3
"""A random small model around a real vocabulary (llama.cpp's models/ggml-vocab-*.gguf, in
../shared/vocab), written with llama.cpp's own gguf-py (PYTHONPATH=LLAMA_CPP/gguf-py), so that
BOS and greedy text can be compared with llama.cpp on a file strata did not write. The file keeps
the vocabulary's tokenizer keys as they are (no add_bos_token where the vocabulary has none).
Usage: vocab_model.py VOCAB.gguf ARCH(llama|qwen2|falcon) OUT.gguf"""
import sys
import numpy as np
import gguf
src, arch, out = sys.argv[1], sys.argv[2], sys.argv[3]
r = gguf.GGUFReader(src)
V = len(r.fields["tokenizer.ggml.tokens"].data)
D, H, F, L = 64, 4, 128, 2
rng = np.random.default_rng(7)
w = gguf.GGUFWriter(out, arch)
for name, f in r.fields.items():
    if not name.startswith("tokenizer."):
        continue
    vt = f.types[0]
    if vt == gguf.GGUFValueType.ARRAY:
        w.add_key_value(name, f.contents(), vt, sub_type=f.types[-1])
    else:
        w.add_key_value(name, f.contents(), vt)
w.add_context_length(256); w.add_embedding_length(D); w.add_block_count(L)
w.add_feed_forward_length(F); w.add_head_count(H); w.add_head_count_kv(H); w.add_vocab_size(V)
if arch == "falcon": w.add_layer_norm_eps(1e-5)
else: w.add_layer_norm_rms_eps(1e-5)
def t(n, *shape, s=0.3): w.add_tensor(n, rng.normal(0, s, size=shape).astype(np.float32))
t("token_embd.weight", V, D, s=1.0); t("output_norm.weight", D, s=0.1); t("output.weight", V, D)
if arch == "falcon": t("output_norm.bias", D, s=0.1)
for l in range(L):
    p = f"blk.{l}."
    w.add_tensor(p + "attn_norm.weight", (1 + rng.normal(0, .1, D)).astype(np.float32))
    if arch == "falcon":
        t(p + "attn_norm.bias", D, s=0.1); t(p + "attn_qkv.weight", 3 * D, D)
        t(p + "attn_output.weight", D, D); t(p + "ffn_up.weight", F, D); t(p + "ffn_down.weight", D, F)
        continue
    w.add_tensor(p + "ffn_norm.weight", (1 + rng.normal(0, .1, D)).astype(np.float32))
    for n, rows in (("attn_q", D), ("attn_k", D), ("attn_v", D)):
        t(p + n + ".weight", rows, D)
        if arch == "qwen2": t(p + n + ".bias", rows, s=0.1)
    t(p + "attn_output.weight", D, D); t(p + "ffn_gate.weight", F, D); t(p + "ffn_up.weight", F, D); t(p + "ffn_down.weight", D, F)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
