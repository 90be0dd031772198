#!/usr/bin/env python3
"""The server's memory and its other clients under the attacks of issues 29 and 52, measured.

Starts `strata serve` (in a cgroup v1 memory group whose limit is --ram-budget, when one can be
made; with a chat template that misbehaves on cue), then sends, 8 connections at a time:
  issue 29 (the HTTP side):
  1. heads of tiny headers: 9 MB each (refused with 431 after 32 KiB) and the largest a head may
     be (99 headers, ~31 KiB, parsed, then 401 without the key);
  2. bodies of 8 MB of '[' (nested arrays; reserved in the request memory, refused before
     parsing);
  3. bodies of 8 MB of small numbers in one array (a document 12x the body: refused, 413).
  issue 52 (what a request asks the engine to compile, render or answer):
  4. /tokenize with pieces of 7 MB of text (the answer's bound is over the request memory: 413);
  5. grammars: 30,000 nested '(', a 436-byte grammar of 2^20 paths, a 30 KB literal {1000}, a
     schema enum of 4,100 values, a $ref chain of 20,000, tool_calls arguments of 30,000 '['
     (each a 400 naming its field);
  6. the template: a message that makes it run past its step budget (range|unique), one that
     makes it build past its byte budget ([60 MB] * 1000) (each a 500 naming the budget).
It reports the server's RSS before, after each attack (once settled) and its peak (VmHWM), the
cgroup's peak, and whether the server still answers. Exit status 1 if the server died or stopped
answering, or its RSS grew more than --max-growth MiB (10) over an attack.

With --load: 32 well-behaved clients (chat, 16 tokens each, 4 rounds) alone, then while one
client sends the issue-52 attacks in a loop: their latencies' median and p99 in both runs (a
benchmark: nothing here is asserted on time).

Usage: bench/serve_attack.py [--strata build/bin/strata] [--model M] [--ram-budget 600M]
                             [--parallel 8] [--load] [--json]
"""
import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

MIB = 1 << 20


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.upper()
    return int(float(t[:-1]) * units[t[-1]]) if t[-1] in units else int(t)


def send_and_read(port, head, body=b"", chunk=1 << 16):
    """Sends head and body (in pieces, stopping when the server closes), returns the status."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        data = head + body
        for i in range(0, len(data), chunk):
            try:
                s.sendall(data[i:i + chunk])
            except OSError:
                break  # refused early: the server closed its side
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while True:
            try:
                got = s.recv(65536)
            except OSError:
                break
            if not got:
                break
            reply += got
        return int(reply[9:12]) if reply.startswith(b"HTTP/1.1 ") else -1
    finally:
        s.close()


def attack(port, make, connections=8):
    statuses = [None] * connections

    def one(i):
        statuses[i] = make(port)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def tiny_headers(port):
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"a:b\r\n" * (9_000_000 // 5) + b"\r\n"
    return send_and_read(port, head)


def largest_head(port):
    head = (b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" +
            b"".join(b"X-%02d: %s\r\n" % (i, b"v" * 300) for i in range(98)) + b"\r\n")
    return send_and_read(port, head)


def post(path, body, key="k"):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()


def nested_body(port):
    body = b"[" * (8 * MIB - 1024)
    return send_and_read(port, post("/v1/completions", body), body)


def wide_body(port):
    body = b'{"prompt": [' + b"1," * ((8 * MIB - 1024) // 2) + b'1]}'
    return send_and_read(port, post("/v1/completions", body), body)


_BODIES = {}


def post_json(port, path, obj, key="k"):
    # Each attack's body is made once (the attacker's own CPU is not what is measured).
    made = _BODIES.get(id(obj))
    if made is None:
        body = json.dumps(obj).encode()
        made = _BODIES[id(obj)] = (post(path, body, key) + body, obj)
    return send_and_read(port, made[0])


def once(make):
    """The value make() gives, made on the first call only."""
    box = []
    return lambda: box[0] if box else (box.append(make()) or box[0])


TOKENIZE = once(lambda: {"content": "a b c d " * (7 * MIB // 8), "with_pieces": True})


def tokenize_pieces(port):
    return post_json(port, "/tokenize", TOKENIZE())


NESTED = once(lambda: {"prompt": "a", "grammar": "root ::= " + "(" * 30000 + '"a"' + ")" * 30000})


def grammar_nested(port):
    return post_json(port, "/v1/completions", NESTED())


PATHS = once(lambda: {"prompt": "a", "grammar": "root ::= a0\n" + "".join(
    f"a{i} ::= a{i + 1} | a{i + 1}\n" for i in range(20)) + 'a20 ::= "x"\n'})


def grammar_paths(port):
    return post_json(port, "/v1/completions", PATHS())


REPEAT = once(lambda: {"prompt": "a", "grammar": 'root ::= "' + "a" * 30000 + '"{1000}'})


def grammar_repeat(port):
    return post_json(port, "/v1/completions", REPEAT())


ENUM = once(lambda: {"messages": [{"role": "user", "content": "pick"}],
                      "response_format": {"type": "json_schema", "json_schema": {
                          "schema": {"enum": [f"v{i}" for i in range(4100)]}}}})


def schema_enum(port):
    return post_json(port, "/v1/chat/completions", ENUM())


def ref_chain():
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(20000)}
    defs["d20000"] = {"type": "integer"}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    return {"messages": [{"role": "user", "content": "n"}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}


REFS = once(ref_chain)


def schema_refs(port):
    return post_json(port, "/v1/chat/completions", REFS())


ARGUMENTS = once(lambda: {"messages": [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[" * 30000}}]},
    {"role": "tool", "tool_call_id": "c", "content": "ok"}]})
STEPS = once(lambda: {"messages": [{"role": "user", "content": "steps"}]})
BYTES = once(lambda: {"messages": [{"role": "user", "content": "bytes"}]})


def deep_arguments(port):
    return post_json(port, "/v1/chat/completions", ARGUMENTS())


def template_steps(port):
    return post_json(port, "/v1/chat/completions", STEPS())


def template_bytes(port):
    return post_json(port, "/v1/chat/completions", BYTES())


# A chat template that renders as ChatML, and misbehaves when a message asks it to.
HOSTILE_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.content == 'steps' %}{{ range(1000000)|unique|length }}{% endif %}"
    "{% if m.content == 'bytes' %}{% set s = 'x' * 60000000 %}{{ ([s] * 1000)|length }}{% endif %}"
    "{{ '<|im_start|>' + m.role + '\\n' + (m.content or '') + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    "{{ '' if tools is not defined else '' }}")

ROUND3 = [("/tokenize of 7 MB with pieces", tokenize_pieces),
          ("grammar of 30,000 nested '('", grammar_nested),
          ("grammar of 2^20 paths (436 bytes)", grammar_paths),
          ("grammar 30 KB literal {1000}", grammar_repeat),
          ("schema enum of 4,100 values", schema_enum),
          ("schema $ref chain of 20,000", schema_refs),
          ("tool_calls arguments 30,000 '['", deep_arguments),
          ("template past its step budget", template_steps),
          ("template past its byte budget", template_bytes)]


def chat_latencies(port, clients=32, rounds=4, tokens=16):
    """Seconds each well-behaved chat request took, all clients at once, `rounds` each."""
    out = []
    lock = threading.Lock()

    def one(i):
        for r in range(rounds):
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                data=json.dumps({"messages": [{"role": "user", "content": f"Tell me {i} {r}"}],
                                 "max_tokens": tokens, "temperature": 0}).encode(),
                headers={"Authorization": "Bearer k", "Content-Type": "application/json"})
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(req, timeout=120) as resp:
                    ok = resp.status == 200
            except Exception:
                ok = False
            with lock:
                out.append(time.monotonic() - t0 if ok else float("inf"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out)


def attack_until(port, stop):
    # The attacker stands for another machine: its own CPU (making and sending bodies) yields
    # to the server's here, so what is measured is what its requests cost the server.
    os.nice(19)
    while not stop.is_set():
        for _, make in ROUND3:
            if stop.is_set():
                break
            make(port)


def quantile(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def answers(port):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        data=b'{"prompt": "In the beginning", "max_tokens": 4}',
        headers={"Authorization": "Bearer k", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status == 200 and json.load(r)["usage"]["completion_tokens"] == 4
    except Exception:
        return False


def make_cgroup(limit):
    base = "/sys/fs/cgroup/memory"
    if not os.path.isdir(base):
        return None
    cg = f"{base}/strata_serve_attack_{os.getpid()}"
    try:
        os.mkdir(cg)
        with open(f"{cg}/memory.limit_in_bytes", "w") as f:
            f.write(str(limit))
        return cg
    except OSError:
        return None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default=os.path.join(root, "build/bin/strata"))
    ap.add_argument("--model", default=os.path.join(root, "models/strata-tiny.gguf"))
    ap.add_argument("--ram-budget", default="600M")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--port", type=int, default=18931)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--max-growth", type=float, default=10.0)
    ap.add_argument("--load", action="store_true")
    a = ap.parse_args()
    budget = parse_bytes(a.ram_budget)
    cg = make_cgroup(budget)
    pre = (lambda: open(f"{cg}/cgroup.procs", "w").write(str(os.getpid()))) if cg else None
    template = f"/tmp/strata_hostile_template_{os.getpid()}.jinja"
    with open(template, "w") as f:
        f.write(HOSTILE_TEMPLATE)
    server = subprocess.Popen(
        [a.strata, "serve", "-m", a.model, "--port", str(a.port), "--api-key", "k", "-np",
         str(a.parallel), "--ram-budget", a.ram_budget, "--chat-template", template],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, preexec_fn=pre, text=True)
    log = []
    threading.Thread(target=lambda: log.extend(server.stderr), daemon=True).start()
    report = {"ram_budget": budget, "cgroup": cg is not None, "attacks": []}
    ok = True
    try:
        for _ in range(300):
            if answers(a.port):
                break
            time.sleep(0.1)
        else:
            sys.exit("the server did not start: " + "".join(log))
        for _ in range(4):  # warm-up: what stays (KV pages, buffers) is not growth
            answers(a.port)
        report["rss_start_mib"] = rss_kib(server.pid) / 1024
        for name, make in [("9 MB heads of tiny headers", tiny_headers),
                           ("largest heads (98 headers, 30 KiB)", largest_head),
                           ("8 MB bodies of nested '['", nested_body),
                           ("8 MB bodies of 4M numbers", wide_body)] + ROUND3:
            before = rss_kib(server.pid) / 1024
            print(f"attack: {name}", file=sys.stderr, flush=True)
            statuses = attack(a.port, make)
            time.sleep(1.0)
            if server.poll() is not None:
                sys.exit(f"the server died under '{name}' (status {server.returncode}): " + "".join(log)[-2000:])
            alive = answers(a.port)
            after = rss_kib(server.pid) / 1024 if server.poll() is None else float("nan")
            entry = {"attack": name, "statuses": statuses, "rss_before_mib": before,
                     "rss_after_mib": after, "growth_mib": after - before, "still_answers": alive}
            report["attacks"].append(entry)
            ok = ok and alive and after - before <= a.max_growth
        report["rss_peak_mib"] = rss_kib(server.pid, "VmHWM") / 1024
        if a.load:
            quiet = chat_latencies(a.port)
            # The attacker in its own process: in this one it would take the clients' GIL.
            stop = multiprocessing.Event()
            t = multiprocessing.Process(target=attack_until, args=(a.port, stop))
            t.start()
            attacked = chat_latencies(a.port)
            stop.set()
            t.join()
            report["load"] = {
                "clients": 32, "requests": len(quiet),
                "quiet_median_s": quantile(quiet, 0.5), "quiet_p99_s": quantile(quiet, 0.99),
                "attacked_median_s": quantile(attacked, 0.5), "attacked_p99_s": quantile(attacked, 0.99),
                "all_answered": all(x != float("inf") for x in quiet + attacked)}
            ok = ok and report["load"]["all_answered"]
        if cg:
            with open(f"{cg}/memory.max_usage_in_bytes") as f:
                report["cgroup_peak_mib"] = int(f.read()) / MIB
    finally:
        server.terminate()
        server.wait()
        os.remove(template)
        if cg:
            time.sleep(0.2)
            os.rmdir(cg)
    report["ok"] = ok
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"--ram-budget {budget / MIB:.0f} MiB, "
              f"{'in a cgroup of that limit' if cg else 'no cgroup (not root?)'}; "
              f"RSS at start {report['rss_start_mib']:.1f} MiB")
        for e in report["attacks"]:
            print(f"  {e['attack']:<36} statuses {sorted(set(e['statuses']))}: RSS "
                  f"{e['rss_before_mib']:.1f} -> {e['rss_after_mib']:.1f} MiB "
                  f"({e['growth_mib']:+.1f}), {'answers' if e['still_answers'] else 'DEAD'}")
        print(f"  peak RSS {report['rss_peak_mib']:.1f} MiB"
              + (f", cgroup peak {report['cgroup_peak_mib']:.1f} MiB" if cg else ""))
        if "load" in report:
            ld = report["load"]
            print(f"  32 clients x 4 chats: median {ld['quiet_median_s']:.2f} s, p99 "
                  f"{ld['quiet_p99_s']:.2f} s alone; median {ld['attacked_median_s']:.2f} s, p99 "
                  f"{ld['attacked_p99_s']:.2f} s beside the attacker "
                  f"({ld['attacked_p99_s'] / ld['quiet_p99_s']:.2f}x); "
                  f"{'all answered' if ld['all_answered'] else 'SOME FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
