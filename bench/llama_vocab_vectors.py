#!/usr/bin/env python3
"""Tokenizes llama.cpp's tokenizer test vectors (models/ggml-vocab-NAME.gguf with its .inp and
.out, from a llama.cpp checkout that this repository does not hold) with strata and compares
the ids: the .inp file's texts, separated by "\\n__ggml_vocab_test__\\n", against the .out
file's lines, tokenized without BOS and without special-token parsing as llama.cpp's
test-tokenizer-0 does. Prints one line per vocabulary and the texts that differ.
Usage: llama_vocab_vectors.py STRATA LLAMA_CPP_DIR NAME [NAME ...]"""
import json
import os
import subprocess
import sys
import tempfile

strata, llama = sys.argv[1], sys.argv[2]
failures = 0
for name in sys.argv[3:]:
    base = os.path.join(llama, "models", f"ggml-vocab-{name}.gguf")
    missing = [p for p in (base, base + ".inp", base + ".out") if not os.path.exists(p)]
    if missing:
        print(f"FAIL {name}: no {', '.join(missing)}")
        failures += 1
        continue
    raw = open(base + ".inp", encoding="utf-8").read()
    texts = raw.split("\n__ggml_vocab_test__\n")
    want = [[int(t) for t in line.split()] for line in open(base + ".out").read().splitlines()]
    if texts and texts[-1] == "" and len(texts) == len(want) + 1:
        texts.pop()
    if len(texts) != len(want):
        print(f"FAIL {name}: {len(texts)} texts but {len(want)} results")
        failures += 1
        continue
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
    out = subprocess.run([strata, "tokenize", "-m", base, "--batch", f.name, "--no-bos"],
                         capture_output=True, text=True)
    os.unlink(f.name)
    if out.returncode != 0:
        print(f"FAIL {name}: {out.stderr.strip()}")
        failures += 1
        continue
    got = json.loads(out.stdout)
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    failures += len(bad) > 0
    print(f"{'ok  ' if not bad else 'FAIL'} {name}: {len(texts) - len(bad)}/{len(texts)} equal")
    for i in bad[:5]:
        print(f"     {texts[i]!r}: llama.cpp {want[i]}, strata {got[i]}")
sys.exit(1 if failures else 0)
