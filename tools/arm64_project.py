#!/usr/bin/env python3
"""Projects pp512, decode tok/s and vision ms/tile of the InternVL2-1B shape on a named
phone-class AArch64 core from the instruction counts of tools/arm64_figures.py.

No AArch64 machine is at hand, so this is arithmetic, with every assumption printed:

  cycles      = max(instructions / issue width, FP-SIMD instructions / ASIMD pipes)
                (the core's two hard issue limits; caches, dependencies and branch misses
                only add cycles, so this is an upper bound on speed: --efficiency scales it)
  decode      = max(cycles / cores / clock, weight bytes per token / bandwidth)
  pp512       = 512 x prefill-token cycles / cores / clock (compute-bound; the counts were
                taken at 129 tokens: attention at 512 adds ~3 % per token to the layer MACs)
  vision tile = tile cycles / cores / clock

    tools/arm64_project.py --figures /tmp/arm/figures.json --bytes-w8a8 ... --bytes-w4a8 ...
"""
import argparse
import json

# A named core and the facts the projection rests on (sources in the README's AArch64 part).
CORES = {
    "a76": {
        "name": "Cortex-A76 (Raspberry Pi 5: 4 cores at 2.4 GHz, LPDDR4X)",
        "issue": 4,  # instructions decoded / dispatched per cycle
        "simd_pipes": 2,  # 128-bit ASIMD/FP pipes (V0, V1), FMLA and SDOT on either
        "ghz": 2.4,
        "cores": 4,
        # Sustained weight streaming of llama.cpp's decode on a Pi 5 (file bytes x tok/s,
        # Q8_0 / Q4_K / Q2_K of a 0.5B model: 9.8-10.6 GB/s); tinymembench's one-thread copy
        # reads 5.6-6.2 GB/s.
        "gbps": 10.0,
        "levels": {"int8": "dotprod", "vision": ("w8a8", "neon"), "vision_int8": ("vw8", "dotprod")},
    },
    "i8mm-2pipe": {
        "name": "a 2-pipe core with i8mm + bf16 (Cortex-A710/A720 class) at the A76's clock, "
                "cores and bandwidth: the instruction sets' effect alone",
        "issue": 4, "simd_pipes": 2, "ghz": 2.4, "cores": 4, "gbps": 10.0,
        "levels": {"int8": "i8mm", "vision": ("w8a8", "bf16"), "vision_int8": ("vw8", "i8mm")},
    },
}


def find(rows, figure, quant, level):
    for r in rows:
        if r["figure"].startswith(figure) and r["quant"] == quant and r["level"] == level:
            return r
    return None


def cycles(row, core, efficiency):
    total, simd = row["instructions"]["whole"], row["simd"]["whole"]
    return max(total / core["issue"], simd / core["simd_pipes"]) / efficiency


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--figures", default="/tmp/arm64-figures/figures.json",
                   help="figures.json of tools/arm64_figures.py (comma-separated: several)")
    p.add_argument("--core", default="a76,i8mm-2pipe")
    p.add_argument("--efficiency", type=float, default=1.0,
                   help="fraction of the issue bound reached (1 = the bound)")
    p.add_argument("--bytes-w8a8", type=float, required=True,
                   help="weight bytes read per decode token, w8a8 (24 layers + LM head)")
    p.add_argument("--bytes-w4a8", type=float, required=True)
    args = p.parse_args()
    rows = [r for path in args.figures.split(",") for r in json.load(open(path))]
    for key in args.core.split(","):
        core = CORES[key]
        hz = core["ghz"] * 1e9
        print(f"\n{core['name']}: issue {core['issue']}/cycle, {core['simd_pipes']} ASIMD pipes, "
              f"{core['cores']} cores at {core['ghz']} GHz, {core['gbps']} GB/s, "
              f"efficiency {args.efficiency:.2f}")
        lv = core["levels"]["int8"]
        for quant, nbytes in (("w8a8", args.bytes_w8a8), ("w4a8", args.bytes_w4a8)):
            d, pf = find(rows, "decode", quant, lv), find(rows, "prefill", quant, lv)
            if d:
                t_compute = cycles(d, core, args.efficiency) / core["cores"] / hz
                t_memory = nbytes / (core["gbps"] * 1e9)
                bound = "memory" if t_memory > t_compute else "compute"
                print(f"  {quant} decode ({lv}): {1 / max(t_compute, t_memory):6.1f} tok/s "
                      f"({bound}-bound: compute {t_compute * 1e3:.1f} ms, weights "
                      f"{nbytes / 1e6:.0f} MB {t_memory * 1e3:.1f} ms)")
            if pf:
                t = cycles(pf, core, args.efficiency) / core["cores"] / hz
                print(f"  {quant} pp512 ({lv}): {1 / t:6.1f} tok/s")
        for label, (quant, level) in (("bf16 tower", core["levels"]["vision"]),
                                      ("int8 tower", core["levels"]["vision_int8"])):
            v = find(rows, "vision", "bf16" if quant == "w8a8" else "int8", level)
            if v:
                t = cycles(v, core, args.efficiency) / core["cores"] / hz
                print(f"  vision tile, {label} ({level}): {t * 1e3:7.0f} ms")


if __name__ == "__main__":
    main()
