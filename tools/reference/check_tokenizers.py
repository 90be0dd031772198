#!/usr/bin/env python3
"""Checks strata's tokenizers against the real thing, over thousands of varied strings:
  'llama' (SentencePiece BPE): against the sentencepiece library on tests/data/spm-bpe.model
  'gpt2' (byte-level BPE): against tools/reference/bpe_tokenizer.py
Usage: check_tokenizers.py STRATA_BINARY DATA_DIR WORK_DIR"""
import json
import os
import random
import subprocess
import sys

import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe_tokenizer import ByteLevelBPE  # noqa: E402
from gguf_py import GGUFReader  # noqa: E402

AWKWARD = [
    "", " ", "  ", "\n", "\t", " \n ", "a", " a", "a ", "  leading and trailing  ",
    "Hello, world!", "hello   world", "tab\tseparated\tvalues", "line one\nline two\n\n",
    "1234567890", "3.14159 and 2,718", "year 2024: 42 items @ $19.99", "x1y2z3",
    "don't won't I'm you're we've they'll he'd", "'s 't 're", "''quoted''",
    "naïve café résumé", "Ärger über Öl", "日本語のテキスト", "中文字符", "한국어",
    "emoji 😀🎉 👍🏽", "Ω≈ç√∫", "combining e\u0301 a\u0308", "zero\u200bwidth", "ﬁ ligature",
    "mixed 日本 and English", "¿Qué tal?", "Привет, мир", "Ελληνικά", "עברית", "العربية",
    "\u00a0nbsp\u00a0", "\u3000ideographic space", "a\u2028b", "<0x41> <s> </s>", "▁already▁marked",
    "!!!???...", "--- *** ###", "C:\\path\\to\\file", "http://example.com/a?b=c&d=e",
    "    indented code();", "\r\nwindows\r\n", "ALL CAPS SHOUTING", "camelCaseWords",
]


def test_strings(text, n, seed):
    rng = random.Random(seed)
    out = list(AWKWARD)
    words = text.split(" ")
    extras = ["é", "日本", "😀", "  ", "\n", "\t", "123", "'s", "ß", "Ω", "\u00a0", "—", "..."]
    while len(out) < n:
        kind = rng.random()
        if kind < 0.5:  # a slice of real text, any length
            start = rng.randrange(len(text))
            out.append(text[start:start + rng.choice([1, 2, 5, 20, 80, 300])])
        elif kind < 0.8:  # words with odd characters mixed in
            parts = [rng.choice(words) for _ in range(rng.randint(1, 8))]
            for _ in range(rng.randint(0, 3)):
                parts.insert(rng.randrange(len(parts) + 1), rng.choice(extras))
            out.append(rng.choice(["", " ", "  "]).join(parts))
        else:  # random code points from several scripts
            ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff),
                      (0x3040, 0x30ff), (0x4e00, 0x4fff), (0x1f600, 0x1f64f), (0x9, 0xd)]
            s = "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(rng.randint(1, 30)))
            out.append(s)
    return out[:n]


def run_strata(strata, gguf, strings, work, name):
    path = os.path.join(work, f"{name}-strings.json")
    with open(path, "w") as f:
        json.dump(strings, f)
    out = subprocess.run([strata, "tokenize", "-m", gguf, "--no-bos", "--batch", path],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def compare(name, strings, expected, got):
    bad = [(s, e, g) for s, e, g in zip(strings, expected, got) if e != g]
    print(f"{name}: {len(strings) - len(bad)}/{len(strings)} strings encode identically")
    for s, e, g in bad[:5]:
        print(f"  MISMATCH {s!r}\n    expected {e}\n    strata   {g}")
    return not bad


def main():
    strata, data, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    text = open(os.path.join(data, "kjv-heldout.txt")).read()
    strings = test_strings(text, 3000, seed=1)

    sp = spm.SentencePieceProcessor(model_file=os.path.join(data, "spm-bpe.model"))
    ok = compare("llama/SentencePiece", strings, [sp.encode(s) for s in strings],
                 run_strata(strata, os.path.join(data, "spm-tokenizer.gguf"), strings, work, "spm"))

    gguf = os.path.join(data, "gpt2-tokenizer.gguf")
    g = GGUFReader(gguf)
    ref = ByteLevelBPE(g.kv["tokenizer.ggml.tokens"], g.kv["tokenizer.ggml.merges"])
    ok &= compare("gpt2/byte-level BPE", strings, [ref.encode(s) for s in strings],
                  run_strata(strata, gguf, strings, work, "gpt2"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
