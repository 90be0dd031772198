"""Probes a running strata serve with slow clients: N connections that send one request byte every
2 s, then times GET /health. Usage: tools/probe/slow_clients.py PORT [N]"""
import socket, sys, time, threading, urllib.request
port = int(sys.argv[1]); stop = False
def slow():
    s = socket.create_connection(("127.0.0.1", port))
    req = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    try:
        for b in req:
            if stop: break
            s.send(bytes([b])); time.sleep(2)
    except OSError: pass
ts = [threading.Thread(target=slow, daemon=True) for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 8)]
for t in ts: t.start()
time.sleep(1)
t0 = time.time()
try:
    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30).read()
    print(f"/health answered after {time.time()-t0:.2f} s")
except Exception as e:
    print(f"/health not answered in {time.time()-t0:.1f} s: {e}")
stop = True
