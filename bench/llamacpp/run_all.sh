#!/bin/sh
# strata against llama.cpp v0.5.0 (and PowerInfer) on files they wrote, as docs/LLAMACPP_FILES.md
# reports. Neither is built by this repository: LLAMA_CPP is a llama.cpp checkout built with
# -DLLAMA_BUILD_TESTS=ON (targets test-llama-archs llama-completion llama-tokenize), see
# ../shared/vocab/README.md; POWERINFER_BIN (optional) the folder holding PowerInfer's `main`.
#  1. llama.cpp's own random models (test-llama-archs -s 42 -o): logits for 12 ids, llama.cpp's
#     default context (F16 KV cache) and an F32 cache without flash attention (KV_F32=1).
#  2. A Llama-3.1-shape file (rope_freqs) written by llama.cpp's gguf-py: every position of 2048.
#  3. Models around real vocabularies written by gguf-py: the prompt's tokens (BOS included) and
#     16 greedy tokens, llama-completion against strata run.
#  4. PowerInfer's ReluFalcon and OPT layouts (strata synth --powerinfer) with Falcon's and GPT-2's
#     vocabularies: 24 greedy tokens, every neuron computed, against strata's gate-first mode.
# Usage: bench/llamacpp/run_all.sh LLAMA_CPP WORK_DIR [POWERINFER_BIN]
set -eu
llama=$(realpath "$1") work=$2 pi=${3:-}
here=$(dirname "$(realpath "$0")")
strata=$(realpath "${STRATA:-build/bin/strata}")
vocab=$(realpath "$here/../../../shared/vocab")
mkdir -p "$work/archs"
work=$(realpath "$work")
bin=$llama/build/bin
g++ -O2 -std=c++17 "$here/dump_logits.cpp" -I"$llama/include" -I"$llama/ggml/include" \
  -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin" -o "$work/dump_logits"
dump=$work/dump_logits cmp="/usr/bin/python3 $here/compare_logits.py $strata $work/dump_logits"
export PYTHONPATH="$llama/gguf-py"

echo "== 1. llama.cpp's test-llama-archs models (seed 42)"
"$bin/test-llama-archs" -s 42 -a '^(llama|falcon|qwen2|qwen3|qwen2moe|qwen3moe|gemma2|gemma3|phi3|gpt-oss)$' \
  -o "$work/archs" >/dev/null 2>&1
for f in "$work"/archs/*.gguf; do
  $cmp "$f"
  KV_F32=1 $cmp "$f" | sed 's/^/  F32 KV: /'
done

echo "== 2. Llama-3.1 shape with rope_freqs, 2048 positions"
/usr/bin/python3 "$here/llama31_model.py" "$work/llama31.gguf"
$cmp "$work/llama31.gguf" --random 2048 -- --cache-type-k f16 --cache-type-v f16
KV_F32=1 $cmp "$work/llama31.gguf" --random 2048 | sed 's/^/  F32 KV: /'

echo "== 3. Real vocabularies: prompt tokens and 16 greedy tokens"
prompt="Once upon a time"
for v in falcon:falcon qwen2:qwen2 gpt-2:llama llama-bpe:llama llama-spm:llama; do
  name=${v%%:*} arch=${v##*:} f="$work/vocab-${v%%:*}.gguf"
  /usr/bin/python3 "$here/vocab_model.py" "$vocab/ggml-vocab-$name.gguf" "$arch" "$f"
  theirs=$("$bin/llama-tokenize" -m "$f" -p "$prompt" --ids --log-disable 2>/dev/null | tail -1 |
    tr -d '[],' )
  ours=$("$strata" tokenize -m "$f" -p "$prompt" 2>/dev/null | tail -1)
  text_l=$("$bin/llama-completion" -m "$f" -p "$prompt" -n 16 --temp 0 -no-cnv \
    --no-display-prompt --simple-io --no-warmup -t 2 -c 256 2>/dev/null)
  text_s=$("$strata" run -m "$f" -p "$prompt" -n 16 --temp 0 -t 2 2>/dev/null)
  [ "$theirs" = "$ours" ] && tok=equal || tok="differ ($theirs | $ours)"
  [ "$prompt$text_l" = "$text_s" ] && gen=equal || gen=differ
  printf '%-10s prompt tokens %-8s [%s]  greedy text %s\n' "$name" "$tok" "$ours" "$gen"
done

[ -n "$pi" ] || exit 0
echo "== 4. PowerInfer's layouts with BPE vocabularies: 24 greedy tokens"
for arch in falcon opt; do
  if [ $arch = falcon ]; then v=falcon n=65024 extra="--kv-heads 1"; else
    v=gpt-2 n=50257 extra="--tied --ctx 2048"; fi
  f="$work/pi-$arch.gguf"
  "$strata" synth --vocab $n --tokenizer-from "$vocab/ggml-vocab-$v.gguf" --sparsity 0.1 \
    --powerinfer --ffn relu --preset tiny --embd 256 --ff 1024 --heads 8 --layers 4 --type f16 \
    --arch $arch $extra -o "$f" >/dev/null
  text_p=$(cd "$work" && LLAMA_SPARSE_PRED_THRESHOLD=-1e30 "$pi/main" -m "$f" \
    -p "Once upon a time there was" -n 24 --temp 0 -t 2 2>/dev/null | sed 's/^ *//')
  text_s=$("$strata" run -m "$f" -p "Once upon a time there was" -n 24 --temp 0 -t 2 \
    --ffn gate-first 2>/dev/null)
  [ "$text_p" = "$text_s" ] && gen=equal || gen="differ: '$text_p' | '$text_s'"
  printf '%-10s (%s vocabulary) greedy text %s\n' "$arch" "$v" "$gen"
done
