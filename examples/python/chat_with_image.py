"""Chat with an image from Python: the edgevl package end to end, notebook style (the `# %%`
cells run one by one in Jupyter or VS Code, or the whole file as a script).

    pip install ./                                   # from the repository root
    python examples/python/chat_with_image.py        # a small synth InternVL, a bundled photo
    python examples/python/chat_with_image.py --model v.evb --image photo.jpg

Without --model it writes a random-weight InternVL2-1B-shaped checkpoint (2 LLM and 2 vision
layers) and compiles it to w8a8: its words are noise, but the tiles, image tokens, streaming
and timings are real.
"""

# %% Arguments (defaults when run as cells)
import argparse
import pathlib
import sys
import tempfile
import time

import edgevl

ROOT = pathlib.Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--model", help="a compiled .evb (default: synthesize and compile one)")
ap.add_argument("--image", default=str(ROOT / "tests/fixtures/images/src/baseline.jpg"))
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--threads", type=int, default=None)
args = ap.parse_args([] if "ipykernel" in sys.modules else None)
print(f"edgevl {edgevl.__version__} on {edgevl.cpu_info()['cpu_model']}")

# %% A model: synthesized and compiled unless one is given
model_path = args.model
if model_path is None:
    work = pathlib.Path(tempfile.mkdtemp(prefix="edgevl-example-"))
    t0 = time.perf_counter()
    edgevl.synth("internvl2-1b", work / "ckpt", layers=2, vision_layers=2)
    info = edgevl.compile(work / "ckpt", work / "v.evb", quant="w8a8")
    model_path = info["path"]
    print(f"synthesized and compiled {model_path} in {time.perf_counter() - t0:.1f} s")

# %% Open it: a memory map, ready in milliseconds
m = edgevl.Model(model_path, threads=args.threads)
print(m)

# %% Ask about the photo; the reply streams token by token
messages = [
    {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": args.image}},
            {"type": "text", "text": "Describe the image."},
        ],
    }
]
stats = {}
for chunk in m.chat(messages, max_tokens=args.max_tokens, temperature=0, stream=True):
    piece = chunk["choices"][0]["delta"].get("content")
    if piece:
        print(piece, end="", flush=True)
    stats = chunk.get("edgevl", stats)
print()
print(
    f"[{stats['images']} image, {stats['tiles']} tiles, {stats['image_tokens']} image tokens | "
    f"time to first token {stats['ttft_ms']:.0f} ms | {stats['generated_tokens']} tokens at "
    f"{stats['decode_tok_s']:.1f} tok/s | stop: {stats['stop_reason']}]"
)

# %% A conversation: the follow-up evaluates only its new tokens, the image is not encoded again
s = m.session(system="You are a concise assistant.")
first = s.send("What is in the picture?", images=[args.image], max_tokens=16, temperature=0)
second = s.send("And the colours?", max_tokens=16, temperature=0)
print(f"turn 1: {first['usage']['prompt_tokens']} prompt tokens; turn 2 reused "
      f"{second['edgevl']['reused_tokens']} of {second['usage']['prompt_tokens']}, "
      f"vision {second['edgevl']['vision_ms']:.0f} ms")

# %% The projector's features, as a numpy array over the runtime's buffer
try:
    feats = m.embed_image(args.image)
    print(f"image features {feats.shape} {feats.dtype}")
except ImportError:
    print("numpy is not installed: embed_image() needs it")

# %% Constrained output: always a complete JSON document of this schema
schema = {"type": "object", "properties": {"caption": {"type": "string"}}, "required": ["caption"]}
r = m.chat(messages, json_schema=schema, max_tokens=48, temperature=0)
print("JSON:", r["choices"][0]["message"]["content"])
