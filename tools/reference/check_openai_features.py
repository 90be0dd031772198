#!/usr/bin/env python3
"""Validates what tools/load/openai_features.mjs got from strata serve through the npm openai
client: every structured reply that ended ("stop") is JSON its schema accepts, every tool call
(whole or gathered from a stream) names a listed tool (the required one) with arguments its
parameters schema accepts, and finish_reason is "tool_calls"; logprobs have one entry per token.
Validation is python3-jsonschema's. Prints a table; exits 1 on any failure.

usage: check_openai_features.py RESULTS.json
"""
import json
import re
import sys

import jsonschema


# OpenAI's CreateEmbeddingResponse, as its API reference describes it.
EMBEDDING_RESPONSE = {
    "type": "object", "required": ["object", "data", "model", "usage"],
    "properties": {
        "object": {"const": "list"}, "model": {"type": "string"},
        "data": {"type": "array", "items": {
            "type": "object", "required": ["object", "index", "embedding"],
            "properties": {"object": {"const": "embedding"}, "index": {"type": "integer"},
                           "embedding": {"type": "array", "items": {"type": "number"}, "minItems": 1}}}},
        "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"],
                  "properties": {"prompt_tokens": {"type": "integer", "minimum": 1},
                                 "total_tokens": {"type": "integer", "minimum": 1}}}}}


def check_embeddings(r):
    """The float response is in OpenAI's shape, one unit vector per input in order, and the
    client's default (base64, decoded by it) gives the same vectors."""
    try:
        jsonschema.validate(r["response"], EMBEDDING_RESPONSE)
    except jsonschema.ValidationError as e:
        return str(e)[:200]
    data = r["response"]["data"]
    if [d["index"] for d in data] != list(range(r["inputs"])):
        return f"indexes {[d['index'] for d in data]}"
    for d, b in zip(data, r["decoded"]):
        v = d["embedding"]
        if abs(sum(x * x for x in v) - 1) > 1e-4 or len(b) != len(v):
            return f"length {sum(x * x for x in v)}, {len(b)} vs {len(v)} values"
        if max(abs(x - y) for x, y in zip(v, b)) > 1e-6:
            return "the base64 vector differs from the float one"
    if data[0]["embedding"] == data[1]["embedding"]:
        return "two inputs gave the same vector"
    return ""


def main():
    data = json.load(open(sys.argv[1], encoding="utf-8"))
    params = {t["function"]["name"]: t["function"]["parameters"] for t in data["tools"]}
    failures = 0
    rows = {}
    for r in data["results"]:
        kind, ok, why = r["kind"], True, ""
        if "schema" in r:
            if r["finish"] == "length":
                rows.setdefault(kind, [0, 0, 0])[1] += 1
                continue
            try:
                jsonschema.validate(json.loads(r["output"]), r["schema"])
            except (ValueError, jsonschema.ValidationError) as e:
                ok, why = False, f"{r['output']!r}: {e}"
        elif "calls" in r:
            if r["finish"] == "length":
                rows.setdefault(kind, [0, 0, 0])[1] += 1
                continue
            if r["finish"] != "tool_calls" or not r["calls"]:
                ok, why = False, f"finish {r['finish']}, {len(r['calls'])} calls"
            for c in r["calls"]:
                try:
                    if c["name"] not in params or (r["only"] and c["name"] != r["only"]):
                        raise ValueError(f"a call of {c['name']}")
                    if not re.fullmatch(r"[A-Za-z0-9]{9}", c["id"]) or c["type"] != "function":
                        raise ValueError(f"id {c['id']!r} type {c['type']!r}")
                    jsonschema.validate(json.loads(c["arguments"]), params[c["name"]])
                except (ValueError, jsonschema.ValidationError) as e:
                    ok, why = False, f"{c}: {e}"
        elif kind == "embeddings":
            why = check_embeddings(r)
            ok = not why
        elif kind == "logprobs":
            lp = r["logprobs"]
            ok = lp is not None and len(lp) == r["completion_tokens"] and all(
                len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in lp)
            why = "" if ok else json.dumps(lp)[:200]
        row = rows.setdefault(kind, [0, 0, 0])
        row[0 if ok else 2] += 1
        if not ok:
            failures += 1
            print(f"  INVALID {kind}: {why}")
    print(f"{'reply':<58} {'valid':>5} {'cut':>4} {'invalid':>7}")
    for kind, (valid, cut, invalid) in rows.items():
        print(f"{kind:<58} {valid:>5} {cut:>4} {invalid:>7}")
        if valid == 0:
            print(f"  no {kind} reply ended within max_tokens")
            failures += 1
    if failures:
        print(f"FAILED: {failures}")
        return 1
    print("every reply through the openai client is valid for its schema (python3-jsonschema)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
