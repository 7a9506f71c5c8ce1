#!/usr/bin/env python3
"""Reload every committed LLM golden fixture with transformers and check it reproduces.

For qwen2, llama and internlm2_as_llama: AutoModelForCausalLM.from_pretrained(<fixture dir>)
(float32, eager attention) must reproduce logits_<i>.npy for every prompt and the greedy tokens;
AutoTokenizer.from_pretrained(<fixture dir>) must reproduce the prompt ids and the
tokenizer_vectors (qwen2 also from vocab.json+merges.txt alone). internlm2 is checked by
check_internlm2_layout.py (numpy, fused wqkv). Also checks the fixture size budget.

Usage: build/venv/bin/python tools/golden/verify_goldens.py
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

torch.set_num_threads(1)

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.abspath(os.path.join(HERE, "..", "..", "tests", "fixtures", "golden"))
TOL = 1e-4


def dir_size(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


@torch.no_grad()
def check_model(name, check_tokenizer):
    d = os.path.join(FIX, name)
    g = json.load(open(os.path.join(d, "golden.json")))
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    ok = True
    worst = 0.0
    for p in g["prompts"]:
        ref = np.load(os.path.join(d, p["logits"]))
        assert ref.dtype == np.float32 and ref.shape == (len(p["ids"]), model.config.vocab_size), ref.shape
        got = model(torch.tensor([p["ids"]]), use_cache=False).logits[0].numpy()
        diff = float(np.abs(got - ref).max())
        worst = max(worst, diff)
        ok &= diff <= TOL
    ids = list(g["greedy"]["prompt_ids"])
    for _ in g["greedy"]["tokens"]:
        ids.append(int(model(torch.tensor([ids]), use_cache=False).logits[0, -1].argmax()))
    greedy_ok = ids[len(g["greedy"]["prompt_ids"]):] == g["greedy"]["tokens"]
    # also with the KV cache (transformers generate, greedy, no EOS stop)
    out = model.generate(torch.tensor([g["greedy"]["prompt_ids"]]), max_new_tokens=len(g["greedy"]["tokens"]),
                         min_new_tokens=len(g["greedy"]["tokens"]), do_sample=False, eos_token_id=None,
                         pad_token_id=0)
    gen_ok = out[0, len(g["greedy"]["prompt_ids"]):].tolist() == g["greedy"]["tokens"]
    ok &= greedy_ok and gen_ok
    msg = f"{name:20s} logits max|diff| {worst:.2e}  greedy(recompute) {greedy_ok}  greedy(generate+cache) {gen_ok}"
    if check_tokenizer:
        tok_dirs = {"tokenizer files": d}
        tmp = None
        if os.path.exists(os.path.join(d, "vocab.json")):
            tmp = tempfile.mkdtemp()
            for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
                shutil.copy(os.path.join(d, f), tmp)
            tok_dirs["vocab.json+merges.txt only"] = tmp
        for label, td in tok_dirs.items():
            tok = AutoTokenizer.from_pretrained(td)
            bad = [p["text"] for p in g["prompts"] if tok(p["text"])["input_ids"] != p["ids"]]
            bad += [v["text"] for v in g["tokenizer_vectors"] if tok(v["text"])["input_ids"] != v["ids"]]
            msg += f"\n{'':20s} tokenizer ({label}): {'ok' if not bad else 'MISMATCH ' + repr(bad)}"
            ok &= not bad
        if tmp:
            shutil.rmtree(tmp)
    print(msg)
    return ok


def main():
    ok = True
    ok &= check_model("qwen2", True)
    ok &= check_model("llama", True)
    ok &= check_model("internlm2_as_llama", False)  # its tokenizer is InternLM2's (remote code)
    total = 0
    for n in sorted(os.listdir(FIX)):
        if os.path.isdir(os.path.join(FIX, n)):
            s = dir_size(os.path.join(FIX, n))
            total += s
            print(f"  {n:20s} {s / 1e6:.3f} MB")
            ok &= s < 1.5e6
    print(f"  total {total / 1e6:.3f} MB")
    ok &= total < 8e6
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
