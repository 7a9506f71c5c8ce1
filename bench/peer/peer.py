#!/usr/bin/env python3
"""edgevl side by side with llama.cpp on the same shapes, threads and run (DESIGN.md section 7).

For each --arch: `edgevl synth` a random-weight hub checkpoint of the real shape, compile it to
.evb (f16) and write the same weights as GGUF (f16, q8_0, q4_0, bench/peer/to_gguf.py). Then
every engine config runs in its own process (load time and peak RSS are its own): edgevl
through `edgevl bench --json`, llama.cpp through bench/peer/llama_worker.py. Each test is one
warm-up plus --reps timed runs per process, --rounds processes per config (configs interleaved
round by round); figures are medians of all timed samples.

Bounds: pp as achieved GFLOP/s / SGEMM peak; tg as achieved GB/s / streaming read bandwidth
(both measured here by machine.py, same thread count). Output: a table on stdout,
build/peer/latest.json (every figure and ratio), bench/results/<date>-<cpu>.md (snapshot).
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import machine  # noqa: E402

LLAMA_TYPES = ["f16", "q8_0", "q4_0"]
# edgevl weight type -> the llama.cpp type it is compared with.
EDGEVL_ROWS = [("f16", "f16"), ("w8a8", "q8_0"), ("w4a8", "q4_0")]


def log(msg):
    print(f"[peer {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def cpu_info():
    model, flags = "unknown", ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].strip()
    return model, flags


def edgevl_version(exe):
    """The tree the edgevl binary was most likely built from (HEAD, dirty or not) and its
    build time: benchmarks of a moving tree need both."""
    def git(*args):
        r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
        return r.stdout.strip()
    return {"binary": exe, "binary_mtime": time.strftime(
                "%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(exe))),
            "head": git("rev-parse", "--short", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def llm_shape(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        c = json.load(f)
    d, nh = c["hidden_size"], c["num_attention_heads"]
    nkv = c.get("num_key_value_heads", nh)
    hd = d // nh
    q, kv = nh * hd, nkv * hd
    layer = d * (q + 2 * kv) + q * d + 3 * d * c["intermediate_size"]
    return {"layers": c["num_hidden_layers"], "hidden": d, "n_heads": nh, "n_kv_heads": nkv,
            "head_dim": hd, "ffn": c["intermediate_size"], "vocab": c["vocab_size"],
            "matmul_params_per_token": layer * c["num_hidden_layers"],
            "head_params": c["vocab_size"] * d,
            "tied": bool(c.get("tie_word_embeddings", False))}


def pp_flops(s, n):
    # 2 * (matmul params per token) * n + lm_head once + causal attention
    # (QK^T and PV: 4 * n_heads * head_dim * kv_len per query and layer, kv_len = 1..n).
    return (2 * s["matmul_params_per_token"] * n + 2 * s["head_params"]
            + 4 * s["layers"] * s["n_heads"] * s["head_dim"] * n * (n + 1) / 2)


def kv_bytes(s, kv_len, elem=2):
    # K and V of every layer at kv_len positions (both engines keep an f16 KV cache).
    return 2 * s["layers"] * s["n_kv_heads"] * s["head_dim"] * kv_len * elem


def median(xs):
    return statistics.median(xs) if xs else None


def prepare(a, arch):
    tag = arch + (f"-L{a.layers}" if a.layers else "")
    ckpt = os.path.join(a.workdir, tag)
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        cmd = [a.edgevl, "synth", "--arch", arch, "--out", ckpt]
        if a.layers:
            cmd += ["--layers", str(a.layers)]
        run(cmd, stderr=subprocess.DEVNULL)
    evbs = {}
    for q in a.edgevl_types:
        evb = os.path.join(a.workdir, f"{tag}-{q}.evb")
        # Recompiled when older than the edgevl binary: the .evb format may have moved on.
        if not os.path.exists(evb) or os.path.getmtime(evb) < os.path.getmtime(a.edgevl):
            run([a.edgevl, "compile", ckpt, "-o", evb, "--quant", q, "-q"])
        evbs[q] = evb
    ggufs = {}
    if not a.no_llama:
        for t in a.types:
            path = os.path.join(a.workdir, f"{tag}-{t}.gguf")
            meta = path + ".json"
            if not os.path.exists(meta):
                out = run([sys.executable, os.path.join(HERE, "to_gguf.py"), ckpt, path,
                           "--type", t], capture_output=True, text=True)
                with open(meta, "w") as f:
                    f.write(out.stdout)
            with open(meta) as f:
                ggufs[t] = json.load(f)
            ggufs[t]["path"] = path
    return tag, ckpt, evbs, ggufs


def bench_edgevl(a, evb):
    cmd = [a.edgevl, "bench", "-m", evb, "-t", str(a.threads), "--pp", str(a.pp), "--tg",
           str(a.tg), "--depth", ",".join(map(str, a.depths)), "--reps", str(a.reps), "--json"]
    out = run(cmd, capture_output=True, text=True)
    return json.loads(out.stdout)


def bench_llama(a, gguf):
    cmd = [sys.executable, os.path.join(HERE, "llama_worker.py"), gguf, "--threads",
           str(a.threads), "--ctx", str(a.ctx), "--pp", str(a.pp), "--tg", str(a.tg),
           "--depth", *map(str, a.depths), "--reps", str(a.reps)]
    out = run(cmd, capture_output=True, text=True)
    j = json.loads(out.stdout.strip().splitlines()[-1])
    # Which buffers/kernels llama.cpp used (its load log goes to stderr).
    j["log_buffers"] = sorted(set(re.findall(r"(\S+) (?:model )?buffer size", out.stderr)))
    j["log_repack"] = [ln.strip() for ln in out.stderr.splitlines() if "repack" in ln.lower()][:5]
    return j


def collect(runs, test):
    xs = []
    for r in runs:
        for t in r["tests"]:
            if t["name"] == test:
                xs += t["samples"]
    return xs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--archs", default="qwen2-0.5b")
    ap.add_argument("--layers", type=int, default=0, help="override layer count (0: real)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--depths", default="0,512")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--types", default=",".join(LLAMA_TYPES), help="llama.cpp GGUF types")
    ap.add_argument("--edgevl-types", default="f16",
                    help="edgevl --quant presets to compile and run (e.g. f16,w8a8,w4a8)")
    ap.add_argument("--edgevl", default=os.path.join(ROOT, "build", "edgevl"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "peer", "work"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "peer", "latest.json"))
    ap.add_argument("--snapshot-dir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--no-snapshot", action="store_true")
    ap.add_argument("--no-llama", action="store_true",
                    help="skip llama.cpp (e.g. llama-cpp-python failed to build)")
    ap.add_argument("--llama-error", default="", help="why llama.cpp is skipped (for the report)")
    ap.add_argument("--from-json", default="",
                    help="re-render the table and snapshot of an earlier latest.json, run nothing")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            report = json.load(f)
        write_outputs(a, report, report_tests(report))
        return
    a.depths = [int(x) for x in a.depths.split(",") if x != ""]
    a.types = [t for t in a.types.split(",") if t]
    a.edgevl_types = [t for t in a.edgevl_types.split(",") if t]
    os.makedirs(a.workdir, exist_ok=True)

    cpu_model, cpu_flags = cpu_info()
    log("measuring read bandwidth and SGEMM peak")
    bounds = machine.measure(os.path.dirname(a.out), a.threads)
    bw = bounds[f"read_gb_s_{a.threads}t"]
    peak = bounds["sgemm"]["gflop_s"]
    tests = [f"pp{a.pp}"] + [f"tg{a.tg}@d{d}" for d in a.depths]

    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu_model": cpu_model, "cpu_flags": cpu_flags, "kernel": platform.release(),
              "threads": a.threads, "reps": a.reps, "rounds": a.rounds, "bounds": bounds,
              "llama_error": a.llama_error or None,
              "llama_cmake_args": os.environ.get("LLAMA_CMAKE_ARGS"),
              "edgevl_isa": os.environ.get("EDGEVL_ISA") or None,
              "edgevl": edgevl_version(a.edgevl), "archs": {}}
    for arch in a.archs.split(","):
        tag, ckpt, evbs, ggufs = prepare(a, arch)
        shape = llm_shape(ckpt)
        configs = [("edgevl", q, evbs[q]) for q in evbs]
        configs += [("llama.cpp", t, ggufs[t]["path"]) for t in ggufs]
        runs = {c[:2]: [] for c in configs}
        for rnd in range(a.rounds):
            for eng, typ, path in configs:
                log(f"{tag}: {eng} {typ} round {rnd + 1}/{a.rounds}")
                r = bench_edgevl(a, path) if eng == "edgevl" else bench_llama(a, path)
                runs[(eng, typ)].append(r)
        rows = []
        for eng, typ, path in configs:
            rs = runs[(eng, typ)]
            if eng == "edgevl":
                wbytes = rs[0]["model"]["decode_weight_bytes"]
            else:
                wbytes = ggufs[typ]["decode_bytes"]
            row = {"engine": eng, "type": typ, "path": path, "weight_bytes_per_token": wbytes,
                   "load_ms": median([r["load_ms"] for r in rs]),
                   "peak_rss_mb": median([r["peak_rss_mb"] for r in rs]), "tests": {}}
            if eng == "edgevl":
                row["kernels"] = rs[0]["kernels"]
                row["cpu_features"] = rs[0]["cpu"]
            else:
                row["system_info"] = rs[0]["system_info"]
                row["rss_before_load_mb"] = median([r["rss_before_load_mb"] for r in rs])
                row["buffers"] = rs[0]["log_buffers"]
                row["llama_cpp_python"] = rs[0]["llama_cpp_python"]
            for t in tests:
                xs = collect(rs, t)
                m = median(xs)
                e = {"tok_s": m, "samples": xs}
                if t.startswith("pp"):
                    gf = pp_flops(shape, a.pp) / (a.pp / m) / 1e9
                    e.update(gflop_s=gf, frac_sgemm_peak=gf / peak)
                else:
                    d = int(t.split("@d")[1])
                    per_tok = wbytes + kv_bytes(shape, d + (a.tg + 1) / 2)
                    e.update(bytes_per_token=per_tok, gb_s=per_tok * m / 1e9,
                             frac_read_bw=per_tok * m / 1e9 / bw,
                             bound_tok_s=bw * 1e9 / per_tok)
                row["tests"][t] = e
            rows.append(row)
        # Ratios edgevl / llama.cpp for each edgevl type against its llama.cpp counterpart.
        ratios = {}
        by = {(r["engine"], r["type"]): r for r in rows}
        for etype, ltype in EDGEVL_ROWS:
            ev, ll = by.get(("edgevl", etype)), by.get(("llama.cpp", ltype))
            key = f"edgevl_{etype}/llama_{ltype}"
            if ev is None or ll is None:
                ratios[key] = None
                continue
            ratios[key] = {t: ev["tests"][t]["tok_s"] / ll["tests"][t]["tok_s"] for t in tests}
            ratios[key]["load_ms"] = ev["load_ms"] / ll["load_ms"]
            ratios[key]["peak_rss_mb"] = ev["peak_rss_mb"] / ll["peak_rss_mb"]
        report["archs"][tag] = {"shape": shape, "rows": rows, "ratios": ratios}
        # Written after every shape so a long run that is stopped keeps what it measured.
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)

    # Bounds again after the runs: on a shared machine the larger reading is the physical one
    # (the fractions below use the bounds measured before the runs; both are kept).
    report["bounds_after"] = machine.measure(os.path.dirname(a.out), a.threads)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    write_outputs(a, report, tests)


def report_tests(report):
    ar = next(iter(report["archs"].values()))
    return list(ar["rows"][0]["tests"].keys())


def write_outputs(a, report, tests):
    cpu_model = report["cpu_model"]
    text = render(report, tests)
    print(text)
    if not a.no_snapshot:
        os.makedirs(a.snapshot_dir, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", cpu_model.lower()).strip("-")
        # Virtual machines often name only the vendor ("AMD EPYC"): a Zen 3 and a Zen 5 snapshot
        # of one day must not overwrite each other, so an existing file gets a numbered sibling.
        if report.get("edgevl_isa"):  # a forced level (run_peer.sh PEER_ISA)
            slug += "-" + re.sub(r"[^a-z0-9]+", "-", report["edgevl_isa"].lower())
        snap = os.path.join(a.snapshot_dir, f"{report['date'][:10]}-{slug}.md")
        n = 2
        while os.path.exists(snap):
            snap = os.path.join(a.snapshot_dir, f"{report['date'][:10]}-{slug}-{n}.md")
            n += 1
        with open(snap, "w") as f:
            f.write(snapshot(report, text))
        log(f"wrote {a.out} and {snap}")


def fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def render(report, tests):
    out = []
    bw_key = [k for k in report["bounds"] if k.startswith("read_gb_s_") and k != "read_gb_s_1t"][0]
    b = report["bounds"]
    out.append(f"bounds: read {b['read_gb_s_1t']:.1f} GB/s (1 thread), {b[bw_key]:.1f} GB/s "
               f"({report['threads']} threads); SGEMM {b['sgemm']['gflop_s']:.0f} GFLOP/s "
               f"({report['threads']} threads)")
    for tag, ar in report["archs"].items():
        out.append("")
        out.append(f"### {tag} ({report['threads']} threads, medians of "
                   f"{report['reps'] * report['rounds']} runs)")
        out.append("")
        hdr = ["engine", "type"] + [f"{t} tok/s" for t in tests] + ["load ms", "peak RSS MB"]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "|".join("---" for _ in hdr) + "|")
        by = {(r["engine"], r["type"]): r for r in ar["rows"]}
        lines = []
        for etype, _ in EDGEVL_ROWS:
            lines.append(("edgevl", etype, by.get(("edgevl", etype))))
        for t in LLAMA_TYPES:
            if ("llama.cpp", t) in by:
                lines.append(("llama.cpp", t, by[("llama.cpp", t)]))
        for eng, typ, r in lines:
            cells = [eng, typ]
            for t in tests:
                if r is None:
                    cells.append("n/a")
                    continue
                e = r["tests"][t]
                frac = e.get("frac_sgemm_peak", e.get("frac_read_bw"))
                cells.append(f"{e['tok_s']:.1f} ({frac * 100:.0f}% of bound)")
            cells += [fmt(r and r["load_ms"]), fmt(r and r["peak_rss_mb"])]
            out.append("| " + " | ".join(cells) + " |")
        for key, rat in ar["ratios"].items():
            cells = [f"ratio {key}", ""]
            if rat is None:
                cells += ["n/a"] * (len(tests) + 2)
            else:
                cells += [f"{rat[t]:.2f}x" for t in tests]
                cells += [f"{rat['load_ms']:.2f}x", f"{rat['peak_rss_mb']:.2f}x"]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        out.append("bound = SGEMM peak for pp (FLOPs = 2*params*N + lm_head + causal attention), "
                   "read bandwidth for tg (bytes = weights read per token + f16 KV at the mean "
                   "depth)")
    if report.get("llama_error"):
        out.append(f"\nllama.cpp skipped: {report['llama_error']}")
    return "\n".join(out)


def snapshot(report, text):
    rows = [r for ar in report["archs"].values() for r in ar["rows"]]
    ev = next((r for r in rows if r["engine"] == "edgevl"), None)
    ll = next((r for r in rows if r["engine"] == "llama.cpp"), None)
    s = [f"# edgevl vs llama.cpp — {report['date']}", "",
         f"- CPU: {report['cpu_model']} (kernel {report['kernel']}), {report['threads']} threads",
         f"- CPU flags: `{report['cpu_flags']}`",
         f"- bounds measured in the same run: `{json.dumps(report['bounds'])}`"]
    if ev:
        s.append("- edgevl kernel paths: `" + " ".join(f"{k}={v}" for k, v in
                                                        ev["kernels"].items()) + "`")
    if report.get("edgevl"):
        e = report["edgevl"]
        s.append(f"- edgevl: `{e['binary']}` built {e['binary_mtime']}, tree at {e['head']}"
                 f"{' (+ uncommitted changes)' if e['dirty'] else ''}")
    if report.get("edgevl_isa"):
        s.append(f"- edgevl level forced with EDGEVL_ISA={report['edgevl_isa']} (the SGEMM "
                 f"bound's OpenBLAS kernel is the `architecture` in the bounds below)")
    if report.get("llama_cmake_args"):
        s.append(f"- llama.cpp built with CMAKE_ARGS=`{report['llama_cmake_args']}`")
    if ll:
        s.append(f"- llama.cpp (llama-cpp-python {ll['llama_cpp_python']}) system info: "
                 f"`{ll['system_info']}`")
        s.append("- llama.cpp weight buffers per type: " + "; ".join(
            f"{r['type']}: {', '.join(r['buffers'])}" for r in rows if r["engine"] == "llama.cpp"))
        s.append(f"- llama.cpp peak RSS includes the Python interpreter, numpy and the bindings "
                 f"(~{ll['rss_before_load_mb']:.0f} MB before the model loads)")
    s += ["- Random-weight checkpoints of the real shapes (`edgevl synth`); weight values do not "
          "change speed. GGUF q8_0/q4_0 are \"pure\" (every 2-D weight, embedding included).",
          "- The machine is shared and noisy (2 vCPUs under KVM, other work running): every "
          "figure is a median, and run-to-run spread of 10-30% is normal here. Samples are in "
          "build/peer/latest.json.",
          "- edgevl rows marked n/a were not run (not compiled with that --quant preset in "
          "this run).", "", text, ""]
    return "\n".join(s)


if __name__ == "__main__":
    main()
