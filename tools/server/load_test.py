#!/usr/bin/env python3
"""Load test of `edgevl serve`: N concurrent clients x M requests mixing streaming,
non-streaming, images, cancellations mid-stream, oversized and malformed bodies.

It starts the server itself (or uses --base-url with --pid for RSS), warms it up, records the
server's RSS, runs the mix, and checks that every request got a well-formed answer or a clean
error, that the server is still up, and that its RSS came back near the warm baseline.
Standard library only.

  python3 tools/server/load_test.py --edgevl build/edgevl --model m.evb --image photo.jpg
"""
import argparse
import base64
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edgevl_server import EdgevlServer  # noqa: E402


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Client:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def request(self, method, path, body=None, stream_cancel_after=None, timeout=120):
        """Returns (status, kind) where kind names what came back."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            if resp.getheader("Content-Type", "").startswith("text/event-stream"):
                return resp.status, self._read_stream(resp, stream_cancel_after)
            data = resp.read()
            j = json.loads(data)
            if resp.status == 200:
                ok = "choices" in j and j["choices"][0].get("finish_reason") in ("stop", "length")
                return resp.status, "ok" if ok else "malformed-200"
            ok = "error" in j and isinstance(j["error"].get("message"), str)
            return resp.status, "error-object" if ok else "malformed-error"
        finally:
            conn.close()

    @staticmethod
    def _read_stream(resp, cancel_after):
        events, buf = 0, b""
        while True:
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
            if not chunk:
                return "stream-truncated"
            buf += chunk
            while b"\n\n" in buf:
                line, buf = buf.split(b"\n\n", 1)
                if not line.startswith(b"data: "):
                    return "stream-malformed"
                data = line[6:]
                if data == b"[DONE]":
                    return "stream-ok"
                json.loads(data)
                events += 1
                if cancel_after is not None and events >= cancel_after:
                    return "cancelled-by-client"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edgevl", default="build/edgevl")
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", help="an image file for the image requests")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=200, help="per client")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--rss-slack-mb", type=float, default=16,
                    help="RSS may end this much (+10%%) above the warm baseline (sanitizer builds keep "
                         "freed memory in quarantine: give them more)")
    a = ap.parse_args()

    max_body = 4 << 20
    server = EdgevlServer(a.edgevl, a.model, "-t", a.threads, "--parallel", a.parallel, "--queue", 64,
                          "--max-body", max_body, "--image-cache-mb", 64)
    srv = server.proc
    cl = Client("127.0.0.1", server.port)

    img_uri = None
    if a.image:
        with open(a.image, "rb") as f:
            img_uri = "data:image/jpeg;base64," + base64.b64encode(f.read()).decode()

    def chat(text, stream=False, image=None):
        content = text if not image else [{"type": "image_url", "image_url": {"url": image}},
                                          {"type": "text", "text": text}]
        return json.dumps({"messages": [{"role": "user", "content": content}],
                           "max_tokens": a.max_tokens, "temperature": 0.7, "stream": stream})

    kinds = ["plain", "stream", "image", "cancel", "oversized", "malformed", "bad-field", "completion"]
    if not img_uri:
        kinds.remove("image")

    def one(kind, rng):
        words = " ".join(rng.choice(["sky", "river", "cat", "code", "tree", "light"]) for _ in range(rng.randint(2, 12)))
        if kind == "plain":
            return cl.request("POST", "/v1/chat/completions", chat(words))
        if kind == "stream":
            return cl.request("POST", "/v1/chat/completions", chat(words, stream=True))
        if kind == "image":
            return cl.request("POST", "/v1/chat/completions", chat(words, image=img_uri))
        if kind == "cancel":
            body = json.dumps({"messages": [{"role": "user", "content": words}], "max_tokens": 2000,
                               "stream": True})
            return cl.request("POST", "/v1/chat/completions", body, stream_cancel_after=2)
        if kind == "oversized":
            return cl.request("POST", "/v1/chat/completions", "x" * (max_body + 1024))
        if kind == "malformed":
            return cl.request("POST", "/v1/chat/completions", '{"messages": [' + words)
        if kind == "bad-field":
            return cl.request("POST", "/v1/chat/completions",
                              json.dumps({"messages": [{"role": "user", "content": words}], "temperature": -1}))
        return cl.request("POST", "/v1/completions",
                          json.dumps({"prompt": words, "max_tokens": a.max_tokens}))

    # Warm-up: every kind once, so lazily sized buffers reach their size; then the baseline.
    rng0 = random.Random(0)
    for k in kinds:
        one(k, rng0)
    time.sleep(0.5)
    rss_before = rss_mb(srv.pid)

    results, lock = [], threading.Lock()

    def worker(i):
        rng = random.Random(a.seed * 1000 + i)
        for _ in range(a.requests):
            kind = rng.choice(kinds)
            t0 = time.perf_counter()
            try:
                status, what = one(kind, rng)
            except Exception as e:  # connection refused or reset: the server misbehaved
                status, what = -1, f"exception:{type(e).__name__}"
            with lock:
                results.append((kind, status, what, time.perf_counter() - t0))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    time.sleep(1.0)  # let cancelled generations end
    alive = srv.poll() is None
    rss_after = rss_mb(srv.pid) if alive else 0.0

    expected = {"plain": {(200, "ok")}, "stream": {(200, "stream-ok")}, "image": {(200, "ok")},
                "cancel": {(200, "cancelled-by-client"), (200, "stream-ok")},
                "oversized": {(413, "error-object")}, "malformed": {(400, "error-object")},
                "bad-field": {(400, "error-object")}, "completion": {(200, "ok")}}
    by_kind, bad = {}, []
    for kind, status, what, dt in results:
        by_kind.setdefault(kind, {}).setdefault(f"{status} {what}", 0)
        by_kind[kind][f"{status} {what}"] += 1
        if (status, what) not in expected[kind] and not (status == 429 and what == "error-object"):
            bad.append((kind, status, what))
    lat = sorted(dt for kind, status, what, dt in results if status == 200 and kind in ("plain", "image", "completion"))
    summary = {
        "requests": len(results), "clients": a.clients, "wall_s": round(wall, 2),
        "by_kind": by_kind, "unexpected": len(bad),
        "latency_ms_p50": round(1000 * statistics.median(lat), 1) if lat else None,
        "latency_ms_p99": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1) if lat else None,
        "rss_mb_before": round(rss_before, 1), "rss_mb_after": round(rss_after, 1), "server_alive": alive,
    }
    srv.terminate()
    srv.wait(timeout=30)
    summary["server_exit"] = srv.returncode
    print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    ok = alive and not bad and srv.returncode == 0 and rss_after <= rss_before * 1.10 + a.rss_slack_mb
    if bad:
        print("unexpected answers:", bad[:10], file=sys.stderr)
    print("load test:", "PASS" if ok else "FAIL", file=sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
