#!/usr/bin/env python3
"""Instructions per decode token, per prefill token and per vision tile of the InternVL2-1B shape
on each AArch64 kernel level, counted under qemu-user (tools/arm64_count.py), by differences.

A whole model is too many instructions to log under emulation, so the counts come from
random-weight checkpoints of the real shape with 1 and 2 layers (`edgevl synth --arch
internvl2-1b --layers L --vision-layers V`), and every figure is a difference of two runs that
share everything else:

  B      = bench --pp 1   --tg 1 --reps 1          (load, one warm-up + one timed run of each)
  D      = bench --pp 1   --tg 5 --reps 1          decode token  = (D - B) / 8
  P      = bench --pp 129 --tg 1 --reps 1          prefill token = (P - B) / 256
  layer  = the same difference on L = 2 minus L = 1
  whole  = (L = 1 figure) + (layers - 1) x layer   (InternVL2-1B: 24 LLM layers)

  vision tile: run -i IMAGE --max-tiles 1 -n 1 on V = 1 and V = 2 (LLM 1 layer in both):
  vision layer = difference; tile = (V = 1 run - the same run without the image) + 23 x layer

Single thread (-t 1: no pool wake-ups in the count). Writes a JSON of every count and prints a
table. Needs the cross build (tools/arm64-test.sh --build-only) and the x86 build's CLI for
synth / compile:

  tools/arm64_figures.py --work /tmp/arm --what decode,prefill,vision
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import arm64_count  # noqa: E402

ROOT = os.path.dirname(HERE)
LLM_LAYERS, VISION_LAYERS = 24, 24


class Args:
    def __init__(self, program, cpu):
        self.program, self.cpu, self.quiet = program, cpu, True


def prepare(work, host_cli):
    """Checkpoints and binaries; each made once."""
    os.makedirs(work, exist_ok=True)
    models = {}
    for name, layers, vlayers in (("L1", 1, 1), ("L2", 2, 1), ("L1V2", 1, 2)):
        ckpt = os.path.join(work, f"iv1b-{name}")
        if not os.path.exists(os.path.join(ckpt, "config.json")):
            subprocess.run([host_cli, "synth", "--arch", "internvl2-1b", "--layers", str(layers),
                            "--vision-layers", str(vlayers), "--out", ckpt], check=True,
                           stdout=subprocess.DEVNULL)
        for quant, extra in (("w8a8", []), ("w4a8", []), ("vw8", ["--vision-quant", "w8a8"])):
            evb = os.path.join(work, f"iv1b-{name}-{quant}.evb")
            if not os.path.exists(evb):
                q = "w8a8" if quant == "vw8" else quant
                subprocess.run([host_cli, "compile", ckpt, "-o", evb, "--quant", q, "--context",
                                "1024", "-q"] + extra, check=True)
            models[(name, quant)] = evb
    return models


def count(cache, key, program, cpu):
    if key in cache:
        return cache[key]
    c = arm64_count.run(Args(program, cpu))
    cache[key] = [c.total(), c.simd()]
    # The hottest blocks of every run (their listings are the inner loops that ran).
    hot_path = os.path.join(os.path.dirname(program[program.index("-m") + 1]), "hot.json")
    hot = json.load(open(hot_path)) if os.path.exists(hot_path) else {}
    with contextlib.redirect_stdout(io.StringIO()):
        hot["|".join(key)] = arm64_count.report(c, 4, cpu)["hot"]
    json.dump(hot, open(hot_path, "w"), indent=1)
    print(f"  {key}: {cache[key][0]:,} ({cache[key][1]:,} FP/SIMD)", flush=True)
    return cache[key]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", default="/tmp/arm64-figures")
    p.add_argument("--cli", default=os.path.join(ROOT, "build-arm64", "edgevl"))
    p.add_argument("--host-cli", default=os.path.join(ROOT, "build", "edgevl"))
    p.add_argument("--cpu", default="max", help="qemu CPU model (must have every level asked)")
    p.add_argument("--what", default="decode,prefill,vision")
    p.add_argument("--llm", default="w8a8:neon,w8a8:dotprod,w8a8:i8mm,w4a8:neon,w4a8:dotprod,"
                   "w4a8:i8mm", help="quant:level pairs for decode and prefill")
    p.add_argument("--vision", default="w8a8:neon,w8a8:bf16,vw8:dotprod,vw8:i8mm",
                   help="quant:level pairs for the vision tile (w8a8 = bf16 tower, vw8 = int8)")
    p.add_argument("--image", default=os.path.join(ROOT, "tests/fixtures/images/src/baseline.jpg"))
    args = p.parse_args()
    what = set(args.what.split(","))
    models = prepare(args.work, args.host_cli)
    out_path = os.path.join(args.work, "counts.json")
    cache = {}
    if os.path.exists(out_path):
        cache = {tuple(k.split("|")): v for k, v in json.load(open(out_path)).items()}

    def save():
        json.dump({"|".join(k): v for k, v in cache.items()}, open(out_path, "w"), indent=1)

    def bench(model, level, pp, tg):
        key = (model, level, f"pp{pp}", f"tg{tg}")
        prog = [args.cli, "bench", "-m", model, "-t", "1", "--isa", level, "--pp", str(pp),
                "--tg", str(tg), "--reps", "1"]
        v = count(cache, tuple(os.path.basename(x) for x in key), prog, args.cpu)
        save()
        return v

    def run(model, level, image):
        key = (os.path.basename(model), level, "image" if image else "text")
        prog = [args.cli, "run", "-m", model, "-t", "1", "--isa", level, "--temp", "0", "-n",
                "1", "--max-tiles", "1", "-p", "Describe"] + (["-i", args.image] if image else [])
        v = count(cache, key, prog, args.cpu)
        save()
        return v

    def figure(name, quant, level, fixed_and_layer, layers):
        """fixed_and_layer(i) -> (one-layer figure, per-layer figure) of count component i."""
        row = {"figure": name, "quant": quant, "level": level}
        for i, part in enumerate(("instructions", "simd")):
            first, layer = fixed_and_layer(i)
            row[part] = {"fixed": first - layer, "per_layer": layer,
                         "whole": first + (layers - 1) * layer}
        rows.append(row)

    rows = []
    for pair in args.llm.split(","):
        quant, level = pair.split(":")
        m1, m2 = models[("L1", quant)], models[("L2", quant)]
        # (name, pp, tg, tokens the difference to B = pp 1 / tg 1 holds: warm-up + timed run)
        for name, pp, tg, tokens in (("decode token", 1, 5, 8), ("prefill token (129)", 129, 1,
                                                                 256)):
            if name.split()[0] not in what:
                continue

            def per_token(i, pp=pp, tg=tg, tokens=tokens):
                one, two = ((bench(m, level, pp, tg)[i] - bench(m, level, 1, 1)[i]) / tokens
                            for m in (m1, m2))
                return one, two - one
            figure(name, quant, level, per_token, LLM_LAYERS)
    if "vision" in what:
        for pair in args.vision.split(","):
            quant, level = pair.split(":")

            def vision(i):
                v1 = run(models[("L1", quant)], level, True)[i]
                v2 = run(models[("L1V2", quant)], level, True)[i]
                text = run(models[("L1", quant)], level, False)[i]
                # v1 - text: one vision layer, patch embedding, projector, and the LLM's
                # prefill of the 256 image tokens (one layer).
                return v1 - text, v2 - v1
            figure("vision tile", "bf16" if quant == "w8a8" else "int8", level, vision,
                   VISION_LAYERS)
    print(f"\n{'figure':20s} {'quant':5s} {'level':8s} {'fixed':>13s} {'per layer':>13s} "
          f"{'InternVL2-1B':>15s} {'of it FP/SIMD':>15s}")
    for r in rows:
        a, v = r["instructions"], r["simd"]
        print(f"{r['figure']:20s} {r['quant']:5s} {r['level']:8s} {a['fixed']:13,.0f} "
              f"{a['per_layer']:13,.0f} {a['whole']:15,.0f} {v['whole']:15,.0f}")
    with open(os.path.join(args.work, "figures.json"), "w") as f:
        json.dump(rows, f, indent=1)

if __name__ == "__main__":
    main()
