#!/usr/bin/env python3
"""Three `strata serve` replicas behind Debian's nginx, as docs/DEPLOY.md deploys them: the
nginx config is deploy/nginx.conf (only its ports and file paths changed), each replica runs
with deploy/kubernetes.yaml's container arguments (the model and port changed, one thread
each), and the manifest's fields are checked (probes, grace period against --drain-timeout,
scrape annotations, ports).

A load test of 12 clients (whole and streamed completions) runs through nginx; 3 s in, one
replica is killed (SIGKILL), 2 s later another gets SIGTERM (it drains), and the load goes on to
10 s on the last one. Passing means:
  - the only failed requests were in flight on the killed replica when it died (its address in
    nginx's X-Upstream header, started before the kill, ended after it), each a clean failure:
    a 502 with an OpenAI error body, or a stream cut before its [DONE];
  - no request on the draining replica failed, and it exited 0 by itself after "drained";
  - every request started a second after the kill succeeded;
  - the replicas are balanced (least connections: each served requests before the kill).
Prints the figures: requests, failures, p50/p99 latency. Exits 77 (skipped) without nginx.

usage: check_replicas.py STRATA MODEL WORK_DIR
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "reference"))
from http_helpers import free_port, wait_until  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = ["In the beginning", "And God said", "Let there be light", "And the evening",
           "The earth was without form", "He called the light Day"]
KILL_AT, TERM_AT, END_AT = 3.0, 5.0, 10.0






def health(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/health")
        return c.getresponse().status
    except OSError:
        return None


def check_manifest():
    import yaml
    docs = {d["kind"]: d for d in yaml.safe_load_all(open(os.path.join(ROOT, "deploy/kubernetes.yaml")))}
    dep, svc = docs["Deployment"], docs["Service"]
    pod = dep["spec"]["template"]
    c = pod["spec"]["containers"][0]
    args = [str(a) for a in c["args"]]
    port = int(args[args.index("--port") + 1])
    drain = float(args[args.index("--drain-timeout") + 1])
    pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    checks = {
        "3 replicas": dep["spec"]["replicas"] == 3,
        "readiness probe: GET /health on the serving port":
            c["readinessProbe"]["httpGet"]["path"] == "/health" and named[c["readinessProbe"]["httpGet"]["port"]] == port,
        "liveness probe: the port (open while loading and draining)":
            named[c["livenessProbe"]["tcpSocket"]["port"]] == port,
        "grace period > preStop pause + --drain-timeout":
            pod["spec"]["terminationGracePeriodSeconds"] > pre_stop + drain,
        "scrape annotations: /metrics on the serving port":
            pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
            and int(pod["metadata"]["annotations"]["prometheus.io/port"]) == port
            and pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true",
        "the Service targets the serving port": named[svc["spec"]["ports"][0]["targetPort"]] == port,
        "selectors match": dep["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
                           == svc["spec"]["selector"],
        "no unavailable replica during a rollout": dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0,
    }
    for name, ok in checks.items():
        print(f"manifest: {name}: {'ok' if ok else 'FAILED'}")
    if not all(checks.values()):
        sys.exit(1)
    return args


def replica_args(args, model, port):
    out = list(args)
    out[out.index("-m") + 1] = model
    out[out.index("--port") + 1] = str(port)
    out[out.index("--host") + 1] = "127.0.0.1"
    return out + ["-t", "1"]


def nginx_config(work, listen, ports):
    text = open(os.path.join(ROOT, "deploy/nginx.conf")).read()
    for needed in ["least_conn;", "max_fails=", "proxy_buffering off;", "non_idempotent", "http_503",
                   "add_header X-Upstream"]:
        assert needed in text, f"deploy/nginx.conf lacks {needed}"
    servers = re.findall(r"server 127\.0\.0\.1:(\d+)", text)
    assert len(servers) == 3, servers
    for old, new in zip(servers, ports):
        text = text.replace(f"server 127.0.0.1:{old} ", f"server 127.0.0.1:{new} ")
    text = re.sub(r"listen \d+;", f"listen 127.0.0.1:{listen};", text)
    local = (f"  access_log {work}/access.log;\n  client_body_temp_path {work}/body;\n"
             f"  proxy_temp_path {work}/proxy;\n  fastcgi_temp_path {work}/fastcgi;\n"
             f"  uwsgi_temp_path {work}/uwsgi;\n  scgi_temp_path {work}/scgi;\n")
    text = text.replace("http {\n", "http {\n" + local, 1)
    if os.geteuid() == 0:
        text = "user root;\n" + text
    path = os.path.join(work, "nginx.conf")
    open(path, "w").write(text)
    return path


class Result:
    def __init__(self, kind, start):
        self.kind, self.start, self.end = kind, start, None
        self.status, self.ok, self.upstream, self.why = None, False, "", ""


def one_request(port, stream, prompt, t0):
    r = Result("stream" if stream else "whole", time.time() - t0)
    body = json.dumps({"prompt": prompt, "max_tokens": 48, "temperature": 0, "stream": stream})
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = c.getresponse()
        r.status = resp.status
        r.upstream = (resp.getheader("X-Upstream") or "").split(",")[-1].strip()
        data = resp.read().decode()
        if resp.status != 200:
            err = json.loads(data)["error"]
            r.why = f"{resp.status}: {err['message']}"
        elif stream:
            r.ok = data.rstrip().endswith("data: [DONE]") and '"error"' not in data
            r.why = "" if r.ok else "a stream without its [DONE]"
        else:
            r.ok = "text" in json.loads(data)["choices"][0]
    except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
        r.why = f"{type(e).__name__}: {e}"
    r.end = time.time() - t0
    return r


def main():
    strata, model, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        print("skipped: no nginx")
        sys.exit(77)
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    os.makedirs(work, exist_ok=True)
    args = check_manifest()
    ports = [free_port() for _ in range(3)]
    replicas, logs = [], []
    for i, p in enumerate(ports):
        logs.append(os.path.join(work, f"replica{i}.log"))
        replicas.append(subprocess.Popen([strata] + replica_args(args, model, p), stderr=open(logs[-1], "w")))
    listen = free_port()
    conf = nginx_config(work, listen, ports)
    nginx = subprocess.Popen([nginx_bin, "-p", work, "-c", conf, "-g",
                              f"daemon off; pid {work}/nginx.pid; error_log {work}/error.log;"])
    try:
        for p in ports:
            wait_until(f"replica on {p}", lambda p=p: health(p) == 200, 60)
        wait_until("nginx", lambda: health(listen) == 200)
        results, lock, stop = [], threading.Lock(), threading.Event()
        t0 = time.time()

        def client(k):
            i = k
            while not stop.is_set():
                r = one_request(listen, i % 2 == 0, PROMPTS[i % len(PROMPTS)], t0)
                with lock:
                    results.append(r)
                i += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        time.sleep(KILL_AT)
        killed = f"127.0.0.1:{ports[0]}"
        t_kill = time.time() - t0
        replicas[0].send_signal(signal.SIGKILL)
        time.sleep(TERM_AT - KILL_AT)
        drained = f"127.0.0.1:{ports[1]}"
        replicas[1].send_signal(signal.SIGTERM)
        time.sleep(END_AT - TERM_AT)
        stop.set()
        for t in threads:
            t.join()
        drain_rc = replicas[1].wait(timeout=60)

        ok = [r for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        lat = sorted(r.end - r.start for r in ok)
        pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
        before = {}
        for r in results:
            if r.end < t_kill:
                before[r.upstream] = before.get(r.upstream, 0) + 1
        print(f"{'requests':>8} {'ok':>5} {'failed':>6} {'p50 ms':>7} {'p99 ms':>7}")
        print(f"{len(results):>8} {len(ok):>5} {len(failed):>6} {pct(0.5):>7.0f} {pct(0.99):>7.0f}")
        print(f"served before the kill, by replica: {before}")
        problems = []
        for r in failed:
            in_flight = r.upstream == killed and r.start < t_kill <= r.end
            clean = r.why.startswith("502") or r.why.startswith("a stream") or "IncompleteRead" in r.why
            print(f"  failed: {r.kind} {r.start:.2f}-{r.end:.2f}s via {r.upstream or '?'}: {r.why}")
            if not (in_flight and clean):
                problems.append(f"a failure not explained by the kill: {r.kind} via {r.upstream}: {r.why}")
        late = [r for r in results if r.start > t_kill + 1.0 and not r.ok]
        if late:
            problems.append(f"{len(late)} requests started after the kill failed")
        if any(r.upstream == drained and not r.ok for r in results):
            problems.append("a request on the draining replica failed")
        if drain_rc != 0 or "drained" not in open(logs[1]).read():
            problems.append(f"the draining replica exited {drain_rc} without draining")
        if len(before) < 3:
            problems.append(f"not every replica served requests before the kill: {before}")
        if len(results) < 50:
            problems.append(f"only {len(results)} requests")
        print(f"the killed replica ({killed}) had {len(failed)} requests cut; the drained one "
              f"({drained}) exited {drain_rc} after finishing its requests")
        for p in problems:
            print("FAILED: " + p)
        if problems:
            sys.exit(1)
        print("no request lost beyond those in flight on the killed replica")
    finally:
        nginx.terminate()
        nginx.wait(timeout=30)
        for r in replicas:
            if r.poll() is None:
                r.kill()
                r.wait()


if __name__ == "__main__":
    main()
