#!/usr/bin/env python3
"""Checks `strata perplexity` against the PyTorch reference forward pass: the same text, tokenized
by strata (with BOS), cut into llama.cpp-style windows, scored in float64 by
tools/reference/llama_ref.py. Usage: check_perplexity.py STRATA MODEL TEXT N_CTX WINDOWS"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import LlamaReference  # noqa: E402


def main():
    strata, model, text_path, n_ctx, windows = sys.argv[1:6]
    n_ctx, windows = int(n_ctx), int(windows)
    text = open(text_path).read()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([text], f)
    ids = json.loads(subprocess.run([strata, "tokenize", "-m", model, "--batch", f.name],
                                    check=True, capture_output=True, text=True).stdout)[0]
    os.unlink(f.name)
    got = json.loads(subprocess.run([strata, "perplexity", "-m", model, "-f", text_path, "-c",
                                     str(n_ctx), "--chunks", str(windows), "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    ref = LlamaReference(model)
    bos = ids[0]
    nll, count = 0.0, 0
    for w in range(windows):
        chunk = ids[w * n_ctx:(w + 1) * n_ctx]
        chunk[0] = bos
        logp = ref.forward(chunk).log_softmax(-1)
        for j in range(n_ctx // 2, n_ctx - 1):
            nll -= logp[j, chunk[j + 1]].item()
            count += 1
    ppl = math.exp(nll / count)
    rel = abs(got["perplexity"] - ppl) / ppl
    ok = rel <= 1e-3 and got["predictions"] == count
    print(f"{'ok' if ok else 'FAIL'}: strata {got['perplexity']:.5f} reference {ppl:.5f} "
          f"(rel {rel:.1e}, {count} predictions)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
