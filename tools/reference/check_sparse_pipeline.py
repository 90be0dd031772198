#!/usr/bin/env python3
"""The sparse pipeline on the shipped model, end to end, through the CLI:
profile -> train-predictors -> perplexity dense vs predict vs gate-first -> run -> the hybrid.
Fails unless: the profile is consistent (sparsity per layer matches perplexity's exact-zero
count on the same text, power-law curve, HTML written, hash tied to the model); predict mode
raises held-out perplexity by at most 2% with every layer's recall >= 0.97; gate-first gives
the dense perplexity and greedy text exactly; split between a device (the reference device,
which runs the device code paths with the CPU's kernels) and the CPU by the ILP under a VRAM
budget, in RAM and bundled (VRAM, a RAM budget, flash), predict mode gives the CPU's
perplexity within 1e-6 and its greedy text, with a share of the activations on each side."""
import json
import os
import subprocess
import sys

strata, root, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
model = os.path.join(root, "models", "strata-tiny.gguf")
train_text = os.path.join(root, "models", "strata-tiny-predictor-train.txt")
heldout = os.path.join(root, "models", "strata-tiny-heldout.txt")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def cli(*args):
    r = subprocess.run([strata, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"strata {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


# 1. Profile: the counts must agree with the session's own zero counting on the same windows
# (perplexity evaluates 255 of each window's 256 tokens, hence the small tolerance).
stats = os.path.join(work, "profile.gguf")
prof = json.loads(cli("profile", "-m", model, "-f", heldout, "-n", "2560", "-c", "256",
                      "-o", stats, "--json", "-t", "2"))
ppl = json.loads(cli("perplexity", "-m", model, "-f", heldout, "-c", "256", "--chunks", "10",
                     "--json", "-t", "2"))
check(prof["tokens"] == 2560, f"profile read 2560 tokens ({prof['tokens']})")
for l, s in zip(prof["layers"], ppl["ffn_sparsity_per_layer"]):
    check(abs(l["sparsity"] - s) < 2e-3, f"layer {l['layer']} profile sparsity {l['sparsity']:.4f} "
          f"~ perplexity's {s:.4f}")
    check(l["neurons_for_50"] < 0.5 * l["neurons_for_95"] + 1e-9,
          f"layer {l['layer']} hot-neuron curve is concave (50%: {l['neurons_for_50']:.3f}, "
          f"95%: {l['neurons_for_95']:.3f})")
check(os.path.getsize(prof["report"]) > 1000 and "<svg" in open(prof["report"]).read(),
      "HTML report with an SVG plot written")

# 2. Predictors.
sparse = os.path.join(work, "tiny-predictors.gguf")
trained = json.loads(cli("train-predictors", "-m", model, "-f", train_text, "-n", "16384",
                         "-o", sparse, "--ranks", "32,64,128", "--json", "-t", "2"))
for l in trained["layers"]:
    check(l["recall"] >= 0.97, f"layer {l['layer']} held-out recall {l['recall']:.4f} (rank {l['rank']})")

# 3. Accuracy guard on held-out text.
def perplexity(mode, *extra):
    return json.loads(cli("perplexity", "-m", sparse, "-f", heldout, "-c", "256", "--chunks", "60",
                          "--ffn", mode, "--json", "-t", "2", *extra))
dense = perplexity("dense")
predict = perplexity("predict", "--check-predictor")
gate_first = perplexity("gate-first")
increase = predict["perplexity"] / dense["perplexity"] - 1
check(increase <= 0.02, f"predict perplexity {predict['perplexity']:.4f} vs dense "
      f"{dense['perplexity']:.4f}: +{100 * increase:.3f}% (limit 2%)")
for l in predict["ffn"]["layers"]:
    check(l["recall"] >= 0.97, f"layer {l['layer']} recall on held-out text {l['recall']:.4f}, "
          f"computed density {l['computed_density']:.3f}")
check(abs(gate_first["perplexity"] - dense["perplexity"]) < 1e-4 * dense["perplexity"],
      f"gate-first perplexity {gate_first['perplexity']:.5f} == dense {dense['perplexity']:.5f}")

# 4. Greedy text: gate-first identical to dense.
def run(mode):
    return subprocess.run([strata, "run", "-m", sparse, "-p", "And he said", "-n", "48", "--temp",
                           "0", "--ffn", mode, "-t", "2"], capture_output=True, text=True).stdout
check(run("dense") == run("gate-first"), "gate-first greedy text == dense")

# 5. The hybrid: the predictor model profiled, then placed by the ILP between a 10 MiB device
# and the CPU, in RAM and bundled under a 40 MiB RAM budget (three tiers). The KV cache in f32
# as on the CPU, so only the split's order of additions differs.
sparse_profile = os.path.join(work, "tiny-predictors.profile.gguf")
cli("profile", "-m", sparse, "-f", heldout, "-n", "2048", "-c", "256", "-o", sparse_profile,
    "-t", "2")
bundle = os.path.join(work, "tiny-predictors.bundle.gguf")
cli("bundle", "-m", sparse, "-o", bundle)
on_device = ["--device", "reference", "--vram-budget", "10M", "--profile", sparse_profile,
             "-ctk", "f32", "-ctv", "f32"]
cpu_ppl = json.loads(cli("perplexity", "-m", sparse, "-f", heldout, "-c", "256", "--chunks", "8",
                         "--ffn", "predict", "--json", "-t", "2"))["perplexity"]
cpu_text = run("predict")
for name, model_file, extra in [("in RAM", sparse, []),
                                ("bundled", bundle, ["--ram-budget", "40M"])]:
    hybrid = json.loads(cli("perplexity", "-m", model_file, "-f", heldout, "-c", "256", "--chunks",
                            "8", "--json", "-t", "2", *on_device, *extra))
    split = hybrid["ffn"]["split"]
    check(abs(hybrid["perplexity"] / cpu_ppl - 1) < 1e-6,
          f"hybrid {name}: perplexity {hybrid['perplexity']:.6f} == the CPU's {cpu_ppl:.6f}")
    check(split is not None and 0.05 < split["device_share"] < 0.95,
          f"hybrid {name}: {100 * split['device_share']:.1f}% of activations on the device")
    if model_file == bundle:
        check(split["per_token_over_all_tokens"]["flash_bytes"] > 0,
              f"hybrid {name}: {split['per_token_over_all_tokens']['flash_bytes']:.0f} bytes "
              "per token read from flash")
    text = subprocess.run([strata, "run", "-m", model_file, "-p", "And he said", "-n", "48",
                           "--temp", "0", "-t", "2", *on_device, *extra],
                          capture_output=True, text=True).stdout
    check(text == cpu_text and len(text) > 0, f"hybrid {name}: greedy text == the CPU's")

# 5. The other architectures' plain ReLU FFNs with biases (OPT; ReluFalcon with KV groups and two
# input norms), random-weight models on the shipped tokenizer: predictors trained on them, then
# predict mode in RAM, bundled (every neuron cached: the same logits; caches a little over the
# minimum, several passes a layer: within rounding, the passes' sums added in order), split
# with the reference device in RAM and from flash (within 1e-5 of the CPU's), and wholly on the
# emulated GPU.
TOKENS = "1,5,200,17,3,99,42,7,150,8,64,33"
f32_kv = ["--cache-type-k", "f32", "--cache-type-v", "f32"]


def logits(model_file, *extra):
    return json.loads(cli("logits", "-m", model_file, "--tokens", TOKENS, "-t", "2", *extra))


def rel_err(a, b):
    scale = max(abs(x) for row in b for x in row)
    return max(abs(x - y) for r, q in zip(a, b) for x, y in zip(r, q)) / scale


for label, flags in [("opt", ["--arch", "opt"]),
                     ("relufalcon", ["--arch", "falcon", "--ffn", "relu", "--kv-heads", "2"])]:
    dense_file = os.path.join(work, f"{label}.gguf")
    cli("synth", "--preset", "tiny", "--vocab", "2048", "--tokenizer-from", model, "--seed", "3",
        "-o", dense_file, *flags)
    with_predictors = os.path.join(work, f"{label}-predictors.gguf")
    cli("train-predictors", "-m", dense_file, "-f", train_text, "-o", with_predictors, "-n", "3000")
    bundled = os.path.join(work, f"{label}.bundle.gguf")
    cli("bundle", "-m", with_predictors, "-o", bundled)
    ram = logits(with_predictors, "--ffn", "predict")
    check(rel_err(logits(with_predictors, "--ffn", "gate-first"), logits(dense_file)) < 1e-5,
          f"{label}: gate-first == dense")
    check(logits(bundled, "--ram-budget", "1G") == ram, f"{label}: bundled: the RAM logits exactly")
    err = rel_err(logits(bundled, "--ram-budget", "19.5M"), ram)
    check(err < 1e-6, f"{label}: bundled, small caches: rel err {err:.1e}")
    for name, model_file in [("in RAM", with_predictors), ("bundled", bundled)]:
        # The largest VRAM budget (0.05 MiB steps) that leaves a share of the neurons on the
        # CPU: the models are small, so the window between all and none is narrow.
        budget, share = None, None
        for step in range(32, 15, -1):
            on_device = ["--ffn", "predict", "--device", "reference", "--vram-budget",
                         f"{step * 0.05:.2f}M", "--ram-budget", "64M", *f32_kv]
            split = json.loads(cli("perplexity", "-m", model_file, "-f", heldout, "-c", "64",
                                   "--chunks", "2", "--json", "-t", "2", *on_device))["ffn"]["split"]
            if split is not None and 0.05 < split["device_share"] < 0.95:
                budget, share = on_device, split["device_share"]
                break
        check(budget is not None, f"{label}: a VRAM budget that splits the FFN ({name})")
        if budget is None:
            continue
        err = rel_err(logits(model_file, *budget), ram)
        check(err < 1e-5, f"{label}: split with the reference device {name} "
                          f"({100 * share:.0f}% on the device): rel err {err:.1e}")
    err = rel_err(logits(with_predictors, "--ffn", "predict", "--device", "cuda-emu", *f32_kv), ram)
    check(err < 1e-5, f"{label}: predict mode on the emulated GPU: rel err {err:.1e}")

if failures:
    sys.exit(f"{len(failures)} checks failed")
print("sparse pipeline: all checks passed")
