#!/usr/bin/env python3
"""Independent numpy forward pass of the InternLM2 fixture, reading the FUSED grouped wqkv.

The InternLM2 goldens (tests/fixtures/golden/internlm2/logits_*.npy) were computed with a
transformers LlamaForCausalLM holding the same weights. This script reads
tests/fixtures/golden/internlm2/ in InternLM2 layout (model.tok_embeddings, attention.wqkv,
attention.wo, feed_forward.w1/w3/w2, attention_norm, ffn_norm, output) and splits wqkv exactly
as modeling_internlm2.py does:

    qkv = rearrange(qkv, 'b q (h gs d) -> b q h gs d', gs=2 + num_key_value_groups, d=head_dim)
    q   = rearrange(qkv[..., :num_key_value_groups, :], 'b q h gs d -> b q (h gs) d')
    k   = qkv[..., -2, :]
    v   = qkv[..., -1, :]

It runs in float64 and prints max|diff| against the Llama-computed goldens (must be ~1e-5 or
less), and, as a control, the diff when wqkv is wrongly read as plain [Q; K; V] (must be large).
Exit code 0 iff the grouped reading matches and the control does not.

Usage: build/venv/bin/python tools/golden/check_internlm2_layout.py
"""

import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.abspath(os.path.join(HERE, "..", "..", "tests", "fixtures", "golden"))


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, theta):
    # rotate-half convention: channel i pairs with i + d/2
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[:, None, :]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rot * sin


def split_wqkv(qkv, nkv, groups, hd, grouped):
    t = qkv.shape[0]
    if grouped:
        g = qkv.reshape(t, nkv, groups + 2, hd)           # 'b q (h gs d) -> b q h gs d'
        q = g[:, :, :groups, :].reshape(t, nkv * groups, hd)  # 'b q h gs d -> b q (h gs) d'
        k = g[:, :, -2, :]
        v = g[:, :, -1, :]
    else:  # control: the WRONG reading, [all q heads; all k heads; all v heads]
        nq = nkv * groups
        q = qkv[:, :nq * hd].reshape(t, nq, hd)
        k = qkv[:, nq * hd:(nq + nkv) * hd].reshape(t, nkv, hd)
        v = qkv[:, (nq + nkv) * hd:].reshape(t, nkv, hd)
    return q, k, v


def forward(w, cfg, ids, grouped=True):
    hid = cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = hid // nh
    groups = nh // nkv
    eps, theta = cfg["rms_norm_eps"], float(cfg["rope_theta"])
    t = len(ids)
    pos = np.arange(t, dtype=np.float64)
    mask = np.triu(np.full((t, t), -np.inf), 1)
    x = w["model.tok_embeddings.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rmsnorm(x, w[p + "attention_norm.weight"], eps)
        q, k, v = split_wqkv(h @ w[p + "attention.wqkv.weight"].T, nkv, groups, hd, grouped)
        q, k = rope(q, pos, theta), rope(k, pos, theta)
        out = np.empty((t, nh, hd))
        for head in range(nh):
            kv = head // groups  # q head `head` belongs to kv head head // groups
            s = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            out[:, head, :] = s @ v[:, kv, :]
        x = x + out.reshape(t, nh * hd) @ w[p + "attention.wo.weight"].T
        h = rmsnorm(x, w[p + "ffn_norm.weight"], eps)
        gate = h @ w[p + "feed_forward.w1.weight"].T
        up = h @ w[p + "feed_forward.w3.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "feed_forward.w2.weight"].T
    x = rmsnorm(x, w["model.norm.weight"], eps)
    return x @ w["output.weight"].T


def main():
    d = os.path.join(FIX, "internlm2")
    cfg = json.load(open(os.path.join(d, "config.json")))
    gold = json.load(open(os.path.join(d, "golden.json")))
    w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg["hidden_size"] // nh
    print(f"internlm2 fixture: hidden {cfg['hidden_size']}, heads {nh}, kv heads {nkv}, head_dim {hd}, "
          f"wqkv {w['model.layers.0.attention.wqkv.weight'].shape} = [{nkv} x ({nh // nkv}+2) x {hd}] rows")
    ok = True
    for p in gold["prompts"]:
        ref = np.load(os.path.join(d, p["logits"])).astype(np.float64)
        scale = np.abs(ref).max()
        good = np.abs(forward(w, cfg, p["ids"], grouped=True) - ref).max()
        bad = np.abs(forward(w, cfg, p["ids"], grouped=False) - ref).max()
        print(f"  {p['logits']}: {len(p['ids']):2d} tokens  max|diff| grouped wqkv = {good:.3e}   "
              f"(control, wqkv read as [Q;K;V]: {bad:.3e}; max|logit| {scale:.2f})")
        ok &= good <= 1e-4 * max(1.0, scale) and bad > 1e-2 * scale
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
