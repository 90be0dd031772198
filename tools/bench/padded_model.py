#!/usr/bin/env python3
"""A large-shape model that computes what a small trained one does: the shipped model's weights
zero-padded into a Llama-7B shape (n_embd 4096, 32 heads of 128, n_ff 11008, 32 layers; its own
vocabulary of 2048), F16. Each weight is read per token as in a 7B model, so speed is a 7B's,
while the text and a quantized copy's agreement with it are a trained model's: random weights
give near-uniform next-token distributions on which a draft model agrees by chance (a 7B of
random weights and its Q4_0 copy: 2.6% of drafted tokens kept), which no trained model does.

Exact, not approximate: each small head's 32 dimensions sit in the first 32 of a 128-wide head
(q scaled by 2 for the 1/sqrt(head_dim) it now gets, RoPE base raised to the 4th power so the 32
dimensions keep their frequencies, each of the 4 K/V heads copied to the 2 query heads that
share it), norms scaled by sqrt(256/4096) with epsilon / 16 so that a zero-padded residual
normalises to the same values, and the layers past the 6th all zero (they add nothing to the
residual). Written tensor by tensor: memory stays near one tensor.

  padded_model.py models/strata-tiny.gguf OUT.gguf
"""
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from gguf_py import GGUFReader, STRING, ARRAY, U32, I32, F32, BOOL  # noqa: E402

EMBD, HEADS, HEAD_DIM, FF, LAYERS = 4096, 32, 128, 11008, 32


def kv_entry(key, value):
    def packed(vtype, v):
        if vtype == STRING:
            b = v.encode("utf-8", errors="surrogateescape")
            return struct.pack("<Q", len(b)) + b
        return struct.pack({U32: "<I", I32: "<i", F32: "<f", BOOL: "<?"}[vtype], v)

    def scalar_type(v):
        return BOOL if isinstance(v, bool) else U32 if isinstance(v, int) else F32 if isinstance(v, float) else STRING

    out = packed(STRING, key)
    if isinstance(value, list):
        itype = I32 if key == "tokenizer.ggml.token_type" else scalar_type(value[0])
        out += struct.pack("<IIQ", ARRAY, itype, len(value))
        return out + b"".join(packed(itype, v) for v in value)
    return out + struct.pack("<I", scalar_type(value)) + packed(scalar_type(value), value)


def main(src, dst):
    r = GGUFReader(src)
    kv = dict(r.kv)
    c = {k.split(".", 1)[1]: v for k, v in kv.items() if k.startswith("llama.")}
    n, heads, kv_heads, hd = c["embedding_length"], c["attention.head_count"], c["attention.head_count_kv"], c["attention.key_length"]
    ff, layers = c["feed_forward_length"], c["block_count"]
    assert heads <= HEADS and n <= EMBD and ff <= FF and layers <= LAYERS and hd <= HEAD_DIM
    norm_scale = math.sqrt(n / EMBD)
    kv.update({"llama.embedding_length": EMBD, "llama.block_count": LAYERS, "llama.feed_forward_length": FF,
               "llama.attention.head_count": HEADS, "llama.attention.head_count_kv": HEADS,
               "llama.attention.key_length": HEAD_DIM, "llama.attention.value_length": HEAD_DIM,
               "llama.rope.dimension_count": HEAD_DIM,
               "llama.rope.freq_base": float(c["rope.freq_base"]) ** (HEAD_DIM / hd),
               "llama.attention.layer_norm_rms_epsilon": float(c["attention.layer_norm_rms_epsilon"]) * n / EMBD,
               "general.name": "strata-tiny padded to a 7B shape"})

    def t(name):
        return r.tensor(name) if name in r.tensors else None

    def heads_out(w, per_head, head_of, scale=1.0):
        """Rows of a projection by output head: small head head_of(h)'s rows at head h's first dims."""
        out = np.zeros((HEADS * HEAD_DIM, EMBD), np.float32)
        for h in range(heads):
            g = head_of(h)
            out[h * HEAD_DIM:h * HEAD_DIM + hd, :n] = w[g * hd:(g + 1) * hd, :] * scale
        return out

    def tensor(name):
        """(array, f16) of the padded tensor `name` (numpy order: [rows=out, cols=in])."""
        if name == "token_embd.weight" or name == "output.weight":
            w = t(name)
            out = np.zeros((w.shape[0], EMBD), np.float32)
            out[:, :n] = w
            return out, True
        if name == "output_norm.weight":
            out = np.zeros(EMBD, np.float32)
            out[:n] = t(name) * norm_scale
            return out, False
        layer, part = int(name.split(".")[1]), name.split(".", 2)[2]
        small = t(name) if layer < layers else None
        if part in ("attn_norm.weight", "ffn_norm.weight"):
            out = np.zeros(EMBD, np.float32)
            if small is not None:
                out[:n] = small * norm_scale
            return out, False
        shape = {"attn_q.weight": (EMBD, EMBD), "attn_k.weight": (EMBD, EMBD), "attn_v.weight": (EMBD, EMBD),
                 "attn_output.weight": (EMBD, EMBD), "ffn_gate.weight": (FF, EMBD), "ffn_up.weight": (FF, EMBD),
                 "ffn_down.weight": (EMBD, FF)}[part]
        if small is None:
            return np.zeros(shape, np.float16), True
        group = heads // kv_heads
        if part == "attn_q.weight":
            return heads_out(small, hd, lambda h: h, 2.0), True
        if part in ("attn_k.weight", "attn_v.weight"):
            return heads_out(small, hd, lambda h: h // group), True
        out = np.zeros(shape, np.float32)
        if part == "attn_output.weight":
            for h in range(heads):
                out[:n, h * HEAD_DIM:h * HEAD_DIM + hd] = small[:, h * hd:(h + 1) * hd]
        else:
            out[:small.shape[0], :small.shape[1]] = small
        return out, True

    names = ["token_embd.weight", "output_norm.weight", "output.weight"]
    for l in range(LAYERS):
        names += [f"blk.{l}.{p}.weight" for p in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                  "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
    vocab = r.tensor("token_embd.weight").shape[0]

    def shape_of(name):
        if name in ("token_embd.weight", "output.weight"):
            return (vocab, EMBD), True
        if name.endswith("norm.weight"):
            return (EMBD,), False
        part = name.split(".", 2)[2]
        return ((FF, EMBD) if part in ("ffn_gate.weight", "ffn_up.weight") else
                (EMBD, FF) if part == "ffn_down.weight" else (EMBD, EMBD)), True

    header = b"GGUF" + struct.pack("<IQQ", 3, len(names), len(kv))
    header += b"".join(kv_entry(k, v) for k, v in kv.items())
    offset = 0
    for name in names:
        shape, f16 = shape_of(name)
        header += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(shape))
        header += b"".join(struct.pack("<Q", d) for d in reversed(shape))
        header += struct.pack("<IQ", 1 if f16 else 0, offset)
        offset += (int(np.prod(shape)) * (2 if f16 else 4) + 31) // 32 * 32
    with open(dst, "wb") as f:
        f.write(header + b"\0" * ((-len(header)) % 32))
        for i, name in enumerate(names):
            arr, f16 = tensor(name)
            data = np.ascontiguousarray(arr, np.float16 if f16 else np.float32).tobytes()
            assert arr.shape == shape_of(name)[0], name
            f.write(data + b"\0" * ((-len(data)) % 32))
            print(f"\r{i + 1}/{len(names)} tensors", end="", file=sys.stderr)
    print(file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
