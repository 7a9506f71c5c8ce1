"""The package and the model: version, properties, tokens, errors, help(), threads, ISA."""

from __future__ import annotations

import pydoc
import re

import pytest
from conftest import GOLDEN, IMAGES, ROOT, edgevl, golden, ids_of, run_cli


def test_version_is_the_projects():
    want = re.search(r"project\(edgevl VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    assert edgevl.__version__ == want.group(1)


def test_properties(qwen2):
    assert qwen2.family == "qwen2"
    assert qwen2.vision is False
    assert qwen2.context > 0
    assert qwen2.quant == "f32"
    assert qwen2.threads == 2
    assert qwen2.tokenizer.vocab_size == golden("qwen2")["tokenizer_size"]
    assert qwen2.isa in edgevl.isa_levels()
    assert "qwen2" in repr(qwen2)


def test_tokenize_matches_the_reference_and_the_cli(qwen2, qwen2_path):
    for v in golden("qwen2")["tokenizer_vectors"]:
        ids = qwen2.tokenize(v["text"], add_bos=False)
        assert ids == v["ids"], v["text"]
        assert qwen2.detokenize(ids, skip_special=False) == v["decoded"]
    text = "The quick brown fox jumps over the lazy dog."
    cli = run_cli("tokenize", "-m", qwen2_path, text, "--json")
    assert qwen2.tokenize(text) == cli["ids"]
    assert qwen2.tokenize(text.encode()) == cli["ids"]


def test_errors_carry_the_runtimes_message(tmp_path, qwen2):
    with pytest.raises(edgevl.Error, match="missing.evb"):
        edgevl.Model(tmp_path / "missing.evb")
    with pytest.raises(TypeError, match="temperature"):
        qwen2.generate("Hi", temperature="hot", max_tokens=2)
    with pytest.raises(edgevl.Error, match="top.p"):
        qwen2.generate("Hi", top_p=0.0, max_tokens=2)
    with pytest.raises(edgevl.ContextFullError, match="max_tokens"):
        qwen2.generate("Hi", max_tokens=qwen2.context + 1)
    with pytest.raises(edgevl.Error, match="text-only"):
        qwen2.chat([{"role": "user", "content": "Hi"}], images=[str(IMAGES / "baseline.jpg")])
    with pytest.raises(ValueError, match="last message"):
        qwen2.chat([{"role": "assistant", "content": "Hi"}])
    with pytest.raises(edgevl.Error, match="alternatives"):
        qwen2.generate("Hi", json_schema={"type": "object"}, grammar='root ::= "a"')
    with pytest.raises(edgevl.Error):
        edgevl.select_isa("no-such-level")
    with pytest.raises(edgevl.Error, match="outside the vocabulary"):
        qwen2.generate([1 << 30], max_tokens=1)


def test_help_documents_the_api():
    doc = pydoc.render_doc(edgevl.Model, renderer=pydoc.plaintext)
    for name in ("chat", "generate", "session", "tokenize", "embed_image", "bench", "temperature",
                 "json_schema", "image_url", "KeyboardInterrupt"):
        assert name in doc, name
    assert "quant" in (edgevl.compile.__doc__ or "")


def test_threads_give_the_same_greedy_tokens(qwen2_path, qwen2):
    g = golden("qwen2")["greedy"]
    one = edgevl.Model(qwen2_path, threads=1)
    assert one.threads == 1
    a = one.generate(g["prompt_ids"], max_tokens=32, temperature=0, ignore_eos=True)
    b = qwen2.generate(g["prompt_ids"], max_tokens=32, temperature=0, ignore_eos=True)
    assert ids_of(a) == ids_of(b) == g["tokens"]


def test_isa_can_be_forced_and_restored(qwen2_path):
    try:
        m = edgevl.Model(qwen2_path, threads=1, isa="scalar")
        assert m.isa == "scalar"
        g = golden("qwen2")["greedy"]
        r = m.generate(g["prompt_ids"], max_tokens=32, temperature=0, ignore_eos=True)
        assert ids_of(r) == g["tokens"]
    finally:
        edgevl.select_isa("best")
    assert edgevl.Model(qwen2_path).isa == edgevl.cpu_info()["level"]


def test_bench_reports_speeds(qwen2):
    b = qwen2.bench(prompt_tokens=32, gen_tokens=8, reps=1)
    assert b["prefill_tok_s"] > 0 and b["decode_tok_s"] > 0
    assert b["prompt_tokens"] == 32 and b["cpu"]


def test_compile_from_python(tmp_path):
    lines = []
    out = tmp_path / "q.evb"
    s = edgevl.compile(GOLDEN / "qwen2", out, quant="f16", progress=lines.append)
    assert out.exists() and s["file_bytes"] == out.stat().st_size
    assert lines
    m = edgevl.Model(out)
    assert m.quant == "f16" and m.family == "qwen2"


def test_compile_with_calibration_samples_and_overrides(tmp_path):
    out = tmp_path / "c.evb"
    s = edgevl.compile(GOLDEN / "qwen2", out, quant="w8a8",
                       calib=["The quick brown fox.", {"text": "Capital of France?"}])  # fmt: skip
    assert s["calibrated"]
    assert edgevl.Model(out).quant == "w8a8"
    with pytest.raises(edgevl.Error):
        edgevl.compile(tmp_path / "nowhere", tmp_path / "x.evb")
