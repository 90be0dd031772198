#!/usr/bin/env python3
"""Compares strata's logits with the PyTorch reference for random small models of every FFN
variant and weight type. Usage: check_logits.py STRATA_BINARY WORK_DIR
Error metric per model: max |strata - ref| / max |ref| over all positions and logits.
Tolerances (documented in the README):
  F32: 1e-4 against the exact reference.
  F16, BF16: 1e-4 too: the weights are exactly representable in both, only the summation
    precision (f32 in strata, f64 here) differs.
  Q8_0, Q4_0: 1e-5 against the reference that rounds each product's input through Q8_0 as
    strata's kernels do (a rounding tie decided differently moves one element by one step),
    and 5e-2 against the exact product of the dequantized weights (the 8-bit activations)."""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import LlamaReference  # noqa: E402

TOL_EXACT = {"f32": 1e-4, "f16": 1e-4, "bf16": 1e-4, "q8_0": 5e-2, "q4_0": 5e-2}
TOL_EMULATED = {"q8_0": 1e-5, "q4_0": 1e-5}


def main():
    strata, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    tokens = [1, 17, 200, 3, 99, 42, 255, 8, 128, 64, 5, 31]
    failures = 0
    for ffn in ["swiglu", "reglu", "drelu", "relu"]:
        for typ in ["f32", "f16", "bf16", "q8_0", "q4_0"]:
            path = os.path.join(work, f"ref-{ffn}-{typ}.gguf")
            extra = ["--tied"] if ffn == "drelu" else []  # also cover the tied output head
            subprocess.run([strata, "synth", "--preset", "tiny", "--type", typ, "--ffn", ffn,
                            "--seed", "7", "-o", path] + extra, check=True,
                           stdout=subprocess.DEVNULL)
            refs = [("exact", LlamaReference(path).forward(tokens), TOL_EXACT[typ])]
            if typ in TOL_EMULATED:
                refs.append(("q8-emulated", LlamaReference(path, emulate_q8=True).forward(tokens),
                             TOL_EMULATED[typ]))
            # The scalar reference kernels and the fastest SIMD kernels of this CPU.
            for kernels in ["scalar", ""]:
                env = dict(os.environ, STRATA_CPU=kernels)
                out = subprocess.run([strata, "logits", "-m", path, "-t", "2", "--tokens",
                                      ",".join(map(str, tokens))], check=True,
                                     capture_output=True, text=True, env=env).stdout
                got = torch.tensor(json.loads(out), dtype=torch.float64)
                for label, ref, tol in refs:
                    err = ((got - ref).abs().max() / ref.abs().max()).item()
                    ok = err <= tol
                    failures += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} {ffn:7s} {typ:5s} {kernels or 'simd':6s} "
                          f"{label:12s} rel err {err:.2e} (tol {tol:.0e})")
    if failures:
        print(f"{failures} comparisons failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
