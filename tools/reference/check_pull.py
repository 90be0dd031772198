#!/usr/bin/env python3
"""`strata pull` and -hf against a local HTTP server that answers as Hugging Face does (the tree
API with LFS sizes and SHA-256s, /resolve/ with Range requests). Checks: the file chosen by its
quantization tag; a download cut halfway fails naming the resume, keeps the .part, and the next
pull asks for the rest (a Range request) and ends with the exact bytes; a complete file is not
fetched again; a host that sends other bytes than it publishes is refused by SHA-256 and the
download removed; no tag picks Q4_K_M; a missing tag or repository is named; `strata run -hf`
runs the pulled model. No outside network: the host is $HF_ENDPOINT on 127.0.0.1.

usage: check_pull.py STRATA MODEL WORKDIR
"""
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

REPO = "someone/tiny-GGUF"


class Host(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files = files          # name -> bytes actually sent
        self.published = {}         # name -> (size, sha256) the tree API announces
        self.cut_next = False       # the next download stops halfway
        self.requests = []          # (path, Range header)


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        host = self.server
        host.requests.append((self.path, self.headers.get("Range")))
        tree = f"/api/models/{REPO}/tree/main?recursive=true"
        if self.path == tree:
            entries = [{"type": "file", "path": "README.md", "size": 10}]
            for name, data in host.files.items():
                size, sha = host.published.get(name, (len(data), hashlib.sha256(data).hexdigest()))
                entries.append({"type": "file", "path": name, "size": 134,
                                "lfs": {"oid": sha, "size": size, "pointerSize": 134}})
            return self.reply(200, json.dumps(entries).encode(), "application/json")
        prefix = f"/{REPO}/resolve/main/"
        if not self.path.startswith(prefix) or self.path[len(prefix):] not in host.files:
            return self.reply(404, b'{"error": "not found"}', "application/json")
        data = host.files[self.path[len(prefix):]]
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
        body = data[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if host.cut_next:
            host.cut_next = False
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def reply(self, status, body, kind):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    strata, model, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = open(model, "rb").read()
    other = data[:-1] + bytes([data[-1] ^ 1])
    host = Host({"tiny-Q4_K_M.gguf": data, "tiny-Q8_0.gguf": data, "tiny-Q8_0_L.gguf": other,
                 "mmproj-tiny-F16.gguf": b"x" * 100})
    threading.Thread(target=host.serve_forever, daemon=True).start()
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{host.server_port}", STRATA_CACHE=f"{work}/cache")
    failures = 0

    def pull(spec, *extra, cmd="pull"):
        return subprocess.run([strata, cmd, *extra, spec] if cmd == "pull" else [strata, cmd, "-hf", spec, *extra],
                              capture_output=True, text=True, env=env, timeout=120)

    def check(ok, what, r=None):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            failures += 1
            if r is not None:
                print(f"     rc {r.returncode}; stdout {r.stdout.strip()[-300:]!r}; stderr {r.stderr.strip()[-300:]!r}")

    cached = f"{work}/cache/someone_tiny-GGUF_tiny-Q8_0.gguf"
    host.cut_next = True
    r = pull(f"{REPO}:q8_0")
    check(r.returncode != 0 and "run the same command to resume" in r.stderr and os.path.getsize(cached + ".part") > 0,
          "a cut download fails naming the resume and keeps its .part", r)
    kept = os.path.getsize(cached + ".part") if os.path.exists(cached + ".part") else 0
    host.requests.clear()
    r = pull(f"{REPO}:q8_0")
    ranges = [rng for path, rng in host.requests if "/resolve/" in path]
    check(r.returncode == 0 and r.stdout.strip() == cached and open(cached, "rb").read() == data,
          "the next pull finishes it, the exact bytes, its path printed", r)
    check(ranges == [f"bytes={kept}-"], f"and asked only for the rest ({ranges})")
    host.requests.clear()
    r = pull(f"{REPO}:Q8_0")
    check(r.returncode == 0 and not any("/resolve/" in p for p, _ in host.requests), "a complete file is not fetched again", r)

    host.files["tiny-Q4_0.gguf"] = other
    host.published["tiny-Q4_0.gguf"] = (len(data), hashlib.sha256(data).hexdigest())
    r = pull(f"{REPO}:Q4_0")
    q4 = f"{work}/cache/someone_tiny-GGUF_tiny-Q4_0.gguf"
    check(r.returncode != 0 and "SHA-256" in r.stderr and not os.path.exists(q4) and not os.path.exists(q4 + ".part"),
          "other bytes than published are refused by SHA-256 and removed", r)
    r = pull(REPO)
    check(r.returncode == 0 and r.stdout.strip().endswith("tiny-Q4_K_M.gguf"), "no tag: Q4_K_M", r)
    r = pull(f"{REPO}:IQ2_XS")
    check(r.returncode != 0 and "no GGUF file of the repository is 'IQ2_XS'" in r.stderr and "tiny-Q8_0.gguf" in r.stderr,
          "a missing tag is named with the files there are", r)
    r = pull("someone/missing:Q4_0")
    check(r.returncode != 0 and "has no repository 'someone/missing'" in r.stderr, "a missing repository is named", r)
    r = pull("not-a-repo")
    check(r.returncode != 0 and "is not user/repo[:quant]" in r.stderr, "a malformed name is refused", r)
    r = pull(f"{REPO}:Q8_0", "-p", "In the beginning", "-n", "4", "--seed", "1", cmd="run")
    check(r.returncode == 0 and len(r.stdout) > len("In the beginning"), "strata run -hf runs the pulled model", r)
    host.shutdown()
    print(f"{failures} failures" if failures else "strata pull resumes, verifies and chooses as it should")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
