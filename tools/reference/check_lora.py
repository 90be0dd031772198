#!/usr/bin/env python3
"""LoRA adapters against the adapters merged into the weights. Usage: check_lora.py STRATA WORK

For random F32 models (`strata synth`), writes adapters in the layout of llama.cpp v0.5.0's
convert_lora_to_gguf.py (general.type "adapter", general.architecture the base model's,
adapter.type "lora", adapter.lora.alpha; tensors "<base name>.lora_a" of GGUF shape
[n_in, rank] and "<base name>.lora_b" of [rank, n_out], F32 or F16; a norm vector, which
llama.cpp skips) and a copy of the model with W + s * B @ A written over each adapted matrix
(s = scale * alpha / rank, or scale when alpha is 0), in numpy, independent of strata. Then
`strata logits` of the base model with --lora / --lora-scaled must equal the merged model's:
max |a - b| / max |b| <= 1e-4, in dense, predict and gate-first modes (llama) and for a fused
attn_qkv (falcon, an F16 adapter: strata keeps F16 pairs in F16).

With LLAMACPP_GGUF_PY set to llama.cpp v0.5.0's gguf-py folder (../shared/vocab/README.md says
where its source comes from), the first adapter is also written by its GGUFWriter with its
constants, as convert_lora_to_gguf.py calls them, and must give the same logits."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_py import F32, STRING, GGUFReader, GGUFWriter  # noqa: E402

TOL = 1e-4
TOKENS = "1,17,200,42,9,250,77,5,123,64,100,31"


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stderr}")
    return r


def logits(strata, model, *extra):
    out = run([strata, "logits", "-m", model, "--tokens", TOKENS, "-t", "2", *extra]).stdout
    return np.array(json.loads(out), dtype=np.float64)


def write_adapter(path, arch, pairs, alpha, f16):
    """pairs: {base name: (A [rank, n_in], B [n_out, rank])}."""
    w = GGUFWriter()
    w.add("general.architecture", STRING, arch)
    w.add("general.type", STRING, "adapter")
    w.add("general.name", STRING, "check-lora")
    w.add("adapter.type", STRING, "lora")
    w.add("adapter.lora.alpha", F32, float(alpha))
    for name, (a, b) in pairs.items():
        w.add_tensor(name + ".lora_a", a, f16=f16)
        w.add_tensor(name + ".lora_b", b, f16=f16)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32))  # skipped, as llama.cpp
    w.write(path)


def write_adapter_with_gguf_py(path, arch, pairs, alpha):
    """The calls convert_lora_to_gguf.py makes (llama.cpp's gguf-py), for the same pairs."""
    sys.path.insert(0, os.environ["LLAMACPP_GGUF_PY"])
    import gguf  # noqa: E402  (llama.cpp's, only where the environment names it)
    w = gguf.GGUFWriter(path, arch)
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for name, (a, b) in pairs.items():
        w.add_tensor(name + ".lora_a", a)
        w.add_tensor(name + ".lora_b", b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def random_pairs(reader, names, rank, rng, f16):
    pairs = {}
    for name in names:
        n_out, n_in = reader.tensor(name).shape
        a = rng.standard_normal((rank, n_in)).astype(np.float32) / np.sqrt(n_in)
        b = rng.standard_normal((n_out, rank)).astype(np.float32) * 0.05
        if f16:  # the values the file holds, so the merge uses them exactly
            a, b = a.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32)
        pairs[name] = (a, b)
    return pairs


def merge(base, merged, adapters):
    """adapters: [(pairs, alpha, scale)]. Writes W + s B A over each matrix (F32 files), and
    over ffn_down_t, the transposed copy of ffn_down that strata's files may hold beside it."""
    shutil.copyfile(base, merged)
    reader = GGUFReader(base)
    deltas = {}
    for pairs, alpha, scale in adapters:
        for name, (a, b) in pairs.items():
            rank = a.shape[0]
            s = scale * alpha / rank if alpha != 0 else scale
            d = s * (b.astype(np.float64) @ a.astype(np.float64))
            deltas[name] = deltas.get(name, 0) + d
    with open(merged, "r+b") as f:
        for name, d in deltas.items():
            dims, ttype, start = reader.tensors[name]
            assert ttype == 0, f"{name}: the merge writes F32 models only"
            w = reader.tensor(name).astype(np.float64) + d
            f.seek(start)
            f.write(w.astype(np.float32).tobytes())
            # The sparse FFN reads ffn_down_t (strata's transposed copy) where the file has it.
            twin = name.replace("ffn_down.weight", "ffn_down_t.weight")
            if twin != name and twin in reader.tensors:
                f.seek(reader.tensors[twin][2])
                f.write(np.ascontiguousarray(w.T).astype(np.float32).tobytes())


def compare(label, got, want):
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    moved = float(np.max(np.abs(got - want)))
    print(f"{label}: max rel err {err:.2e}")
    if err > TOL:
        sys.exit(f"FAIL: {label}: {err:.2e} > {TOL}")
    return moved


def layer_names(reader, n_layer, parts):
    return [f"blk.{l}.{p}.weight" for l in range(n_layer) for p in parts
            if f"blk.{l}.{p}.weight" in reader.tensors]


def check_llama(strata, work, rng):
    base = os.path.join(work, "llama.gguf")
    run([strata, "synth", "--preset", "tiny", "--type", "f32", "--ffn", "reglu",
         "--sparsity", "0.2", "--keep-down", "--layers", "3", "-o", base])
    reader = GGUFReader(base)
    n_layer = int(reader.kv["llama.block_count"])
    everything = layer_names(reader, n_layer, ["attn_q", "attn_k", "attn_v", "attn_output",
                                               "ffn_gate", "ffn_up", "ffn_down"])
    first = random_pairs(reader, everything + ["output.weight"], 8, rng, f16=False)
    second = random_pairs(reader, layer_names(reader, n_layer, ["attn_q", "ffn_down", "ffn_up"]),
                          4, rng, f16=True)
    a1, a2 = os.path.join(work, "llama-a1.gguf"), os.path.join(work, "llama-a2.gguf")
    write_adapter(a1, "llama", first, alpha=16, f16=False)
    write_adapter(a2, "llama", second, alpha=0, f16=True)
    merged = os.path.join(work, "llama-merged.gguf")
    merge(base, merged, [(first, 16, 1.0), (second, 0, 0.5)])
    for mode in ["dense", "predict", "gate-first"]:
        want = logits(strata, merged, "--ffn", mode)
        got = logits(strata, base, "--ffn", mode, "--lora", a1, "--lora-scaled", f"{a2}:0.5")
        moved = compare(f"llama {mode}, two adapters", got, want)
        plain = logits(strata, base, "--ffn", mode)
        if np.max(np.abs(plain - want)) < 100 * TOL * np.max(np.abs(want)):
            sys.exit(f"FAIL: llama {mode}: the adapters hardly move the logits ({moved})")
    # FILE:SCALE in --lora, and a comma list, as llama.cpp's newer spelling.
    got = logits(strata, base, "--ffn", "dense", "--lora", f"{a1},{a2}:0.5")
    compare("llama dense, --lora A,B:0.5", got, logits(strata, merged, "--ffn", "dense"))
    zero = logits(strata, base, "--ffn", "dense", "--lora", f"{a1}:0", "--lora", f"{a2}:0")
    compare("llama dense, scale 0", zero, logits(strata, base, "--ffn", "dense"))
    if os.environ.get("LLAMACPP_GGUF_PY"):
        theirs = os.path.join(work, "llama-a1-gguf-py.gguf")
        write_adapter_with_gguf_py(theirs, "llama", first, alpha=16)
        ours = logits(strata, base, "--ffn", "dense", "--lora", a1)
        compare("llama dense, the adapter written by llama.cpp's gguf-py",
                logits(strata, base, "--ffn", "dense", "--lora", theirs), ours)


def check_falcon(strata, work, rng):
    base = os.path.join(work, "falcon.gguf")
    run([strata, "synth", "--preset", "tiny", "--arch", "falcon", "--type", "f32", "--layers",
         "2", "-o", base])
    reader = GGUFReader(base)
    names = layer_names(reader, 2, ["attn_qkv", "attn_output", "ffn_up", "ffn_down"])
    pairs = random_pairs(reader, names, 6, rng, f16=True)
    adapter = os.path.join(work, "falcon-a.gguf")
    write_adapter(adapter, "falcon", pairs, alpha=12, f16=True)
    merged = os.path.join(work, "falcon-merged.gguf")
    merge(base, merged, [(pairs, 12, 1.0)])
    got = logits(strata, base, "--lora", adapter)
    compare("falcon fused qkv, F16 adapter", got, logits(strata, merged))
    # An adapter of another architecture is refused naming both.
    r = subprocess.run([strata, "logits", "-m", base, "--tokens", "1,2", "--lora",
                        os.path.join(work, "llama-a1.gguf")], capture_output=True, text=True)
    if r.returncode == 0 or "'llama'" not in r.stderr or "'falcon'" not in r.stderr:
        sys.exit(f"FAIL: a llama adapter on a falcon model: {r.returncode} {r.stderr}")


def main():
    strata, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(7)
    check_llama(strata, work, rng)
    check_falcon(strata, work, rng)
    print("PASS")


if __name__ == "__main__":
    main()
