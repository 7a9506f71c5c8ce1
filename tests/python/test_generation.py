"""Generation through Python against the goldens and the CLI: greedy ids, streaming, sampling
options, constrained output, beams, speculation, multi-turn reuse and interruption."""

from __future__ import annotations

import _thread
import json
import threading
import time

import pytest
from conftest import edgevl, golden, ids_of, run_cli, text_of

SYSTEM = "You are a helpful assistant."
QUESTION = "Capital of France?"
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


def test_greedy_ids_equal_the_reference(qwen2):
    g = golden("qwen2")["greedy"]
    r = qwen2.generate(g["prompt_ids"], max_tokens=len(g["tokens"]), temperature=0, ignore_eos=True)
    assert ids_of(r) == g["tokens"]
    assert r["object"] == "text_completion" and r["usage"]["completion_tokens"] == len(g["tokens"])


def test_chat_prompt_is_the_references(qwen2):
    assert qwen2.prompt_tokens(MESSAGES) == golden("qwen2")["greedy"]["prompt_ids"]


def test_chat_greedy_ids_equal_the_clis(qwen2, qwen2_path):
    cli = run_cli("run", "-m", qwen2_path, "--system", SYSTEM, "-p", QUESTION, "-n", "32",
                  "--temp", "0", "--ignore-eos", "--json")  # fmt: skip
    r = qwen2.chat(MESSAGES, max_tokens=32, temperature=0, ignore_eos=True)
    assert ids_of(r) == cli["tokens"]
    assert text_of(r) == cli["text"]
    assert r["object"] == "chat.completion"
    assert r["choices"][0]["message"]["role"] == "assistant"
    assert r["usage"]["prompt_tokens"] == cli["prompt_tokens"]


def test_raw_greedy_ids_equal_the_clis(qwen2, qwen2_path):
    text = golden("qwen2")["prompts"][0]["text"]
    cli = run_cli("run", "-m", qwen2_path, "--raw", "-p", text, "-n", "24", "--temp", "0",
                  "--ignore-eos", "--json")  # fmt: skip
    assert ids_of(qwen2.generate(text, max_tokens=24, temperature=0, ignore_eos=True)) == cli["tokens"]


def test_sampling_options_equal_the_clis(qwen2, qwen2_path):
    cli = run_cli("run", "-m", qwen2_path, "-p", QUESTION, "-n", "24", "--temp", "1.1",
                  "--top-k", "20", "--top-p", "0.9", "--min-p", "0.02", "--repeat-penalty", "1.1",
                  "--presence-penalty", "0.3", "--frequency-penalty", "0.2",
                  "--repeat-last-n", "16", "--seed", "7", "--ignore-eos", "--json")  # fmt: skip
    kw = dict(max_tokens=24, temperature=1.1, top_k=20, top_p=0.9, min_p=0.02, repeat_penalty=1.1,
              presence_penalty=0.3, frequency_penalty=0.2, repeat_last_n=16, seed=7, ignore_eos=True)
    a = qwen2.chat([{"role": "user", "content": QUESTION}], **kw)
    b = qwen2.chat([{"role": "user", "content": QUESTION}], **kw)
    assert ids_of(a) == ids_of(b) == cli["tokens"]


def test_streaming_equals_not_streaming(qwen2):
    whole = qwen2.chat(MESSAGES, max_tokens=32, temperature=0, ignore_eos=True)
    chunks = list(qwen2.chat(MESSAGES, max_tokens=32, temperature=0, ignore_eos=True, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == text_of(whole)
    assert len(chunks) > 3  # piece by piece, not one block at the end
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["edgevl"]["tokens"] == ids_of(whole)
    assert last["usage"] == whole["usage"]
    raw = list(qwen2.generate("Once upon", max_tokens=16, temperature=0, stream=True))
    assert "".join(c["choices"][0]["text"] for c in raw) == text_of(
        qwen2.generate("Once upon", max_tokens=16, temperature=0)
    )


def test_stop_strings_end_the_reply(qwen2):
    full = text_of(qwen2.chat(MESSAGES, max_tokens=32, temperature=0, ignore_eos=True))
    stop = full[len(full) // 2:][:3]
    assert stop
    r = qwen2.chat(MESSAGES, max_tokens=32, temperature=0, ignore_eos=True, stop=[stop])
    assert text_of(r) == full[: full.index(stop)]
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["edgevl"]["stop_reason"] == "stop_string"


def test_logit_bias_bans_a_token(qwen2):
    g = golden("qwen2")["greedy"]
    first = g["tokens"][0]
    r = qwen2.generate(g["prompt_ids"], max_tokens=2, temperature=0, logit_bias={first: float("-inf")})
    assert ids_of(r)[0] != first
    r = qwen2.generate(g["prompt_ids"], max_tokens=2, temperature=0, logit_bias={str(first): -1e9})
    assert ids_of(r)[0] != first


def test_json_schema_gives_a_valid_document(qwen2):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
              "required": ["city", "people"]}  # fmt: skip
    r = qwen2.chat([{"role": "user", "content": "A city as JSON"}], json_schema=schema,
                   max_tokens=48, temperature=0)  # fmt: skip
    doc = json.loads(text_of(r))
    assert isinstance(doc["city"], str) and isinstance(doc["people"], int)
    r = qwen2.chat([{"role": "user", "content": "JSON"}], max_tokens=48, seed=3,
                   response_format={"type": "json_object"})  # fmt: skip
    assert isinstance(json.loads(text_of(r)), dict)
    r = qwen2.chat([{"role": "user", "content": "Yes?"}], grammar='root ::= "yes" | "no"',
                   max_tokens=8, seed=5)  # fmt: skip
    assert text_of(r) in ("yes", "no")


def test_beams_equal_the_clis(qwen2, qwen2_path):
    cli = run_cli("run", "-m", qwen2_path, "-p", QUESTION, "-n", "12", "--beams", "3", "--json")
    r = qwen2.chat([{"role": "user", "content": QUESTION}], max_tokens=12, beams=3)
    assert ids_of(r) == cli["tokens"]
    assert r["edgevl"]["beam_score"] == pytest.approx(cli["score"], rel=1e-5)


def test_speculation_keeps_greedy_tokens(qwen2):
    g = golden("qwen2")["greedy"]
    r = qwen2.generate(g["prompt_ids"], max_tokens=32, temperature=0, ignore_eos=True, lookup=3)
    assert ids_of(r) == g["tokens"]
    assert r["edgevl"]["spec_passes"] > 0


def test_session_reuses_the_prefix(qwen2_path):
    m = edgevl.Model(qwen2_path, threads=2)
    s = m.session(system=SYSTEM)
    r1 = s.send(QUESTION, max_tokens=8, temperature=0, ignore_eos=True)
    r2 = s.send("And of Spain?", max_tokens=8, temperature=0, ignore_eos=True)
    assert r2["edgevl"]["reused_tokens"] >= r1["usage"]["prompt_tokens"]
    assert [h["role"] for h in s.history] == ["system", "user", "assistant", "user", "assistant"]
    # The same conversation from scratch gives the same reply: reuse changes no token.
    fresh = edgevl.Model(qwen2_path, threads=2)
    r = fresh.chat(s.history[:-1], max_tokens=8, temperature=0, ignore_eos=True)
    assert r["edgevl"]["reused_tokens"] == 0
    assert ids_of(r) == ids_of(r2)
    # A streamed turn joins the history once it ends.
    chunks = list(s.send("And Italy?", max_tokens=4, temperature=0, ignore_eos=True, stream=True))
    assert s.history[-1]["content"] == "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    s.reset()
    assert [h["role"] for h in s.history] == ["system"]


def _interrupt_once_generating(m) -> threading.Thread:
    """Ctrl-C as a user gives it: once `m` generates, a pending SIGINT for the main thread."""

    def watch():
        deadline = time.monotonic() + 30
        while not m.generating and time.monotonic() < deadline:
            time.sleep(0.0005)
        _thread.interrupt_main()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


# The golden InternVL's LLM has a 4096-token context: a generation that fills it runs far longer
# than the watcher takes to see it (the Qwen2 golden's 512 would be over in milliseconds).
PROMPT = "Once upon a time"


def test_ctrl_c_interrupts_and_leaves_the_model_usable(internvl):
    want = ids_of(internvl.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True))
    t = _interrupt_once_generating(internvl)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        internvl.generate(PROMPT, temperature=0, ignore_eos=True)  # as long as the context allows
    t.join()
    assert time.monotonic() - start < 10
    assert not internvl.generating
    assert ids_of(internvl.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True)) == want


def test_ctrl_c_interrupts_a_stream(internvl):
    want = ids_of(internvl.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True))
    t = _interrupt_once_generating(internvl)
    with pytest.raises(KeyboardInterrupt):
        for _ in internvl.generate(PROMPT, temperature=0, ignore_eos=True, stream=True):
            pass
    t.join()
    # The loop's iterator was closed as the exception left it: its generation has stopped.
    assert not internvl.generating
    assert ids_of(internvl.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True)) == want


def test_a_stream_left_early_stops_its_generation(internvl):
    want = ids_of(internvl.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True))
    for i, _ in enumerate(internvl.generate(PROMPT, temperature=0, ignore_eos=True, stream=True)):
        if i == 3:
            break
    assert not internvl.generating
    assert ids_of(internvl.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True)) == want


def test_a_draft_model_keeps_greedy_tokens(qwen2, qwen2_path):
    g = golden("qwen2")["greedy"]
    r = qwen2.generate(g["prompt_ids"], max_tokens=32, temperature=0, ignore_eos=True,
                       draft=qwen2_path, draft_k=4)  # fmt: skip
    assert ids_of(r) == g["tokens"]
    assert r["edgevl"]["spec_accepted"] > 0


def test_the_gil_is_released_while_generating(internvl):
    # A Python thread keeps running while the main thread generates (with the GIL held it
    # would not run at all until the call returned).
    counts = []

    def count():
        n = 0
        deadline = time.monotonic() + 30
        while not internvl.generating and time.monotonic() < deadline:
            time.sleep(0.0005)
        while internvl.generating:
            n += 1
        counts.append(n)

    t = threading.Thread(target=count)
    t.start()
    internvl.generate(PROMPT, temperature=0, ignore_eos=True)
    t.join()
    assert counts[0] > 1000


def test_raw_beams_equal_the_clis(qwen2, qwen2_path):
    text = golden("qwen2")["prompts"][0]["text"]
    cli = run_cli("run", "-m", qwen2_path, "--raw", "-p", text, "-n", "10", "--beams", "2",
                  "--json")  # fmt: skip
    r = qwen2.generate(text, max_tokens=10, beams=2)
    assert ids_of(r) == cli["tokens"]
