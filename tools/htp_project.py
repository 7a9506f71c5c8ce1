#!/usr/bin/env python3
"""Phone figures for the HTP backend, projected (not measured) from edgevl's cost model.

The x86 QNN HTP simulator executes graphs but its cycle counts are not a device model (they
change by orders of magnitude with the data: docs/htp.md), so phone figures come from:

  * the work: `edgevl inspect` of the compiled model ("cost" line: prefill GFLOP per token,
    decode bytes per token and per cached token, vision GFLOP per tile), one file per preset;
  * two published measurements on the Snapdragon 8 Elite HTP (v79) that fix the achieved rates:
    a Qwen3-VL ViT at 512x512 in ~161 ms (compute: vision and prefill), and ExecuTorch-QNN's
    InternVL3-1B decode at ~17 tok/s (its LLM is Qwen2.5-0.5B: the InternVL2-1B LLM's shape);
  * the SoCs' memory bandwidth (LPDDR5X) for the decode bound, and Qualcomm's stated
    generation gain of the 8 Elite NPU over the 8 Gen 3's for the v75 compute rate.

Usage: tools/htp_project.py COSTDIR   (COSTDIR/<arch>-<preset>.cost: `edgevl inspect` lines)
"""
import re
import sys
from pathlib import Path

# Snapdragon SoCs (HTP arch, LPDDR5X peak bandwidth in GB/s: 64-bit bus x transfer rate).
SOCS = {
    "8 Gen 3 (SM8650, v75)": {"bw": 76.8, "compute_vs_8elite": 1 / 1.45},
    "8 Elite (SM8750, v79)": {"bw": 84.8, "compute_vs_8elite": 1.0},
}

# Published 8 Elite figures that calibrate the achieved rates.
VIT_512_MS = 161.0  # Qwen3-VL ViT, one 512x512 image, HTP
INTERNVL3_1B_TOKS = 17.0  # ExecuTorch-QNN InternVL3-1B decode, tok/s


def qwen3vl_vit_flops(side=512, depth=24, c=1024, ffn=4096, patch=16, merge=2, out=2048):
    """FLOPs of the Qwen3-VL-2B/4B vision tower (believed shape) on one side x side image."""
    n = (side // patch) ** 2
    per_layer = 2 * n * (4 * c * c + 2 * c * ffn) + 4 * n * n * c  # projections + attention
    patch_embed = 2 * n * (3 * 2 * patch * patch) * c
    merger = 2 * (n // (merge * merge)) * ((4 * c) * (4 * c) + (4 * c) * out)
    return depth * per_layer + patch_embed + merger


def read_cost(path):
    text = path.read_text()
    m = re.search(r"prefill ([\d.]+) GFLOP per token.*decode reads ([\d.]+) MB per token "
                  r"\+ ([\d.]+) KB per cached token(?:, vision ([\d.]+) GFLOP per tile)?", text)
    if not m:
        sys.exit(f"{path}: no cost line (edgevl inspect output expected)")
    return {"prefill_gflop": float(m[1]), "decode_mb": float(m[2]), "kv_kb": float(m[3]),
            "vision_gflop": float(m[4] or 0)}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = Path(sys.argv[1])
    costs = {p.stem: read_cost(p) for p in sorted(d.glob("*.cost"))}
    vit = qwen3vl_vit_flops()
    rate_8elite = vit / (VIT_512_MS / 1000)  # FLOP/s the 8 Elite HTP reached on a ViT
    # Achieved decode bandwidth: the InternVL2-1B LLM shape at 4-bit weights (w4a8's bytes: the
    # closest edgevl preset to ExecuTorch-QNN's 4-bit-weight builds) x the published tok/s.
    ref = costs.get("internvl2-1b-w4a8")
    if ref is None:
        sys.exit("internvl2-1b-w4a8.cost is needed to calibrate decode")
    bw_eff_8elite = ref["decode_mb"] * 1e6 * INTERNVL3_1B_TOKS / 1e9
    print(f"calibration: Qwen3-VL ViT 512x512 = {vit / 1e9:.0f} GFLOP in {VIT_512_MS:.0f} ms "
          f"-> {rate_8elite / 1e12:.2f} TFLOP/s achieved on the 8 Elite HTP; InternVL3-1B decode "
          f"{INTERNVL3_1B_TOKS:.0f} tok/s x {ref['decode_mb']:.0f} MB/token (4-bit weights) -> "
          f"{bw_eff_8elite:.1f} GB/s achieved ({bw_eff_8elite / SOCS['8 Elite (SM8750, v79)']['bw']:.0%}"
          " of the bus)\n")
    print("| model | preset | SoC | vision ms / 448² tile | TTFT ms (1 tile + 30 tokens) | "
          "decode tok/s at d0, achieved-rate projection | decode bound, bus bandwidth |")
    print("|---|---|---|---|---|---|---|")
    # The CPU presets whose weight bytes stand for the HTP builds' (activations do not change
    # what decode reads).
    weights = {"f16": "fp16", "w8a8": "8-bit weights (w8a16)", "w4a8": "4-bit weights (w4a16)"}
    for name, c in costs.items():
        arch, preset = name.rsplit("-", 1)
        preset = weights.get(preset, preset)
        for soc, s in SOCS.items():
            rate = rate_8elite * s["compute_vs_8elite"]
            vision_ms = c["vision_gflop"] * 1e9 / rate * 1000
            prompt = 256 + 30  # one tile's tokens and a short question
            ttft_ms = vision_ms + c["prefill_gflop"] * 1e9 * prompt / rate * 1000
            bw_eff = bw_eff_8elite * s["bw"] / SOCS["8 Elite (SM8750, v79)"]["bw"]
            toks = bw_eff * 1e9 / (c["decode_mb"] * 1e6)
            bound = s["bw"] * 1e9 / (c["decode_mb"] * 1e6)
            print(f"| {arch} | {preset} | {soc} | {vision_ms:.0f} | {ttft_ms:.0f} | {toks:.1f} | "
                  f"{bound:.0f} |")


if __name__ == "__main__":
    main()
