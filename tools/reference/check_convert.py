#!/usr/bin/env python3
"""Tests `strata convert` end to end: writes tiny Hugging Face checkpoints (random weights,
ReGLU and SwiGLU, one file and sharded with an index, F32 and BF16 tensors), converts them, and
compares strata's logits with a PyTorch forward pass that follows Hugging Face's LlamaModel
(rotate_half rotary embedding) on the original weights: this checks the q/k permutation and
every tensor mapping. Then checks that bad checkpoints fail cleanly and leave no output file.
Usage: check_convert.py STRATA_BINARY DATA_DIR WORK_DIR"""
import json
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "train_tiny"))
import train  # noqa: E402  (the HF-semantics model and the safetensors writer)
sys.path.insert(0, HERE)
import hf_families as hf  # noqa: E402  (Falcon, OPT, Qwen2, Qwen3 checkpoints, forward passes)
import hf_gemma  # noqa: E402  (Gemma 2 and 3 checkpoints, forward passes)
import hf_glm4moe  # noqa: E402  (GLM-4.5 checkpoints, forward passes)
import hf_phi3  # noqa: E402  (Phi-3 checkpoints, forward passes)
from gguf_py import GGUFReader  # noqa: E402

TOKENS = [1, 17, 200, 3, 99, 42, 1999, 8, 128, 64]


def make_checkpoint(path, act, shards, dtype, tokenizer, seed, hidden=64, ff=128):
    torch.manual_seed(seed)
    cfg = dict(vocab_size=2000, hidden_size=hidden, intermediate_size=ff, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act=act)
    model = train.Model(cfg)
    with torch.no_grad():
        for p in model.parameters():  # larger than the training init, so errors would show
            p.normal_(0, 0.2)
    os.makedirs(path, exist_ok=True)
    state = train.hf_state(model)
    if dtype == "BF16":  # round to bf16 so the reference and the file hold the same values
        state = {k: torch.from_numpy(v).bfloat16().float().numpy() for k, v in state.items()}
    names = list(state)
    if shards == 1:
        write(os.path.join(path, "model.safetensors"), state, dtype)
    else:
        weight_map = {}
        for s in range(shards):
            part = {n: state[n] for n in names[s::shards]}
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            write(os.path.join(path, fname), part, dtype)
            weight_map.update({n: fname for n in part})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(dict(cfg, architectures=["LlamaForCausalLM"], model_type="llama",
                       bos_token_id=1, eos_token_id=2), f)
    shutil.copy(tokenizer, os.path.join(path, "tokenizer.model"))
    return model, state


def write(path, tensors, dtype):
    if dtype == "F32":
        train.write_safetensors(path, tensors)
        return
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        b = torch.from_numpy(np.ascontiguousarray(arr)).bfloat16().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def reference_logits(model, state):
    with torch.no_grad():
        # load the (possibly bf16-rounded) weights back into the HF-semantics model
        sd = {}
        for k, v in state.items():
            k2 = k.replace("model.", "", 1).replace("self_attn.", "").replace("mlp.", "")
            sd[k2] = torch.from_numpy(v)
        model.load_state_dict(sd)
        model.double()
        model.cos, model.sin = model.cos.double(), model.sin.double()
        return model(torch.tensor([TOKENS]))[0]


def strata_logits(strata, gguf):
    out = subprocess.run([strata, "logits", "-m", gguf, "--tokens", ",".join(map(str, TOKENS))],
                         check=True, capture_output=True, text=True).stdout
    return torch.tensor(json.loads(out), dtype=torch.float64)


def expect_failure(strata, src, out, needle):
    r = subprocess.run([strata, "convert", src, "-o", out], capture_output=True, text=True)
    ok = (r.returncode != 0 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
          and not os.path.exists(out) and not os.path.exists(out + ".tmp"))
    print(f"{'ok  ' if ok else 'FAIL'} bad checkpoint ({needle}): {r.stderr.strip()}")
    return ok


# Llama 3.1's rope_scaling on a Mistral-shaped LLaMA (no window), theta 10000 so that the
# 16-wide heads' wavelengths span the blend.
LLAMA3 = dict(hf.mistral_config(sliding_window=None), rope_theta=10000.0, rope_scaling={
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32})


def main():
    strata, data, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tokenizer = os.path.join(data, "spm-bpe.model")
    ok = True
    cases = [("relu", 1, "F32", "f32", 1e-4), ("silu", 3, "F32", "f32", 1e-4),
             ("relu", 2, "BF16", "f32", 1e-4), ("silu", 1, "F32", "f16", 5e-3)]
    for i, (act, shards, dtype, out_type, tol) in enumerate(cases):
        src = os.path.join(work, f"hf-{i}")
        model, state = make_checkpoint(src, act, shards, dtype, tokenizer, seed=i)
        gguf = os.path.join(work, f"converted-{i}.gguf")
        subprocess.run([strata, "convert", src, "-o", gguf, "--type", out_type], check=True,
                       capture_output=True)
        ref = reference_logits(model, state)
        got = strata_logits(strata, gguf)
        err = ((got - ref).abs().max() / ref.abs().max()).item()
        good = err <= tol
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {act} {shards} shard(s) {dtype} -> {out_type}: "
              f"rel err {err:.2e} (tol {tol:.0e})")

    # Falcon (both fused q/k/v layouts, GELU and ReluFalcon's ReLU), OPT, Qwen2, Qwen3 (its head
    # size unlike hidden / heads), Mixtral and Qwen3-MoE (experts stacked into ffn_*_exps)
    # checkpoints.
    others = [("falcon multi_query", hf.falcon_config(False, kv_heads=1), hf.falcon_state,
               hf.falcon_forward),
              ("falcon new_decoder", hf.falcon_config(True, kv_heads=2), hf.falcon_state,
               hf.falcon_forward),
              ("relufalcon new_decoder", hf.falcon_config(True, kv_heads=2, act="relu"),
               hf.falcon_state, hf.falcon_forward),
              ("opt", hf.opt_config(), hf.opt_state, hf.opt_forward),
              ("qwen2", hf.qwen2_config(), hf.qwen2_state, hf.qwen2_forward),
              ("qwen2 tied", hf.qwen2_config(kv_heads=1, tied=True), hf.qwen2_state,
               hf.qwen2_forward),
              ("qwen3 head_dim 32", hf.qwen3_config(), hf.qwen2_state, hf.qwen2_forward),
              ("mixtral 4 experts top 2", hf.mixtral_config(), hf.mixtral_state,
               hf.mixtral_forward),
              ("mixtral 6 experts top 3", hf.mixtral_config(experts=6, k=3, kv_heads=4),
               hf.mixtral_state, hf.mixtral_forward),
              ("qwen3moe 4 experts top 2", hf.qwen3moe_config(), hf.qwen3moe_state,
               hf.qwen3moe_forward),
              # Mistral's and Mixtral's sliding window (4 and 3 positions of the 10 tokens).
              ("mistral sliding_window 4", hf.mistral_config(), hf.qwen2_state,
               hf.qwen2_forward),
              ("mixtral sliding_window 3", hf.mixtral_config(sliding_window=3), hf.mixtral_state,
               hf.mixtral_forward),
              ("qwen2moe 4 experts top 2, shared 80", hf.qwen2moe_config(), hf.qwen2moe_state,
               hf.qwen2moe_forward),
              # rope_scaling as llama.cpp's converter carries it (issue 53): Llama 3's as the
              # rope_freqs tensor, linear and YaRN as rope.scaling keys. The original contexts
              # are short so that the 10 tokens reach the scaled frequencies.
              ("llama rope_scaling llama3", LLAMA3, hf.qwen2_state, hf.qwen2_forward),
              ("qwen2 rope_scaling linear x2", dict(hf.qwen2_config(), rope_scaling={
                  "type": "linear", "factor": 2.0}), hf.qwen2_state, hf.qwen2_forward),
              ("qwen2 rope_scaling yarn x4", dict(hf.qwen2_config(), rope_scaling={
                  "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4}),
               hf.qwen2_state, hf.qwen2_forward),
              # Gemma 2 (caps 5 and 3 so that they bend, a window of 3 on even layers) and
              # Gemma 3 (q/k norms; a window of 3 on two of three layers with their own RoPE
              # base; the full layers at 1e6 with linear scaling x8, given by layer_types in
              # one case); every norm's 1 + w.
              ("gemma2 window 3, caps 5/3", hf_gemma.gemma_config(2), hf_gemma.gemma_state,
               hf_gemma.gemma_forward),
              ("gemma3 window 3 of every 3, linear x8", hf_gemma.gemma_config(
                  3, rope_scaling={"rope_type": "linear", "factor": 8.0}),
               hf_gemma.gemma_state, hf_gemma.gemma_forward),
              ("gemma3 layer_types", hf_gemma.gemma_config(3, layer_types=[
                  "full_attention", "sliding_attention", "sliding_attention", "full_attention"]),
               hf_gemma.gemma_state, hf_gemma.gemma_forward),
              # Phi-3: fused qkv_proj and gate_up_proj; Phi-4-mini's partial rotary (half the
              # head here) with LongRoPE: `strata logits` runs a context of the 10 tokens, so an
              # original context of 16 takes the short table and one of 8 the long one.
              ("phi3", hf_phi3.phi3_config(), hf_phi3.phi3_state, hf_phi3.phi3_forward),
              ("phi3 partial rotary, longrope short", hf_phi3.phi3_config(partial=0.5, longrope=16),
               hf_phi3.phi3_state, hf_phi3.phi3_forward),
              ("phi3 longrope long", hf_phi3.phi3_config(longrope=8), hf_phi3.phi3_state,
               lambda s, c, t: hf_phi3.phi3_forward(s, c, t, long_context=True)),
              # Gemma 3's multimodal checkpoints: text_config, the language model's tensors
              # under either transformers layout beside a vision tower, 64 embedding rows past
              # the tokenizer cut off (llama.cpp's vocabulary).
              ("gemma3 conditional generation, old layout",
               hf_gemma.gemma3_multimodal_config("old"), hf_gemma.gemma3_multimodal_state,
               hf_gemma.gemma3_multimodal_forward),
              ("gemma3 conditional generation, new layout",
               hf_gemma.gemma3_multimodal_config("new"), hf_gemma.gemma3_multimodal_state,
               hf_gemma.gemma3_multimodal_forward),
              # GLM-4.5: layer 0 dense, then 6 experts (2 a token) by sigmoid scores with the
              # correction bias, normalized and scaled by 2.5, one shared expert; q/k/v biases,
              # q/k norms, RoPE on half of each 32-wide head.
              ("glm4moe", hf_glm4moe.glm4moe_config(), hf_glm4moe.glm4moe_state,
               hf_glm4moe.glm4moe_forward)]
    for i, (label, cfg, make_state, forward) in enumerate(others):
        src = os.path.join(work, f"hf-other-{i}")
        os.makedirs(src)
        state = {k: v.astype(np.float32) for k, v in make_state(cfg, 20 + i).items()}
        train.write_safetensors(os.path.join(src, "model.safetensors"), state)
        with open(os.path.join(src, "config.json"), "w") as f:
            json.dump(cfg, f)
        shutil.copy(tokenizer, os.path.join(src, "tokenizer.model"))
        gguf = os.path.join(work, f"converted-other-{i}.gguf")
        subprocess.run([strata, "convert", src, "-o", gguf, "--type", "f32"], check=True,
                       capture_output=True)
        ref = forward({k: v.astype(np.float64) for k, v in state.items()}, cfg, TOKENS)
        err = ((strata_logits(strata, gguf) - ref).abs().max() / ref.abs().max()).item()
        good = err <= 1e-4
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {label} -> f32: rel err {err:.2e} (tol 1e-04)")
    # What these converters refuse: each one line, nothing written.
    for i, key, value, needle in [(0, "alibi", True, "ALiBi"),
                                  (0, "activation", "silu", "activation 'silu'"),
                                  (3, "do_layer_norm_before", False, "post-norm"),
                                  (3, "word_embed_proj_dim", 32, "word_embed_proj_dim"),
                                  (4, "use_sliding_window", True, "use_sliding_window"),
                                  (7, "hidden_act", "relu", "MixtralForCausalLM with hidden_act"),
                                  (7, "num_experts_per_tok", 5, "'num_experts_per_tok' = 5"),
                                  (7, "num_local_experts", 3, "block_sparse_moe.gate.weight"),
                                  (9, "norm_topk_prob", False, "norm_topk_prob false"),
                                  (9, "mlp_only_layers", [1], "mlp_only_layers"),
                                  (9, "decoder_sparse_step", 2, "decoder_sparse_step"),
                                  (12, "norm_topk_prob", True, "norm_topk_prob true"),
                                  (12, "mlp_only_layers", [0], "mlp_only_layers"),
                                  (14, "rope_scaling", {"type": "dynamic", "factor": 2.0},
                                   "rope_scaling type 'dynamic'"),
                                  (15, "rope_scaling", {"type": "yarn", "factor": 4.0,
                                                        "beta_fast": 16},
                                   "rope_scaling.beta_fast (yarn scaling)"),
                                  (4, "rope_scaling", {"rope_type": "llama3", "factor": 8.0},
                                   "rope_scaling llama3 belongs to LLaMA"),
                                  (16, "query_pre_attn_scalar", 7,
                                   "query_pre_attn_scalar 7 differs from the 32"),
                                  (16, "hidden_activation", "gelu", "hidden_activation 'gelu'"),
                                  (17, "attn_logit_softcapping", 50.0, "Gemma 3 has none"),
                                  (18, "layer_types", ["full_attention"],
                                   "layer_types has 1 entries for 4 layers"),
                                  (21, "rope_scaling", {"type": "longrope", "long_factor": [1.0],
                                                        "short_factor": [1.0]},
                                   "rope_scaling.long_factor must be a list of 8 numbers"),
                                  (19, "partial_rotary_factor", 0.01,
                                   "partial_rotary_factor 0.01 gives 0 rotary dimensions"),
                                  (4, "rope_scaling", {"type": "longrope"},
                                   "rope_scaling longrope belongs to Phi-3"),
                                  (24, "n_group", 4, "n_group 4 (group-limited routing)"),
                                  (24, "hidden_act", "gelu", "hidden_act 'gelu'")]:
        src = os.path.join(work, f"hf-other-{i}")
        bad_dir = os.path.join(work, "bad-other")
        shutil.rmtree(bad_dir, ignore_errors=True)
        shutil.copytree(src, bad_dir)
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        cfg[key] = value
        with open(os.path.join(bad_dir, "config.json"), "w") as f:
            json.dump(cfg, f)
        ok &= expect_failure(strata, bad_dir, os.path.join(work, "bad-other.gguf"), needle)

    # Straight to a llama-quantize mixture: `convert --type q4_k_m` of a 256-wide checkpoint must
    # give exactly the logits of `convert --type f32` followed by `quantize ... Q4_K_M` (the same
    # recipe and quantizer on the same values; their closeness to the HF model is the PyTorch
    # logits check's business).
    src = os.path.join(work, "hf-wide")
    make_checkpoint(src, "relu", 1, "F32", tokenizer, seed=9, hidden=256, ff=512)
    direct, f32, requant = (os.path.join(work, n) for n in ("q4km.gguf", "f32.gguf", "rq.gguf"))
    subprocess.run([strata, "convert", src, "-o", direct, "--type", "q4_k_m"], check=True,
                   capture_output=True)
    subprocess.run([strata, "convert", src, "-o", f32, "--type", "f32"], check=True,
                   capture_output=True)
    subprocess.run([strata, "quantize", f32, requant, "Q4_K_M"], check=True, capture_output=True)
    same = torch.equal(strata_logits(strata, direct), strata_logits(strata, requant))
    ok &= same
    print(f"{'ok  ' if same else 'FAIL'} convert --type q4_k_m equals convert + quantize Q4_K_M")

    # Bad checkpoints: each fails with one line and leaves no output behind.
    base = os.path.join(work, "hf-1")  # 3 shards
    bad = os.path.join(work, "bad")

    def fresh():
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(base, bad)
    out = os.path.join(work, "bad.gguf")
    fresh()
    cfg = json.load(open(os.path.join(bad, "config.json")))
    cfg["architectures"] = ["GPTNeoXForCausalLM"]
    json.dump(cfg, open(os.path.join(bad, "config.json"), "w"))
    ok &= expect_failure(strata, bad, out, "GPTNeoXForCausalLM")
    fresh()
    os.remove(os.path.join(bad, "model-00002-of-00003.safetensors"))
    ok &= expect_failure(strata, bad, out, "missing")
    fresh()
    cfg = json.load(open(os.path.join(bad, "config.json")))
    cfg["intermediate_size"] = 96
    json.dump(cfg, open(os.path.join(bad, "config.json"), "w"))
    ok &= expect_failure(strata, bad, out, "has shape")
    fresh()
    shard = os.path.join(bad, "model-00001-of-00003.safetensors")
    raw = open(shard, "rb").read()
    hlen = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + hlen])
    name = next(k for k in header if k != "__metadata__")
    header[name]["dtype"] = "I32"
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(shard, "wb").write(len(h).to_bytes(8, "little") + h + raw[8 + hlen:])
    ok &= expect_failure(strata, bad, out, "dtype I32")
    fresh()
    raw = open(shard, "rb").read()
    open(shard, "wb").write(raw[:len(raw) // 2])  # truncated shard
    ok &= expect_failure(strata, bad, out, "offsets outside the file")

    # config.json values that strata would refuse in the GGUF file, or that were truncated
    # silently, or that sized allocations before anything checked them (issue 19).
    def with_config(**changes):
        fresh()
        path = os.path.join(bad, "config.json")
        cfg = json.load(open(path))
        cfg.update(changes)
        json.dump(cfg, open(path, "w"))
    for changes, needle in [({"rms_norm_eps": -1}, "not a positive number"),
                            ({"rope_theta": 0}, "not a positive number"),
                            # Issue 52.16: values the loader refuses once stored as f32.
                            ({"rope_theta": 1e-50}, "rope.freq_base is 0"),
                            ({"rms_norm_eps": 1e-50}, "expected a number in (0, 1)"),
                            ({"rms_norm_eps": 5}, "expected a number in (0, 1)"),
                            ({"max_position_embeddings": 2**62}, "outside"),
                            ({"bos_token_id": 2**40}, "outside"),
                            ({"hidden_size": 64.5}, "not a whole number"),
                            ({"num_attention_heads": "4"}, "not a whole number"),
                            ({"num_key_value_heads": 0}, "outside"),  # found by fuzz_convert
                            ({"vocab_size": 20_000_000}, "model.embed_tokens.weight has shape"),
                            ({"num_hidden_layers": 100000}, "lacks"),
                            ({"tie_word_embeddings": "no"}, "not true or false")]:
        with_config(**changes)
        ok &= expect_failure(strata, bad, out, needle)
    fresh()
    index = os.path.join(bad, "model.safetensors.index.json")
    idx = json.load(open(index))
    idx["weight_map"][next(iter(idx["weight_map"]))] = 7
    json.dump(idx, open(index, "w"))
    ok &= expect_failure(strata, bad, out, "not a file name")
    fresh()
    idx["weight_map"][next(iter(idx["weight_map"]))] = "../../etc/passwd"
    json.dump(idx, open(index, "w"))
    ok &= expect_failure(strata, bad, out, "not a file in the directory")

    # tokenizer.json in place of tokenizer.model, malformed in each way probing found.
    def with_tokenizer_json(obj):
        fresh()
        os.remove(os.path.join(bad, "tokenizer.model"))
        json.dump(obj, open(os.path.join(bad, "tokenizer.json"), "w"))
    vocab = {f"t{i}": i for i in range(100)}

    def tok(**parts):
        t = {"model": {"type": "BPE", "vocab": vocab, "merges": []},
             "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": []}
        for k, v in parts.items():
            if k in ("vocab", "merges"):
                t["model"][k] = v
            else:
                t[k] = v
        return t
    for obj, needle in [([], "not a JSON object"),
                        (tok(vocab={"a": "0"}), "not a whole number"),
                        (tok(vocab=[1, 2]), "not an object"),
                        (tok(merges=[1, 2]), "model.merges[0]"),
                        (tok(added_tokens=[1]), "added_tokens[0]"),
                        (tok(added_tokens=[{"id": 2**62, "content": "x"}]), "outside"),
                        (tok(added_tokens=[{"id": "5", "content": "x"}]), "added_tokens[0]"),
                        (tok(pre_tokenizer=[]), "not supported")]:
        with_tokenizer_json(obj)
        ok &= expect_failure(strata, bad, out, needle)
    # Llama 3's and Qwen2's pre-tokenizers (a Split by their regex, then ByteLevel without its own)
    # are known by the regex; ignore_merges must be what the name implies (Llama 3: true).
    digits = {"llama-bpe": r"\p{N}{1,3}", "qwen2": r"\p{N}"}

    def split_then_bytes(name, regex=None):
        rx = regex or (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|" + digits[name] +
                       r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    for obj, needle in [(tok(pre_tokenizer=split_then_bytes("qwen2", regex=r"\s+")), "not supported"),
                        (tok(pre_tokenizer=split_then_bytes("llama-bpe")), "ignore_merges is false"),
                        (tok(pre_tokenizer={"type": "ByteLevel", "use_regex": False}), "not supported")]:
        with_tokenizer_json(obj)
        ok &= expect_failure(strata, bad, out, needle)
    for name, ignore in [("llama-bpe", True), ("qwen2", False)]:
        obj = tok(pre_tokenizer=split_then_bytes(name))
        obj["model"]["ignore_merges"] = ignore
        with_tokenizer_json(obj)
        r = subprocess.run([strata, "convert", bad, "-o", out], capture_output=True, text=True)
        got = GGUFReader(out).kv.get("tokenizer.ggml.pre") if r.returncode == 0 else r.stderr.strip()
        good = got == name
        print(f"{'ok  ' if good else 'FAIL'} tokenizer.json with {name}'s Split: pre = {got}")
        ok &= good

    with_tokenizer_json(tok())  # the well-formed one converts
    r = subprocess.run([strata, "convert", bad, "-o", out], capture_output=True, text=True)
    good = r.returncode == 0 and os.path.exists(out) and GGUFReader(out).kv["tokenizer.ggml.pre"] == "gpt2"
    print(f"{'ok  ' if good else 'FAIL'} tokenizer.json converts: {r.stderr.strip()[:200]}")
    ok &= good

    # An output that is a device is refused and left as it was (as root, rename() replaced it).
    r = subprocess.run([strata, "convert", base, "-o", "/dev/full"], capture_output=True, text=True)
    good = (r.returncode != 0 and "not a regular file" in r.stderr
            and stat.S_ISCHR(os.stat("/dev/full").st_mode))
    print(f"{'ok  ' if good else 'FAIL'} -o /dev/full: {r.stderr.strip()}")
    ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
