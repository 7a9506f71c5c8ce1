#!/usr/bin/env python3
"""Drives `edgevl serve` with the official `openai` Python client: text, image, streaming,
completions, models, logprobs (chat and completions), `tools` refused, and errors surfacing as
the client's exception class.

  python3 -m venv build/venv-tools && build/venv-tools/bin/pip install openai
  build/venv-tools/bin/python tools/server/openai_client_check.py \
      --edgevl build/edgevl --model m.evb --image tests/fixtures/images/src/wide_3to1.png
(or --base-url http://host:port/v1 for a server already running)
"""
import argparse
import base64
import mimetypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edgevl_server import EdgevlServer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgevl", default="build/edgevl")
    ap.add_argument("--model")
    ap.add_argument("--base-url")
    ap.add_argument("--image")
    a = ap.parse_args()
    import openai

    srv = None
    base = a.base_url
    if not base:
        srv = EdgevlServer(a.edgevl, a.model, "-t", 2)
        base = srv.base + "/v1"
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        failures += not ok
        print(f"[{'ok' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}")

    try:
        client = openai.OpenAI(base_url=base, api_key="unused")
        models = client.models.list()
        model = models.data[0].id
        check("models.list", len(models.data) == 1, model)

        r = client.chat.completions.create(model=model, temperature=0, max_tokens=12,
                                           messages=[{"role": "user", "content": "Say hello."}])
        text = r.choices[0].message.content
        check("chat.completions (text)", r.object == "chat.completion" and r.usage.completion_tokens == 12,
              f"{r.usage.prompt_tokens} prompt + {r.usage.completion_tokens} tokens, finish {r.choices[0].finish_reason}")

        stream = client.chat.completions.create(model=model, temperature=0, max_tokens=12, stream=True,
                                                stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "Say hello."}])
        pieces, usage = [], None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
        check("chat.completions (stream)", "".join(pieces) == text and usage is not None,
              f"{len(pieces)} chunks, same text as unstreamed: {''.join(pieces) == text}, "
              f"cached prompt tokens {usage.prompt_tokens_details.cached_tokens if usage else '?'}")

        if a.image:
            mime = mimetypes.guess_type(a.image)[0] or "image/png"
            with open(a.image, "rb") as f:
                uri = f"data:{mime};base64," + base64.b64encode(f.read()).decode()
            r = client.chat.completions.create(model=model, temperature=0, max_tokens=8, messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": uri}},
                                             {"type": "text", "text": "What is in the picture?"}]}])
            check("chat.completions (image)", r.usage.prompt_tokens > 256,
                  f"{r.usage.prompt_tokens} prompt tokens with the image")

        r = client.completions.create(model=model, prompt="Once upon a time", max_tokens=6, temperature=0)
        check("completions", r.object == "text_completion" and r.usage.completion_tokens == 6,
              f"finish {r.choices[0].finish_reason}")

        r = client.chat.completions.create(model=model, temperature=0, max_tokens=6, logprobs=True,
                                           top_logprobs=3,
                                           messages=[{"role": "user", "content": "Say hello."}])
        lp = r.choices[0].logprobs.content if r.choices[0].logprobs else []
        check("chat.completions logprobs", len(lp) == 6 and all(len(t.top_logprobs) == 3 for t in lp)
              and all(t.token == t.top_logprobs[0].token for t in lp),
              " ".join(f"{t.token!r}:{t.logprob:.2f}" for t in lp[:3]))
        r = client.completions.create(model=model, prompt="Once upon a time", max_tokens=4,
                                      temperature=0, logprobs=2)
        clp = r.choices[0].logprobs
        check("completions logprobs", clp is not None and len(clp.tokens) == 4
              and "".join(clp.tokens) == r.choices[0].text, f"{clp.token_logprobs if clp else None}")
        try:
            client.chat.completions.create(model=model, max_tokens=4, messages=[
                {"role": "user", "content": "What is the weather?"}], tools=[{"type": "function",
                "function": {"name": "weather", "parameters": {"type": "object"}}}])
            check("tools refused", False, "no exception")
        except openai.BadRequestError as e:
            check("tools refused", e.status_code == 400 and e.param == "tools", e.message[:90])
        try:
            client.chat.completions.create(model=model, max_tokens=10_000_000,
                                           messages=[{"role": "user", "content": "x"}])
            check("error -> BadRequestError", False, "no exception")
        except openai.BadRequestError as e:
            check("error -> BadRequestError", e.status_code == 400,
                  f"status {e.status_code}, code {e.code}: {e.message[:90]}")
        try:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}])
            check("remote image refused", False, "no exception")
        except openai.BadRequestError as e:
            check("remote image refused", "remote" in e.message, e.message[:90])
    finally:
        if srv:
            srv.close()
    print("openai client check:", "PASS" if failures == 0 else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
