#!/bin/sh
# Makes models/strata-tiny.gguf, the model the README's quick start runs: random weights in a
# LLaMA shape with a ReGLU FFN and the SentencePiece tokenizer of tests/data. It stands in until
# the project ships a trained model (see the converter/model issue).
# Usage: tools/make_shipped_model.sh BUILD_DIR
set -eu
build=${1:-build}
"$build/bin/strata" synth --preset tiny --embd 256 --ff 768 --layers 4 --heads 8 --kv-heads 4 \
  --vocab 2000 --ctx 512 --type f16 --ffn reglu --seed 2026 \
  --tokenizer-from tests/data/spm-tokenizer.gguf -o models/strata-tiny.gguf
