#!/usr/bin/env python3
"""edgevl beside llama.cpp on the Qwen-VL families (Qwen3.5, Qwen3-VL): same shapes, threads, run.

llama.cpp's own tools are the peer here, built from the llama.cpp that llama-cpp-python vendors
(bench/peer/llama_tools.sh): its converter writes the GGUF and the vision projector (mmproj) of
the `edgevl synth` checkpoint (bench/peer/llama_convert.py), llama-quantize makes q8_0 / q4_0
(--pure: every matrix in that type, as bench/peer/to_gguf.py writes the other families),
llama-bench times pp / tg at each depth, llama-mtmd-cli one image per process (its log's "mtmd
batch encoding done in N ms" is the vision encoder alone; "image decoded in N ms" the image
tokens' prefill).

edgevl: `edgevl bench --json` on .evb files compiled from the same checkpoint, the vision tower
compiled wide enough (--vision-max-patches) for the largest image, so that both engines encode
the same patches (checked: the image-token counts of both are in the report).

Each round runs every config once, engines alternating; figures are medians over all samples.
Bounds as in peer.py (machine.py): streaming read bandwidth for decode, the OpenBLAS SGEMM peak
for prefill and vision, measured before and after the runs.

  vlm_peer.py --llama-bin DIR --llama-src DIR [--archs qwen3.5-0.8b,qwen3-vl-2b] [--rounds 2]
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import machine  # noqa: E402

# edgevl preset -> the llama.cpp type it is compared with.
PAIRS = [("f16", "f16"), ("w8a8", "q8_0"), ("w4a8", "q4_0")]
# The pre-tokenizer llama.cpp's converter is told (llama_convert.py) and whether the checkpoint
# family has multi-token-prediction layers the converter expects (synth writes none).
FAMILY = {"qwen3.5": {"pre": "qwen35", "no_mtp": True}, "qwen3-vl": {"pre": "qwen2", "no_mtp": False}}


def log(msg):
    print(f"[vlm-peer] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def family(arch):
    return next(f for f in FAMILY if arch.startswith(f + "-"))


def median(xs):
    return statistics.median(xs) if xs else None


def prepare(a, arch):
    w = a.workdir
    ckpt = os.path.join(w, arch)
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        run([a.edgevl, "synth", "--arch", arch, "--out", ckpt], stderr=subprocess.DEVNULL)
    evbs = {}
    for q, _ in PAIRS:
        evb = os.path.join(w, f"{arch}-{q}-vmp{a.vision_max_patches}.evb")
        if not os.path.exists(evb) or os.path.getmtime(evb) < os.path.getmtime(a.edgevl):
            run([a.edgevl, "compile", ckpt, "-o", evb, "--quant", q, "--vision-max-patches",
                 str(a.vision_max_patches), "-q"])
        evbs[q] = evb
    f = FAMILY[family(arch)]
    conv = [sys.executable, os.path.join(HERE, "llama_convert.py"), "--llama-src", a.llama_src,
            "--pre", f["pre"], ckpt, "--outtype", "f16"] + (["--no-mtp"] if f["no_mtp"] else [])
    ggufs = {"f16": os.path.join(w, f"{arch}-f16.gguf")}
    mmproj = os.path.join(w, f"{arch}-mmproj-f16.gguf")
    if not os.path.exists(ggufs["f16"]):
        run(conv + ["--outfile", ggufs["f16"]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(mmproj):
        run(conv + ["--mmproj", "--outfile", mmproj], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
    for _, t in PAIRS[1:]:
        ggufs[t] = os.path.join(w, f"{arch}-{t}.gguf")
        if not os.path.exists(ggufs[t]):
            run([os.path.join(a.llama_bin, "llama-quantize"), "--pure", ggufs["f16"], ggufs[t], t,
                 str(a.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ckpt, evbs, ggufs, mmproj


def images(a):
    from PIL import Image
    import numpy as np
    rng = np.random.default_rng(1)
    out = {}
    for s in a.sizes:
        wd, ht = map(int, s.split("x"))
        path = os.path.join(a.workdir, f"noise-{s}.png")
        if not os.path.exists(path):
            Image.fromarray(rng.integers(0, 256, (ht, wd, 3), dtype=np.uint8)).save(path)
        out[s] = path
    return out


def bench_edgevl(a, evb, image):
    cmd = [a.edgevl, "bench", "-m", evb, "-t", str(a.threads), "--pp", str(a.pp), "--tg",
           str(a.tg), "--depth", ",".join(map(str, a.depths)), "--reps", str(a.reps), "--json"]
    if image:
        cmd += ["--image", "--image-size", ",".join(a.sizes)]
    j = json.loads(run(cmd, capture_output=True, text=True).stdout)
    tests = {}
    for t in j["tests"]:
        tests[t["name"]] = t
    return {"tests": tests, "model": j["model"], "kernels": j["kernels"], "isa": j["isa"],
            "peak_rss_mb": j["peak_rss_mb"], "load_ms": j["load_ms"]}


def bench_llama(a, gguf):
    cmd = [os.path.join(a.llama_bin, "llama-bench"), "-m", gguf, "-t", str(a.threads), "-p",
           str(a.pp), "-n", str(a.tg), "-d", ",".join(map(str, a.depths)), "-r", str(a.reps),
           "-o", "json"]
    rows = json.loads(run(cmd, capture_output=True, text=True).stdout)
    tests = {}
    for r in rows:
        if r["n_prompt"] > 0 and r["n_gen"] == 0 and r["n_depth"] == 0:
            tests[f"pp{r['n_prompt']}"] = {"samples": r["samples_ts"]}
        elif r["n_gen"] > 0 and r["n_prompt"] == 0:
            tests[f"tg{r['n_gen']}@d{r['n_depth']}"] = {"samples": r["samples_ts"]}
    return {"tests": tests, "model_size": rows[0]["model_size"], "cpu_info": rows[0]["cpu_info"],
            "build_commit": rows[0].get("build_commit"), "type_k": rows[0]["type_k"]}


def vision_llama(a, gguf, mmproj, image):
    cmd = [os.path.join(a.llama_bin, "llama-mtmd-cli"), "-m", gguf, "--mmproj", mmproj,
           "--image", image, "-p", "Describe the picture.", "-n", "1", "-t", str(a.threads),
           "--temp", "0", "-lv", "4"]  # -lv 4: the image batch's token count is an info line
    err = run(cmd, capture_output=True, text=True).stderr
    enc = re.search(r"mtmd batch encoding done in (\d+) ms", err)
    dec = re.search(r"image decoded \(batch 1/1\) in (\d+) ms", err)
    ntok = re.search(r"n_tokens_batch = (\d+)", err)
    if not enc:
        raise SystemExit(f"llama-mtmd-cli printed no encoding time:\n{err[-2000:]}")
    return {"encode_ms": float(enc.group(1)), "image_prefill_ms": float(dec.group(1)) if dec else None,
            "image_tokens": int(ntok.group(1)) if ntok else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--archs", default="qwen3.5-0.8b,qwen3-vl-2b")
    ap.add_argument("--llama-bin", required=True, help="llama.cpp build's bin/ (llama-bench ...)")
    ap.add_argument("--llama-src", required=True, help="llama.cpp source (its converter)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--depths", default="0,512")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sizes", default="448x448,1344x896")
    ap.add_argument("--vision-max-patches", type=int, default=8192)
    ap.add_argument("--edgevl", default=os.path.join(ROOT, "build", "edgevl"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "peer", "work"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "peer", "vlm-latest.json"))
    a = ap.parse_args()
    a.depths = [int(x) for x in a.depths.split(",") if x]
    a.sizes = [s for s in a.sizes.split(",") if s]
    a.edgevl = os.path.abspath(a.edgevl)
    os.makedirs(a.workdir, exist_ok=True)
    imgs = images(a)

    log("measuring read bandwidth and SGEMM peak")
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "kernel": platform.release(), "threads": a.threads, "reps": a.reps,
              "rounds": a.rounds, "pp": a.pp, "tg": a.tg, "depths": a.depths, "sizes": a.sizes,
              "vision_max_patches": a.vision_max_patches,
              "bounds": machine.measure(os.path.dirname(a.out), a.threads), "archs": {}}
    for arch in a.archs.split(","):
        ckpt, evbs, ggufs, mmproj = prepare(a, arch)
        runs = {}
        for rnd in range(a.rounds):
            for q, t in PAIRS:
                log(f"{arch} round {rnd + 1}/{a.rounds}: edgevl {q}, llama.cpp {t}")
                runs.setdefault(("edgevl", q), []).append(bench_edgevl(a, evbs[q], q == "f16"))
                runs.setdefault(("llama.cpp", t), []).append(bench_llama(a, ggufs[t]))
            for s, img in imgs.items():
                for _ in range(a.reps):
                    runs.setdefault(("llama.cpp-vision", s), []).append(
                        vision_llama(a, ggufs["q8_0"], mmproj, img))
        report["archs"][arch] = summarize(a, runs)
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
    report["bounds_after"] = machine.measure(os.path.dirname(a.out), a.threads)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print(render(report))


def summarize(a, runs):
    """Medians per engine/type/test, with the raw samples, and edgevl / llama.cpp ratios."""
    out = {"edgevl": {}, "llama.cpp": {}, "vision": {}, "ratios": {}}
    for (eng, typ), rs in runs.items():
        if eng == "edgevl":
            row = {"decode_weight_bytes": rs[0]["model"]["decode_weight_bytes"],
                   "kernels": rs[0]["kernels"], "isa": rs[0]["isa"],
                   "peak_rss_mb": median([r["peak_rss_mb"] for r in rs]), "tests": {}}
            for name in rs[0]["tests"]:
                t0 = rs[0]["tests"][name]
                key = "ms_per_image" if name.startswith("vision@") else (
                    "ms" if name.startswith("ttft") else "tok_s")
                xs = [x for r in rs for x in r["tests"][name]["samples"]]
                e = {"median": median(xs), "unit": key, "samples": xs}
                for k in ("patches", "image_tokens", "gflop", "preprocess_ms", "bytes_per_step",
                          "prompt_tokens"):
                    if k in t0:
                        e[k] = t0[k]
                row["tests"][name] = e
            out["edgevl"][typ] = row
        elif eng == "llama.cpp":
            row = {"model_size": rs[0]["model_size"], "build_commit": rs[0]["build_commit"],
                   "tests": {}}
            for name in rs[0]["tests"]:
                xs = [x for r in rs for x in r["tests"][name]["samples"]]
                row["tests"][name] = {"median": median(xs), "unit": "tok_s", "samples": xs}
            out["llama.cpp"][typ] = row
        else:
            out["vision"][typ] = {
                "encode_ms": median([r["encode_ms"] for r in rs]),
                "encode_samples": [r["encode_ms"] for r in rs],
                "image_prefill_ms": median([r["image_prefill_ms"] for r in rs
                                            if r["image_prefill_ms"] is not None]),
                "image_tokens": rs[0]["image_tokens"]}
    for q, t in PAIRS:
        ev, ll = out["edgevl"].get(q), out["llama.cpp"].get(t)
        if ev and ll:
            out["ratios"][f"{q}/{t}"] = {n: ev["tests"][n]["median"] / ll["tests"][n]["median"]
                                         for n in ll["tests"] if n in ev["tests"]}
    for s, v in out["vision"].items():
        e = out["edgevl"].get("f16", {}).get("tests", {}).get(f"vision@{s}")
        if e:
            out["ratios"][f"vision@{s}"] = v["encode_ms"] / e["median"]
    return out


def render(report):
    bw = report["bounds"][f"read_gb_s_{report['threads']}t"]
    peak = report["bounds"]["sgemm"]["gflop_s"]
    lines = [f"bounds: read {bw:.1f} GB/s, SGEMM {peak:.0f} GFLOP/s ({report['threads']} threads)"]
    for arch, ar in report["archs"].items():
        lines.append(f"\n## {arch}")
        lines.append("| test | edgevl | llama.cpp | ratio |")
        lines.append("|---|---|---|---|")
        for q, t in PAIRS:
            ev, ll = ar["edgevl"].get(q), ar["llama.cpp"].get(t)
            if not ev or not ll:
                continue
            for n, r in ar["ratios"].get(f"{q}/{t}", {}).items():
                lines.append(f"| {n} {q} vs {t} | {ev['tests'][n]['median']:.2f} tok/s | "
                             f"{ll['tests'][n]['median']:.2f} tok/s | {r:.2f}x |")
        for s, v in ar["vision"].items():
            e = ar["edgevl"]["f16"]["tests"].get(f"vision@{s}")
            if e:
                lines.append(f"| vision {s} (edgevl {e['patches']} patches, llama.cpp "
                             f"{v['image_tokens']} tokens) | {e['median']:.0f} ms | "
                             f"{v['encode_ms']:.0f} ms | {v['encode_ms'] / e['median']:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
