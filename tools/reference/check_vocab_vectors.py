#!/usr/bin/env python3
"""Tokenizes llama.cpp v0.5.0's tokenizer test vectors with strata: each ggml-vocab-NAME.gguf
(a real model's vocabulary) with its .inp (texts separated by "\\n__ggml_vocab_test__\\n") and
.out (one line of ids per text, written by that model's own Hugging Face tokenizer), tokenized
without BOS and without special-token parsing as llama.cpp's test-tokenizer-0 does. Every
vocabulary must give exactly the .out ids, except those strata does not read yet (NOT_YET), which
must be refused with one line naming what is missing.
Usage: check_vocab_vectors.py STRATA VOCAB_DIR [NAME ...]
VOCAB_DIR is ../shared/vocab (or a llama.cpp checkout's models/). Not in the repository (the
vocabularies are 63 MB): without it the check exits 77, which ctest reports as skipped."""
import glob
import json
import os
import subprocess
import sys
import tempfile

# Vocabularies strata refuses today, by name (none since issue 54 added WordPiece).
NOT_YET = set()


def cases(base):
    texts = open(base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    want = [[int(t) for t in line.split()] for line in open(base + ".out").read().splitlines()]
    if texts and texts[-1] == "" and len(texts) == len(want) + 1:
        texts.pop()
    return texts, want


def tokenize(strata, model, texts):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
    try:
        return subprocess.run([strata, "tokenize", "-m", model, "--batch", f.name, "--no-bos"],
                              capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(f.name)


def main():
    strata, folder = sys.argv[1], sys.argv[2]
    if not os.path.isdir(folder):
        print(f"skipped: no vocabulary folder '{folder}'")
        sys.exit(77)
    names = sys.argv[3:] or sorted(
        os.path.basename(p)[len("ggml-vocab-"):-len(".gguf")]
        for p in glob.glob(os.path.join(folder, "ggml-vocab-*.gguf"))
        if os.path.exists(p + ".inp") and os.path.exists(p + ".out"))
    failures = 0
    for name in names:
        base = os.path.join(folder, f"ggml-vocab-{name}.gguf")
        texts, want = cases(base)
        if len(texts) != len(want):
            print(f"FAIL {name}: {len(texts)} texts but {len(want)} results")
            failures += 1
            continue
        out = tokenize(strata, base, texts)
        if name in NOT_YET:
            lines = out.stderr.strip().splitlines()
            refused = out.returncode != 0 and len(lines) == 1 and "tokenizer" in lines[0]
            print(f"{'ok  ' if refused else 'FAIL'} {name}: "
                  f"{'refused (not yet): ' + lines[0] if refused else 'not refused in one line'}")
            failures += not refused
            continue
        if out.returncode != 0:
            print(f"FAIL {name}: {out.stderr.strip()}")
            failures += 1
            continue
        got = json.loads(out.stdout)
        bad = [i for i in range(len(texts)) if got[i] != want[i]]
        failures += len(bad) > 0
        print(f"{'ok  ' if not bad else 'FAIL'} {name}: {len(texts) - len(bad)}/{len(texts)} equal")
        for i in bad[:5]:
            print(f"     {texts[i]!r}: expected {want[i]}, strata {got[i]}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
