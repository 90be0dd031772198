#!/usr/bin/env python3
"""JSON-schema keywords enforced in generation, checked by an independent validator: for each
schema below, `strata run -j SCHEMA` on the shipped model samples replies (several seeds, temperature
1, so the tiny model wanders through what the grammar allows), and python3-jsonschema (Draft
2020-12, with its format checker; dates and times also through Python's datetime) validates
every reply that ended before the token limit. Replies cut by the limit are counted, not
judged; each schema must give at least one whole reply. Exits 1 on any invalid reply.
Unanchored patterns and extra keys of additionalProperties are free text that this tiny model
runs on with until its context ends, so the unit tests cover them (SchemaStrings.*, against
std::regex over every short string, and SchemaKeywords.*).

usage: check_schema_keywords.py STRATA MODEL
"""
import datetime
import json
import subprocess
import sys
import uuid

import jsonschema

SEEDS = range(6)
N_PREDICT = 200  # the shipped model's context is 256 positions
PROMPT = "Answer in JSON:"

SCHEMAS = {
    "integer range": {"type": "integer", "minimum": 0, "maximum": 150},
    "exclusive negative range": {"type": "integer", "exclusiveMinimum": -50, "exclusiveMaximum": -3},
    "number range": {"type": "number", "minimum": -2.5, "maximum": 3.25},
    "probability": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "person": {"type": "object", "additionalProperties": False, "required": ["name", "age"],
               "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
                              "age": {"type": "integer", "minimum": 0, "maximum": 150},
                              "score": {"type": "number", "minimum": 0, "exclusiveMaximum": 10}}},
    "pattern code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
    "pattern words": {"type": "string", "pattern": "^(cat|dog)s? (and|or) [a-z]{1,5}$"},
    "pattern alternation": {"type": "string", "pattern": "^((ab+c|[xyz]{2})-\\d|[A-Z]{3})$"},
    "date": {"type": "string", "format": "date"},
    "time": {"type": "string", "format": "time"},
    "date-time": {"type": "string", "format": "date-time"},
    "uuid": {"type": "string", "format": "uuid"},
    "ipv4": {"type": "string", "format": "ipv4"},
    "email": {"type": "string", "format": "email"},
    "oneOf tagged": {"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer", "minimum": 1, "maximum": 9}},
         "required": ["kind", "lives"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
         "required": ["kind"], "additionalProperties": False}]},
    "allOf merged": {"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 10}}, "required": ["a"]},
        {"properties": {"a": {"maximum": 20}, "b": {"type": "string", "format": "date"}}, "required": ["b"]}]},
    "refs and arrays": {"$defs": {"digit": {"type": "integer", "minimum": 0, "maximum": 9}},
                        "type": "array", "items": {"$ref": "#/$defs/digit"}, "minItems": 2, "maxItems": 4},
    "anyOf with siblings": {"type": "integer", "anyOf": [{"maximum": -100}, {"minimum": 100}]},
}


def datetime_checks(schema, value):
    """Python's own parsers for the date and time formats (the format checker may lack an RFC
    3339 package): a value they refuse is invalid."""
    fmt = schema.get("format")
    if fmt == "date":
        datetime.date.fromisoformat(value)
    elif fmt == "date-time":
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    elif fmt == "time":
        datetime.time.fromisoformat(value.replace("Z", "+00:00"))
    elif fmt == "uuid":
        uuid.UUID(value)


def sample(strata, model, schema, seed):
    r = subprocess.run([strata, "run", "-m", model, "-p", PROMPT, "-n", str(N_PREDICT),
                        "--seed", str(seed), "--temp", "1", "-j", json.dumps(schema), "--json"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"strata run failed: {r.stderr.strip()[-300:]}")
    reports = [line for line in r.stderr.splitlines() if line.startswith("{")]
    if not reports:
        raise RuntimeError(f"strata run printed no --json report: {r.stderr.strip()[-300:]}")
    report = json.loads(reports[-1])
    if not r.stdout.startswith(PROMPT):
        raise RuntimeError(f"strata run did not echo the prompt first: {r.stdout[:80]!r}")
    ended = report["generated_tokens"] < N_PREDICT and "context" not in r.stderr.split("{")[0]
    return r.stdout[len(PROMPT):], ended


def main():
    strata, model = sys.argv[1], sys.argv[2]
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    failures = 0
    print(f"{'schema':26} {'whole':>5} {'cut':>4}  example")
    for name, schema in SCHEMAS.items():
        validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
        whole = cut = 0
        example = ""
        for seed in SEEDS:
            text, ended = sample(strata, model, schema, seed)
            if not ended:
                cut += 1
                continue
            whole += 1
            try:
                value = json.loads(text)
                validator.validate(value)
                if isinstance(value, str):
                    datetime_checks(schema, value)
                example = example or text.strip()
            except (ValueError, jsonschema.ValidationError) as e:
                failures += 1
                print(f"  INVALID {name} seed {seed}: {text!r}: {str(e).splitlines()[0][:160]}")
        if whole == 0:
            failures += 1
            print(f"  NO WHOLE REPLY for {name}")
        print(f"{name:26} {whole:5} {cut:4}  {example[:60]}")
    if failures:
        print(f"{failures} failures")
        return 1
    print("every whole reply is valid under python3-jsonschema")
    return 0


if __name__ == "__main__":
    sys.exit(main())
