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

# edgevl preset -> the llama.cpp type it is compared with. "w4a8-q4head" is w4a8 with the token
# embedding / LM head in Q4 too (compile --overrides), as llama-quantize --pure writes q4_0: the
# same bytes per decoded token as the peer, where plain w4a8 keeps that matrix in Q8.
ALL_PAIRS = [("f16", "f16"), ("w8a8", "q8_0"), ("w4a8", "q4_0"), ("w4a8-q4head", "q4_0")]
PAIRS = ALL_PAIRS[:3]
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
            extra = []
            if q.endswith("-q4head"):
                extra = ["--overrides", q4_head_overrides(w, ckpt)]
            run([a.edgevl, "compile", ckpt, "-o", evb, "--quant", q.split("-")[0],
                 "--vision-max-patches", str(a.vision_max_patches), "-q"] + extra)
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
    for t in sorted({t for _, t in PAIRS} - {"f16"} | {"q8_0"}):  # q8_0: the vision runs' LLM
        ggufs[t] = os.path.join(w, f"{arch}-{t}.gguf")
        if not os.path.exists(ggufs[t]):
            run([os.path.join(a.llama_bin, "llama-quantize"), "--pure", ggufs["f16"], ggufs[t], t,
                 str(a.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ckpt, evbs, ggufs, mmproj


def q4_head_overrides(workdir, ckpt):
    """An overrides file storing the token embedding (and an untied LM head) in Q4."""
    with open(os.path.join(ckpt, "config.json")) as f:
        c = json.load(f)
    tied = c.get("tie_word_embeddings", c.get("text_config", {}).get("tie_word_embeddings", False))
    pats = [{"pattern": "*embed_tokens.weight", "type": "q4"}]
    if not tied:
        pats.append({"pattern": "*lm_head.weight", "type": "q4"})
    path = os.path.join(workdir, f"{os.path.basename(ckpt)}-q4head.json")
    with open(path, "w") as f:
        json.dump({"patterns": pats}, f)
    return path


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


def mtmd_figures(err):
    """What llama-mtmd-cli's log (-lv 4) says of its image: an image it encodes in several
    batches (InternVL's tiles) prints a line per batch, so encode time, image tokens and the
    image tokens' prefill are the sums of their lines."""
    enc = [float(x) for x in re.findall(r"mtmd batch encoding done in (\d+) ms", err)]
    if not enc:
        raise SystemExit(f"llama-mtmd-cli printed no encoding time:\n{err[-2000:]}")
    ntok = [int(x) for x in re.findall(r"n_tokens_batch = (\d+)", err)]
    dec = [float(x) for x in re.findall(r"image decoded \(batch \d+/\d+\) in (\d+) ms", err)]
    return {"encode_ms": sum(enc), "batches": len(enc),
            "image_tokens": sum(ntok) if ntok else None,
            "image_prefill_ms": sum(dec) if dec else None}


def vision_llama(a, gguf, mmproj, image):
    cmd = [os.path.join(a.llama_bin, "llama-mtmd-cli"), "-m", gguf, "--mmproj", mmproj,
           "--image", image, "-p", "Describe the picture.", "-n", "1", "-t", str(a.threads),
           "--temp", "0", "-lv", "4"]  # -lv 4: the image batch's token count is an info line
    return mtmd_figures(run(cmd, capture_output=True, text=True).stderr)


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
    ap.add_argument("--presets", default="f16,w8a8,w4a8",
                    help="edgevl presets to run, of " + ",".join(q for q, _ in ALL_PAIRS))
    ap.add_argument("--vision-max-patches", type=int, default=8192)
    ap.add_argument("--edgevl", default=os.path.join(ROOT, "build", "edgevl"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "peer", "work"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "peer", "vlm-latest.json"))
    ap.add_argument("--markdown", default="",
                    help="also write the report as markdown here (bench/results/<date>-....md)")
    ap.add_argument("--from-json", default="", help="render an earlier --out file, run nothing")
    ap.add_argument("--levels-md", default="",
                    help="with --from-json A.json,B.json,...: one table of the edgevl / llama.cpp "
                         "ratios of several runs (one per kernel level) into this markdown file")
    a = ap.parse_args()
    global PAIRS
    if a.levels_md:
        reports = []
        for path in a.from_json.split(","):
            with open(path) as f:
                reports.append((os.path.relpath(path, ROOT), json.load(f)))
        write_levels_table(reports, a.levels_md)
        return
    if a.from_json:
        with open(a.from_json) as f:
            report = json.load(f)
        PAIRS = [p for p in ALL_PAIRS if p[0] in report.get("presets", [q for q, _ in PAIRS])]
        if fill_costs(a, report):
            with open(a.from_json, "w") as f:
                json.dump(report, f, indent=1)
        print(render(report))
        if a.markdown:
            write_markdown(report, a.markdown)
        return
    PAIRS = [p for p in ALL_PAIRS if p[0] in a.presets.split(",")]
    if len(PAIRS) != len(a.presets.split(",")):
        ap.error(f"--presets: each of {a.presets} must be one of "
                 + ",".join(q for q, _ in ALL_PAIRS))
    a.depths = [int(x) for x in a.depths.split(",") if x]
    a.sizes = [s for s in a.sizes.split(",") if s]
    a.edgevl = os.path.abspath(a.edgevl)
    os.makedirs(a.workdir, exist_ok=True)
    imgs = images(a)

    log("measuring read bandwidth and SGEMM peak")
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu_model": cpu_model(), "kernel": platform.release(),
              "edgevl": subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %cs"],
                                       capture_output=True, text=True).stdout.strip(),
              "edgevl_isa": os.environ.get("EDGEVL_ISA") or "best",
              "llama_bin": os.path.abspath(a.llama_bin),
              "command": " ".join(sys.argv), "threads": a.threads, "reps": a.reps,
              "rounds": a.rounds, "presets": [q for q, _ in PAIRS], "pp": a.pp, "tg": a.tg,
              "depths": a.depths, "sizes": a.sizes,
              "vision_max_patches": a.vision_max_patches, "markdown": a.markdown,
              "bounds": machine.measure(os.path.dirname(a.out), a.threads), "archs": {}}
    for arch in a.archs.split(","):
        ckpt, evbs, ggufs, mmproj = prepare(a, arch)
        runs = {}
        for rnd in range(a.rounds):
            ran = set()  # a llama.cpp type paired with two presets runs once a round
            for q, t in PAIRS:
                log(f"{arch} round {rnd + 1}/{a.rounds}: edgevl {q}, llama.cpp {t}")
                # --image on f16 (an f16 tower, as llama.cpp's f16 mmproj) and w8a8 (the
                # integer presets' default bf16 tower; w4a8 has the same one)
                runs.setdefault(("edgevl", q), []).append(
                    bench_edgevl(a, evbs[q], q in ("f16", "w8a8")))
                if t not in ran:
                    runs.setdefault(("llama.cpp", t), []).append(bench_llama(a, ggufs[t]))
                    ran.add(t)
            for s, img in (imgs.items() if any(q in ("f16", "w8a8") for q, _ in PAIRS) else ()):
                for _ in range(a.reps):
                    runs.setdefault(("llama.cpp-vision", s), []).append(
                        vision_llama(a, ggufs["q8_0"], mmproj, img))
        report["archs"][arch] = summarize(a, runs)
        report["archs"][arch]["state_bytes"] = recurrent_state_bytes(ckpt)
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
    if not os.environ.get("EDGEVL_ISA"):  # name the level the CPU's best turned out to be
        isas = [row["isa"] for ar in report["archs"].values() for row in ar["edgevl"].values()]
        report["edgevl_isa"] = f"best ({isas[0]})" if isas else "best"
    report["bounds_after"] = machine.measure(os.path.dirname(a.out), a.threads)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print(render(report))
    if a.markdown:
        write_markdown(report, a.markdown)


def fill_costs(a, report):
    """Adds the cost-model figures (GFLOP per prefill token, bytes per decode token, which do not
    depend on speed) to a report made before they were kept: one short `edgevl bench` per .evb
    of the same names. Returns whether anything was added."""
    added = False
    for arch, ar in report["archs"].items():
        for q, row in ar["edgevl"].items():
            if all("tok_s" in t for n, t in row["tests"].items() if not n.startswith(("vision",
                                                                                     "ttft"))):
                continue
            evb = os.path.join(a.workdir, f"{arch}-{q}-vmp{report['vision_max_patches']}.evb")
            cmd = [a.edgevl, "bench", "-m", evb, "-t", str(report["threads"]), "--pp",
                   str(report["pp"]), "--tg", "1", "--depth",
                   ",".join(map(str, report["depths"])), "--reps", "1", "--json"]
            j = json.loads(run(cmd, capture_output=True, text=True).stdout)
            for t in j["tests"]:
                n = t["name"]
                if n.startswith("tg1@"):
                    n = f"tg{report['tg']}@" + n.split("@")[1]
                if n in row["tests"]:
                    for k in ("tok_s", "gflop_s", "bytes_per_token"):
                        if k in t:
                            row["tests"][n][k] = t[k]
            added = True
        if "state_bytes" not in ar:
            ar["state_bytes"] = recurrent_state_bytes(os.path.join(a.workdir, arch))
            added = True
    return added


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def recurrent_state_bytes(ckpt):
    """Bytes of the Gated DeltaNet state one decode step reads (and writes again): f32
    heads x k_dim x v_dim per linear-attention layer, in both engines. 0 for Qwen3-VL."""
    with open(os.path.join(ckpt, "config.json")) as f:
        c = json.load(f)
    t = c.get("text_config", c)
    kinds = t.get("layer_types") or []
    n = sum(1 for k in kinds if k == "linear_attention")
    if n == 0:
        return 0
    return n * t["linear_num_value_heads"] * t["linear_key_head_dim"] * t["linear_value_head_dim"] * 4


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
                for k in ("patches", "image_tokens", "gflop", "preprocess_ms", "bytes_per_token",
                          "prompt_tokens", "tok_s", "gflop_s"):
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
        for q in ("f16", "w8a8"):
            e = out["edgevl"].get(q, {}).get("tests", {}).get(f"vision@{s}")
            if e:
                out["ratios"][f"vision@{s} {q} tower"] = v["encode_ms"] / e["median"]
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
            for q, tower in (("f16", "f16"), ("w8a8", "bf16")):
                e = ar["edgevl"].get(q, {}).get("tests", {}).get(f"vision@{s}")
                if e:
                    lines.append(f"| vision {s}, edgevl {tower} tower ({e['patches']} patches; "
                                 f"llama.cpp {v['image_tokens']} tokens) | {e['median']:.0f} ms | "
                                 f"{v['encode_ms']:.0f} ms | {v['encode_ms'] / e['median']:.2f}x |")
    return "\n".join(lines)


def write_levels_table(reports, path):
    """One row per (level, model): the edgevl / llama.cpp ratios of every test, from the runs'
    JSON reports (each names its level, date, bounds and rounds)."""
    cols = [("w8a8/q8_0", "pp512"), ("w8a8/q8_0", "tg32@d0"), ("w8a8/q8_0", "tg32@d512"),
            ("w4a8/q4_0", "pp512"), ("w4a8/q4_0", "tg32@d0"), ("w4a8/q4_0", "tg32@d512"),
            ("w4a8-q4head/q4_0", "tg32@d0"), ("w4a8-q4head/q4_0", "tg32@d512")]
    head = ["level", "model"] + [f"{t} {p.split('/')[0]}" for p, t in cols] + [
        "vision 448x448", "vision 1344x896", "rounds", "read GB/s before / after",
        "SGEMM GFLOP/s before / after", "source"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for src, r in reports:
        level = r.get("edgevl_isa", "best")
        th = r["threads"]
        after = r.get("bounds_after", {})
        bw = f"{r['bounds'][f'read_gb_s_{th}t']:.0f} / " + (
            f"{after[f'read_gb_s_{th}t']:.0f}" if after else "-")
        sg = f"{r['bounds']['sgemm']['gflop_s']:.0f} / " + (
            f"{after['sgemm']['gflop_s']:.0f}" if after else "-")
        for arch, ar in r["archs"].items():
            cells = [level, arch]
            for pair, test in cols:
                v = ar["ratios"].get(pair, {}).get(test)
                cells.append(f"{v:.2f}x" if v else "-")
            for size in ("448x448", "1344x896"):
                v = ar["ratios"].get(f"vision@{size} w8a8 tower")
                cells.append(f"{v:.2f}x" if v else "-")
            md = r.get("markdown")
            cells += [str(r["rounds"]), bw, sg,
                      f"[{os.path.basename(md)}]({os.path.basename(md)})" if md
                      else f"`{os.path.basename(src)}`"]
            out.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    log(f"wrote {path}")


def write_markdown(report, path):
    """The dated results file: machine, commands, bounds, and per family every figure with its
    fraction of the bound and the ratio to llama.cpp."""
    th = report["threads"]
    bw = max(report["bounds"][f"read_gb_s_{th}t"],
             report.get("bounds_after", {}).get(f"read_gb_s_{th}t", 0))
    peak = max(report["bounds"]["sgemm"]["gflop_s"],
               report.get("bounds_after", {}).get("sgemm", {}).get("gflop_s", 0))
    out = [f"# Qwen3.5 / Qwen3-VL against llama.cpp, {report.get('cpu_model', '?')}", "",
           f"- Date {report['date']}, edgevl {report.get('edgevl', '?')}, kernel level "
           f"{report.get('edgevl_isa', 'best')} "
           f"({'native, not forced' if report.get('edgevl_isa', 'best').startswith('best') else 'forced'}), "
           f"{th} threads, "
           f"{report['rounds']} rounds x {report['reps']} reps (medians of all samples).",
           f"- Command: `{report.get('command', 'bench/peer/vlm_peer.py')}`.",
           f"- llama.cpp: llama-cpp-python 0.3.36's vendored llama.cpp (2026-10-01), tools from "
           f"`{os.path.relpath(report.get('llama_bin', 'build/peer-src/llama-build/bin'), ROOT)}` "
           f"(bench/peer/llama_tools.sh; `-LEVEL`: built with that level's instruction sets only).",
           f"- Bounds (higher of before / after the runs): streaming read {bw:.1f} GB/s, "
           f"OpenBLAS SGEMM {peak:.0f} GFLOP/s ({th} threads).",
           "- Decode bytes per token: the engine's weights (llama.cpp: the GGUF's tensors; "
           "tied embeddings are read whole as the output matrix) + KV at the mean depth + the "
           "Gated DeltaNet state read and written (Qwen3.5).",
           "- Vision: edgevl `bench --image` (random RGB image, preprocessing not timed, tower "
           "compiled with --vision-max-patches so both engines encode the same patches); "
           "llama.cpp `llama-mtmd-cli` one image per process, its `mtmd batch encoding` time.",
           ""]
    for arch, ar in report["archs"].items():
        st = ar.get("state_bytes", 0)
        out += [f"## {arch}", "",
                "| test | edgevl | figure | of bound | llama.cpp | figure | of bound | edgevl / "
                "llama.cpp |", "|---|---|---|---|---|---|---|---|"]
        for q, t in PAIRS:
            ev, ll = ar["edgevl"].get(q), ar["llama.cpp"].get(t)
            if not ev or not ll:
                continue
            for n in ll["tests"]:
                if n not in ev["tests"]:
                    continue
                e, l = ev["tests"][n], ll["tests"][n]
                if "tok_s" not in e:  # a report from before these keys were kept
                    fe = fl = float("nan")
                    unit = ""
                elif n.startswith("pp"):
                    gft = e["gflop_s"] / e["tok_s"]  # GFLOP per token of the compiled graphs
                    fe, fl = gft * e["median"] / peak, gft * l["median"] / peak
                    unit = "SGEMM"
                else:
                    kv = e["bytes_per_token"] - ev["decode_weight_bytes"]
                    be = e["bytes_per_token"] + 2 * st
                    bl = ll["model_size"] + kv + 2 * st
                    fe, fl = be * e["median"] / 1e9 / bw, bl * l["median"] / 1e9 / bw
                    unit = "read BW"
                out.append(f"| {n} | {q} | {e['median']:.1f} tok/s | {fe:.2f} {unit} | {t} | "
                           f"{l['median']:.1f} tok/s | {fl:.2f} | {e['median'] / l['median']:.2f}x |")
        for s, v in ar["vision"].items():
            for q, tower in (("f16", "f16"), ("w8a8", "bf16")):
                e = ar["edgevl"].get(q, {}).get("tests", {}).get(f"vision@{s}")
                if not e:
                    continue
                fe = e["gflop"] / (e["median"] / 1e3) / peak
                fl = e["gflop"] / (v["encode_ms"] / 1e3) / peak
                out.append(f"| vision {s} ({e['patches']} patches; llama.cpp "
                           f"{v['image_tokens']} tokens) | {q} ({tower} tower) | "
                           f"{e['median']:.0f} ms | {fe:.2f} SGEMM | f16 mmproj | "
                           f"{v['encode_ms']:.0f} ms | {fl:.2f} | {v['encode_ms'] / e['median']:.2f}x |")
        for q in ("f16", "w8a8"):
            for n, e in ar["edgevl"].get(q, {}).get("tests", {}).items():
                if n.startswith("ttft@"):
                    s = n.split("@")[1]
                    v = ar["vision"].get(s, {})
                    ll = (f"{v['encode_ms'] + v['image_prefill_ms']:.0f} ms (encode + image "
                          f"tokens' prefill, no question)" if v.get("image_prefill_ms") else "-")
                    out.append(f"| {n} ({e.get('prompt_tokens')} prompt tokens) | {q} | "
                               f"{e['median']:.0f} ms | | q8_0 | {ll} | | |")
        out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
