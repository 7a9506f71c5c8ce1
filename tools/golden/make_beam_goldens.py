#!/usr/bin/env python3
"""Beam-search goldens for edgevl's `run --beams N` (runtime/decoding/beam_search.h), from the reference:
transformers' generate(num_beams=N, do_sample=False, length_penalty=..., early_stopping=...).

Models:
  stories260k  ../shared/data/stories260k, a real trained tiny Llama (read in place, never copied;
               skipped with a message when the folder is absent)
  qwen2        tests/fixtures/golden/qwen2, the small random-weight Qwen2 fixture

For every (model, case, N in {2, 4}) it records the N finished hypotheses the reference keeps
(num_return_sequences = N, best first): generated token ids (the EOS that ended one included)
and sequences_scores (sum of log-softmax / generated_length ** length_penalty, float32).
Writes tests/fixtures/golden/beam/<model>.json.

The generation config is built from scratch (only eos / pad / bos ids from the checkpoint), so no
logits processor (repetition penalty, min length, ...) alters the log-probabilities: the C++
search sees exactly the model's log-softmax.

Usage (from the repo root): build/venv/bin/python tools/golden/make_beam_goldens.py
"""

import json
import os
import sys

import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import transformers  # noqa: E402
from transformers import GenerationConfig, LlamaForCausalLM, Qwen2ForCausalLM  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "golden", "beam")
STORIES = os.path.abspath(os.path.join(ROOT, "..", "shared", "data", "stories260k"))
QWEN2 = os.path.join(ROOT, "tests", "fixtures", "golden", "qwen2")

# (name, max_new_tokens, length_penalty, early_stopping): the reference's defaults, a length
# penalty below and above 1 with early stopping, the "never" rule with a positive penalty (its
# heuristic then assumes max_length), and a negative penalty.
CASES = [
    ("default", None, 1.0, False),
    ("lp0.5_es_true", None, 0.5, True),
    ("lp2_es_false", None, 2.0, False),
    ("lp1.5_never", None, 1.5, "never"),
    ("lp-0.5_es_false", None, -0.5, False),
]
# The same rules with a frequent word token as the only EOS (generate's eos_token_id may be any
# id): neither model ends a text with its real EOS inside a short budget, so these are the cases
# where hypotheses finish early, are ranked against running beams, and stop the search.
EOS_CASES = [
    ("word_eos_default", 1.0, False),
    ("word_eos_es_true", 1.0, True),
    ("word_eos_lp2_never", 2.0, "never"),
    ("word_eos_lp0.5_never", 0.5, "never"),
    ("word_eos_lp0_never", 0.0, "never"),
    ("word_eos_lp-0.5_es_false", -0.5, False),
]


def run(model, prompt, eos, pad, bos, n_beams, max_new, lp, es):
    cfg = GenerationConfig(num_beams=n_beams, do_sample=False, max_new_tokens=max_new,
                           length_penalty=lp, early_stopping=es, num_return_sequences=n_beams,
                           output_scores=True, return_dict_in_generate=True,
                           eos_token_id=eos, pad_token_id=pad, bos_token_id=bos)
    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=cfg)
    hyps = []
    for i in range(n_beams):
        # beam_indices is -1 past a hypothesis' own length (rows are padded to the longest).
        n = int((out.beam_indices[i] >= 0).sum())
        toks = out.sequences[i, len(prompt):len(prompt) + n].tolist()
        hyps.append({"tokens": toks, "score": float(out.sequences_scores[i])})
    return hyps


def make(name, model, prompt, eos, pad, bos, max_new, word_eos):
    model.eval()
    model.config._attn_implementation = "eager"
    cases = []
    plan = [(c, mn or max_new, lp, es, eos) for c, mn, lp, es in CASES]
    plan += [(c, max_new, lp, es, [word_eos]) for c, lp, es in EOS_CASES]
    for case, mn, lp, es, case_eos in plan:
        for n_beams in (2, 4):
            hyps = run(model, prompt, case_eos, pad, bos, n_beams, mn, lp, es)
            cases.append({"name": case, "num_beams": n_beams, "max_new_tokens": mn,
                          "length_penalty": lp, "eos_ids": case_eos,
                          "early_stopping": es if isinstance(es, str) else bool(es),
                          "hypotheses": hyps})
            ended = sum(1 for h in hyps if h["tokens"] and h["tokens"][-1] in case_eos)
            print(f"{name} {case} N={n_beams}: best {hyps[0]['score']:.5f} "
                  f"len {len(hyps[0]['tokens'])}, {ended} of {n_beams} ended by EOS")
    doc = {"model": name, "prompt_ids": prompt,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "cases": cases}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    if os.path.isdir(STORIES):
        m = LlamaForCausalLM.from_pretrained(STORIES, torch_dtype=torch.float32)
        # BOS + "Once upon a time, there" (the start of the model's own greedy story): short
        # enough that the beams write whole stories and end them with EOS inside the budget.
        g = json.load(open(os.path.join(STORIES, "golden_greedy.json")))
        prompt = [1] + g["greedy_ids"][:6]
        make("stories260k", m, prompt, [2], 0, 1, 64, 267)
    else:
        print(f"stories260k: {STORIES} not found, skipped", file=sys.stderr)
    m = Qwen2ForCausalLM.from_pretrained(QWEN2, torch_dtype=torch.float32)
    gc = json.load(open(os.path.join(QWEN2, "generation_config.json")))
    eos = gc["eos_token_id"] if isinstance(gc["eos_token_id"], list) else [gc["eos_token_id"]]
    make("qwen2", m, [500, 72, 101, 32, 409, 88, 17], eos, gc["pad_token_id"], gc["bos_token_id"], 24,
         371)


if __name__ == "__main__":
    main()
