#!/usr/bin/env python3
"""Writes a copy of an InternVL checkpoint whose vision encoder has the activation outliers of
trained ViTs, computing the same function.

Random-weight towers have no outlier channels, so they cannot show what int8 activations per
token lose on a trained one, where a few channels of the LayerNorm outputs run 10-100x the
rest. For each encoder layer this picks `--channels` channels and, function-preservingly:
- multiplies norm1's and norm2's weight and bias by `--alpha` there and divides the matching
  input columns of attn.qkv and mlp.fc1 by it (the LayerNorm outputs get the outliers);
- multiplies the same channels' V rows (weight and bias) of attn.qkv by `--alpha` and divides
  attn.proj's input columns by it (the attention output gets them).
The f32 model computes what the original does (up to rounding); the int8 tower now meets the
outliers. Compare with `edgevl quant-report OUT --quant w8a8 --vision-quant w8a8` (vision cosine
and KL), with and without the rotation override.

Usage: build/venv/bin/python tools/vision_outlier_stress.py SRC OUT [--alpha 50] [--channels 4]
"""
import argparse
import os
import shutil

import numpy as np
import torch
from safetensors.torch import load_file, save_file


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--alpha", type=float, default=50.0)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(a.src, f), os.path.join(a.out, f))
    rng = np.random.default_rng(a.seed)
    changed = 0
    for f in sorted(os.listdir(a.src)):
        if not f.endswith(".safetensors"):
            continue
        t = load_file(os.path.join(a.src, f))
        dtypes = {k: v.dtype for k, v in t.items()}
        prefix = "vision_model.encoder.layers."
        layers = sorted({int(k[len(prefix):].split(".")[0]) for k in t if k.startswith(prefix)})
        for i in layers:
            p = f"{prefix}{i}."
            d = t[p + "norm1.weight"].shape[0]
            ch = torch.from_numpy(rng.choice(d, size=a.channels, replace=False))
            for k in list(t):  # scaled in f32, stored back in the checkpoint's type
                if k.startswith(p):
                    t[k] = t[k].float()
            for norm, consumer in (("norm1", "attn.qkv"), ("norm2", "mlp.fc1")):
                t[p + norm + ".weight"][ch] *= a.alpha
                t[p + norm + ".bias"][ch] *= a.alpha
                t[p + consumer + ".weight"][:, ch] /= a.alpha
            v_rows = 2 * d + ch  # qkv rows are [q; k; v]
            t[p + "attn.qkv.weight"][v_rows, :] *= a.alpha
            if p + "attn.qkv.bias" in t:
                t[p + "attn.qkv.bias"][v_rows] *= a.alpha
            t[p + "attn.proj.weight"][:, ch] /= a.alpha
            for k in list(t):
                if k.startswith(p):
                    t[k] = t[k].to(dtypes[k])
            changed += 1
        save_file(t, os.path.join(a.out, f), metadata={"format": "pt"})
    print(f"{a.out}: {changed} encoder layers with {a.channels} outlier channels x{a.alpha:g}")


if __name__ == "__main__":
    main()
