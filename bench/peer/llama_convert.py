#!/usr/bin/env python3
"""Runs llama.cpp's own convert_hf_to_gguf.py on an `edgevl synth` checkpoint.

For the families whose GGUF layout bench/peer/to_gguf.py does not write (Qwen3.5's Gated
DeltaNet layers, Qwen3-VL's DeepStack and their vision projectors), the peer's converter is the
authority on its own format. One thing is patched: the converter identifies the pre-tokenizer by
hashing the tokenizer's output on a test string, and a synth checkpoint's tokenizer (vocab.json
and merges.txt, no tokenizer.json) hashes to nothing it knows. Benchmarks feed token ids, so the
pre-tokenizer is named here (--pre) instead of detected.

  llama_convert.py --llama-src DIR --pre qwen35 CKPT OUT.gguf [convert_hf_to_gguf options...]

DIR is a llama.cpp source tree (convert_hf_to_gguf.py, conversion/, gguf-py/), e.g. the one
vendored in llama-cpp-python's sdist (bench/peer/llama_tools.sh fetches and builds it).
"""
import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--pre", required=True, help="llama.cpp pre-tokenizer name (qwen2, qwen35)")
    a, rest = ap.parse_known_args()
    src = os.path.abspath(a.llama_src)
    if not os.path.isfile(os.path.join(src, "convert_hf_to_gguf.py")):
        raise SystemExit(f"--llama-src {src}: no convert_hf_to_gguf.py there")
    sys.path[:0] = [src, os.path.join(src, "gguf-py")]
    from conversion.base import TextModel  # noqa: E402 (the path above makes it importable)

    TextModel.get_vocab_base_pre = lambda self, tokenizer: a.pre
    import convert_hf_to_gguf  # noqa: E402

    sys.argv = ["convert_hf_to_gguf.py", *rest]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
