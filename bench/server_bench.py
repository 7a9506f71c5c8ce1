#!/usr/bin/env python3
"""Server figures (issue: serve and embed), standard library only:

  parallel   aggregate decode tok/s with 1, 2, 4 streams at once (one server per count, each
             with --parallel N; tokens after each stream's first / wall from the first stream's
             first token to the last stream's last token)
  followup   time to first token of a follow-up turn with its prefix kept in the slot vs the
             same request on a slot that holds another conversation
  image      time to first token of an image request: first time (decode, tiles, vision,
             prefill), the same image again after a change before it (features from the cache,
             prefill again), and the same request again (prefix kept)
  overhead   decode tok/s of `edgevl run` vs the server (its own timings and as the client sees
             the stream) on the same prompt and token count
  interleave a stream runs while a second request with a long prompt (--long-words) arrives:
             the stream's longest gap between tokens while that prompt is evaluated (the server
             evaluates it a prefill chunk per step), next to the long prompt's own prefill time
             (what the gap would be if the prompt ran at once)

  python3 bench/server_bench.py --edgevl build/edgevl --model m.evb [--image p.jpg] --reps 3
"""
import argparse
import base64
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "server"))
from edgevl_server import EdgevlServer  # noqa: E402


class Server(EdgevlServer):
    def __init__(self, edgevl, model, threads, parallel):
        super().__init__(edgevl, model, "-t", threads, "--parallel", parallel)

    def chat(self, body):
        """Streams a chat request; returns (client ttft s, token times, final usage, timings)."""
        body = dict(body, stream=True, stream_options={"include_usage": True})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        t0 = time.perf_counter()
        c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, r.read()
        times, usage, timings, buf = [], None, None, b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                line, buf = buf.split(b"\n\n", 1)
                data = line[6:]
                if data == b"[DONE]":
                    continue
                j = json.loads(data)
                if j.get("usage"):
                    usage, timings = j["usage"], j.get("timings")
                if j["choices"] and j["choices"][0]["delta"].get("content"):
                    times.append(time.perf_counter())
        return (times[0] - t0 if times else None), times, usage, timings



def msg(text, image=None):
    if not image:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": image}},
                                        {"type": "text", "text": text}]}


def words(n, seed):
    vocab = ["river", "mountain", "light", "city", "engine", "garden", "winter", "signal", "paper", "ocean"]
    return " ".join(vocab[(seed * 7 + i * 3) % len(vocab)] for i in range(n))


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def bench_parallel(a, out):
    res = {}
    for n in a.streams:
        srv = Server(a.edgevl, a.model, a.threads, n)
        try:
            rates = []
            for rep in range(a.reps):
                results = [None] * n

                def run(i):
                    body = {"messages": [msg(words(20, 100 * rep + i))], "max_tokens": a.tokens,
                            "temperature": 0, "ignore_eos": True}
                    results[i] = srv.chat(body)

                ths = [threading.Thread(target=run, args=(i,)) for i in range(n)]
                for t in ths:
                    t.start()
                for t in ths:
                    t.join()
                first = min(r[1][0] for r in results)
                last = max(r[1][-1] for r in results)
                tokens = sum(len(r[1]) - 1 for r in results)
                if last > first:
                    rates.append(tokens / (last - first))
            res[n] = {"aggregate_tok_s": round(median(rates), 1), "samples": [round(x, 1) for x in rates]}
        finally:
            srv.close()
    out["parallel"] = res
    base = res[a.streams[0]]["aggregate_tok_s"]
    for n in a.streams:
        print(f"parallel  {n} stream(s): {res[n]['aggregate_tok_s']:8.1f} tok/s aggregate "
              f"({res[n]['aggregate_tok_s'] / base:.2f}x one stream)")


def bench_followup(a, out):
    srv = Server(a.edgevl, a.model, a.threads, 1)
    try:
        reuse, cold = [], []
        for rep in range(a.reps):
            turn1 = [msg(words(a.context_words, rep))]
            _, times, usage, _ = srv.chat({"messages": turn1, "max_tokens": 16, "temperature": 0, "ignore_eos": True})
            reply = "word " * 15
            turn2 = turn1 + [{"role": "assistant", "content": reply}, msg("And what comes next?")]
            body = {"messages": turn2, "max_tokens": 1, "temperature": 0, "ignore_eos": True}
            t_reuse, _, u2, tm2 = srv.chat(body)
            srv.chat({"messages": [msg(words(30, 999 + rep))], "max_tokens": 1, "temperature": 0})
            t_cold, _, u3, tm3 = srv.chat(body)
            reuse.append(tm2["ttft_ms"])
            cold.append(tm3["ttft_ms"])
        out["followup"] = {"prompt_tokens": u2["prompt_tokens"], "cached_with_reuse": u2["prompt_tokens_details"]["cached_tokens"],
                           "cached_without": u3["prompt_tokens_details"]["cached_tokens"],
                           "ttft_ms_reuse": round(median(reuse), 1), "ttft_ms_cold": round(median(cold), 1)}
        f = out["followup"]
        print(f"followup  {f['prompt_tokens']} prompt tokens: ttft {f['ttft_ms_reuse']:.1f} ms with the prefix kept "
              f"({f['cached_with_reuse']} cached) vs {f['ttft_ms_cold']:.1f} ms without ({f['cached_without']} cached)")
    finally:
        srv.close()


def bench_image(a, out):
    with open(a.image, "rb") as f:
        uri = "data:image/jpeg;base64," + base64.b64encode(f.read()).decode()
    first, cached, kept = [], [], []
    for rep in range(a.reps):
        srv = Server(a.edgevl, a.model, a.threads, 1)  # a fresh feature cache each time
        try:
            q = "Describe the image."
            body = {"messages": [msg(q, uri)], "max_tokens": 1, "temperature": 0, "ignore_eos": True}
            _, _, u1, t1 = srv.chat(body)
            other = {"messages": [{"role": "system", "content": f"You are assistant number {rep}."}, msg(q, uri)],
                     "max_tokens": 1, "temperature": 0, "ignore_eos": True}
            _, _, u2, t2 = srv.chat(other)
            _, _, u3, t3 = srv.chat(other)
            first.append(t1["ttft_ms"])
            cached.append(t2["ttft_ms"])
            kept.append(t3["ttft_ms"])
        finally:
            srv.close()
    out["image"] = {"prompt_tokens": u1["prompt_tokens"], "ttft_ms_first": round(median(first), 1),
                    "ttft_ms_feature_cache": round(median(cached), 1), "ttft_ms_prefix_kept": round(median(kept), 1)}
    f = out["image"]
    print(f"image     {f['prompt_tokens']} prompt tokens: ttft {f['ttft_ms_first']:.1f} ms first, "
          f"{f['ttft_ms_feature_cache']:.1f} ms same image (features cached, prefill again), "
          f"{f['ttft_ms_prefix_kept']:.1f} ms same request (prefix kept)")


def bench_overhead(a, out):
    # Interleaved (run, then the server, per repetition) so that drift of a shared machine hits
    # both alike.
    prompt = words(20, 7)
    run_rates, srv_rates, client_rates = [], [], []
    srv = Server(a.edgevl, a.model, a.threads, 1)
    try:
        for rep in range(a.reps):
            r = subprocess.run([a.edgevl, "run", "-m", a.model, "-p", prompt, "-n", str(a.tokens), "--temp", "0",
                                "--ignore-eos", "--json", "-t", str(a.threads)], capture_output=True, text=True,
                               check=True)
            run_rates.append(json.loads(r.stdout)["decode_tok_s"])
            srv.chat({"messages": [msg(words(20, 50 + rep))], "max_tokens": 1, "temperature": 0})  # another prefix
            _, times, usage, tm = srv.chat({"messages": [msg(prompt)], "max_tokens": a.tokens, "temperature": 0,
                                            "ignore_eos": True})
            srv_rates.append(tm["decode_tokens_per_s"])
            if len(times) > 1 and times[-1] > times[0]:  # a tiny model may stream it in one chunk
                client_rates.append((len(times) - 1) / (times[-1] - times[0]))
    finally:
        srv.close()
    run_m, srv_m, cli_m = median(run_rates), median(srv_rates), median(client_rates)
    out["overhead"] = {"run_tok_s": round(run_m, 1), "server_tok_s": round(srv_m, 1), "client_seen_tok_s": round(cli_m, 1),
                       "run_samples": [round(x, 1) for x in run_rates], "server_samples": [round(x, 1) for x in srv_rates],
                       "overhead_pct": round(100 * (run_m / srv_m - 1), 2),
                       "overhead_client_pct": round(100 * (run_m / cli_m - 1), 2)}
    f = out["overhead"]
    print(f"overhead  decode: run {run_m:.1f} tok/s, server {srv_m:.1f} tok/s (its timings; {f['overhead_pct']:+.2f}%), "
          f"client sees {cli_m:.1f} tok/s ({f['overhead_client_pct']:+.2f}%); samples run {f['run_samples']} "
          f"server {f['server_samples']}")


def bench_interleave(a, out):
    srv = Server(a.edgevl, a.model, a.threads, 2)
    gaps, prefills, medians = [], [], []
    try:
        for rep_i in range(a.reps):
            res = {}

            def stream():
                res["a"] = srv.chat({"messages": [msg(words(20, 300 + rep_i))], "max_tokens": 400,
                                     "temperature": 0, "ignore_eos": True})

            t = threading.Thread(target=stream)
            t.start()
            time.sleep(2.0)  # the stream is decoding
            t_b = time.perf_counter()
            _, _, usage_b, tm_b = srv.chat({"messages": [msg(words(a.long_words, 400 + rep_i))], "max_tokens": 1,
                                            "temperature": 0})
            t_b_end = time.perf_counter()
            t.join()
            _, times, _, _ = res["a"]
            during = [y - x for x, y in zip(times, times[1:]) if x >= t_b - 0.5 and y <= t_b_end + 0.5]
            before = [y - x for x, y in zip(times, times[1:]) if y < t_b]
            gaps.append(max(during) if during else float("nan"))
            medians.append(median(before))
            prefills.append(tm_b["prefill_ms"] / 1000 if tm_b and "prefill_ms" in tm_b else t_b_end - t_b)
            res["prompt_tokens"] = usage_b["prompt_tokens"] if usage_b else None
            print(f"  rep {rep_i}: long prompt {res['prompt_tokens']} tokens, its prefill {prefills[-1]*1000:.0f} ms; "
                  f"stream: median gap before {medians[-1]*1000:.1f} ms, longest gap during {gaps[-1]*1000:.0f} ms")
    finally:
        srv.close()
    out["interleave"] = {"longest_gap_ms": round(median(gaps) * 1000, 1),
                         "long_prompt_prefill_ms": round(median(prefills) * 1000, 1),
                         "stream_median_gap_ms": round(median(medians) * 1000, 1),
                         "samples_gap_ms": [round(g * 1000, 1) for g in gaps],
                         "samples_prefill_ms": [round(p * 1000, 1) for p in prefills]}
    f = out["interleave"]
    print(f"interleave  longest stream gap during a long prompt {f['longest_gap_ms']} ms vs that prompt's prefill "
          f"{f['long_prompt_prefill_ms']} ms (stream's usual gap {f['stream_median_gap_ms']} ms)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edgevl", default="build/edgevl")
    ap.add_argument("--model", required=True)
    ap.add_argument("--image")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    ap.add_argument("--context-words", type=int, default=300)
    ap.add_argument("--long-words", type=int, default=1500, help="interleave: words of the long prompt")
    ap.add_argument("--only", default="parallel,followup,image,overhead,interleave")
    ap.add_argument("--json")
    a = ap.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out = {"model": a.model, "threads": a.threads, "cpu": cpu, "reps": a.reps}
    print(f"# {a.model}, {a.threads} threads, {cpu}, medians of {a.reps}")
    only = a.only.split(",")
    if "parallel" in only:
        bench_parallel(a, out)
    if "interleave" in only:
        bench_interleave(a, out)
    if "followup" in only:
        bench_followup(a, out)
    if "image" in only and a.image:
        bench_image(a, out)
    if "overhead" in only:
        bench_overhead(a, out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
