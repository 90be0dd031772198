#!/usr/bin/env python3
"""Issue 30's rule for plans of the flash tier, at 1B scale in CI: a plan made from a profile of
the run's own mode (strata profile --ffn predict: the predictor's selections, what a
predict-mode run reads) reads no more from flash per token than the greedy plan without a
profile, under the same RAM budget. Bytes read are deterministic (the cache's decisions are
the compute thread's), so this is a measurement, not a timing.

A 1B-shape model (TinyLlama's width, 4 of its layers, ReGLU at 10% density, rank-64
predictors, Q4_0) is bundled and run for 32 decoded tokens under two RAM budgets that leave the
cache a fraction of the FFN. The table printed beside the rule: each plan's predicted flash
bytes per token and those read, and a dense profile's plan (true activations, the documented
mismatch) for comparison.

Usage: check_flash_plans.py STRATA WORKDIR
"""
import json
import os
import subprocess
import sys

strata, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
failures = 0


def cli(*args):
    r = subprocess.run([strata, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"strata {' '.join(args[:3])} ... failed: {r.stderr.strip()}")
    return r.stdout


def check(ok, what):
    global failures
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}")


model = os.path.join(work, "s1b.gguf")
bundle = os.path.join(work, "s1b.bundle.gguf")
cli("synth", "--preset", "1b", "--layers", "4", "--type", "q4_0", "--ffn", "reglu",
    "--sparsity", "0.1", "--predictor-rank", "64", "-o", model)
cli("bundle", "-m", model, "-o", bundle)
profiles = {}
for mode in ("predict", "dense"):
    profiles[mode] = os.path.join(work, f"s1b.{mode}.profile.gguf")
    cli("profile", "-m", model, "--random-tokens", "64", "--ffn", mode, "-o", profiles[mode])


def bench(budget, profile, *extra):
    if profile:
        extra = ("--profile", profiles[profile], *extra)
    j = json.loads(cli("bench", "-m", bundle, "--ram-budget", budget, "-p", "0", "-n", "32",
                       "-r", "1", "-t", "2", "--no-bandwidth", "--json", *extra))
    f = j["decode_flash"]
    return f["bytes_read_per_token"], f["plan_predicted_bytes_per_token"], j


# The timeline (issue 30, item 1): every byte read is on it, its parts add up to the token, and
# look-ahead (on by default) reads ahead of the layers without reading much more.
html = os.path.join(work, "timeline.html")
ahead, _, j = bench("120M", None, "--timeline", html)
t = j["decode_timeline"]
parts = sum(t["mean_ms_per_token"].values())
check(t["tokens_recorded"] == 32 and abs(parts - t["mean_total_ms"]) < 1e-3 * t["mean_total_ms"],
      f"timeline: 32 tokens, parts {parts:.2f} ms = total {t['mean_total_ms']:.2f} ms")
check(abs(t["bytes_read_per_token"] - ahead) <= 1 + 1e-9 * ahead,
      f"timeline: {t['bytes_read_per_token'] / 2**20:.3f} MiB read a token = the caches' {ahead / 2**20:.3f}")
check(t["mean_ms_per_token"]["lookahead"] > 0, "timeline: look-ahead on by default")
page = open(html).read()
check("<svg" in page and "look-ahead reads" in page, "timeline: the page draws the tokens")
alone, _, _ = bench("120M", None, "--no-lookahead")
check(ahead <= 1.25 * alone,
      f"look-ahead reads {ahead / 2**20:.2f} MiB a token, without {alone / 2**20:.2f}")


print(f"{'budget':>7} {'plan':34} {'predicted MiB':>13} {'read MiB':>9} {'error':>7}")
for budget in ("120M", "135M"):
    read = {}
    for label, profile in [("greedy, no profile", None), ("ilp, predict-mode profile", "predict"),
                           ("ilp, dense profile", "dense")]:
        got, predicted, _ = bench(budget, profile)
        read[label] = got
        print(f"{budget:>7} {label:34} {predicted / 2**20:13.2f} {got / 2**20:9.2f} "
              f"{100 * (predicted / got - 1):+6.0f}%")
    check(read["ilp, predict-mode profile"] <= read["greedy, no profile"],
          f"{budget}: the predict-mode profile's plan reads {read['ilp, predict-mode profile'] / 2**20:.2f} "
          f"MiB a token, the greedy plan {read['greedy, no profile'] / 2**20:.2f}")
sys.exit(1 if failures else 0)
