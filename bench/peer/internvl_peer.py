#!/usr/bin/env python3
"""edgevl beside llama.cpp (libmtmd) and OpenVINO on the InternVL2-1B shape: same shapes,
threads and run, at one kernel level per run (issue 38, part 2).

The checkpoint is `edgevl synth --arch internvl2-1b` (InternViT-300M + MLP projector +
Qwen2-0.5B, random weights: fair for speed), in the original remote-code layout for edgevl and
llama.cpp, and in transformers' native layout (`--hf-names`, the same shapes) for OpenVINO.

- edgevl: `compile --quant w8a8` (its default bf16 tower), `--quant w4a8`, `--quant w8a8
  --vision-quant w8a8` (the int8 tower) and `--quant w8a8 --vision-quant f16` (the f16 tower);
  `bench --image --pp 512 --tg 64 --depth 0 --json [--isa LEVEL]` gives vision ms per 448x448
  tile, ttft (1 tile + a question of <= 30 tokens, end to end), pp512 and tg64 tok/s; the photo
  (1344x896: InternVL's dynamic tiling makes 3x2 tiles + a thumbnail = 7 tiles, 1792 image
  tokens) is `edgevl run -i PHOTO -n 1 --json`: vision = tiles x vision_ms_per_tile.
- llama.cpp: its own converter (bench/peer/llama_convert.py) writes the LLM GGUF (f16, then
  llama-quantize --pure q8_0 / q4_0) and the mmproj (--mmproj, F16 and Q8_0) from the same
  checkpoint (a preprocessor_config.json with InternVL's ImageNet mean / std is added: the
  converter needs it and synth does not write it). llama-bench -p 512 -n 64 for pp / tg;
  llama-mtmd-cli -n 1 for the images: encode = the sum of its "mtmd batch encoding done in N ms"
  lines (libmtmd tiles InternVL images as InternVL does, up to the GGUF's max tiles, 12 here;
  the token count is the sum of its n_tokens_batch lines), TTFT = the wall time between the CLI's
  end of setup ("For normal use cases" warning) and its llama_perf print, from its log's time
  stamps (the chat-templated prompt, image encode, every chunk's prefill and one sampled token).
- OpenVINO (bench/peer/ov_worker.py in build/venv-ov, bench/peer/ov_venv.sh): the tower +
  pixel shuffle + projector from transformers' InternVLModel through openvino.convert_model at
  f32, int8 weights (NNCF compress_weights) and static int8 (NNCF quantize, calibrated on the
  real photos), timed per tile (batch 1) and for the photo's 7 tiles (one batch of 7, as
  InternVL's own pipeline runs them); GenAI's LLMPipeline on the Qwen2 LLM exported by
  optimum-intel at int8 / int4 weights: pp512 = 512 / TTFT, decode = 1000 / TPOT. OpenVINO's
  TTFT is composed: its best vision setting's tile + GenAI's TTFT of a prompt of as many tokens
  as edgevl's ttft prompt (no VLM pipeline: the same token count, measured, added).

Levels: `--isa LEVEL` runs edgevl at that level (`bench --isa`), llama.cpp from the build of
that level (bench/peer/llama_tools.sh, PEER_ISA=LEVEL), and OpenVINO under
ONEDNN_MAX_CPU_ISA=AVX2 with f32 inference precision for the AVX2 levels (bf16 is no AVX2
instruction; with bf16 the plugin finds no Softmax kernel at AVX2). That restriction is partial:
the execution graph's primitive types, kept in the report, show oneDNN's kernels at AVX2
(jit_avx2, brgemm_avx2) while the plugin's own MVN (LayerNorm) kernels stay jit_avx512 and the
f32 FullyConnected layers go to MLAS (gemm_mlas_f32), which picks its kernels by CPUID. GenAI's
int8 / int4 LLM does not run at all under ONEDNN_MAX_CPU_ISA=AVX2 (its weight-compressed
FullyConnected finds no primitive), so its rows are always native and labelled so.

Each round runs every config once, engines alternating (edgevl, llama.cpp, OpenVINO); figures
are medians over all samples. Bounds beside them (bench/peer/machine.py: streaming read
bandwidth, OpenBLAS SGEMM; `build/bench/isa_peak 2 --json`: the instruction peaks), measured
before and after the runs.

  internvl_peer.py [--isa avx2] [--rounds 2] [--out build/peer/internvl-avx2.json]
  internvl_peer.py --from-json native.json,avx2.json --markdown bench/results/DATE-...md
  internvl_peer.py --from-json native.json,avx2.json --levels-md table.md
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import machine  # noqa: E402
from vlm_peer import bench_llama, cpu_model, median, mtmd_figures  # noqa: E402

# edgevl configs: compile flags, what `bench` runs, whether the photo is timed.
EDGEVL = {
    "w8a8": (["--quant", "w8a8"], "full", True),  # default: bf16 tower
    "w4a8": (["--quant", "w4a8"], "llm", False),
    "int8-tower": (["--quant", "w8a8", "--vision-quant", "w8a8"], "image", True),
    "f16-tower": (["--quant", "w8a8", "--vision-quant", "f16"], "image", False),
}
OV_VISION = ("f32", "int8w", "int8")
OV_LLM = ("int8", "int4")
MMPROJ = ("f16", "q8_0")
GGUF = ("q8_0", "q4_0")
AVX2_LEVELS = ("avx2", "avx2-vnni")
MEAN_STD = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225],
            "size": {"height": 448, "width": 448}}


def log(msg):
    print(f"[internvl-peer] {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None, **kw):
    log(" ".join(cmd))
    return subprocess.run(cmd, check=True, env=env, **kw)


def prepare(a):
    w, n = a.workdir, a.name
    ckpt, hf = os.path.join(w, n), os.path.join(w, n + "-hf")
    shape = []
    if a.layers:
        shape += ["--layers", str(a.layers)]
    if a.vision_layers:
        shape += ["--vision-layers", str(a.vision_layers)]
    for d, extra in ((ckpt, []), (hf, ["--hf-names"])):
        if not os.path.exists(os.path.join(d, "config.json")):
            run([a.edgevl, "synth", "--arch", "internvl2-1b", "--out", d] + shape + extra,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pre = os.path.join(ckpt, "preprocessor_config.json")
    if not os.path.exists(pre):
        with open(pre, "w") as f:
            json.dump(MEAN_STD, f)
    evbs = {}
    for name, (flags, _, _) in EDGEVL.items():
        evb = os.path.join(w, f"{n}-{name}.evb")
        if not os.path.exists(evb) or os.path.getmtime(evb) < os.path.getmtime(a.edgevl):
            run([a.edgevl, "compile", ckpt, "-o", evb, "-q"] + flags)
        evbs[name] = evb
    conv = [sys.executable, os.path.join(HERE, "llama_convert.py"), "--llama-src", a.llama_src,
            "--pre", "qwen2", ckpt]
    ggufs = {"f16": os.path.join(w, f"{n}-f16.gguf")}
    if not os.path.exists(ggufs["f16"]):
        run(conv + ["--outtype", "f16", "--outfile", ggufs["f16"]], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
    for t in GGUF:
        ggufs[t] = os.path.join(w, f"{n}-{t}.gguf")
        if not os.path.exists(ggufs[t]):
            run([os.path.join(a.llama_bin, "llama-quantize"), "--pure", ggufs["f16"], ggufs[t], t,
                 str(a.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mmproj = {}
    for t in MMPROJ:
        mmproj[t] = os.path.join(w, f"{n}-mmproj-{t}.gguf")
        if not os.path.exists(mmproj[t]):
            run(conv + ["--mmproj", "--outtype", t, "--outfile", mmproj[t]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ovdir = os.path.join(w, f"{n}-ov")
    if not os.path.exists(os.path.join(ovdir, "vision-int8.xml")):
        run([a.ov_python, os.path.join(HERE, "ov_worker.py"), "export-vision", "--ckpt", hf,
             "--out", ovdir, "--calib", a.calib], stdout=subprocess.DEVNULL)
    ovllm = {}
    for t in OV_LLM:
        ovllm[t] = os.path.join(w, f"{n}-ov-llm-{t}")
        if not os.path.exists(os.path.join(ovllm[t], "openvino_model.xml")):
            run([a.ov_python, os.path.join(HERE, "ov_worker.py"), "export-llm", "--ckpt", ckpt,
                 "--out", ovllm[t], "--weight-format", t], stdout=subprocess.DEVNULL)
    return evbs, ggufs, mmproj, ovdir, ovllm


def images(a):
    """A 448x448 random tile and the 1344x896 photo (a real photo resized, in the work dir)."""
    from PIL import Image
    import numpy as np
    tile = os.path.join(a.workdir, "noise-448x448.png")
    if not os.path.exists(tile):
        rng = np.random.default_rng(1)
        Image.fromarray(rng.integers(0, 256, (448, 448, 3), dtype=np.uint8)).save(tile)
    photo = os.path.join(a.workdir, "photo-1344x896.png")
    if not os.path.exists(photo):
        Image.open(a.photo).convert("RGB").resize((1344, 896), Image.BICUBIC).save(photo)
    return tile, photo


def isa_args(a):
    return ["--isa", a.isa] if a.isa else []


def bench_edgevl(a, name, evb):
    _, what, _ = EDGEVL[name]
    pp, tg = (a.pp, a.tg) if what in ("full", "llm") else (32, 4)
    cmd = [a.edgevl, "bench", "-m", evb, "-t", str(a.threads), "--pp", str(pp), "--tg", str(tg),
           "--depth", "0", "--reps", str(a.reps), "--json"] + isa_args(a)
    if what != "llm":
        cmd.append("--image")
    j = json.loads(run(cmd, capture_output=True, text=True).stdout)
    out = {"isa": j["isa"], "kernels": j["kernels"], "peak_rss_mb": j["peak_rss_mb"]}
    for t in j["tests"]:
        if t["name"] == "vision":
            out["vision_ms"] = t["samples"]
            out["vision_gflop_s"] = t["gflop_s"]
        elif t["name"] == "ttft":
            out["ttft_ms"] = t["samples"]
            out["ttft_prompt_tokens"] = t["prompt_tokens"]
        elif what != "image" and t["name"] == f"pp{a.pp}":
            out["pp"] = t["samples"]
            out["pp_gflop_s"] = t["gflop_s"]
        elif what != "image" and t["name"] == f"tg{a.tg}@d0":
            out["tg"] = t["samples"]
            out["tg_bytes_per_token"] = t["bytes_per_token"]
    return out


def photo_edgevl(a, evb, photo):
    cmd = [a.edgevl, "run", "-m", evb, "-t", str(a.threads), "-i", photo, "-p",
           "Describe the image in detail.", "-n", "1", "--temp", "0", "--json"] + isa_args(a)
    j = json.loads(run(cmd, capture_output=True, text=True).stdout)
    return {"vision_ms": j["tiles"] * j["vision_ms_per_tile"], "tiles": j["tiles"],
            "image_tokens": j["image_tokens"], "ttft_ms": j["ttft_ms"],
            "prompt_tokens": j["prompt_tokens"], "preprocess_ms": j["preprocess_ms"]}


def mtmd(a, gguf, mmproj, image):
    cmd = [os.path.join(a.llama_bin, "llama-mtmd-cli"), "-m", gguf, "--mmproj", mmproj,
           "--image", image, "-p", "Describe the image in detail.", "-n", "1", "-t",
           str(a.threads), "--temp", "0", "-lv", "4"]
    err = run(cmd, capture_output=True, text=True).stderr
    figures = mtmd_figures(err)

    def stamp(pat):  # the log's time stamp (m.ss.mmm.uuu) of the first line matching pat, in ms
        m = re.search(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) \w [^\n]*" + pat, err, re.M)
        return (int(m.group(1)) * 60000 + int(m.group(2)) * 1000 + int(m.group(3))
                + int(m.group(4)) / 1000) if m else None

    t0, t1 = stamp("For normal use cases"), stamp("llama_perf_context_print")
    pe = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", err)
    return figures | {"ttft_ms": (t1 - t0) if t0 is not None and t1 is not None else None,
                      "prompt_tokens": int(pe.group(2)) if pe else None}


def ov_env(a):
    env = dict(os.environ)
    if a.isa in AVX2_LEVELS:
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    return env


def ov_vision(a, xml, batch):
    cmd = [a.ov_python, os.path.join(HERE, "ov_worker.py"), "bench-vision", "--xml", xml,
           "--threads", str(a.threads), "--batch", str(batch), "--reps", str(a.reps)]
    if a.isa in AVX2_LEVELS:
        cmd += ["--precision", "f32"]
    p = subprocess.run(cmd, env=ov_env(a), capture_output=True, text=True)
    log(" ".join(cmd))
    if p.returncode:  # e.g. no primitive for a layer under ONEDNN_MAX_CPU_ISA: kept, not fatal
        err = [ln for ln in p.stderr.splitlines() if ln.strip()]
        return {"error": (err[-1] if err else f"exit {p.returncode}")[:400]}
    return json.loads(p.stdout)


def ov_llm(a, d, ttft_tokens):
    # Never under ONEDNN_MAX_CPU_ISA: GenAI's compressed FullyConnected has no primitive there.
    cmd = [a.ov_python, os.path.join(HERE, "ov_worker.py"), "bench-llm", "--dir", d, "--threads",
           str(a.threads), "--pp", str(a.pp), "--tg", str(a.tg), "--reps", str(a.reps),
           "--ttft-tokens", str(ttft_tokens)]
    return json.loads(run(cmd, capture_output=True, text=True).stdout)


def bounds(a):
    b = machine.measure(os.path.dirname(a.out), a.threads)
    b["loadavg"] = open("/proc/loadavg").read().split()[:3]
    b["time"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if os.path.exists(a.isa_peak):
        b["isa_peak"] = json.loads(run([a.isa_peak, str(a.threads), "--json"],
                                       capture_output=True, text=True).stdout)
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    build = os.path.join(ROOT, "build")
    ap.add_argument("--isa", default="", help="kernel level (avx2, ...); empty: the CPU's best")
    ap.add_argument("--peer-build", default=build,
                    help="the build dir holding peer-src/ (llama.cpp builds) and venv-ov/")
    ap.add_argument("--llama-bin", default="", help="default: PEER_BUILD/peer-src/llama-build"
                    "[-LEVEL]/bin")
    ap.add_argument("--llama-src", default="", help="default: the llama.cpp of llama-cpp-python "
                    "0.3.36 under PEER_BUILD/peer-src")
    ap.add_argument("--ov-python", default="", help="default: PEER_BUILD/venv-ov/bin/python")
    ap.add_argument("--edgevl", default=os.path.join(build, "edgevl"))
    ap.add_argument("--isa-peak", default=os.path.join(build, "bench", "isa_peak"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layers", type=int, default=0, help="cut-down LLM (smoke runs)")
    ap.add_argument("--vision-layers", type=int, default=0,
                    help="cut-down tower (smoke runs; >= 4: llama.cpp's converter maps the "
                         "projector's mlp1.3 through the block count)")
    shared = os.path.join(os.path.dirname(ROOT), "shared", "data", "images")
    ap.add_argument("--photo", default=os.path.join(shared, "image4.jpg"),
                    help="a real photo, resized to 1344x896 into the work dir")
    ap.add_argument("--calib", default=",".join(os.path.join(shared, f"image{i}.jpg")
                                                for i in range(1, 6)),
                    help="static-int8 calibration images for OpenVINO, comma-separated")
    ap.add_argument("--workdir", default=os.path.join(build, "peer", "internvl-work"))
    ap.add_argument("--out", default="", help="default build/peer/internvl-LEVEL.json")
    ap.add_argument("--from-json", default="", help="A.json,B.json: render earlier runs")
    ap.add_argument("--markdown", default="", help="with --from-json: the study's markdown")
    ap.add_argument("--levels-md", default="", help="with --from-json: the per-level table")
    a = ap.parse_args()
    if a.from_json:
        reports = []
        for p in a.from_json.split(","):
            with open(p) as f:
                r = json.load(f)
            if "summary" not in r:  # a run stopped after some rounds: its rounds so far
                tok = next((x["ttft_prompt_tokens"] for rs in r["raw"]["edgevl"].values()
                            for x in rs if "ttft_prompt_tokens" in x), 0)
                r["summary"] = summarize(r["raw"], tok)
                r["partial"] = True
            reports.append(r)
        if a.levels_md:
            with open(a.levels_md, "w") as f:
                f.write(levels_table(reports))
        if a.markdown:
            with open(a.markdown, "w") as f:
                f.write(study_markdown(reports))
        if not a.levels_md and not a.markdown:
            print(levels_table(reports))
        return
    level = a.isa or "native"
    a.llama_bin = a.llama_bin or os.path.join(a.peer_build, "peer-src",
                                              "llama-build" + (f"-{a.isa}" if a.isa else ""), "bin")
    a.llama_src = a.llama_src or os.path.join(a.peer_build, "peer-src", "llama_cpp_python-0.3.36",
                                              "vendor", "llama.cpp")
    a.ov_python = a.ov_python or os.path.join(a.peer_build, "venv-ov", "bin", "python")
    a.out = a.out or os.path.join(build, "peer", f"internvl-{level}.json")
    a.edgevl = os.path.abspath(a.edgevl)
    for p in (os.path.join(a.llama_bin, "llama-mtmd-cli"), a.ov_python, a.edgevl):
        if not os.path.exists(p):
            ap.error(f"{p} is missing (llama_tools.sh / ov_venv.sh / the edgevl build)")
    a.name = "internvl2-1b" + (f"-L{a.layers}" if a.layers else "") + (
        f"-V{a.vision_layers}" if a.vision_layers else "")
    os.makedirs(a.workdir, exist_ok=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    tile, photo = images(a)
    evbs, ggufs, mmproj, ovdir, ovllm = prepare(a)

    log("bounds before")
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cpu_model": cpu_model(), "level": level, "name": a.name,
              "edgevl": subprocess.run([a.edgevl, "--version"], capture_output=True,
                                       text=True).stdout.strip(),
              "edgevl_bin": a.edgevl, "llama_bin": a.llama_bin, "command": " ".join(sys.argv),
              "threads": a.threads, "reps": a.reps, "rounds": a.rounds, "pp": a.pp, "tg": a.tg,
              "photo": os.path.basename(a.photo) + " resized to 1344x896",
              "ov_forced": ("ONEDNN_MAX_CPU_ISA=AVX2, INFERENCE_PRECISION_HINT=f32 (vision only)"
                            if a.isa in AVX2_LEVELS else ""),
              "bounds": bounds(a)}
    raw = {"edgevl": {}, "edgevl_photo": {}, "llama": {}, "mtmd": {}, "ov_vision": {},
           "ov_photo": {}, "ov_llm": {}}
    ttft_tokens = 0
    for rnd in range(a.rounds):
        log(f"round {rnd + 1}/{a.rounds}: edgevl")
        for name, evb in evbs.items():
            r = bench_edgevl(a, name, evb)
            raw["edgevl"].setdefault(name, []).append(r)
            ttft_tokens = ttft_tokens or r.get("ttft_prompt_tokens", 0)
            if EDGEVL[name][2]:
                raw["edgevl_photo"].setdefault(name, []).append(photo_edgevl(a, evb, photo))
        report["raw"] = raw
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
        log(f"round {rnd + 1}/{a.rounds}: llama.cpp")
        for t in GGUF:
            raw["llama"].setdefault(t, []).append(bench_llama(
                argparse.Namespace(llama_bin=a.llama_bin, threads=a.threads, pp=a.pp, tg=a.tg,
                                   depths=[0], reps=a.reps), ggufs[t]))
        for t in MMPROJ:
            for img, key in ((tile, "tile"), (photo, "photo")):
                for _ in range(a.reps):
                    raw["mtmd"].setdefault(f"{t} {key}", []).append(
                        mtmd(a, ggufs["q8_0"], mmproj[t], img))
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
        log(f"round {rnd + 1}/{a.rounds}: OpenVINO")
        for v in OV_VISION:
            xml = os.path.join(ovdir, f"vision-{v}.xml")
            raw["ov_vision"].setdefault(v, []).append(ov_vision(a, xml, 1))
            raw["ov_photo"].setdefault(v, []).append(ov_vision(a, xml, 7))
        for t in OV_LLM:
            raw["ov_llm"].setdefault(t, []).append(ov_llm(a, ovllm[t], ttft_tokens))
        report["raw"] = raw
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
    log("bounds after")
    report["bounds_after"] = bounds(a)
    report["end"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    report["summary"] = summarize(raw, ttft_tokens)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    log(f"wrote {a.out}")
    print(levels_table([report]))


def summarize(raw, ttft_tokens):
    """Medians of every figure. Vision and TTFT in ms (lower is better), pp / tg in tok/s."""
    s = {"edgevl": {}, "llama.cpp": {}, "openvino": {}, "counts": {}}
    for name, rs in raw["edgevl"].items():
        row = {}
        for k in ("vision_ms", "ttft_ms", "pp", "tg"):
            xs = [x for r in rs for x in r.get(k, [])]
            if xs:
                row[k] = median(xs)
        row["isa"] = rs[0]["isa"]
        if name in raw["edgevl_photo"]:
            ps = raw["edgevl_photo"][name]
            row["photo_ms"] = median([p["vision_ms"] for p in ps])
            s["counts"][f"edgevl {name} photo"] = {"tiles": ps[0]["tiles"],
                                                   "image_tokens": ps[0]["image_tokens"]}
        if "ttft_prompt_tokens" in rs[0]:
            s["counts"]["edgevl ttft prompt tokens"] = rs[0]["ttft_prompt_tokens"]
        s["edgevl"][name] = row
    for t, rs in raw["llama"].items():
        s["llama.cpp"][t] = {
            "pp": median([x for r in rs for x in r["tests"].get("pp512", {}).get("samples", [])]),
            "tg": median([x for r in rs for x in r["tests"].get("tg64@d0", {}).get("samples", [])])}
    for key, rs in raw["mtmd"].items():
        t, img = key.split()
        row = s["llama.cpp"].setdefault(f"mmproj {t}", {})
        row["vision_ms" if img == "tile" else "photo_ms"] = median([r["encode_ms"] for r in rs])
        if img == "tile":
            row["ttft_ms"] = median([r["ttft_ms"] for r in rs if r["ttft_ms"] is not None])
            s["counts"]["llama.cpp ttft prompt tokens"] = rs[0]["prompt_tokens"]
        s["counts"][f"llama.cpp mmproj {t} {img}"] = {"batches": rs[0]["batches"],
                                                      "image_tokens": rs[0]["image_tokens"]}
    for v, rs in raw["ov_vision"].items():
        if any("error" in r for r in rs) or any("error" in r for r in raw["ov_photo"].get(v, [])):
            s["openvino"][f"vision {v}"] = {"error": next(r["error"] for r in
                                                          rs + raw["ov_photo"].get(v, [])
                                                          if "error" in r)}
            continue
        s["openvino"][f"vision {v}"] = {
            "vision_ms": median([x for r in rs for x in r["ms"]]),
            "photo_ms": median([x for r in raw["ov_photo"][v] for x in r["ms"]]),
            "precision": rs[0]["inference_precision"], "primitives": rs[0]["primitives"],
            "onednn_max_cpu_isa": rs[0]["onednn_max_cpu_isa"]}
        s["counts"]["openvino photo"] = {"tiles": raw["ov_photo"][v][0]["batch"],
                                         "image_tokens": raw["ov_photo"][v][0]["batch"] *
                                         raw["ov_photo"][v][0]["output_shape"][1]}
    best = min(((r["vision_ms"], k) for k, r in s["openvino"].items() if "vision_ms" in r),
               default=(None, None))
    for t, rs in raw["ov_llm"].items():
        text = median([x for r in rs for x in r.get("ttft_text_ms", [])])
        s["openvino"][f"genai {t}"] = {
            "pp": median([x for r in rs for x in r["pp"]]),
            "tg": median([x for r in rs for x in r["tg"]]),
            "ttft_text_ms": text, "ttft_ms": best[0] + text if text and best[0] else None,
            "ttft_vision": best[1]}
    s["counts"]["openvino ttft prompt tokens"] = ttft_tokens
    return s


def rows(r):
    """(figure, edgevl config, edgevl value, peer, peer config, peer value, ratio) with ratio > 1
    meaning edgevl is faster."""
    s = r["summary"]
    ev, ll, ov = s["edgevl"], s["llama.cpp"], s["openvino"]
    out = []

    def add(fig, ecfg, key, peer, pcfg, pval, lower_better):
        e = ev.get(ecfg, {}).get(key)
        if e is None or pval is None:
            return
        out.append((fig, ecfg, e, peer, pcfg, pval, (pval / e) if lower_better else (e / pval)))

    for fig, key in (("vision 448² tile, ms", "vision_ms"), ("vision 1344×896 photo, ms",
                                                            "photo_ms")):
        for ecfg in ("w8a8", "int8-tower", "f16-tower"):
            for t in MMPROJ:
                add(fig, ecfg, key, "llama.cpp", f"mmproj {t}", ll.get(f"mmproj {t}", {}).get(key),
                    True)
            for v in OV_VISION:
                add(fig, ecfg, key, "OpenVINO", f"vision {v}", ov.get(f"vision {v}", {}).get(key),
                    True)
    for ecfg in ("w8a8", "int8-tower"):
        add("TTFT 1 tile + question, ms", ecfg, "ttft_ms", "llama.cpp", "mmproj f16 + q8_0",
            ll.get("mmproj f16", {}).get("ttft_ms"), True)
        add("TTFT 1 tile + question, ms", ecfg, "ttft_ms", "OpenVINO", "best vision + genai int8",
            ov.get("genai int8", {}).get("ttft_ms"), True)
    for key, fig in (("pp", "pp512, tok/s"), ("tg", "decode tg64, tok/s")):
        for ecfg, lt, ot in (("w8a8", "q8_0", "int8"), ("w4a8", "q4_0", "int4")):
            add(fig, ecfg, key, "llama.cpp", lt, ll.get(lt, {}).get(key), False)
            add(fig, ecfg, key, "OpenVINO", f"genai {ot}", ov.get(f"genai {ot}", {}).get(key),
                False)
    return out


def bw(r):
    th = r["threads"]
    return (r["bounds"][f"read_gb_s_{th}t"], r.get("bounds_after", {}).get(f"read_gb_s_{th}t"))


def levels_table(reports):
    """One row per level: edgevl's default (w8a8, bf16 tower) over each peer's best setting."""
    head = ["level", "vision tile / llama.cpp", "/ OpenVINO", "photo / llama.cpp", "/ OpenVINO",
            "TTFT / llama.cpp", "/ OpenVINO", "pp512 / llama.cpp", "/ OpenVINO",
            "tg64 / llama.cpp", "/ OpenVINO", "read GB/s before / after", "date"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in reports:
        rs = rows(r)

        def best(fig, peer, ecfg):  # against the peer's fastest setting
            xs = [x[6] for x in rs if x[0] == fig and x[3] == peer and x[1] == ecfg]
            return f"{min(xs):.2f}x" if xs else "-"

        cells = [r["level"]]
        for fig, ecfg in (("vision 448² tile, ms", "w8a8"), ("vision 1344×896 photo, ms", "w8a8"),
                          ("TTFT 1 tile + question, ms", "w8a8"), ("pp512, tok/s", "w8a8"),
                          ("decode tg64, tok/s", "w4a8")):
            cells += [best(fig, "llama.cpp", ecfg), best(fig, "OpenVINO", ecfg)]
        b0, b1 = bw(r)
        cells += [f"{b0:.0f} / {b1:.0f}" if b1 else f"{b0:.0f}", r["date"][:16]]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def fmt(v, fig):
    return f"{v:.0f}" if "ms" in fig else f"{v:.1f}"


def study_markdown(reports):
    r0 = reports[0]
    out = [f"# InternVL2-1B: edgevl, llama.cpp (libmtmd) and OpenVINO, {r0['cpu_model']}", "",
           f"Issue 38 part 2: same shapes, threads ({r0['threads']}), run; "
           + "; ".join(f"{r['level']}: {len(r['raw']['edgevl']['w8a8'])} round(s) x {r['reps']} rep"
                       for r in reports) + ", engines alternating within "
           "each round, medians of all samples. Ratios are edgevl / peer with > 1 meaning edgevl "
           "is faster (peer ms / edgevl ms for times, edgevl tok/s / peer tok/s for rates). The "
           "machine is a 2-vCPU VM shared with two other agents building and benchmarking C++ "
           "during the runs: compare figures of the same level's run only.", "",
           "Commands: " + "; ".join(f"`{r['command']}`" for r in reports)
           + f"; rendered with `internvl_peer.py --from-json ... --markdown ...`. Shape: "
           f"`{r0['name']}` (edgevl synth, random weights).", "",
           "## Per level (edgevl default: w8a8 binary with its bf16 tower; decode: w4a8), "
           "against each peer's fastest setting", "", levels_table(reports)]
    for r in reports:
        b, b2 = r["bounds"], r.get("bounds_after", {})
        th = r["threads"]
        forced = r["level"] != "native"
        out += [f"## Level {r['level']} ({'forced on this CPU' if forced else 'native'}): "
                f"{r['date']} – {r.get('end', '?')} UTC"
                + (f" (PARTIAL: stopped after {len(r['raw']['edgevl']['w8a8'])} of "
                   f"{r['rounds']} rounds; no bounds after)" if r.get("partial") else ""), "",
                f"- edgevl `{r['edgevl']}` at `{'--isa ' + r['level'] if forced else 'best'}` "
                f"(kernel level reported: {r['summary']['edgevl']['w8a8']['isa']}); llama.cpp "
                f"`{os.path.relpath(r['llama_bin'], os.path.dirname(os.path.dirname(r['llama_bin'])))}`"
                f" ({'built with only this level' if forced else 'native build: AVX-512 VNNI/BF16, no AMX'});"
                f" OpenVINO vision: {r['ov_forced'] or 'native (the plugin picks bf16 inference on AVX-512 BF16)'}; "
                "OpenVINO GenAI: native (cannot be forced, see below).",
                f"- Bounds before / after: read {b[f'read_gb_s_{th}t']:.1f} / "
                f"{b2.get(f'read_gb_s_{th}t', float('nan')):.1f} GB/s ({th} threads), load average "
                f"{' '.join(b.get('loadavg', []))} / {' '.join(b2.get('loadavg', []))}, SGEMM "
                f"{b['sgemm']['gflop_s']:.0f} / {b2.get('sgemm', {}).get('gflop_s', float('nan')):.0f}"
                " GFLOP/s (OpenBLAS" + (", Haswell kernels" if forced and "avx2" in r["level"] else "")
                + ")."]
        for tag, bb in (("before", b), ("after", b2)):
            pk = bb.get("isa_peak", {}).get("peaks", [])
            if pk:
                out.append(f"- isa_peak {tag} (G ops/s, {th} threads): " + ", ".join(
                    f"{p['name']} {p['gops']:.0f}" for p in pk if p.get("gops")) + ".")
        out += ["", "| figure | edgevl | value | peer | setting | value | edgevl / peer |",
                "|---|---|---|---|---|---|---|"]
        for fig, ecfg, e, peer, pcfg, pv, ratio in rows(r):
            out.append(f"| {fig} | {ecfg} | {fmt(e, fig)} | {peer} | {pcfg} | {fmt(pv, fig)} | "
                       f"{ratio:.2f}x |")
        c = r["summary"]["counts"]
        out += ["", "Work per image (like for like): " + "; ".join(
            f"{k}: {v}" for k, v in c.items()) + ".", ""]
        for k, v in r["summary"]["openvino"].items():
            if "error" in v:
                out.append(f"OpenVINO {k} did not run at this level: `{v['error']}`\n")
        prec = {k: v["precision"] for k, v in r["summary"]["openvino"].items() if "precision" in v}
        out.append("OpenVINO inference precision: " + ", ".join(f"{k} {v}" for k, v in prec.items())
                   + ". Execution-graph layer:primitive counts (f32 and static int8 towers): ")
        for k in ("vision f32", "vision int8"):
            pr = r["summary"]["openvino"].get(k, {}).get("primitives", {})
            keep = {n: m for n, m in pr.items() if not n.split(":")[1].startswith(("unknown", "ref"))}
            out.append(f"- {k}: `{json.dumps(keep)}`")
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
