#!/usr/bin/env python3
"""One row per ISA level this CPU runs: vision, prefill, decode and TTFT of the internvl2-1b
synth shape as fractions of that level's physical bound (issue: "fast on every x86 edge CPU").

  build/venv-peer/bin/python bench/level_table.py [--threads 2] [--reps 3] [--levels a,b]

Bounds, measured here in the same run, before and after every row (bandwidth drifts 2x within a
day on shared machines; each row's fractions use its own):
  - the register-only peak of the instruction each level's GEMMs are built on
    (build/bench/isa_peak, all threads): vision on the bf16 tower against max(f32 FMA,
    vdpbf16ps) where the level has bf16 dot products, else f32 FMA at its vector width; the
    int8 tower and pp512 against the level's int8 dot product (vpdpbusd zmm / ymm, or
    vpmaddubsw + vpmaddwd);
  - the streaming read bandwidth (bench/peer/stream_read.c) for decode;
  - fp32 SGEMM of numpy's OpenBLAS (and with OPENBLAS_CORETYPE=Haswell: its AVX2 kernels).
Vision FLOPs and prefill FLOPs are the counts `edgevl bench` reports (2 per multiply-add).
Writes a markdown table to stdout and the raw figures to build/level-table/latest.json.
Needs build/edgevl and build/bench/isa_peak; numpy for the SGEMM column (the peer venv has it).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "peer"))
import machine  # noqa: E402

LEVELS = ["scalar", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "avx512-bf16", "amx"]
FLOAT_PEAK = {  # isa_peak rows whose max bounds the bf16 tower at each level
    "avx2": ["f32 fma ymm"], "avx2-vnni": ["f32 fma ymm"], "avx512": ["f32 fma zmm"],
    "avx512-vnni": ["f32 fma zmm"], "avx512-bf16": ["f32 fma zmm", "bf16 vdpbf16ps zmm"],
}
INT8_PEAK = {
    "avx2": "int8 vpmaddubsw+vpmaddwd ymm", "avx512": "int8 vpmaddubsw+vpmaddwd zmm",
    "avx2-vnni": "int8 vpdpbusd ymm (AVX-VNNI)", "avx512-vnni": "int8 vpdpbusd zmm",
    "avx512-bf16": "int8 vpdpbusd zmm",
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def bench(edgevl, evb, level, threads, reps, extra):
    out = subprocess.run([edgevl, "bench", "-m", evb, "-t", str(threads), "--reps", str(reps),
                          "--isa", level, "--json"] + extra, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    j = json.loads(out.stdout)
    return {t["name"]: t for t in j["tests"]} | {"_kernels": j["kernels"], "_cpu": j}, ""


def measure_peaks(threads):
    out = run([os.path.join(ROOT, "build", "bench", "isa_peak"), str(threads), "--json"])
    return {p["name"]: p["gops"] for p in json.loads(out)["peaks"]}


def row_bounds(raw, r):
    """The bounds a row is measured against: those read just before and after it (the machine's
    bandwidth drifts by 2x within a day), the higher of the two; a run saved before rows had
    their own falls back to the run's."""
    b = r.get("bounds")
    if not b:
        return raw["peaks_gops"], raw["read_gb_s"], f"{raw['read_gb_s']:.0f}"
    before, after = b["before"], b["after"]
    peaks = {k: max(v, after["peaks_gops"].get(k, 0)) for k, v in before["peaks_gops"].items()}
    bw = max(before["read_gb_s"], after["read_gb_s"])
    return peaks, bw, f"{before['read_gb_s']:.0f} / {after['read_gb_s']:.0f}"


def render(raw, threads):
    sgemm, sgemm_avx2 = raw["sgemm_gflop_s"], raw["sgemm_avx2_gflop_s"]

    def frac(x, peak):
        return f"{x / peak:.2f}" if peak else "-"

    def vs(x, ref):
        return f"{x / ref:.2f}x" if ref else "-"

    rows = []
    for level, r in raw["levels"].items():
        if "refused" in r:
            rows.append(f"| {level} | refused: {r['refused']} |||||")
            continue
        llm, v8 = r["w8a8"], r["int8_tower"]
        peaks, bw, bw_cell = row_bounds(raw, r)
        fpeak = max(peaks.get(n, 0) for n in FLOAT_PEAK.get(level, ["-"]))
        ipeak = peaks.get(INT8_PEAK.get(level, "-"), 0)
        vis, vis8, pp = llm["vision"], v8["vision"], llm["pp512"]
        d0, d512 = llm["tg64@d0"], llm["tg64@d512"]
        sg = sgemm_avx2 if level.startswith("avx2") else sgemm
        rows.append(
            f"| {level} | {vis['ms_per_tile']:.0f} ({vis['gflop_s']:.0f} GFLOP/s, "
            f"{frac(vis['gflop_s'], fpeak)} of peak, {vs(vis['gflop_s'], sg)} SGEMM) "
            f"| {vis8['ms_per_tile']:.0f} ({vis8['gflop_s']:.0f} GOP/s, "
            f"{frac(vis8['gflop_s'], ipeak)} of int8 peak) "
            f"| {pp['tok_s']:.0f} ({pp['gflop_s']:.0f} GOP/s, {frac(pp['gflop_s'], ipeak)} of "
            f"int8 peak, {vs(pp['gflop_s'], sg)} SGEMM) "
            f"| {d0['tok_s']:.1f} / {d512['tok_s']:.1f} ({d0['gb_s'] / bw:.2f} / "
            f"{d512['gb_s'] / bw:.2f} of read bw) | {llm['ttft']['ms']:.0f} "
            f"| {bw_cell} | {fpeak:.0f} / {ipeak:.0f} |")
    cpu = next((v["w8a8"]["_cpu"] for v in raw["levels"].values() if "w8a8" in v), {})
    print(f"CPU: {cpu.get('cpu_model', '?')} [{cpu.get('cpu', '?')}], {threads} threads; "
          f"at the start: read bandwidth {raw['read_gb_s']:.1f} GB/s; SGEMM "
          f"{sgemm and round(sgemm)} GFLOP/s (OPENBLAS_CORETYPE=Haswell: "
          f"{sgemm_avx2 and round(sgemm_avx2)}); peaks (G ops/s): "
          + ", ".join(f"{k} {v:.0f}" for k, v in raw["peaks_gops"].items()))
    print("Each row's fractions use the bounds read just before and after it (the higher of the "
          "two), shown in its last columns.")
    print()
    print("| level | vision ms/tile, bf16 tower | vision ms/tile, int8 tower | pp512 tok/s "
          "| tg64 d0 / d512 tok/s | ttft ms | read GB/s before / after | float / int8 peak "
          "G ops/s |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--levels", default=",".join(LEVELS[1:]))
    ap.add_argument("--edgevl", default=os.path.join(ROOT, "build", "edgevl"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "level-table"))
    ap.add_argument("--from-json", default="",
                    help="render a saved latest.json again with freshly measured isa_peak peaks")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            raw = json.load(f)
        raw["peaks_gops"] = measure_peaks(a.threads)
        render(raw, a.threads)
        return
    os.makedirs(a.work, exist_ok=True)
    src = os.path.join(a.work, "src")
    if not os.path.exists(os.path.join(src, "config.json")):
        run([a.edgevl, "synth", "--arch", "internvl2-1b", "--out", src])
        vocab = os.path.join(ROOT, "..", "shared", "data", "qwen2-tokenizer")
        if os.path.isdir(vocab):  # realistic prompt lengths (see bench/image_bench.sh)
            for f in ("vocab.json", "merges.txt"):
                shutil.copy(os.path.join(vocab, f), src)
    evbs = {}
    for name, extra in (("w8a8", []), ("w8a8-int8tower", ["--vision-quant", "w8a8"])):
        evbs[name] = os.path.join(a.work, name + ".evb")
        if not os.path.exists(evbs[name]):
            run([a.edgevl, "compile", src, "-o", evbs[name], "--quant", "w8a8", "-q",
                 "-t", str(a.threads)] + extra)

    peaks = measure_peaks(a.threads)
    bw = machine.read_bandwidth(os.path.join(ROOT, "build"), a.threads)
    try:
        sgemm = machine.gemm_peak(a.threads)["gflop_s"]
        env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
        sgemm_avx2 = json.loads(run([sys.executable, "-c", machine.GEMM_CHILD], env=dict(
            env, OPENBLAS_NUM_THREADS=str(a.threads))))["gflop_s"]
    except Exception as e:  # no numpy: the other columns stand
        print(f"(SGEMM not measured: {e})", file=sys.stderr)
        sgemm = sgemm_avx2 = None

    raw = {"peaks_gops": peaks, "read_gb_s": bw, "sgemm_gflop_s": sgemm,
           "sgemm_avx2_gflop_s": sgemm_avx2, "levels": {}}
    def bounds_now():
        return {"read_gb_s": machine.read_bandwidth(os.path.join(ROOT, "build"), a.threads),
                "peaks_gops": measure_peaks(a.threads)}

    for level in a.levels.split(","):
        before = bounds_now()
        llm, err = bench(a.edgevl, evbs["w8a8"], level, a.threads, a.reps,
                         ["--pp", "512", "--tg", "64", "--depth", "0,512", "--image"])
        if llm is None:
            raw["levels"][level] = {"refused": err.splitlines()[-1] if err else "?"}
            continue
        v8, _ = bench(a.edgevl, evbs["w8a8-int8tower"], level, a.threads, a.reps,
                      ["--pp", "16", "--tg", "1", "--image"])
        raw["levels"][level] = {"w8a8": llm, "int8_tower": v8,
                                "bounds": {"before": before, "after": bounds_now()}}
    render(raw, a.threads)
    with open(os.path.join(a.work, "latest.json"), "w") as f:
        json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
