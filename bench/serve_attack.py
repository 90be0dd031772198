#!/usr/bin/env python3
"""The server's memory under the attacks of issue 29, measured.

Starts `strata serve` (in a cgroup v1 memory group whose limit is --ram-budget, when one can be
made), then sends, 8 connections at a time:
  1. heads of tiny headers: 9 MB each (refused with 431 after 32 KiB) and the largest a head may
     be (99 headers, ~31 KiB, parsed, then 401 without the key);
  2. bodies of 8 MB of '[' (nested arrays; reserved in the request memory, refused before
     parsing);
  3. bodies of 8 MB of small numbers in one array (a document 12x the body: refused, 413).
It reports the server's RSS before, after each attack (once settled) and its peak (VmHWM), the
cgroup's peak, and whether the server still answers. Exit status 1 if the server died or stopped
answering, or its RSS grew more than 16 MiB over an attack.

Usage: bench/serve_attack.py [--strata build/bin/strata] [--model M] [--ram-budget 600M]
                             [--parallel 8] [--json]
"""
import argparse
import json
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
    a = ap.parse_args()
    budget = parse_bytes(a.ram_budget)
    cg = make_cgroup(budget)
    pre = (lambda: open(f"{cg}/cgroup.procs", "w").write(str(os.getpid()))) if cg else None
    server = subprocess.Popen(
        [a.strata, "serve", "-m", a.model, "--port", str(a.port), "--api-key", "k", "-np",
         str(a.parallel), "--ram-budget", a.ram_budget],
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
                           ("8 MB bodies of 4M numbers", wide_body)]:
            before = rss_kib(server.pid) / 1024
            statuses = attack(a.port, make)
            time.sleep(1.0)
            alive = server.poll() is None and answers(a.port)
            after = rss_kib(server.pid) / 1024 if server.poll() is None else float("nan")
            entry = {"attack": name, "statuses": statuses, "rss_before_mib": before,
                     "rss_after_mib": after, "growth_mib": after - before, "still_answers": alive}
            report["attacks"].append(entry)
            ok = ok and alive and after - before <= 16
        report["rss_peak_mib"] = rss_kib(server.pid, "VmHWM") / 1024
        if cg:
            with open(f"{cg}/memory.max_usage_in_bytes") as f:
                report["cgroup_peak_mib"] = int(f.read()) / MIB
    finally:
        server.terminate()
        server.wait()
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
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
