#!/usr/bin/env python3
"""/v1/embeddings of `strata serve` against the PyTorch reference (llama_ref.py).

For each pooling (mean, cls, last) a server on the model is asked for the embeddings of a set of
inputs (token ids and texts) in one request, while two streamed completions generate beside it
in the same batches; the reference computes every position's final hidden state (after the
output norm), pools it the same way and scales it to unit length. Every vector must match the
reference within 1e-4 (max abs difference; F32/F16 weights), have unit length, and equal the
vector of the same input asked alone (batching does not change it beyond rounding: 1e-5); a
text's vector must equal its /tokenize ids' (add_special); encoding_format "base64" must decode
to the float vector. Bad requests must be 400s naming the field. Prints a table.

usage: check_embeddings.py STRATA MODEL
"""
import base64
import json
import os
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_helpers import free_port, post  # noqa: E402
from llama_ref import LlamaReference  # noqa: E402

TOL_REF, TOL_BATCH = 1e-4, 1e-5
TEXTS = ["In the beginning God created the heaven and the earth.", "And the earth was without form",
         "Let there be light", "a"]






def embeddings(port, inputs, **extra):
    status, reply = post(port, "/v1/embeddings", {"input": inputs, "model": "m", **extra})
    if status != 200:
        raise RuntimeError(f"status {status}: {reply}")
    assert [d["index"] for d in reply["data"]] == list(range(len(reply["data"]))), reply
    return reply


def stream_completion(port, done):
    body = {"prompt": "And God said", "max_tokens": 120, "stream": True, "temperature": 0}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        done.append(sum(1 for line in r if line.startswith(b"data: ")))


def pooled(hidden, pooling):
    v = {"mean": hidden.mean(0), "cls": hidden[0], "last": hidden[-1]}[pooling]
    return v / v.norm()


def start_server(strata, model, pooling):
    port = free_port()
    proc = subprocess.Popen([strata, "serve", "-m", model, "--port", str(port), "-t", "2", "-np", "4",
                             "--pooling", pooling], stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the server did not start: " + proc.stderr.read())


def check_errors(port):
    cases = [({"input": []}, "input"), ({"input": ""}, "input"), ({"input": [[]]}, "input"),
             ({"input": [1, "a"]}, "input"), ({"input": [99999999]}, "input"), ({"input": {"a": 1}}, "input"),
             ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
             ({"input": "a", "dimensions": 3}, "dimensions"), ({}, "input"),
             ({"input": "a " * 5000}, "input")]
    for body, param in cases:
        status, reply = post(port, "/v1/embeddings", body)
        if status != 400 or reply["error"]["param"] != param:
            raise AssertionError(f"{json.dumps(body)[:60]}: {status} {reply}")
    return len(cases)


def main():
    strata, model = sys.argv[1], sys.argv[2]
    ref = LlamaReference(model)
    print(f"{'pooling':<8} {'inputs':>6} {'max |strata - ref|':>19} {'max |batched - alone|':>22} "
          f"{'text = ids':>10} {'base64':>6}")
    failures = 0
    for pooling in ["mean", "cls", "last"]:
        proc, port = start_server(strata, model, pooling)
        try:
            ids = []
            for t in TEXTS:
                status, r = post(port, "/tokenize", {"content": t, "add_special": True})
                assert status == 200, r
                ids.append(r["tokens"])
            inputs = ids + [[5, 6, 7, 8, 9, 10, 11], [300, 2, 17]]
            # Two generations beside the embeddings, in the same steps.
            done = []
            streams = [threading.Thread(target=stream_completion, args=(port, done)) for _ in range(2)]
            for s in streams:
                s.start()
            time.sleep(0.05)
            batched = embeddings(port, inputs)
            for s in streams:
                s.join()
            assert len(done) == 2 and all(n > 1 for n in done), done
            n_tokens = sum(len(i) for i in inputs)
            assert batched["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}, batched["usage"]
            err_ref = err_batch = 0.0
            for k, inp in enumerate(inputs):
                got = torch.tensor(batched["data"][k]["embedding"], dtype=torch.float64)
                want = pooled(ref.hidden(inp), pooling)
                err_ref = max(err_ref, (got - want).abs().max().item())
                assert abs(got.norm().item() - 1) < 1e-5, got.norm()
                alone = torch.tensor(embeddings(port, inp)["data"][0]["embedding"], dtype=torch.float64)
                err_batch = max(err_batch, (got - alone).abs().max().item())
            texts = embeddings(port, TEXTS)
            text_ok = all(
                max(abs(a - b) for a, b in zip(texts["data"][k]["embedding"], batched["data"][k]["embedding"])) < TOL_BATCH
                for k in range(len(TEXTS)))
            b64 = embeddings(port, TEXTS[0], encoding_format="base64")["data"][0]["embedding"]
            raw = base64.b64decode(b64)
            decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
            b64_ok = max(abs(a - b) for a, b in zip(decoded, texts["data"][0]["embedding"])) < TOL_BATCH
            ok = err_ref < TOL_REF and err_batch < TOL_BATCH and text_ok and b64_ok
            failures += not ok
            print(f"{pooling:<8} {len(inputs):>6} {err_ref:>19.2e} {err_batch:>22.2e} {str(text_ok):>10} "
                  f"{str(b64_ok):>6}{'' if ok else '  FAILED'}")
            if pooling == "mean":
                print(f"bad requests refused with 400 naming the field: {check_errors(port)}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    if failures:
        sys.exit(1)
    print("all embeddings match the reference")


if __name__ == "__main__":
    main()
