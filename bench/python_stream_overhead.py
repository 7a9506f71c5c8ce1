#!/usr/bin/env python3
"""The cost of the Python streaming loop per token, against `edgevl run` on the same binary,
prompt and threads, runs alternated (CLI, Python, CLI, ...), medians.

    PYTHONPATH=build/python python3 bench/python_stream_overhead.py --model v.evb \
        [--edgevl build/edgevl] [-n 128] [--reps 7] [--threads 2]

CLI: the runtime's own decode time per token (`run --json`: decode_tok_s, the tokens after the
first, greedy, EOS ignored). Python: wall time of `for chunk in m.chat(..., stream=True)` from
the first content chunk to the last chunk (the one with the statistics) over the tokens after
the first: the runtime's decode plus everything Python adds per token (the worker's hand-over,
the iterator, the chunk dicts). Each Python run is a fresh process, as each CLI run is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PROMPT = "Write a long story about a lighthouse keeper."


def child(model: str, n: int, threads: int) -> None:
    import edgevl

    m = edgevl.Model(model, threads=threads)
    msgs = [{"role": "user", "content": PROMPT}]
    t_first = t_end = 0.0
    stats = {}
    for chunk in m.chat(msgs, max_tokens=n, temperature=0, ignore_eos=True, stream=True):
        now = time.perf_counter()
        if not t_first and chunk["choices"][0]["delta"].get("content"):
            t_first = now
        if "edgevl" in chunk:
            stats = chunk["edgevl"]
            t_end = now
    tokens = stats["generated_tokens"]
    print(json.dumps({
        "ms_per_token": (t_end - t_first) * 1000.0 / (tokens - 1),
        "runtime_ms_per_token": 1000.0 / stats["decode_tok_s"],
        "tokens": tokens,
    }))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--edgevl", default="build/edgevl")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.model, a.n, a.threads)
        return
    cli, py, py_runtime = [], [], []
    for rep in range(a.reps + 1):  # the first pair warms the page cache
        out = subprocess.run(
            [a.edgevl, "run", "-m", a.model, "-p", PROMPT, "-n", str(a.n), "--temp", "0",
             "--ignore-eos", "--json", "-t", str(a.threads)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        c = 1000.0 / json.loads(out)["decode_tok_s"]
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--model", a.model, "-n", str(a.n),
             "--threads", str(a.threads)],
            check=True, capture_output=True, text=True, env=os.environ,
        ).stdout  # fmt: skip
        p = json.loads(out)
        if rep == 0:
            continue
        cli.append(c)
        py.append(p["ms_per_token"])
        py_runtime.append(p["runtime_ms_per_token"])
        print(f"rep {rep}: cli {c:.3f} ms/token, python loop {p['ms_per_token']:.3f} "
              f"(runtime inside python {p['runtime_ms_per_token']:.3f})", file=sys.stderr)
    mc, mp, mr = statistics.median(cli), statistics.median(py), statistics.median(py_runtime)
    ratios = [p / c for p, c in zip(py, cli)]
    print(json.dumps({
        "model": os.path.basename(a.model), "tokens": a.n, "threads": a.threads, "reps": a.reps,
        "cli_ms_per_token": round(mc, 4), "python_loop_ms_per_token": round(mp, 4),
        "runtime_in_python_ms_per_token": round(mr, 4),
        "overhead_pct_medians": round((mp / mc - 1) * 100, 2),
        "overhead_pct_median_of_pairs": round((statistics.median(ratios) - 1) * 100, 2),
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
