#!/usr/bin/env python3
"""Golden outputs for edgevl's Qwen3.5 text path (hybrid Gated DeltaNet + gated full attention),
from the public reference (transformers `models/qwen3_5`).

Writes tests/fixtures/golden/qwen35/: a tiny random-weight Qwen3_5ForConditionalGeneration saved
by save_pretrained in the hub form (config.json model_type qwen3_5 with nested text_config and
vision_config, tensors model.language_model.* and a tiny model.visual.*), the in-repo Qwen2-style
byte-level BPE tokenizer of make_llm_goldens.py, golden.json and:
  model.safetensors  in bf16, as the hub's checkpoints are (the goldens are the saved model
                   loaded back in f32)
  logits_<i>.npy   f32 [T, vocab] prefill logits of prompt i (text-only path)
  hidden_0.npy     f32 [layers + 1, T, hidden] every decoder layer's output for prompt 0
                   (debugging aid: index 0 is the embedding rows)

The text model: 4 layers, layer_types [linear, linear, linear, full] (3 Gated DeltaNet layers, 1
gated attention layer), linear_num_value_heads 4 > linear_num_key_heads 2 so the GQA of the
delta rule is exercised, head_dim 32 with partial_rotary_factor 0.25 (8 rotated dims). The
zero-centred norms (1 + w), A_log and dt_bias are random, not at their init values, so a
forgotten +1 or a wrong decay shows. Prompt 0 is ~100 tokens: it crosses the 64-token chunk of
the reference's chunked delta rule.

Usage (from the repo root): build/venv/bin/python tools/golden/make_qwen35_goldens.py
"""

import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_llm_goldens as g  # noqa: E402  (tokenizer, json, greedy and seed helpers)

from transformers import (AutoTokenizer, Qwen3_5Config,  # noqa: E402
                          Qwen3_5ForConditionalGeneration)

TEXT = dict(hidden=64, inter=128, layers=4, heads=4, kv_heads=2, head_dim=32, hk=2, hv=4, dk=16,
            dv=16, conv=4, eps=1e-6, theta=1000000.0, max_pos=512, partial=0.25)
# The smallest tower the config allows: only its tensors' presence matters here (edgevl skips
# them for now), and they count against the fixture's size budget.
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=1, patch_size=8,
              temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16)
INIT = dict(emb_std=1.0, w_gain=1.6, lm_gain=2.0, norm_jitter=0.5)
N_SEEDS = 16

LONG_TEXT = (
    "The lighthouse keeper counted the ships that passed each night, writing their names in a "
    "worn leather book. Some nights there were none at all; on others, twelve or more crossed "
    "the bay before dawn, their lamps swinging in the wind. He never learned where they went.")


def init_weights(model, seed):
    """Explicit init: every parameter random, zero-centred norms (Qwen3_5RMSNorm, used as 1 + w)
    around 0, the gated output norm around 1, A_log / dt_bias spread so the decay varies per head."""
    gen = torch.Generator().manual_seed(seed)
    hidden = TEXT["hidden"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + INIT["norm_jitter"] * r)  # Qwen3_5RMSNormGated: plain * w
            elif name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                if "visual" in name:
                    p.copy_(1.0 + INIT["norm_jitter"] * r)  # LayerNorm
                else:
                    p.copy_(INIT["norm_jitter"] * r)  # zero-centred: the model uses 1 + w
            elif name.endswith("A_log"):
                u = torch.rand(p.shape, generator=gen)
                p.copy_(torch.log(0.5 + 8.0 * u))
            elif name.endswith("dt_bias"):
                p.copy_(0.7 * r)
            elif name.endswith(".bias"):
                p.copy_(0.02 * r)
            elif "embed_tokens" in name:
                p.copy_(INIT["emb_std"] * r)
            elif "lm_head" in name:
                p.copy_(INIT["lm_gain"] / math.sqrt(hidden) * r)
            elif name.endswith("conv1d.weight"):
                p.copy_(0.6 * r)
            elif p.dim() >= 2:
                fan_in = p[0].numel()
                p.copy_(INIT["w_gain"] / math.sqrt(fan_in) * r)
            else:
                p.copy_(0.1 * r)


def make_model(vocab, specials):
    t = TEXT
    text_config = dict(
        vocab_size=vocab, hidden_size=t["hidden"], intermediate_size=t["inter"],
        num_hidden_layers=t["layers"], num_attention_heads=t["heads"],
        num_key_value_heads=t["kv_heads"], head_dim=t["head_dim"],
        linear_num_key_heads=t["hk"], linear_num_value_heads=t["hv"], linear_key_head_dim=t["dk"],
        linear_value_head_dim=t["dv"], linear_conv_kernel_dim=t["conv"],
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        max_position_embeddings=t["max_pos"], rms_norm_eps=t["eps"],
        rope_parameters={"rope_type": "default", "rope_theta": t["theta"],
                         "partial_rotary_factor": t["partial"], "mrope_section": [1, 1, 2],
                         "mrope_interleaved": True},
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=specials["<|im_end|>"])
    vision_config = dict(VISION, out_hidden_size=t["hidden"])
    conf = Qwen3_5Config(text_config=text_config, vision_config=vision_config,
                         tie_word_embeddings=True, image_token_id=vocab - 1,
                         video_token_id=vocab - 2, vision_start_token_id=vocab - 3,
                         vision_end_token_id=vocab - 4)
    conf._attn_implementation = "eager"
    conf.text_config._attn_implementation = "eager"
    m = Qwen3_5ForConditionalGeneration(conf).float().eval()
    assert m.model.language_model.layers[0].linear_attn.num_v_heads == t["hv"]
    assert hasattr(m.model.language_model.layers[3], "self_attn")
    return m


@torch.no_grad()
def cached_greedy(model, prompt_ids, n):
    """Greedy through transformers' own cache (chunked prefill, recurrent decode), as a check
    that its two forms of the delta rule agree on this model."""
    out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=n, do_sample=False,
                         min_new_tokens=n, eos_token_id=None, pad_token_id=0)
    return list(map(int, out[0, len(prompt_ids):]))


def main():
    d = g.fresh_dir("qwen35")
    specials, n_tok = g.build_qwen2_tokenizer(d)
    vocab = ((n_tok + 8 + 63) // 64) * 64  # room for the 4 vision ids past the tokenizer
    tok = AutoTokenizer.from_pretrained(d)

    chat = ("<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n")
    texts = [LONG_TEXT, chat, "Numbers like 3.14159 and 2024 cost $19.99!"]
    prompts = []
    for t in texts:
        ids = list(map(int, tok(t)["input_ids"]))
        prompts.append((t, ids))
    assert len(prompts[0][1]) > 64, len(prompts[0][1])  # crosses the reference's chunk of 64

    mk = lambda: make_model(vocab, specials)  # noqa: E731
    best = None
    for s in range(4000, 4000 + N_SEEDS):
        model = mk()
        init_weights(model, s)
        toks, margins, ratios = g.greedy(model, prompts[1][1], g.N_GREEDY)
        ok = len(set(toks)) >= g.MIN_DISTINCT and max(toks) < n_tok
        if ok:
            for dt in (torch.bfloat16, torch.float16):
                if g.greedy(g.rounded_copy(model, dt), prompts[1][1], g.N_GREEDY)[0] != toks:
                    ok = False
                    break
        score = (ok, min(ratios))
        if best is None or score > best[0]:
            best = (score, s)
    assert best[0][0], "no seed gave a stable, non-degenerate greedy run"
    seed = best[1]
    model = mk()
    init_weights(model, seed)

    # Saved in bf16 like the hub's checkpoints; the goldens come from the saved file loaded back
    # in f32 (the seed search checked that bf16 weights keep the greedy run).
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(d)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float32).eval()
    model.config._attn_implementation = "eager"
    model.config.text_config._attn_implementation = "eager"
    os.remove(os.path.join(d, "generation_config.json")) if os.path.exists(
        os.path.join(d, "generation_config.json")) else None
    g.write_json(os.path.join(d, "generation_config.json"), {
        "bos_token_id": specials["<|endoftext|>"],
        "do_sample": False,
        "eos_token_id": [specials["<|im_end|>"], specials["<|endoftext|>"]],
    })
    saved = g.json.load(open(os.path.join(d, "config.json")))
    assert saved["model_type"] == "qwen3_5" and "text_config" in saved, saved
    assert saved["dtype"] == "bfloat16", saved

    with torch.no_grad():
        out = model(torch.tensor([prompts[0][1]]), use_cache=False, output_hidden_states=True)
    hidden = torch.stack([h[0] for h in out.hidden_states]).float().numpy().astype("<f4")
    np.save(os.path.join(d, "hidden_0.npy"), np.ascontiguousarray(hidden))

    gp = prompts[1][1]
    toks = g.greedy(model, gp, g.N_GREEDY)[0]
    assert cached_greedy(model, gp, g.N_GREEDY) == toks, "transformers' cached decode disagrees"
    g.write_goldens(d, "qwen3_5", model, "transformers AutoTokenizer (Qwen2Tokenizer) on tokenizer.json",
                    prompts, 1, g.tokenizer_vectors(tok, g.COMMON_TOKENIZER_TEXTS[:2]),
                    extra={"seed": seed, "init": INIT, "text": TEXT, "tokenizer_size": n_tok,
                           "model_vocab_size": vocab,
                           "hidden_states": {"prompt": 0, "file": "hidden_0.npy"}})
    print("qwen35: seed", seed, "prompt lengths", [len(p[1]) for p in prompts])


if __name__ == "__main__":
    main()
