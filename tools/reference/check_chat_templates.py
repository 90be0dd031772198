#!/usr/bin/env python3
"""strata's chat templates against Jinja2, the oracle.

Every template in tests/data/chat_templates/ and every built-in one (`strata chat-template
--list`) is rendered on a set of conversations by strata (`strata chat-template --json`) and by
Jinja2 (Debian's python3-jinja2) in Hugging Face's chat-template environment (sandboxed,
trim_blocks, lstrip_blocks, loop controls, its tojson, raise_exception and strftime_now). The
two must agree byte for byte; where Jinja2 fails, strata must fail too (the template's own
raise_exception with the same message). Prints the table, templates x conversations.

usage: check_chat_templates.py STRATA TEMPLATE_DIR WORK_DIR
"""
import datetime
import json
import os
import subprocess
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}]


def conversations():
    sys_msg = {"role": "system", "content": "You are a helpful assistant"}
    hello = {"role": "user", "content": "Hello"}
    hi = {"role": "assistant", "content": "Hi there"}
    tool_call = {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "call12345", "type": "function",
                                 "function": {"name": "get_weather",
                                              "arguments": {"city": "Paris", "unit": "c"}}}]}
    tool_reply = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
                  "content": "{\"temperature\": 21}"}
    b = {"bos_token": "<s>", "eos_token": "</s>"}
    return {
        "user": dict(b, messages=[hello], add_generation_prompt=True),
        "system+user": dict(b, messages=[sys_msg, hello], add_generation_prompt=True),
        "multi-turn": dict(b, messages=[sys_msg, hello, hi, {"role": "user", "content": "Who are you"},
                                        {"role": "assistant", "content": "   I am an assistant   "},
                                        {"role": "user", "content": "Another question"}],
                           add_generation_prompt=True),
        "no-gen-prompt": dict(b, messages=[hello, hi], add_generation_prompt=False),
        "unicode": dict(b, messages=[{"role": "user", "content":
                                      "Ünïcödé 漢字 🙂 \"quotes\" 'apostrophes' {{ not jinja }} {% x %}\n\tnext line  "}],
                        add_generation_prompt=True),
        "empty-content": dict(b, messages=[{"role": "user", "content": ""}], add_generation_prompt=True),
        "parts": dict(b, messages=[{"role": "user", "content": [{"type": "text", "text": "Part one. "},
                                                                 {"type": "text", "text": "Part two."}]}],
                      add_generation_prompt=True),
        "thinking": dict(b, messages=[hello, {"role": "assistant",
                                              "content": "<think>\nLet me see.\n</think>\n\nHi!"},
                                      {"role": "user", "content": "Again"}],
                         add_generation_prompt=True, enable_thinking=False),
        "tools": dict(b, messages=[sys_msg, {"role": "user", "content": "Weather in Paris?"}, tool_call,
                                   tool_reply], tools=TOOLS, add_generation_prompt=True,
                      date_string="03 Dec 2026"),
        "long": dict(b, messages=[sys_msg] + [m for i in range(12) for m in
                                              ({"role": "user", "content": f"Question {i}?"},
                                               {"role": "assistant", "content": f"Answer {i}."})]
                     + [{"role": "user", "content": "Last"}], add_generation_prompt=True),
        "bos-eos-other": dict(messages=[sys_msg, hello, hi, {"role": "user", "content": "Bye"}],
                              bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                              add_generation_prompt=True),
    }


def jinja_render(env, source, context):
    try:
        return {"prompt": env.from_string(source).render(**context)}
    except Raised as e:
        return {"error": str(e), "raised": True}
    except Exception as e:  # noqa: BLE001 - any other failure of Jinja2 is the reference's answer
        return {"error": f"{type(e).__name__}: {e}", "raised": False}


def agree(ref, got):
    if "prompt" in ref:
        return "prompt" in got and got["prompt"] == ref["prompt"]
    if "prompt" in got:
        return False
    if ref["raised"]:
        return got.get("raised") and got["error"].endswith(ref["error"])
    return not got.get("raised")


def main():
    strata, template_dir, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    convs = conversations()
    names = list(convs)
    ctx_path = os.path.join(work, "contexts.json")
    with open(ctx_path, "w", encoding="utf-8") as f:
        json.dump([convs[n] for n in names], f, ensure_ascii=False)

    templates = []  # (label, source, strata args)
    for fname in sorted(os.listdir(template_dir)):
        if fname.endswith(".jinja"):
            path = os.path.join(template_dir, fname)
            with open(path, encoding="utf-8") as f:
                templates.append((fname[:-6], f.read(), ["--chat-template", path]))
    builtins = subprocess.run([strata, "chat-template", "--list"], check=True, capture_output=True,
                              text=True).stdout.split()
    for name in builtins:
        source = subprocess.run([strata, "chat-template", "--chat-template", name, "--show"],
                                check=True, capture_output=True, text=True).stdout
        templates.append(("builtin:" + name, source, ["--chat-template", name]))

    env = environment()
    failures = 0
    width = max(len(t[0]) for t in templates)
    print(f"{'template':<{width}}  " + " ".join(f"{n[:6]:>6}" for n in names) + "   equal")
    for label, source, args in templates:
        run = subprocess.run([strata, "chat-template", *args, "--context", ctx_path, "--json",
                              "--bos", "<s>", "--eos", "</s>"], capture_output=True, text=True)
        if run.returncode != 0:  # refused at load: right only where Jinja2 fails everywhere
            refusal = {"error": run.stderr.strip(), "raised": False, "refused": True}
            got = [refusal] * len(names)
        else:
            got = json.loads(run.stdout)
        cells, equal = [], 0
        for i, n in enumerate(names):
            ref = jinja_render(env, source, convs[n])
            ok = agree(ref, got[i])
            equal += ok
            kind = "text" if "prompt" in ref else ("raise" if ref["raised"] else "error")
            if got[i].get("refused"):
                kind = "load"  # strata refused the template when it was chosen
            cells.append(f"{(kind if ok else 'DIFF'):>6}")
            if not ok:
                failures += 1
                with open(os.path.join(work, f"{label.replace(':', '_')}.{n}.diff.json"), "w",
                          encoding="utf-8") as f:
                    json.dump({"jinja2": ref, "strata": got[i]}, f, ensure_ascii=False, indent=1)
        print(f"{label:<{width}}  " + " ".join(cells) + f"   {equal}/{len(names)}")
    total = len(templates) * len(names)
    print(f"{len(templates)} templates x {len(names)} conversations: {total - failures} of {total} "
          f"equal to Jinja2 {jinja2.__version__} (text: same bytes; raise: same raise_exception "
          f"message; error: both fail; load: Jinja2 fails and strata refuses the template at load)")
    if failures:
        print(f"FAILED: {failures} differ; the pairs are in {work}/*.diff.json")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
