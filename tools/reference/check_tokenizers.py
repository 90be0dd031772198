#!/usr/bin/env python3
"""Checks strata's tokenizers against the real thing, over thousands of varied strings:
  'llama' (SentencePiece BPE): against the sentencepiece library on tests/data/spm-bpe.model
  'gpt2' (byte-level BPE): against tools/reference/bpe_tokenizer.py, with GPT-2's pre-tokenizer
    and with Falcon's, Llama 3's and Qwen2's (the same vocabulary written again with
    tokenizer.ggml.pre = falcon, llama-bpe, qwen2; Llama 3's taking a piece that is one token
    whole)
Usage: check_tokenizers.py STRATA_BINARY DATA_DIR WORK_DIR"""
import json
import os
import random
import subprocess
import sys

import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe_tokenizer import BYTE_TO_CHAR as BPE_CHARS, ByteLevelBPE  # noqa: E402
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


def write_metadata_gguf(path, kv):
    """A GGUF file of metadata only (no tensors): enough for `strata tokenize`."""
    import struct

    def string(v):
        b = v.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def value(v):
        if isinstance(v, bool):
            return struct.pack("<I", 7) + struct.pack("<?", v)
        if isinstance(v, str):
            return struct.pack("<I", 8) + string(v)
        if isinstance(v, int):
            return struct.pack("<I", 5) + struct.pack("<i", v)
        if isinstance(v, float):
            return struct.pack("<I", 6) + struct.pack("<f", v)
        if isinstance(v, list):
            if all(isinstance(x, str) for x in v):
                return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(string(x) for x in v)
            if all(isinstance(x, int) for x in v):
                return struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", x) for x in v)
            return struct.pack("<IIQ", 9, 6, len(v)) + b"".join(struct.pack("<f", x) for x in v)
        raise ValueError(f"cannot write {v!r}")

    body = b"".join(string(k) + value(v) for k, v in kv.items())
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + body)


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
    # Falcon's pre-tokenizer over the same vocabulary: numbers, symbols and punctuation split.
    falcon = os.path.join(work, "falcon-pre-tokenizer.gguf")
    write_metadata_gguf(falcon, dict({k: v for k, v in g.kv.items() if k.startswith(("general.", "tokenizer."))},
                                     **{"tokenizer.ggml.pre": "falcon"}))
    ref = ByteLevelBPE(g.kv["tokenizer.ggml.tokens"], g.kv["tokenizer.ggml.merges"], pre="falcon")
    numbers = ["1234567", "12 345 6789", "x1234y", "$100+$2=<3>^~|`", "a.b,c;d", "((1+2)*3)",
               "don't stop", "1,000,000.00", "IP 192.168.0.1:8080", "''\"quotes\"''"]
    falcon_strings = numbers + strings
    ok &= compare("gpt2/byte-level BPE, falcon pre-tokenizer", falcon_strings,
                  [ref.encode(s) for s in falcon_strings],
                  run_strata(strata, falcon, falcon_strings, work, "falcon"))
    # Llama 3's and Qwen2's patterns over the same vocabulary, with one token added that no merge
    # reaches (" qxqxqx" whole): Llama 3's tokenizer takes it whole (ignore_merges), Qwen2's merges.
    kv = {k: v for k, v in g.kv.items() if k.startswith(("general.", "tokenizer."))}
    whole = "".join(BPE_CHARS[b] for b in " qxqxqx".encode("utf-8"))
    tokens = list(kv["tokenizer.ggml.tokens"]) + [whole]
    kv["tokenizer.ggml.tokens"] = tokens
    if "tokenizer.ggml.token_type" in kv:
        kv["tokenizer.ggml.token_type"] = list(kv["tokenizer.ggml.token_type"]) + [1]
    gpt4_strings = numbers + ["I'M HERE, YOU'RE THERE", "x\r\n\r\n  y", "a qxqxqx b qxqxqxq",
                              "(x)=>{\n\n  return 1;\r\n}", "\t\tdone  \n "] + strings
    for pre, name, ignore in [("llama3", "llama-bpe", True), ("qwen2", "qwen2", False)]:
        path = os.path.join(work, f"{pre}-pre-tokenizer.gguf")
        write_metadata_gguf(path, dict(kv, **{"tokenizer.ggml.pre": name}))
        ref = ByteLevelBPE(tokens, kv["tokenizer.ggml.merges"], pre=pre, ignore_merges=ignore)
        expected = [ref.encode(s) for s in gpt4_strings]
        # The rule must matter here: the added token appears exactly where it is taken whole.
        if (len(tokens) - 1 in ref.encode(" qxqxqx")) != ignore:
            print(f"{pre}: the added token is {'not ' if ignore else ''}taken whole by the reference")
            ok = False
        ok &= compare(f"gpt2/byte-level BPE, {name} pre-tokenizer", gpt4_strings, expected,
                      run_strata(strata, path, gpt4_strings, work, pre))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
