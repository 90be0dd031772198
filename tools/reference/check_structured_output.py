#!/usr/bin/env python3
"""Structured output through `strata serve`, checked by Debian's python3-jsonschema.

Starts the server on the shipped model and asks for JSON under a set of schemas (objects with
required and optional keys, nested arrays with bounds, enums, const, anyOf, type lists, a
recursive $ref), each with greedy decoding and with sampling at several seeds, through
response_format json_schema, llama.cpp's json_schema field and response_format json_object.
Every reply that ends ("stop") must be JSON its schema accepts (jsonschema.validate); replies cut
by max_tokens are counted apart and must be prefixes the grammar allowed (never checked as
valid). A GBNF grammar's replies must match it. Schemas strata cannot enforce, bad grammars and
two formats at once must be 400s naming the field. Two constrained requests and a plain one run
at once in the batch scheduler. Prints a table.

Then tools, with a server on Qwen2.5's chat template (Hermes-style calls): tool_choice
"required" and a named function must give finish_reason "tool_calls" (when the reply ends) with
calls of known tools whose arguments validate against the tool's parameters (jsonschema);
streamed, the calls come as one delta with their indexes; an assistant message with tool_calls
and a tool message are rendered and answered; wrong tools and choices are 400s.

usage: check_structured_output.py STRATA MODEL TEMPLATE_DIR
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_helpers import free_port, post  # noqa: E402

SCHEMAS = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"},
        "alive": {"type": "boolean"}, "tribe": {"enum": ["Judah", "Levi", "Dan"]},
        "nick": {"type": ["string", "null"], "maxLength": 8}},
        "required": ["name", "age", "alive", "tribe"], "additionalProperties": False},
    "list": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 12},
             "minItems": 2, "maxItems": 4},
    "optional-first": {"type": "object", "properties": {
        "note": {"type": "string", "maxLength": 10}, "count": {"type": "integer"},
        "ok": {"const": True}}, "required": ["ok"]},
    "any-of": {"type": "object", "properties": {
        "v": {"anyOf": [{"type": "number"}, {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}]}},
        "required": ["v"]},
    "tree": {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["v"]}}, "$ref": "#/$defs/node"},
}
GRAMMAR = 'root ::= ("yes" | "no") ", " [0-9]{1,3} " " ("sheep" | "goats") "."'
GRAMMAR_RE = re.compile(r"^(yes|no), [0-9]{1,3} (sheep|goats)\.$")






def chat(port, fmt, seed, temperature, max_tokens=160):
    body = {"messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": max_tokens,
            "temperature": temperature, "seed": seed}
    body.update(fmt)
    status, reply = post(port, "/v1/chat/completions", body)
    if status != 200:
        raise RuntimeError(f"status {status}: {reply}")
    c = reply["choices"][0]
    return c["message"]["content"], c["finish_reason"]


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "maxLength": 12},
                                          "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "count_sheep", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}, "flock": {"type": "array",
                                                                          "items": {"type": "boolean"}, "maxItems": 3}},
        "required": ["n"]}}},
]


def start(strata, args):
    port = free_port()
    server = subprocess.Popen([strata, "serve", "--port", str(port), *args], stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    return server, port


def check_calls(calls, only=None):
    """Problems with a reply's tool_calls: unknown tools, or arguments their schema rejects."""
    problems = []
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for c in calls:
        name = c["function"]["name"]
        if name not in schemas or (only and name != only):
            problems.append(f"call of {name}")
            continue
        try:
            jsonschema.validate(json.loads(c["function"]["arguments"]), schemas[name])
        except (ValueError, jsonschema.ValidationError) as e:
            problems.append(f"{name} arguments {c['function']['arguments']!r}: {e}")
        if not re.fullmatch(r"[A-Za-z0-9]{9}", c["id"]) or c["type"] != "function":
            problems.append(f"call id/type {c['id']!r} {c['type']!r}")
    return problems


def check_tools(strata, model, template):
    server, port = start(strata, ["-m", model, "-np", "2", "-c", "3072", "--chat-template", template])
    failures = 0
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    try:
        for choice, only in (("required", None), ({"type": "function", "function": {"name": "count_sheep"}}, "count_sheep")):
            ended = 0
            for seed, temperature in ((0, 0.0), (1, 0.8), (2, 0.8)):
                status, reply = post(port, "/v1/chat/completions", {
                    "messages": ask, "tools": TOOLS, "tool_choice": choice, "max_tokens": 200,
                    "seed": seed, "temperature": temperature})
                c = reply["choices"][0] if status == 200 else {}
                if c.get("finish_reason") == "length":
                    continue
                ended += 1
                calls = c.get("message", {}).get("tool_calls", [])
                problems = check_calls(calls, only)
                if status != 200 or c["finish_reason"] != "tool_calls" or not calls or problems:
                    print(f"  tools {choice}: {status} {reply} {problems}")
                    failures += 1
            print(f"tool_choice {json.dumps(choice):<62} {ended} of 3 ended, each a valid call")
            failures += ended == 0
        # Streamed: one delta with the calls, then finish_reason tool_calls.
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps({
            "messages": ask, "tools": TOOLS, "tool_choice": "required", "max_tokens": 200, "stream": True,
            "temperature": 0}).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            events = [json.loads(line[6:]) for line in r.read().decode().splitlines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
        deltas = [e["choices"][0]["delta"] for e in events]
        calls = [c for d in deltas for c in d.get("tool_calls", [])]
        finish = events[-1]["choices"][0]["finish_reason"]
        ok = finish == "length" or (finish == "tool_calls" and calls and not check_calls(calls)
                                    and all("index" in c for c in calls))
        print(f"streamed required call: finish {finish}, {len(calls)} call(s) {'ok' if ok else 'WRONG'}")
        failures += not ok
        # A call and its result fed back: rendered by the template and answered.
        status, reply = post(port, "/v1/chat/completions", {"messages": ask + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "abcdefghi", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "abcdefghi", "content": "21 C and sunny"}],
            "tools": TOOLS, "max_tokens": 8})
        ok = status == 200 and reply["usage"]["prompt_tokens"] > 0
        print(f"tool result fed back: {status} {'ok' if ok else reply}")
        failures += not ok
        refusals = [
            ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "nope"),
            ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name", "letters"),
            ({"tool_choice": "required"}, "tool_choice", "needs 'tools'"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"s": {"type": "string", "pattern": "(x)\\1"}}}}}],
              "tool_choice": "required"}, "tools", "backreference"),
        ]
        for fields, param, needle in refusals:
            body = {"messages": ask}
            body.update(fields)
            status, reply = post(port, "/v1/chat/completions", body)
            err = reply.get("error", {})
            ok = status == 400 and err.get("param") == param and needle in err.get("message", "")
            print(f"refused {param:<24} {'ok' if ok else 'WRONG'}: {status} {err.get('message', reply)}")
            failures += not ok
        status, reply = post(port, "/v1/completions", {"prompt": "x", "tools": TOOLS})
        ok = status == 400 and reply["error"]["param"] == "tools"
        print(f"refused tools on /v1/completions {'ok' if ok else 'WRONG'}")
        failures += not ok
    finally:
        server.terminate()
        server.wait(timeout=30)
    return failures


def main():
    strata, model, template_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    server, port = start(strata, ["-m", model, "-np", "3", "-c", "768"])
    failures = 0
    try:
        runs = [(0, 0.0), (1, 0.8), (2, 0.8), (3, 1.2)]
        print(f"{'schema':<16} {'via':<22} {'stop+valid':>10} {'cut':>4} {'invalid':>8}")
        for name, schema in SCHEMAS.items():
            for via, fmt in (("response_format", {"response_format": {"type": "json_schema",
                                                                       "json_schema": {"name": name, "strict": True,
                                                                                       "schema": schema}}}),
                             ("json_schema (llama)", {"json_schema": schema})):
                valid = cut = invalid = 0
                for seed, temperature in runs:
                    text, finish = chat(port, fmt, seed, temperature)
                    if finish != "stop":
                        cut += 1
                        continue
                    try:
                        jsonschema.validate(json.loads(text), schema)
                        valid += 1
                    except (ValueError, jsonschema.ValidationError) as e:
                        invalid += 1
                        print(f"  INVALID {name} seed {seed}: {text!r}: {e}")
                print(f"{name:<16} {via:<22} {valid:>10} {cut:>4} {invalid:>8}")
                failures += invalid
                if valid == 0:
                    print(f"  no reply ended within max_tokens for {name}")
                    failures += 1
        # json_object: any JSON object.
        valid = 0
        for seed, temperature in runs:
            text, finish = chat(port, {"response_format": {"type": "json_object"}}, seed, temperature, 400)
            if finish == "stop":
                if not isinstance(json.loads(text), dict):
                    failures += 1
                valid += 1
        print(f"{'json_object':<16} {'response_format':<22} {valid:>10} {len(runs) - valid:>4} {0:>8}")
        # A GBNF grammar (llama.cpp's field), on /v1/completions.
        matched = 0
        for seed, temperature in runs:
            status, reply = post(port, "/v1/completions", {"prompt": "How many?", "grammar": GRAMMAR,
                                                           "max_tokens": 40, "seed": seed, "temperature": temperature})
            text = reply["choices"][0]["text"] if status == 200 else ""
            if GRAMMAR_RE.match(text) and reply["choices"][0]["finish_reason"] == "stop":
                matched += 1
            else:
                print(f"  grammar reply does not match: {status} {reply}")
                failures += 1
        print(f"{'gbnf':<16} {'grammar (llama)':<22} {matched:>10} {0:>4} {len(runs) - matched:>8}")
        # Constrained and plain requests at once, in one batch.
        results = {}

        def one(key, fmt):
            results[key] = chat(port, fmt, 5, 0.8)
        threads = [threading.Thread(target=one, args=("a", {"json_schema": SCHEMAS["person"]})),
                   threading.Thread(target=one, args=("b", {"json_schema": SCHEMAS["list"]})),
                   threading.Thread(target=one, args=("plain", {}))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for key, schema in (("a", SCHEMAS["person"]), ("b", SCHEMAS["list"])):
            text, finish = results[key]
            if finish == "stop":
                try:
                    jsonschema.validate(json.loads(text), schema)
                except (ValueError, jsonschema.ValidationError) as e:
                    print(f"  INVALID under concurrency: {text!r}: {e}")
                    failures += 1
        print("concurrent: two constrained requests beside a plain one, outputs valid")
        # Refusals name the field.
        refusals = [
            ({"json_schema": {"type": "string", "pattern": "^a(?=b)"}}, "json_schema", "lookaround"),
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "multipleOf": 3}}}},
             "response_format", "multipleOf"),
            ({"grammar": "root ::= undefined-rule"}, "grammar", "undefined-rule"),
            ({"grammar": "root ::= \"a\"", "json_schema": {}}, "grammar", "not both"),
            ({"response_format": {"type": "xml"}}, "response_format", "json_object"),
        ]
        for fields, param, needle in refusals:
            body = {"messages": [{"role": "user", "content": "x"}]}
            body.update(fields)
            status, reply = post(port, "/v1/chat/completions", body)
            err = reply.get("error", {})
            ok = status == 400 and err.get("param") == param and needle in err.get("message", "")
            print(f"refused {param:<16} {'ok' if ok else 'WRONG'}: {status} {err.get('message', reply)}")
            failures += not ok
    finally:
        server.terminate()
        server.wait(timeout=30)
    failures += check_tools(strata, model, f"{template_dir}/Qwen-Qwen2.5-7B-Instruct.jinja")
    if failures:
        print(f"FAILED: {failures}")
        return 1
    print("every finished reply is valid JSON for its schema, every call valid for its tool (python3-jsonschema)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
