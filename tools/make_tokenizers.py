#!/usr/bin/env python3
"""Makes the tokenizer fixtures in tests/data (committed; rerun only to change them):
  kjv-train.txt is not kept; the King James text comes from Debian's bible-kjv package.
  spm-bpe.model          SentencePiece BPE (spm_train) on ~400 KB of it, LLaMA's settings
  spm-tokenizer.gguf     the same vocabulary as GGUF tokenizer.ggml.* metadata (model 'llama')
  gpt2-tokenizer.gguf    a byte-level BPE (600 merges) trained on the same text (model 'gpt2')
  kjv-heldout.txt        ~150 KB of later books, never trained on: test strings come from it
Usage: /usr/bin/python3 tools/make_tokenizers.py   (needs bible-kjv, python3-sentencepiece)"""
import os
import subprocess
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "reference"))
import bpe_tokenizer  # noqa: E402
from gguf_py import ARRAY, BOOL, F32, I32, STRING, U32, GGUFWriter  # noqa: E402

DATA = os.path.join(HERE, "..", "tests", "data")


def bible(spec):
    return subprocess.run(["bible", spec], check=True, capture_output=True, text=True).stdout


def main():
    os.makedirs(DATA, exist_ok=True)
    train = bible("gen1:1-lev27:34")[:400_000]
    heldout = bible("rev1:1-rev22:21") + bible("jude1:1-jude1:25") + bible("jas1:1-jas5:20")
    with open(os.path.join(DATA, "kjv-heldout.txt"), "w") as f:
        f.write(heldout)
    tmp = "/tmp/strata-spm-train.txt"
    with open(tmp, "w") as f:
        f.write(train)
    prefix = os.path.join(DATA, "spm-bpe")
    subprocess.run(["spm_train", f"--input={tmp}", f"--model_prefix={prefix}", "--model_type=bpe",
                    "--vocab_size=2000", "--byte_fallback=true", "--split_digits=true",
                    "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                    "--add_dummy_prefix=true", "--character_coverage=1.0", "--seed_sentencepiece_size=100000",
                    "--num_threads=1"],
                   check=True, capture_output=True)
    os.remove(prefix + ".vocab")
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    n = sp.get_piece_size()
    types = []
    for i in range(n):
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        elif sp.is_unused(i):
            types.append(5)
        else:
            types.append(1)
    w = GGUFWriter()
    w.add("general.architecture", STRING, "llama")
    w.add("tokenizer.ggml.model", STRING, "llama")
    w.add("tokenizer.ggml.tokens", ARRAY, [sp.id_to_piece(i) for i in range(n)], STRING)
    w.add("tokenizer.ggml.scores", ARRAY, [sp.get_score(i) for i in range(n)], F32)
    w.add("tokenizer.ggml.token_type", ARRAY, types, I32)
    w.add("tokenizer.ggml.bos_token_id", U32, sp.bos_id())
    w.add("tokenizer.ggml.eos_token_id", U32, sp.eos_id())
    w.add("tokenizer.ggml.unknown_token_id", U32, sp.unk_id())
    w.add("tokenizer.ggml.add_bos_token", BOOL, True)
    w.add("tokenizer.ggml.add_space_prefix", BOOL, True)
    w.write(os.path.join(DATA, "spm-tokenizer.gguf"))

    merges = bpe_tokenizer.train(train[:150_000], 600)
    tokens = [bpe_tokenizer.BYTE_TO_CHAR[b] for b in range(256)]
    tokens += [a + b for a, b in merges]
    tokens.append("<|endoftext|>")
    w = GGUFWriter()
    w.add("general.architecture", STRING, "llama")
    w.add("tokenizer.ggml.model", STRING, "gpt2")
    w.add("tokenizer.ggml.pre", STRING, "gpt2")
    w.add("tokenizer.ggml.tokens", ARRAY, tokens, STRING)
    w.add("tokenizer.ggml.token_type", ARRAY, [1] * (len(tokens) - 1) + [3], I32)
    w.add("tokenizer.ggml.merges", ARRAY, [f"{a} {b}" for a, b in merges], STRING)
    w.add("tokenizer.ggml.bos_token_id", U32, len(tokens) - 1)
    w.add("tokenizer.ggml.eos_token_id", U32, len(tokens) - 1)
    w.add("tokenizer.ggml.add_bos_token", BOOL, False)
    w.write(os.path.join(DATA, "gpt2-tokenizer.gguf"))
    print(f"spm vocabulary {n}, gpt2 vocabulary {len(tokens)}, held-out text {len(heldout)} bytes")


if __name__ == "__main__":
    main()
