#!/usr/bin/env python3
"""Video goldens for edgevl's Qwen3-VL family, from transformers' Qwen3VLVideoProcessor and
Qwen3VLForConditionalGeneration, on the Qwen3-VL golden checkpoint that make_qwen3vl_goldens.py
wrote (tests/fixtures/golden/qwen3vl: loaded back from its bf16 safetensors, which hold exactly
the weights its goldens were computed with, so the image goldens stay untouched).

Input: tests/fixtures/video/gradient_88x60_6fps.mp4 (15 frames, 6 fps, H.264 yuv420p, made
procedurally by the ffmpeg CLI: see make_clip below). Writes into the checkpoint directory:

  video_preprocessor_config.json  the processor's settings (shrunk size, so a frame fits the
                                  golden tower's 64 patches; fps 2, frames [4, 768])
  video_frames.npy                the decoded rgb24 frames PyAV gave the processor [n][h][w][3]
                                  (u8 values stored as float32: core/npy reads f32 and i32)
  video_pixels.npy                pixel_values_videos [grid_t * gh * gw][3 * 2 * 16 * 16]
  video_vision.npy                the vision tower's merger output for the video
  video_deepstack_<k>.npy         DeepStack merger k's output
  video.json                      frame indices, fps, timestamps, video_grid_thw, the chat
                                  prompt (Qwen3-VL's template for a video part, expanded by
                                  Qwen3VLProcessor.replace_video_token), its ids, get_rope_index's
                                  positions, and the greedy ids

Needs torchvision (the video processor's backend) and av (PyAV: load_video's default backend) in
the venv; the frames are decoded by load_video(backend="pyav") with the processor's sample_frames.
The same files go into tests/fixtures/golden/qwen35vl (Qwen3.5, make_qwen35_goldens.py --vision:
no DeepStack; the reply opens with <think>\n).

Usage (from the repo root): build/venv/bin/python tools/golden/make_qwen3vl_video_goldens.py
"""

import json
import os
import subprocess
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_llm_goldens as mlg  # noqa: E402
import make_qwen3vl_goldens as q  # noqa: E402
from transformers import AutoTokenizer, Qwen3VLForConditionalGeneration  # noqa: E402
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor  # noqa: E402
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # noqa: E402

ROOT = mlg.ROOT
DIR = os.path.join(ROOT, "tests", "fixtures", "golden", "qwen3vl")
CLIP = os.path.join(ROOT, "tests", "fixtures", "video", "gradient_88x60_6fps.mp4")
# t_bar * h * w within [8192, 65536]: the 88x60 frames go to 96x64 (4 x 6 patches per frame)
VIDEO_SIZE = {"shortest_edge": 8 * 32 * 32, "longest_edge": 64 * 32 * 32}

# Qwen3-VL's published template for a video part of the content.
VIDEO_PART = "<|vision_start|><|video_pad|><|vision_end|>"
QUESTIONS = ["What happens?", "What happens in this video?", "Describe the video.", "What moves?",
             "What is this?", "Tell me about the clip.", "What changes over time?", "Summarize it."]


def make_clip(path):
    """The fixture clip: a moving gradient, 88x60 (sides that smart_resize rounds apart:
    60 -> 64, 88 -> 96), 6 fps, 2.5 s, H.264 yuv420p."""
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "nullsrc=s=88x60:r=6:d=2.5,format=rgb24,geq=r='mod(X*3+T*60\\,256)':"
                    "g='mod(Y*4+T*20\\,256)':b='mod(X+Y+T*90\\,256)'",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "28", "-preset", "veryslow",
                    "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1", path], check=True)


@torch.no_grad()
def greedy(model, inputs, n, video_token):
    ids = inputs["input_ids"][0].tolist()
    toks = []
    for _ in range(n):
        ii = torch.tensor([ids], dtype=torch.long)
        lg = model(input_ids=ii, use_cache=False, pixel_values_videos=inputs["pixel_values_videos"],
                   video_grid_thw=inputs["video_grid_thw"],
                   mm_token_type_ids=2 * (ii == video_token).long()).logits[0, -1].double()
        toks.append(int(torch.argmax(lg)))
        ids.append(toks[-1])
        if toks[-1] >= model.config.vision_start_token_id:
            break  # a vision special: transformers would take a generated pad for a video token
    return toks


def main(d=DIR, model_cls=Qwen3VLForConditionalGeneration, reply_prefix="", save_inputs=True):
    """`reply_prefix`: what the template adds after the generation prompt (Qwen3.5: "<think>\\n",
    make_qwen35_goldens.vl_prompt_text)."""
    DIR = d
    if not os.path.exists(CLIP):
        os.makedirs(os.path.dirname(CLIP), exist_ok=True)
        make_clip(CLIP)
    tok = AutoTokenizer.from_pretrained(DIR)
    vproc = Qwen3VLVideoProcessor(size=VIDEO_SIZE, patch_size=16, temporal_patch_size=2, merge_size=2,
                                  image_mean=q.MEAN, image_std=q.STD, fps=2, min_frames=4, max_frames=768,
                                  cap_pixels_per_frame=False)
    vproc.save_pretrained(DIR)
    model = model_cls.from_pretrained(DIR, dtype=torch.float32, attn_implementation="eager").eval()
    video_token = model.config.video_token_id

    # The loader the processor uses (read_video_pyav through load_video) and its sampling.
    from transformers.video_utils import load_video
    frames, meta = load_video(CLIP, backend="pyav", sample_indices_fn=vproc.sample_frames)
    # The processor's own loading of a path needs torchcodec (or torchvision < 0.26); given the
    # frames PyAV decoded (load_video's default backend) and their metadata, it does the rest.
    out = vproc(videos=[frames], video_metadata=[meta], do_sample_frames=False, return_metadata=True,
                return_tensors="pt")
    pv, thw, vmeta = out["pixel_values_videos"], out["video_grid_thw"], out["video_metadata"][0]
    assert list(vmeta.frames_indices) == list(meta.frames_indices)

    # Qwen3VLProcessor's prompt expansion (its __call__ needs an image processor too: this is
    # its replace_video_token on the template's text).
    proc = Qwen3VLProcessor.__new__(Qwen3VLProcessor)
    proc.video_processor = vproc
    proc.video_token, proc.vision_start_token, proc.vision_end_token = (
        "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
    # The first question whose greedy run is N_GREEDY tokens without a vision special and with
    # MIN_DISTINCT distinct ids (the random model's runs on some prompts are degenerate).
    for question in QUESTIONS:
        text = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                       add_generation_prompt=True)
        text = text.replace("<|im_start|>user\n", "<|im_start|>user\n" + VIDEO_PART, 1) + reply_prefix
        expanded = text.replace("<|video_pad|>", proc.replace_video_token(out, 0), 1)
        ids = torch.tensor([tok(expanded)["input_ids"]])
        inputs = {"input_ids": ids, "pixel_values_videos": pv, "video_grid_thw": thw}
        toks = greedy(model, inputs, q.N_GREEDY, video_token)
        if len(toks) == q.N_GREEDY and len(set(toks)) >= q.MIN_DISTINCT:
            break
    else:
        raise SystemExit("no question gave a non-degenerate greedy run")
    timestamps = proc._calculate_timestamps(list(vmeta.frames_indices), vmeta.fps, 2)

    with torch.no_grad():
        o = model.model.visual(pv, grid_thw=thw, return_dict=True)
        pos, delta = model.model.get_rope_index(ids, mm_token_type_ids=2 * (ids == video_token).long(),
                                                video_grid_thw=thw)
    if save_inputs:  # the frames and pixels are the processor's alone: kept once, in qwen3vl
        np.save(os.path.join(DIR, "video_frames.npy"), np.ascontiguousarray(frames.astype("<f4")))  # u8 values
        np.save(os.path.join(DIR, "video_pixels.npy"), np.ascontiguousarray(pv.numpy().astype("<f4")))
    np.save(os.path.join(DIR, "video_vision.npy"), np.ascontiguousarray(o.pooler_output.numpy().astype("<f4")))
    deepstack = getattr(o, "deepstack_features", None) or []  # Qwen3.5: none
    for k, f in enumerate(deepstack):
        np.save(os.path.join(DIR, f"video_deepstack_{k}.npy"), np.ascontiguousarray(f.numpy().astype("<f4")))
    g = {
        "clip": "tests/fixtures/video/gradient_88x60_6fps.mp4", "reply_prefix": reply_prefix,
        "total_frames": int(meta.total_num_frames), "fps": float(meta.fps),
        "frame_indices": [int(i) for i in meta.frames_indices], "timestamps": timestamps,
        "frames": "video_frames.npy" if save_inputs else "../qwen3vl/video_frames.npy",
        "pixels": "video_pixels.npy" if save_inputs else "../qwen3vl/video_pixels.npy", "grid_thw": thw[0].tolist(),
        "vision": "video_vision.npy",
        "deepstack": [f"video_deepstack_{k}.npy" for k in range(len(deepstack))],
        "text": expanded, "prompt_ids": ids[0].tolist(), "positions_thw": pos[:, 0].tolist(),
        "question": question, "rope_delta": int(delta.flatten()[0]), "tokens": toks,
        "processor": {"class": "Qwen3VLVideoProcessor", "size": VIDEO_SIZE, "fps": 2, "min_frames": 4,
                      "max_frames": 768, "loader": "read_video_pyav"},
        "versions": mlg.VERSIONS,
    }
    import av
    import torchvision
    g["versions"] = dict(g["versions"], av=av.__version__, torchvision=torchvision.__version__)
    mlg.write_json(os.path.join(DIR, "video.json"), g)
    print(os.path.basename(DIR), "video: grid", thw[0].tolist(), "indices", g["frame_indices"], "tokens", toks)


if __name__ == "__main__":
    main()
    # Qwen3.5 (its image golden's checkpoint, patch 16 like Qwen3-VL's): the same processor,
    # no DeepStack, the reply opening with <think>\n as its template does.
    from transformers import Qwen3_5ForConditionalGeneration
    main(os.path.join(ROOT, "tests", "fixtures", "golden", "qwen35vl"), Qwen3_5ForConditionalGeneration,
         "<think>\n", save_inputs=False)
