#!/usr/bin/env python3
"""strata serve's chat page (GET /) in headless Chromium (Debian's chromium), driven over the
DevTools protocol (python3-websocket), on the shipped model behind an API key:
  - the page and its Content-Security-Policy are served without the key; nothing is fetched
    from anywhere but the server itself; no script error;
  - with the key typed in, it shows the model's name (from /props);
  - a message streams a reply (the text grows while the reply is in flight); Stop ends it
    ("[stopped]"), the text then stays as it was, and the server counts a cancelled request;
  - a second message gets a whole reply (after the first turn) that ends by itself, with its
    timing (tokens, tok/s, the prompt's time) under it; eight more turns each get one (ten in
    all: the oldest are left out once the context is full);
  - replies are Markdown rendered as elements (code blocks, lists, bold), markup shown as text;
  - at 400 px wide nothing overflows and the buttons stay on screen;
  - a screenshot of the page is written to WORK_DIR/chat_page.png (its path printed).
Exits 77 (skipped) without chromium or python3-websocket.

usage: check_web_page.py STRATA MODEL WORK_DIR
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import websocket
except ImportError:
    print("skipped: no python3-websocket")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "reference"))
from http_helpers import free_port, wait_until  # noqa: E402

KEY = "sesame"






class DevTools:
    """A page target over the DevTools protocol: commands, and the events seen so far."""

    def __init__(self, url):
        self.ws = websocket.create_connection(url, timeout=30)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def js(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")


def start_server(strata, model, work):
    port = free_port()
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen([strata, "serve", "-m", model, "--port", str(port), "-t", "2", "-np", "2",
                             "-c", "16384", "--api-key", KEY], stderr=log)
    wait_until("the server", lambda: ok(f"http://127.0.0.1:{port}/health"))
    return proc, port


def ok(url):
    try:
        urllib.request.urlopen(url, timeout=1)
        return True
    except OSError:
        return False


def start_chromium(work):
    profile = tempfile.mkdtemp(dir=work)
    proc = subprocess.Popen([shutil.which("chromium"), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
                             f"--user-data-dir={profile}", "--window-size=1000,720", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    wait_until("chromium's DevTools port", lambda: os.path.exists(port_file) and open(port_file).read().strip())
    port = int(open(port_file).read().split()[0])
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
    page = next(t for t in targets if t["type"] == "page")
    return proc, DevTools(page["webSocketDebuggerUrl"])


def metric(port, name):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {KEY}"})
    for line in urllib.request.urlopen(req, timeout=10).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def last_reply(dt):
    """The last reply's state, its text (the rendered Markdown without the page's notes) and
    everything it shows."""
    return dt.js("(() => { const r = [...document.querySelectorAll('.assistant')].pop();"
                 " if (!r) return null;"
                 " const own = [...r.childNodes].filter(n => !(n.classList && (n.classList.contains('note')"
                 " || n.classList.contains('timing'))));"
                 " const timing = r.querySelector('.timing');"
                 " return {state: r.dataset.state, text: own.map(n => n.textContent).join(''),"
                 " all: r.textContent, timing: timing ? timing.textContent : ''}; })()")


MARKDOWN_CHECK = r"""(() => {
  const d = document.createElement('div');
  renderMarkdown(d, 'Intro with `x<y` and **bold** <img src=x onerror="window.pwned=1">\n\n' +
                    '```js\nlet a = "<b>";\n```\n- one\n- two\n1. first\n# Title\n```\nopen');
  return {pre: d.querySelectorAll('pre').length, li: d.querySelectorAll('ul > li').length,
          ol: d.querySelectorAll('ol > li').length, strong: d.querySelectorAll('strong').length,
          code: d.querySelectorAll('p code').length, img: d.querySelectorAll('img, b').length,
          firstPre: d.querySelector('pre').textContent, lastPre: [...d.querySelectorAll('pre')].pop().textContent,
          text: d.querySelector('p').textContent};
})()"""


def main():
    strata, model, work = sys.argv[1:4]
    if shutil.which("chromium") is None:
        print("skipped: no chromium")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    server, port = start_server(strata, model, work)
    browser = None
    try:
        origin = f"http://127.0.0.1:{port}"
        head = urllib.request.urlopen(origin + "/", timeout=10)
        policy = head.headers.get("Content-Security-Policy", "")
        assert head.status == 200 and "connect-src 'self'" in policy and "default-src 'none'" in policy, policy
        print(f"ok: GET / without the key: {head.headers['Content-Type']}, CSP {policy!r}")

        browser, dt = start_chromium(work)
        dt.call("Network.enable")
        dt.call("Runtime.enable")
        dt.call("Page.enable")
        dt.call("Emulation.setDeviceMetricsOverride", width=1000, height=720, deviceScaleFactor=1, mobile=False)
        dt.call("Page.navigate", url=origin + "/")
        wait_until("the page to load", lambda: dt.js("document.readyState") == "complete")
        dt.js(f"document.getElementById('key').value = '{KEY}';"
              "document.getElementById('key').dispatchEvent(new Event('change'))")
        model_text = "document.getElementById('model').textContent"
        try:
            name = wait_until("the model's name", lambda: dt.js(model_text) == "strata-tiny" and "strata-tiny", 10)
        except AssertionError:
            raise AssertionError(f"the page shows {dt.js(model_text)!r}, not the model's name")
        print(f"ok: the page shows the model: {name}")

        # 8000 tokens (slots of 8192 positions): the reply still streams when Stop is clicked even
        # where the browser's calls are slow beside other tests (a reply of 3500 once ended first).
        cancelled_before = metric(port, "strata_requests_cancelled_total")
        dt.js("document.getElementById('temperature').value = '0';"
              "document.getElementById('max_tokens').value = '8000';"
              "document.getElementById('input').value = 'In the beginning';"
              "document.getElementById('send').click()")
        first = wait_until("the reply to stream", lambda: (r := last_reply(dt)) and len(r["text"]) > 20 and r)
        assert first["state"] == "streaming", first
        grown = wait_until("the reply to grow", lambda: (r := last_reply(dt)) and len(r["text"]) > len(first["text"]) and r)
        dt.js("document.getElementById('stop').click()")
        stopped = wait_until("the reply to stop", lambda: (r := last_reply(dt)) and r["state"] == "stopped" and r)
        assert stopped["all"].endswith("[stopped]"), stopped
        time.sleep(0.5)
        after = last_reply(dt)
        assert after["text"] == stopped["text"], "the text grew after Stop"
        wait_until("the server to count the cancelled request",
                   lambda: metric(port, "strata_requests_cancelled_total") > cancelled_before, 10)
        print(f"ok: a reply streamed ({len(first['text'])} then {len(grown['text'])} characters seen), "
              f"Stop ended it at {len(stopped['text'])} and the server cancelled it")

        dt.js("document.getElementById('max_tokens').value = '40';"
              "document.getElementById('input').value = 'And God said';"
              "document.getElementById('send').click()")
        done = wait_until("the second reply", lambda: (r := last_reply(dt)) and r["state"] in ("done", "error") and r)
        assert done["state"] == "done" and done["text"], done
        users = dt.js("document.querySelectorAll('.user').length")
        assert users == 2, users
        assert "tok/s" in done["timing"] and "prompt" in done["timing"], done
        print(f"ok: a second turn got a whole reply: {done['text'][:60]!r}... timed: {done['timing']!r}")

        # Eight more turns: ten in all, the oldest left out once the context is full.
        for turn in range(3, 11):
            dt.js("document.getElementById('input').value = 'And it came to pass';"
                  "document.getElementById('send').click()")
            reply = wait_until(f"reply {turn}", lambda: dt.js("document.querySelectorAll('.user').length") == turn
                               and (r := last_reply(dt)) and r["state"] in ("done", "error") and r)
            assert reply["state"] == "done" and reply["text"], (turn, reply)
        print(f"ok: ten turns, each with a whole reply (the last: {reply['all'][-80:]!r})")

        md = dt.js(MARKDOWN_CHECK)
        assert md["pre"] == 2 and md["li"] == 2 and md["ol"] == 1 and md["code"] == 1, md
        assert md["img"] == 0 and "<img" in md["text"] and md["firstPre"] == 'let a = "<b>";', md
        assert md["lastPre"] == "open" and md["strong"] == 2, md
        assert not dt.js("window.pwned === 1"), "markup in a reply ran"
        print(f"ok: Markdown rendered as elements (code blocks, lists, bold), markup shown as text: {md}")

        dt.call("Emulation.setDeviceMetricsOverride", width=400, height=720, deviceScaleFactor=1, mobile=True)
        narrow = dt.js("(() => { const r = (id) => document.getElementById(id).getBoundingClientRect();"
                       " return {scroll: document.documentElement.scrollWidth, send: r('send').right,"
                       " stop: r('stop').right, reset: r('reset').right, input: r('input').width}; })()")
        assert narrow["scroll"] <= 400 and max(narrow["send"], narrow["stop"], narrow["reset"]) <= 400, narrow
        assert narrow["input"] >= 150, narrow
        shot = dt.call("Page.captureScreenshot", format="png")
        with open(os.path.join(os.path.abspath(work), "chat_page_400px.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"ok: at 400 px nothing overflows: {narrow}")
        dt.call("Emulation.setDeviceMetricsOverride", width=1000, height=720, deviceScaleFactor=1, mobile=False)

        shot = dt.call("Page.captureScreenshot", format="png")
        png = os.path.join(os.path.abspath(work), "chat_page.png")
        with open(png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"screenshot: {png} ({os.path.getsize(png)} bytes)")

        urls = [e["params"]["request"]["url"] for e in dt.events if e.get("method") == "Network.requestWillBeSent"]
        outside = [u for u in urls if not u.startswith(origin + "/")]
        assert urls and not outside, f"requests outside the server: {outside}"
        errors = [e for e in dt.events if e.get("method") in ("Runtime.exceptionThrown",)]
        assert not errors, errors
        print(f"ok: {len(urls)} requests, all to the server; no script errors")
    finally:
        if browser:
            browser.kill()
            browser.wait()
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
