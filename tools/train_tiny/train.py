#!/usr/bin/env python3
"""Trains strata's shipped model: a small LLaMA-architecture model with a ReGLU FFN
(relu(gate) * up) on the King James Bible (Debian's bible-kjv), with a SentencePiece BPE
tokenizer, and saves it as a Hugging Face-style directory (config.json, model.safetensors written
by this script, tokenizer.model) for `strata convert`.

Reproducible: fixed seeds, fixed step count, one thread order (torch deterministic on CPU).
Usage: /usr/bin/python3 tools/train_tiny/train.py --out build/strata-tiny-hf [--steps N] [--ffn F]
--ffn swiglu trains the same model with a SwiGLU FFN (silu(gate) * up), as Llama's: the dense
model people run, on which input sparsity (strata sparsify) is measured.
Writes OUT/heldout.txt (the held-out text) and OUT/results.json (held-out perplexity computed
the way `strata perplexity` does, llama.cpp-style, and per-layer FFN activation sparsity)."""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = dict(vocab_size=2048, hidden_size=256, intermediate_size=1024, num_hidden_layers=6,
              num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256,
              rms_norm_eps=1e-5, rope_theta=10000.0)
HELDOUT_FROM = "heb1:1"  # Hebrews to Revelation are never trained on


def kjv(spec):
    raw = subprocess.run(["bible", spec], check=True, capture_output=True, text=True).stdout
    verses, current = [], None
    for line in raw.splitlines():
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            if current:
                verses.append(current)
            current = m.group(1).strip()
        elif line.strip() and current is not None and not re.match(r"^[1-3]?\s?[A-Z][a-z]+.* \d+$", line):
            current += " " + line.strip()
        elif line.strip():  # a chapter heading such as "Genesis 1"
            if current:
                verses.append(current)
            current = None
            verses.append(line.strip())
    if current:
        verses.append(current)
    return "\n".join(verses) + "\n"


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Block(nn.Module):
    """A LLaMA decoder layer, as Hugging Face's LlamaDecoderLayer computes it (rotate_half RoPE).
    With hidden_act relu (this model's) the FFN is relu(gate_proj x) * up_proj x (ReGLU); with
    silu it is SwiGLU (used by tools/reference/check_convert.py)."""

    def __init__(self, c):
        super().__init__()
        d, h, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.h, self.kv, self.hd = h, kv, d // h
        self.input_layernorm = RMSNorm(d, c["rms_norm_eps"])
        self.q_proj = nn.Linear(d, h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv * self.hd, bias=False)
        self.o_proj = nn.Linear(h * self.hd, d, bias=False)
        self.post_attention_layernorm = RMSNorm(d, c["rms_norm_eps"])
        self.gate_proj = nn.Linear(d, c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(d, c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], d, bias=False)
        self.silu = c.get("hidden_act", "relu") == "silu"

    def forward(self, x, cos, sin, mask, record=None):
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.kv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.o_proj(o)
        h = self.post_attention_layernorm(x)
        gate = self.gate_proj(h)
        act = F.silu(gate) if self.silu else F.relu(gate)
        if record is not None:
            record.append(act.detach())
        return x + self.down_proj(act * self.up_proj(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
        hd = c["hidden_size"] // c["num_attention_heads"]
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.arange(c["max_position_embeddings"]).float()[:, None] * inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, tokens, record=None):
        T = tokens.shape[1]
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, self.cos[:T], self.sin[:T], mask, record)
        return self.lm_head(self.norm(x))


def hf_state(model):
    """Weights under Hugging Face LlamaForCausalLM names."""
    out = {"model.embed_tokens.weight": model.embed_tokens.weight,
           "model.norm.weight": model.norm.weight, "lm_head.weight": model.lm_head.weight}
    for i, l in enumerate(model.layers):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = l.input_layernorm.weight
        out[p + "post_attention_layernorm.weight"] = l.post_attention_layernorm.weight
        for name in ["q_proj", "k_proj", "v_proj", "o_proj"]:
            out[p + f"self_attn.{name}.weight"] = getattr(l, name).weight
        for name in ["gate_proj", "up_proj", "down_proj"]:
            out[p + f"mlp.{name}.weight"] = getattr(l, name).weight
    return {k: v.detach().float().contiguous().numpy() for k, v in out.items()}


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        b = arr.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def perplexity(model, ids, n_ctx, bos):
    """llama.cpp's method: the text tokenized with BOS in front, cut into non-overlapping chunks
    of n_ctx tokens whose first token is replaced by BOS; each chunk scores the predictions of
    its tokens n_ctx/2+1 .. n_ctx-1 (the first half is context)."""
    nll, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for start in range(0, len(ids) - n_ctx + 1, n_ctx):
            chunk = list(ids[start:start + n_ctx])
            chunk[0] = bos
            logits = model(torch.tensor([chunk]))[0].double()
            logp = logits.log_softmax(-1)
            first = n_ctx // 2
            for j in range(first, n_ctx - 1):
                nll -= logp[j, chunk[j + 1]].item()
                count += 1
    return math.exp(nll / count), count


def sparsity(model, ids, n_ctx, bos):
    """Per layer: fraction of exact zeros after relu(gate) over held-out chunks."""
    zeros = [0] * len(model.layers)
    total = [0] * len(model.layers)
    with torch.no_grad():
        for start in range(0, min(len(ids), 64 * n_ctx) - n_ctx + 1, n_ctx):
            chunk = list(ids[start:start + n_ctx])
            chunk[0] = bos
            record = []
            model(torch.tensor([chunk]), record)
            for i, a in enumerate(record):
                zeros[i] += int((a == 0).sum())
                total[i] += a.numel()
    return [z / t for z, t in zip(zeros, total)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ffn", choices=["reglu", "swiglu"], default="reglu")
    args = ap.parse_args()
    torch.manual_seed(1234)
    np.random.seed(1234)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    train_text = kjv("gen1:1-" + "phm1:25")
    held_text = kjv(HELDOUT_FROM + "-rev22:21")
    with open(os.path.join(args.out, "heldout.txt"), "w") as f:
        f.write(held_text)
    with open("/tmp/strata-train-text.txt", "w") as f:
        f.write(train_text)
    spm.SentencePieceTrainer.train(
        input="/tmp/strata-train-text.txt", model_prefix=os.path.join(args.out, "tokenizer"),
        model_type="bpe", vocab_size=CONFIG["vocab_size"], byte_fallback=True, split_digits=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        character_coverage=1.0, num_threads=1, minloglevel=2, input_sentence_size=0,
        shuffle_input_sentence=False)
    os.remove(os.path.join(args.out, "tokenizer.vocab"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.out, "tokenizer.model"))
    bos = sp.bos_id()
    train_ids = np.array(sp.encode(train_text), dtype=np.int64)
    held_ids = [bos] + sp.encode(held_text)
    print(f"train {len(train_text)} bytes -> {len(train_ids)} tokens; held-out {len(held_text)} "
          f"bytes -> {len(held_ids)} tokens", flush=True)

    hidden_act = "silu" if args.ffn == "swiglu" else "relu"
    model = Model(dict(CONFIG, hidden_act=hidden_act))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{n_params / 1e6:.2f}M parameters", flush=True)
    T = CONFIG["max_position_embeddings"]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = 100
    rng = np.random.default_rng(1234)
    t0 = time.time()
    for step in range(args.steps):
        lr = 3e-3 * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train_ids) - T, size=args.batch)
        batch = np.stack([train_ids[s:s + T] for s in starts])
        batch[:, 0] = bos  # sequences start with BOS, as at inference
        x = torch.from_numpy(batch)
        model.train()
        logits = model(x)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step} loss {loss.item():.3f} lr {lr:.2e} {time.time() - t0:.0f}s",
                  flush=True)

    ppl, count = perplexity(model, held_ids, T, bos)
    sp_layers = sparsity(model, held_ids, T, bos)
    print(f"held-out perplexity {ppl:.4f} over {count} predictions; sparsity "
          + " ".join(f"{s:.3f}" for s in sp_layers), flush=True)

    cfg = dict(CONFIG, architectures=["LlamaForCausalLM"], model_type="llama", hidden_act=hidden_act,
               bos_token_id=bos, eos_token_id=sp.eos_id(), tie_word_embeddings=False,
               torch_dtype="float32")
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(args.out, "model.safetensors"), hf_state(model))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"heldout_perplexity": ppl, "predictions": count, "n_ctx": T,
                   "ffn_sparsity_per_layer": sp_layers, "steps": args.steps,
                   "final_train_loss": loss.item(), "parameters": n_params,
                   "train_seconds": time.time() - t0}, f, indent=2)


if __name__ == "__main__":
    main()
