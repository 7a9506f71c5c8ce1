#!/usr/bin/env python3
"""The cost of the Python streaming loop, against `edgevl run` on the same binary, prompt,
tokens and threads, runs alternated (CLI, Python, CLI, ...), medians.

    PYTHONPATH=build/python python3 bench/python_stream_overhead.py --model v.evb \
        [--edgevl build/edgevl] [-n 256] [--reps 9] [--threads 2]

Both generate n tokens greedily with EOS ignored, in a fresh process each (the model already in
the page cache: a first untimed pair warms it). CLI: the runtime's own time, `run --json`'s
ttft_ms plus its decode (tokens after the first at decode_tok_s). Python: the wall time of
`for chunk in m.chat(..., stream=True)` from the call to the last chunk (the one with the
statistics): message parsing, the worker thread, the runtime, the hand-over of every piece, the
chunk dicts. Also reported: the runtime's own time inside the Python process (the same two
figures from the last chunk's statistics), which separates what the Python layer adds from
differences between two processes.
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
    stats = {}
    t0 = time.perf_counter()
    for chunk in m.chat(msgs, max_tokens=n, temperature=0, ignore_eos=True, stream=True):
        stats = chunk.get("edgevl", stats)
    wall = (time.perf_counter() - t0) * 1000.0
    print(json.dumps({"wall_ms": wall, "runtime_ms": runtime_ms(stats), "tokens": stats["generated_tokens"]}))


def runtime_ms(j: dict) -> float:
    """Time to first token plus the decode of the tokens after it, as the runtime reports."""
    return j["ttft_ms"] + (j["generated_tokens"] - 1) * 1000.0 / j["decode_tok_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--edgevl", default="build/edgevl")
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("--reps", type=int, default=9)
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
        j = json.loads(out)
        j["generated_tokens"] = len(j["tokens"])
        c = runtime_ms(j)
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--model", a.model, "-n", str(a.n),
             "--threads", str(a.threads)],
            check=True, capture_output=True, text=True, env=os.environ,
        ).stdout  # fmt: skip
        p = json.loads(out)
        if rep == 0:
            continue
        cli.append(c)
        py.append(p["wall_ms"])
        py_runtime.append(p["runtime_ms"])
        print(f"rep {rep}: cli {c:.1f} ms, python loop {p['wall_ms']:.1f} ms (runtime inside "
              f"python {p['runtime_ms']:.1f} ms) for {p['tokens']} tokens", file=sys.stderr)
    mc, mp, mr = statistics.median(cli), statistics.median(py), statistics.median(py_runtime)
    inproc = [w / r for w, r in zip(py, py_runtime)]
    pairs = [w / c for w, c in zip(py, cli)]
    print(json.dumps({
        "model": os.path.basename(a.model), "tokens": a.n, "threads": a.threads, "reps": a.reps,
        "cpu": cpu_model(),
        "cli_ms": round(mc, 2), "python_loop_ms": round(mp, 2), "runtime_in_python_ms": round(mr, 2),
        "cli_ms_per_token": round(mc / a.n, 4), "python_ms_per_token": round(mp / a.n, 4),
        "overhead_vs_cli_pct_medians": round((mp / mc - 1) * 100, 2),
        "overhead_vs_cli_pct_median_of_pairs": round((statistics.median(pairs) - 1) * 100, 2),
        "python_layer_pct_in_process": round((statistics.median(inproc) - 1) * 100, 2),
        "python_layer_us_per_token": round((statistics.median([w - r for w, r in zip(py, py_runtime)])) * 1000 / a.n, 1),
    }, indent=1))  # fmt: skip


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
