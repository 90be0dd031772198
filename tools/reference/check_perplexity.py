#!/usr/bin/env python3
"""Checks `strata perplexity` against the PyTorch reference forward pass: the same text, tokenized
by strata (with BOS), cut into llama.cpp-style windows, scored in float64 by
tools/reference/llama_ref.py. Then its KL divergence (llama-perplexity's --kl-divergence-base and
--kl-divergence) of a Q4_0 copy of the model from the model: the mean KL, same-top rate and
perplexity ratio against the reference's forward passes of both files.
Usage: check_perplexity.py STRATA MODEL TEXT N_CTX WINDOWS"""
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
    ok = check_kl_divergence(strata, model, text_path, n_ctx, windows, ids) and ok
    sys.exit(0 if ok else 1)


def run_json(args):
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def check_kl_divergence(strata, model, text_path, n_ctx, windows, ids):
    with tempfile.TemporaryDirectory() as work:
        base, q4 = os.path.join(work, "base.kld"), os.path.join(work, "q4_0.gguf")
        subprocess.run([strata, "quantize", model, q4, "q4_0"], check=True, capture_output=True)
        subprocess.run([strata, "perplexity", "-m", model, "-f", text_path, "-c", str(n_ctx),
                        "--chunks", str(windows), "--kl-divergence-base", base], check=True,
                       capture_output=True)
        got = run_json([strata, "perplexity", "-m", q4, "--kl-divergence",
                        "--kl-divergence-base", base, "--json"])["kl_divergence"]
        self_kl = run_json([strata, "perplexity", "-m", model, "--kl-divergence",
                            "--kl-divergence-base", base, "--json"])["kl_divergence"]
        ref_p, ref_q = LlamaReference(model), LlamaReference(q4, emulate_q8=True)
        bos = ids[0]
        kld, same, nll_p, nll_q, count = 0.0, 0, 0.0, 0.0, 0
        for w in range(windows):
            chunk = ids[w * n_ctx:(w + 1) * n_ctx]
            chunk[0] = bos
            lp = ref_p.forward(chunk).log_softmax(-1)[n_ctx // 2:n_ctx - 1]
            lq = ref_q.forward(chunk).log_softmax(-1)[n_ctx // 2:n_ctx - 1]
            kld += (lp.exp() * (lp - lq)).sum().item()
            same += (lp.argmax(-1) == lq.argmax(-1)).sum().item()
            nxt = torch.tensor(chunk[n_ctx // 2 + 1:n_ctx])
            nll_p -= lp.gather(1, nxt[:, None]).sum().item()
            nll_q -= lq.gather(1, nxt[:, None]).sum().item()
            count += len(nxt)
    kld /= count
    ratio = math.exp((nll_q - nll_p) / count)
    checks = [
        ("predictions", got["predictions"] == count, f"{got['predictions']} vs {count}"),
        ("mean KL", abs(got["kld"]["value"] - kld) <= 0.05 * kld and kld > 1e-3,
         f"strata {got['kld']['value']:.6f} reference {kld:.6f}"),
        ("same top", abs(got["same_top"]["value"] * count - same) <= 2,
         f"strata {got['same_top']['value'] * count:.0f} reference {same} of {count}"),
        ("PPL(Q)/PPL(base)", abs(got["ppl_ratio"]["value"] - ratio) <= 2e-3,
         f"strata {got['ppl_ratio']['value']:.5f} reference {ratio:.5f}"),
        ("itself", abs(self_kl["kld"]["value"]) <= 1e-5 and self_kl["same_top"]["value"] > 0.99,
         f"KL {self_kl['kld']['value']:.2e}, same top {self_kl['same_top']['value']:.4f}"),
    ]
    for name, passed, detail in checks:
        print(f"{'ok' if passed else 'FAIL'}: KL divergence, {name}: {detail}")
    return all(passed for _, passed, _ in checks)


if __name__ == "__main__":
    main()
