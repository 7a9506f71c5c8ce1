"""edgevl: vision-language and language models compiled to one .evb and run on CPUs.

The Python package over edgevl's runtime (the C++ engine of ``edgevl run``, ``chat`` and
``serve``), in the manner of llama-cpp-python::

    import edgevl
    m = edgevl.Model("v.evb")                         # edgevl.compile(checkpoint, "v.evb")
    r = m.chat([{"role": "user", "content": "What is in the picture?"}],
               images=["photo.jpg"], max_tokens=64)
    print(r["choices"][0]["message"]["content"])
    for chunk in m.chat([...], stream=True): ...      # OpenAI-shaped chunks

Main entry points: :class:`Model` (``chat``, ``generate``, ``session``, ``tokenize``,
``embed_image``, ``bench``), :class:`Session` (multi-turn with prefix reuse), :func:`compile`.
Errors from the runtime raise :class:`Error` (a RuntimeError) with its message.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

from . import _edgevl
from ._edgevl import ContextFullError, Error, Image, cpu_info, isa_levels, select_isa, synth_archs
from ._model import Model, Session, Tokenizer

__version__: str = _edgevl.__version__

__all__ = [
    "Model", "Session", "Tokenizer", "Image", "Error", "ContextFullError", "compile", "synth",
    "synth_archs", "cpu_info", "isa_levels", "select_isa", "__version__",
]  # fmt: skip


def compile(
    checkpoint_dir: Union[str, "os.PathLike[str]"],
    out: Union[str, "os.PathLike[str]"],
    quant: str = "w8a8",
    overrides: Union[str, "os.PathLike[str]", Mapping[str, Any], None] = None,
    calib: Union[str, "os.PathLike[str]", Sequence[Union[str, Mapping[str, Any]]], None] = None,
    progress: Union[Callable[[str], Any], bool, None] = None,
    *,
    context: int = 0,
    kv: str = "auto",
    vision_quant: Optional[str] = None,
    group: int = 32,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """Compiles a hub checkpoint directory (config.json, *.safetensors, tokenizer files) into a
    .evb, as ``edgevl compile`` does.

    Args:
        checkpoint_dir: the checkpoint directory.
        out: the .evb to write.
        quant: preset: "f32", "f16", "bf16", "w8a8", "w4a8", "w4a16".
        overrides: per-tensor storage (the ``--overrides`` JSON): a path or the dict itself.
        calib: calibration samples: a JSONL path, or a list of texts or
            ``{"text": ..., "image": path}`` dicts.
        progress: called with each progress line; True prints them to stderr.
        context: KV capacity in tokens (0: min(max_position_embeddings, 4096)).
        kv: KV cache type: "f32", "f16", "q8" or "auto".
        vision_quant: the vision tower's storage ("f32", "f16", "bf16", "w8a8"; None: the
            preset's).
        group: Q4 group size (32, 64, 128).
        threads: threads for calibration (None: the physical cores).

    Returns: {"path", "file_bytes", "weight_bytes", "tensors", "seconds", "calibrated", ...}.
    """
    if progress is True:
        progress = lambda line: print(line, file=sys.stderr)  # noqa: E731
    elif progress is False:
        progress = None
    with tempfile.TemporaryDirectory(prefix="edgevl-compile-") as tmp:
        ov = ""
        if isinstance(overrides, Mapping):
            ov = os.path.join(tmp, "overrides.json")
            with open(ov, "w") as f:
                json.dump(overrides, f)
        elif overrides is not None:
            ov = os.fspath(overrides)
        cal = ""
        if isinstance(calib, (str, os.PathLike)):
            cal = os.fspath(calib)
        elif calib is not None:
            cal = os.path.join(tmp, "calib.jsonl")
            with open(cal, "w") as f:
                for s in calib:
                    f.write(json.dumps({"text": s} if isinstance(s, str) else dict(s)) + "\n")
        return _edgevl.compile(
            os.fspath(checkpoint_dir), os.fspath(out), quant, ov, cal, context, kv,
            vision_quant or "", group, threads or 0, progress,
        )  # fmt: skip


def synth(
    arch: str,
    out: Union[str, "os.PathLike[str]"],
    layers: Optional[int] = None,
    vision_layers: Optional[int] = None,
    seed: int = 1,
    dtype: str = "bf16",
    progress: Union[Callable[[str], Any], bool, None] = None,
) -> str:
    """Writes a random-weight checkpoint of a real architecture's shape in the hub layout, as
    ``edgevl synth`` does: the input of tests, examples and benchmarks (its words are noise;
    shapes, tiles, image tokens and timings are real).

    Args:
        arch: one of :func:`synth_archs` ("internvl2-1b", "qwen2-0.5b", "qwen3-1.7b", ...).
        out: the checkpoint directory to write.
        layers: LLM layers (None: the real count); vision_layers: InternViT layers likewise.
        seed: same seed, same bytes. dtype: "bf16" (as on the hub), "f16" or "f32".
        progress: called with each progress line; True prints them to stderr.

    Returns: the directory, for :func:`compile`.
    """
    if progress is True:
        progress = lambda line: print(line, file=sys.stderr)  # noqa: E731
    elif progress is False:
        progress = None
    _edgevl.synth(
        arch, os.fspath(out), -1 if layers is None else layers,
        -1 if vision_layers is None else vision_layers, seed, dtype, False, progress,
    )  # fmt: skip
    return os.fspath(out)
