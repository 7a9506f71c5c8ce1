#!/usr/bin/env python3
"""Beam-search goldens for a Qwen3-VL image prompt (`edgevl run --beams N -i ...`,
Chat::beam_reply): transformers' generate(num_beams=N, do_sample=False) on the tiny Qwen3-VL
golden (tests/fixtures/golden/qwen3vl) with its procedural odd-size image (the one the C++ tests
always have) and "What is this?", the prompt made as make_qwen3vl_goldens.py makes it.

For N in {2, 3} it records the N finished hypotheses the reference keeps (num_return_sequences =
N, best first): generated ids (an ending EOS included) and sequences_scores. Writes
tests/fixtures/golden/beam/qwen3vl_image.json. Checked by tests/runtime/qwen3vl_conversation_test.cpp.

Usage (from the repo root): build/venv/bin/python tools/golden/make_qwen3vl_beam_goldens.py
"""

import json
import os
import sys

import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_qwen3vl_goldens as g  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer, GenerationConfig, Qwen3VLForConditionalGeneration  # noqa: E402
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "golden", "qwen3vl")
OUT = os.path.join(ROOT, "tests", "fixtures", "golden", "beam")
IMAGE = "odd80x144"
MAX_NEW = 8


def main():
    tok = AutoTokenizer.from_pretrained(FIXTURE)
    model = Qwen3VLForConditionalGeneration.from_pretrained(FIXTURE, dtype=torch.float32).eval()
    model.config._attn_implementation = "eager"
    pp = json.load(open(os.path.join(FIXTURE, "preprocessor_config.json")))
    improc = Qwen2VLImageProcessorPil(size=pp["size"], patch_size=pp["patch_size"],
                                      temporal_patch_size=pp["temporal_patch_size"],
                                      merge_size=pp["merge_size"], image_mean=pp["image_mean"],
                                      image_std=pp["image_std"])
    gc = json.load(open(os.path.join(FIXTURE, "generation_config.json")))
    eos = gc["eos_token_id"] if isinstance(gc["eos_token_id"], list) else [gc["eos_token_id"]]
    img = dict(g.test_images())[IMAGE]
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    inputs = g.image_inputs(tok, improc, text, img)
    prompt = inputs["input_ids"][0].tolist()
    cases = []
    for n_beams in (2, 3):
        cfg = GenerationConfig(num_beams=n_beams, do_sample=False, max_new_tokens=MAX_NEW,
                               length_penalty=1.0, early_stopping=False,
                               num_return_sequences=n_beams, output_scores=True,
                               return_dict_in_generate=True, eos_token_id=eos, pad_token_id=eos[0])
        with torch.no_grad():
            out = model.generate(**inputs, attention_mask=torch.ones_like(inputs["input_ids"]),
                                 generation_config=cfg)
        hyps = []
        for i in range(n_beams):
            # beam_indices is -1 past a hypothesis' own length (rows are padded to the longest).
            n = int((out.beam_indices[i] >= 0).sum())
            hyps.append({"tokens": out.sequences[i, len(prompt):len(prompt) + n].tolist(),
                         "score": float(out.sequences_scores[i])})
        cases.append({"num_beams": n_beams, "max_new_tokens": MAX_NEW, "length_penalty": 1.0,
                      "early_stopping": False, "eos_ids": eos, "hypotheses": hyps})
        print(f"N={n_beams}: " + ", ".join(f"{h['score']:.5f}" for h in hyps))
    doc = {"model": "qwen3vl", "image": IMAGE, "text": "What is this?", "prompt_ids": prompt,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "cases": cases}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "qwen3vl_image.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
