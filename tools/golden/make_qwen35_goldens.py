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

The text fixture keeps the smallest tower the config allows, with a preprocessor_config.json
(patch 8) so it compiles like any Qwen3.5 checkpoint.

--vision writes tests/fixtures/golden/qwen35vl/ instead: a tiny Qwen3.5 with a real (small)
vision tower, for image prompts (main_vision below).

Usage (from the repo root): build/venv/bin/python tools/golden/make_qwen35_goldens.py [--vision]
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
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil  # noqa: E402

TEXT = dict(hidden=64, inter=128, layers=4, heads=4, kv_heads=2, head_dim=32, hk=2, hv=4, dk=16,
            dv=16, conv=4, eps=1e-6, theta=1000000.0, max_pos=512, partial=0.25)
# The smallest tower the config allows: the text goldens do not use it (qwen35vl does), and its
# tensors count against the fixture's size budget.
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
    Qwen2VLImageProcessorPil(size={"shortest_edge": 4 * 16 * 16, "longest_edge": 16 * 16 * 16},
                             patch_size=VISION["patch_size"], merge_size=VISION["spatial_merge_size"],
                             temporal_patch_size=VISION["temporal_patch_size"], image_mean=[0.5] * 3,
                             image_std=[0.5] * 3).save_pretrained(d)
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


# --- qwen35vl: image prompts -------------------------------------------------------------------
#
# A tiny Qwen3.5 whose vision tower is small but real (Qwen3_5VisionModel: Conv3d patch embed at
# the published patch 16, interpolated position table, 2D rotary, tanh-GELU blocks, 2x2 merger).
# The gated attention layer has head_dim 64 with the published partial_rotary_factor 0.25: 16
# rotated dims, 8 frequencies, mrope_section [4, 2, 2]: h at 1 and 4, w at 2 and 5, t at 0, 3, 6
# and 7 (7 % 3 == 1 but 7 >= 3 * 2: the clip of the sections, as the published [11, 11, 10] has
# none and [24, 20, 20] of Qwen3-VL has). Writes, with golden.json:
#   vision_<name>.npy        the tower's merger output [tokens, hidden] for the image's
#                            pixel_values (Pillow-backend processor); golden.json keeps the pixel
#                            values' float64 sum and sum of squares, not the pixels
#   image_logits_<name>.npy  the image prompt's logits at every position (chat template with the
#                            image run, <think>\n opening the reply; 3D positions)
#   greedy ids (16) per image prompt, and one prompt with thinking off
# Images: procedural odd sizes (make_image_goldens.procedural, also tests/vision/vision_test_util.h)
# and, when ../shared/data/images is there, a photo (its outputs only: the photo and its pixels
# stay outside the repository; the test skips that case without the data).

VL_TEXT = dict(hidden=32, inter=64, layers=4, heads=2, kv_heads=1, head_dim=64, hk=2, hv=4, dk=8,
               dv=8, conv=4, eps=1e-6, theta=10000000.0, max_pos=1024, partial=0.25,
               mrope_section=[4, 2, 2])
VL_VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                 temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=64)
VL_MIN_PIXELS = 4 * 32 * 32
VL_MAX_PIXELS = 16 * 32 * 32
VL_INIT = dict(emb_std=1.0, w_gain=1.6, norm_jitter=0.5, v_bias_std=0.3, v_norm_jitter=0.2, pos_std=1.0,
               vw_gain=1.2)
VL_GREEDY = 16
VL_SEEDS = 48
VL_QUESTION = "What is this?"


def vl_init_weights(model, seed):
    """The text model as the text fixture's init (zero-centred norms random around 0), the vision
    tower as make_qwen3vl_goldens' (large biases and position table, so each part shows), every
    value rounded to bf16: the goldens are the f32 computation on the saved weights."""
    gen = torch.Generator().manual_seed(seed)
    k = VL_INIT
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.startswith("model.visual."):
                if name.endswith(".bias"):
                    p.copy_(k["v_bias_std"] * r)
                elif p.dim() == 1:
                    p.copy_(1.0 + k["v_norm_jitter"] * r)
                elif "pos_embed" in name:
                    p.copy_(k["pos_std"] * r)
                else:
                    p.copy_(k["vw_gain"] / math.sqrt(p[0].numel()) * r)
            elif name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + k["norm_jitter"] * r)
            elif name.endswith("norm.weight"):
                p.copy_(k["norm_jitter"] * r)
            elif name.endswith("A_log"):
                p.copy_(torch.log(0.5 + 8.0 * torch.rand(p.shape, generator=gen)))
            elif name.endswith("dt_bias"):
                p.copy_(0.7 * r)
            elif "embed_tokens" in name:
                p.copy_(k["emb_std"] * r)
            elif name.endswith("conv1d.weight"):
                p.copy_(0.6 * r)
            else:
                p.copy_(k["w_gain"] / math.sqrt(p[0].numel()) * r)
            p.copy_(p.bfloat16().float())


def vl_config(vocab, specials):
    t = VL_TEXT
    text_config = dict(
        vocab_size=vocab, hidden_size=t["hidden"], intermediate_size=t["inter"],
        num_hidden_layers=t["layers"], num_attention_heads=t["heads"],
        num_key_value_heads=t["kv_heads"], head_dim=t["head_dim"],
        linear_num_key_heads=t["hk"], linear_num_value_heads=t["hv"], linear_key_head_dim=t["dk"],
        linear_value_head_dim=t["dv"], linear_conv_kernel_dim=t["conv"],
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        max_position_embeddings=t["max_pos"], rms_norm_eps=t["eps"],
        rope_parameters={"rope_type": "default", "rope_theta": t["theta"],
                         "partial_rotary_factor": t["partial"], "mrope_section": t["mrope_section"],
                         "mrope_interleaved": True},
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=specials["<|im_end|>"])
    conf = Qwen3_5Config(text_config=text_config, vision_config=dict(VL_VISION, out_hidden_size=t["hidden"]),
                         tie_word_embeddings=True, image_token_id=specials["<|image_pad|>"],
                         video_token_id=specials["<|video_pad|>"],
                         vision_start_token_id=specials["<|vision_start|>"],
                         vision_end_token_id=specials["<|vision_end|>"])
    conf._attn_implementation = "eager"
    conf.text_config._attn_implementation = "eager"
    conf.vision_config._attn_implementation = "eager"
    return conf


def vl_prompt_text(thinking=True):
    """Qwen3.5's chat template for one user turn [image, text] with the generation prompt
    (facts file: <think>\n opens the reply; enable_thinking=false closes an empty block)."""
    return ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>" + VL_QUESTION +
            "<|im_end|>\n<|im_start|>assistant\n" + ("<think>\n" if thinking else "<think>\n\n</think>\n\n"))


def vl_images():
    from PIL import Image
    import make_qwen3vl_goldens as vl
    out = [("odd80x144", Image.fromarray(vl.procedural(144, 80), "RGB")),
           ("tiny45x70", Image.fromarray(vl.procedural(70, 45), "RGB"))]
    photo = os.path.join(vl.IMAGES, "image1.jpg")
    if os.path.exists(photo):
        out.append(("image1", Image.open(photo).convert("RGB")))
    else:
        print("note: no", photo, "- the photo case is left out")
    return out


def main_vision():
    import make_qwen3vl_goldens as vl
    d = g.fresh_dir("qwen35vl")
    specials, n_tok = vl.build_tokenizer(d)  # the qwen2 golden's BPE + the vision specials
    vocab = ((n_tok + 63) // 64) * 64
    tok = AutoTokenizer.from_pretrained(d)
    improc = Qwen2VLImageProcessorPil(size={"shortest_edge": VL_MIN_PIXELS, "longest_edge": VL_MAX_PIXELS},
                                      patch_size=VL_VISION["patch_size"],
                                      temporal_patch_size=VL_VISION["temporal_patch_size"],
                                      merge_size=VL_VISION["spatial_merge_size"], image_mean=[0.5] * 3,
                                      image_std=[0.5] * 3)
    conf = vl_config(vocab, specials)
    images = vl_images()
    cases = [(name, img, vl.image_inputs(tok, improc, vl_prompt_text(), img)) for name, img in images]
    no_think = vl.image_inputs(tok, improc, vl_prompt_text(False), images[0][1])

    def make(seed):
        m = Qwen3_5ForConditionalGeneration(conf).float().eval()
        vl_init_weights(m, seed)
        return m

    # The seed: non-degenerate greedy runs whose ids differ between the two procedural images
    # (so the greedy ids depend on the vision rows), with the widest smallest top-1 margin over
    # every golden prompt (thinking off included).
    best = None
    for s in range(5000, 5000 + VL_SEEDS):
        model = make(s)
        ok, worst, runs = True, 1.0, []
        for inputs in [c[2] for c in cases] + [no_think]:
            toks, ratios = vl.greedy(model, inputs, VL_GREEDY)
            ok = ok and len(toks) == VL_GREEDY and len(set(toks)) >= 5
            worst = min(worst, min(ratios))
            runs.append(toks)
        ok = ok and runs[0] != runs[1]
        if best is None or (ok, worst) > best[0]:
            best = ((ok, worst), s)
    assert best[0][0], "no seed gave a non-degenerate greedy run"
    seed = best[1]
    model = make(seed)

    import copy
    saved = copy.deepcopy(model).to(torch.bfloat16)
    saved.config.dtype = torch.bfloat16
    saved.save_pretrained(d, safe_serialization=True)
    gen = os.path.join(d, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    g.write_json(gen, {"bos_token_id": specials["<|endoftext|>"], "do_sample": False,
                       "eos_token_id": [specials["<|im_end|>"], specials["<|endoftext|>"]]})
    improc.save_pretrained(d)
    cfg = g.json.load(open(os.path.join(d, "config.json")))
    assert cfg["model_type"] == "qwen3_5", cfg
    assert cfg["text_config"]["rope_parameters"]["mrope_section"] == VL_TEXT["mrope_section"], cfg
    assert "deepstack_visual_indexes" not in cfg["vision_config"], cfg

    image_entries, prompts = [], []
    for name, img, inputs in cases:
        pv, thw = inputs["pixel_values"], inputs["image_grid_thw"]
        with torch.no_grad():
            merged = model.model.visual(pv, grid_thw=thw, return_dict=True).pooler_output
        np.save(os.path.join(d, f"vision_{name}.npy"), np.ascontiguousarray(merged.numpy().astype("<f4")))
        src = f"procedural:{img.width}x{img.height}" if name != "image1" else "shared:images/image1.jpg"
        pv64 = pv.double()
        image_entries.append({"name": name, "source": src, "input_size": [img.height, img.width],
                              "grid_thw": thw[0].tolist(), "vision": f"vision_{name}.npy",
                              "pixels_sum": float(pv64.sum()), "pixels_sumsq": float((pv64 ** 2).sum()),
                              "pixels_shape": list(pv.shape)})
        toks, ratios = vl.greedy(model, inputs, VL_GREEDY)
        with torch.no_grad():
            lg = model(use_cache=False, **inputs).logits[0].float().numpy()
            pos, delta = model.model.get_rope_index(inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"],
                                                    image_grid_thw=thw)
        np.save(os.path.join(d, f"image_logits_{name}.npy"), np.ascontiguousarray(lg.astype("<f4")))
        prompts.append({"image": name, "thinking": True, "prompt_ids": inputs["input_ids"][0].tolist(),
                        "grid_thw": thw[0].tolist(), "positions_thw": pos[:, 0].tolist(),
                        "rope_delta": int(delta.flatten()[0]), "logits": f"image_logits_{name}.npy",
                        "tokens": toks, "min_margin_over_logit_range": round(min(ratios), 6)})
    # Thinking off (run --no-think): the same image, the closed think block in the prompt.
    name, inputs = cases[0][0], no_think
    toks, ratios = vl.greedy(model, inputs, VL_GREEDY)
    prompts.append({"image": name, "thinking": False, "prompt_ids": inputs["input_ids"][0].tolist(),
                    "grid_thw": inputs["image_grid_thw"][0].tolist(), "tokens": toks,
                    "min_margin_over_logit_range": round(min(ratios), 6)})

    g.write_json(os.path.join(d, "golden.json"), {
        "arch": "qwen3_5", "question": VL_QUESTION,
        "tokenizer_reference": "transformers AutoTokenizer (Qwen2Tokenizer) on tokenizer.json",
        "images": image_entries, "image_prompts": prompts,
        "processor": {"min_pixels": VL_MIN_PIXELS, "max_pixels": VL_MAX_PIXELS, "mean": [0.5] * 3,
                      "std": [0.5] * 3, "backend": "Qwen2VLImageProcessorPil"},
        "seed": seed, "init": VL_INIT, "text": VL_TEXT, "vision": VL_VISION, "tokenizer_size": n_tok,
        "model_vocab_size": vocab, "versions": g.VERSIONS})
    print("qwen35vl: seed", seed, "worst margin / range", best[0][1], "files", sorted(os.listdir(d)))


if __name__ == "__main__":
    main_vision() if sys.argv[1:] == ["--vision"] else main()
