#!/usr/bin/env python3
"""strata's logits against llama.cpp's (dump_logits) for the same token ids: the largest
|strata - llama.cpp| over all positions relative to llama.cpp's largest |logit| (the worst
position), and at how many positions the argmax agrees.
Usage: compare_logits.py STRATA DUMP_LOGITS MODEL.gguf [--tokens IDS | --random N]
       [-- STRATA_FLAGS...]"""
import json
import os
import random
import subprocess
import sys

args = sys.argv[1:]
extra = args[args.index("--") + 1:] if "--" in args else []
args = args[:args.index("--")] if "--" in args else args
strata, dump, model = args[:3]
tokens = "1,5,9,13,17,21,25,29,33,37,41,45"
if "--tokens" in args:
    tokens = args[args.index("--tokens") + 1]
if "--random" in args:
    random.seed(5)
    n = int(args[args.index("--random") + 1])
    tokens = ",".join(str(random.randrange(128)) for _ in range(n))
ref = json.loads(subprocess.run([dump, model, tokens], capture_output=True, text=True,
                                check=True).stdout)
run = subprocess.run([strata, "logits", "-m", model, "--tokens", tokens, "-t", "2"] + extra,
                     capture_output=True, text=True)
name = os.path.basename(model)
if run.returncode != 0:
    print(f"{name:24s} strata failed: {run.stderr.strip()}")
    sys.exit(1)
got = json.loads(run.stdout)
worst, where = 0.0, 0
for i, (a, b) in enumerate(zip(got, ref)):
    err = max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)
    if err > worst:
        worst, where = err, i
agree = sum(a.index(max(a)) == b.index(max(b)) for a, b in zip(got, ref))
print(f"{name:24s} positions {len(ref):5d}  worst rel err {worst:.2e} (position {where})  "
      f"argmax agree {agree}/{len(ref)}")
