#!/usr/bin/env python3
"""Files as llama.cpp writes them, with every optional tensor its loaders accept, checked against
the PyTorch references. Usage: check_llamacpp_files.py STRATA_BINARY WORK_DIR

For each family strata has (llama dense and MoE, falcon, qwen2, qwen3, qwen2moe, qwen3moe) this
writes a random F32 model with this project's own GGUF writer (gguf_py.py) under llama.cpp's
tensor names, as llama.cpp v0.5.0's model saver does: every optional tensor of the family (q/k/v
and output biases, a fused attn_qkv with its bias, the FFN's biases, per-tensor `.scale` and
`.input_scale` beside every matrix, llama's rope_freqs, qwen2's output.bias, qwen3's
cls.output.weight, falcon's attn_norm_2), the keys its saver writes as 0 for "unset"
(expert_feed_forward_length, expert_shared_feed_forward_length, rope.scaling.factor) and
attention.sliding_window, which those graphs ignore, plus linear and YaRN rope scaling. strata's
logits for 16 token ids are compared with the references (llama_ref.py, arch_ref.py, extended by
llamacpp_extras.py with what llama.cpp's graphs do with those tensors). Tolerance: 1e-4 of the
largest logit (F32 weights; the references are float64). Then a file with a tensor no reader
consumes must be refused naming it. The same files run by llama.cpp itself: docs/LLAMACPP_FILES.md.
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_py as G  # noqa: E402
from arch_ref import (FalconReference, MixtralReference, Qwen2MoeReference,  # noqa: E402
                      Qwen2Reference, Qwen3MoeReference, Qwen3Reference)
from llama_ref import LlamaReference  # noqa: E402

TOL = 1e-4
VOCAB, EMBD, HEADS, KV_HEADS, FF, LAYERS, CTX = 64, 64, 4, 2, 96, 2, 64
EXPERTS, USED = 4, 2
HEAD = EMBD // HEADS
TOKENS = [1, 7, 13, 2, 60, 33, 5, 41, 17, 9, 28, 3, 50, 11, 22, 63]


class Model:
    def __init__(self, arch, seed):
        self.arch = arch
        self.rng = np.random.default_rng(seed)
        self.w = G.GGUFWriter()
        self.w.add("general.architecture", G.STRING, arch)
        a = arch + "."
        for key, value in [("vocab_size", VOCAB), ("context_length", CTX), ("embedding_length", EMBD),
                           ("block_count", LAYERS), ("feed_forward_length", FF),
                           ("attention.head_count", HEADS), ("attention.head_count_kv", KV_HEADS),
                           ("attention.sliding_window", 4),  # ignored by these graphs
                           ("expert_feed_forward_length", 0),  # 0: unset
                           ("expert_shared_feed_forward_length", 0)]:
            self.w.add(a + key, G.U32, value)
        eps_key = "attention.layer_norm_epsilon" if arch == "falcon" else "attention.layer_norm_rms_epsilon"
        self.w.add(a + eps_key, G.F32, 1e-5)
        self.w.add(a + "rope.freq_base", G.F32, 10000.0)
        self.key("rope.scaling.factor", G.F32, 0.0)  # 0: none
        self.w.add("tokenizer.ggml.model", G.STRING, "test")  # llama.cpp's test vocabulary
        self.w.add("tokenizer.ggml.tokens", G.ARRAY, [f"tok_{i}" for i in range(VOCAB)], G.STRING)

    def key(self, key, vtype, value):
        """Sets <arch>.key, replacing an earlier value."""
        name = self.arch + "." + key
        self.w.kv = [kv for kv in self.w.kv if kv[0] != name]
        self.w.add(name, vtype, value)

    def t(self, name, *shape, lo=None, hi=None):
        if lo is None:
            x = self.rng.normal(0.0, 0.2, size=shape)
        else:
            x = self.rng.uniform(lo, hi, size=shape)
        self.w.add_tensor(name, x)

    def matrix(self, name, rows, cols, bias=True, scaled=True, stack=0):
        """A matrix [rows, cols] (or `stack` of them) with its optional bias, scale and input scale."""
        shape = (stack, rows, cols) if stack else (rows, cols)
        self.t(name + ".weight", *shape)
        if bias:
            self.t(name + ".bias", rows)
        if scaled:
            self.t(name + ".scale", stack or 1, lo=0.5, hi=1.5)
            self.t(name + ".input_scale", stack or 1, lo=0.5, hi=1.5)

    def outer(self, output_norm_bias=False):
        self.t("token_embd.weight", VOCAB, EMBD)
        self.t("output_norm.weight", EMBD, lo=0.8, hi=1.2)
        if output_norm_bias:
            self.t("output_norm.bias", EMBD)
        self.t("output.weight", VOCAB, EMBD)

    def write(self, path):
        self.w.write(path)


def attention(m, p, fused=False, biases=True):
    if fused:
        m.matrix(p + "attn_qkv", HEADS * HEAD + 2 * KV_HEADS * HEAD, EMBD, bias=biases)
    else:
        m.matrix(p + "attn_q", HEADS * HEAD, EMBD, bias=biases)
        m.matrix(p + "attn_k", KV_HEADS * HEAD, EMBD, bias=biases)
        m.matrix(p + "attn_v", KV_HEADS * HEAD, EMBD, bias=biases)


def dense_ffn(m, p, biases):
    m.matrix(p + "ffn_gate", FF, EMBD, bias=biases)
    m.matrix(p + "ffn_up", FF, EMBD, bias=biases)
    m.matrix(p + "ffn_down", EMBD, FF, bias=biases)


def experts(m, p, ff):
    m.t(p + "ffn_gate_inp.weight", EXPERTS, EMBD)
    m.matrix(p + "ffn_gate_exps", ff, EMBD, bias=False, stack=EXPERTS)
    m.matrix(p + "ffn_up_exps", ff, EMBD, bias=False, stack=EXPERTS)
    m.matrix(p + "ffn_down_exps", EMBD, ff, bias=False, stack=EXPERTS)
    m.key("expert_count", G.U32, EXPERTS)
    m.key("expert_used_count", G.U32, USED)


def llama(path, moe=False, fused=False, scaling=None, freqs=True, seed=1):
    m = Model("llama", seed)
    m.outer()
    if freqs:
        m.t("rope_freqs.weight", HEAD // 2, lo=1.0, hi=8.0)
    if scaling:
        m.key("rope.scaling.type", G.STRING, scaling[0])  # replaces the default
        m.key("rope.scaling.factor", G.F32, scaling[1])
        m.key("rope.scaling.original_context_length", G.U32, 16)
        m.key("rope.scaling.attn_factor", G.F32, scaling[2])
    for l in range(LAYERS):
        p = f"blk.{l}."
        m.t(p + "attn_norm.weight", EMBD, lo=0.8, hi=1.2)
        attention(m, p, fused=fused)
        m.matrix(p + "attn_output", EMBD, HEADS * HEAD)
        m.t(p + "ffn_norm.weight", EMBD, lo=0.8, hi=1.2)
        if moe:
            experts(m, p, FF)  # llama's experts are feed_forward_length wide
        else:
            dense_ffn(m, p, biases=True)
    m.write(path)


def falcon(path, seed=2):
    m = Model("falcon", seed)
    m.outer(output_norm_bias=True)
    for l in range(LAYERS):
        p = f"blk.{l}."
        for norm in ("attn_norm", "attn_norm_2"):
            m.t(p + norm + ".weight", EMBD, lo=0.8, hi=1.2)
            m.t(p + norm + ".bias", EMBD)
        attention(m, p, fused=True, biases=False)
        m.matrix(p + "attn_output", EMBD, EMBD, bias=False)
        m.matrix(p + "ffn_up", FF, EMBD, bias=False)
        m.matrix(p + "ffn_down", EMBD, FF, bias=False)
    m.write(path)


def qwen(path, arch, seed):
    m = Model(arch, seed)
    m.outer()
    if arch == "qwen2":
        m.t("output.bias", VOCAB)
    if arch == "qwen3":
        m.t("cls.output.weight", 1, EMBD)  # the rerank head: no generation graph reads it
    moe = arch.endswith("moe")
    for l in range(LAYERS):
        p = f"blk.{l}."
        m.t(p + "attn_norm.weight", EMBD, lo=0.8, hi=1.2)
        attention(m, p)
        if arch.startswith("qwen3"):
            m.t(p + "attn_q_norm.weight", HEAD, lo=0.8, hi=1.2)
            m.t(p + "attn_k_norm.weight", HEAD, lo=0.8, hi=1.2)
        m.matrix(p + "attn_output", EMBD, HEADS * HEAD, bias=False)
        m.t(p + "ffn_norm.weight", EMBD, lo=0.8, hi=1.2)
        if not moe:
            dense_ffn(m, p, biases=False)
            continue
        experts(m, p, FF // USED)  # expert_feed_forward_length 0: feed_forward_length / used
        if arch == "qwen2moe":  # the shared expert, expert_shared_feed_forward_length 0: FF wide
            m.t(p + "ffn_gate_inp_shexp.weight", EMBD)
            m.matrix(p + "ffn_gate_shexp", FF, EMBD, bias=False)
            m.matrix(p + "ffn_up_shexp", FF, EMBD, bias=False)
            m.matrix(p + "ffn_down_shexp", EMBD, FF, bias=False)
    m.write(path)


CASES = [
    ("llama rope_freqs, linear x2", lambda p: llama(p, scaling=("linear", 2.0, 1.0)), LlamaReference),
    ("llama fused qkv, yarn x4", lambda p: llama(p, fused=True, freqs=False,
                                                 scaling=("yarn", 4.0, 1.1), seed=3), LlamaReference),
    ("llama moe", lambda p: llama(p, moe=True, seed=4), MixtralReference),
    ("falcon", falcon, FalconReference),
    ("qwen2", lambda p: qwen(p, "qwen2", 5), Qwen2Reference),
    ("qwen3", lambda p: qwen(p, "qwen3", 6), Qwen3Reference),
    ("qwen2moe", lambda p: qwen(p, "qwen2moe", 7), Qwen2MoeReference),
    ("qwen3moe", lambda p: qwen(p, "qwen3moe", 8), Qwen3MoeReference),
]


def strata_logits(strata, path):
    out = subprocess.run([strata, "logits", "-m", path, "-t", "2", "--tokens",
                          ",".join(map(str, TOKENS))], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return torch.tensor(json.loads(out.stdout), dtype=torch.float64)


def main():
    strata, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failed = 0
    for i, (label, make, ref) in enumerate(CASES):
        path = os.path.join(work, f"{i}-{label.split()[0]}.gguf")
        make(path)
        want = ref(path).forward(TOKENS)
        try:
            got = strata_logits(strata, path)
            err = float((got - want).abs().max() / want.abs().max())
        except RuntimeError as e:
            err, label = float("inf"), f"{label}: {e}"
        ok = err <= TOL
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label:32s} rel err {err:.2e} (tol {TOL:.0e})")
    # A tensor no reader consumes: refused by name, never run without it.
    path = os.path.join(work, "stray.gguf")
    m = Model("llama", 12)
    m.outer()
    m.t("rope_freqs.weight", HEAD // 2, lo=1.0, hi=2.0)
    for l in range(LAYERS):
        p = f"blk.{l}."
        m.t(p + "attn_norm.weight", EMBD)
        attention(m, p)
        m.matrix(p + "attn_output", EMBD, HEADS * HEAD)
        m.t(p + "ffn_norm.weight", EMBD)
        m.t(p + "ffn_norm.bias", EMBD)  # llama.cpp's llama loader has no such tensor
        dense_ffn(m, p, biases=False)
    m.write(path)
    out = subprocess.run([strata, "logits", "-m", path, "--tokens", "1,2"], capture_output=True,
                         text=True)
    refused = out.returncode != 0 and "'blk.0.ffn_norm.bias'" in out.stderr
    print(f"{'ok  ' if refused else 'FAIL'} a stray tensor is refused by name: "
          f"{out.stderr.strip() or 'it ran'}")
    failed += not refused
    # Quantizing would drop a scale strata applies to float matrices only: refused, not written.
    scaled, out_path = os.path.join(work, "0-llama.gguf"), os.path.join(work, "q.gguf")
    out = subprocess.run([strata, "quantize", scaled, out_path, "Q8_0"], capture_output=True,
                         text=True)
    refused = out.returncode != 0 and "does not fold per-tensor scales" in out.stderr
    print(f"{'ok  ' if refused else 'FAIL'} quantize refuses scaled matrices: "
          f"{out.stderr.strip() or 'it wrote the file'}")
    failed += not refused
    if failed:
        print(f"{failed} checks failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
