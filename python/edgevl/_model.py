"""The model, its tokenizer and multi-turn sessions: the Python face of the runtime's
``Assistant`` and ``Chat`` (src/runtime/assistant.h)."""

from __future__ import annotations

import inspect
import os
import random
import statistics
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _edgevl
from ._images import ImageLike, prepare
from ._openai import (
    RuntimeMessage,
    chat_chunks,
    chat_response,
    completion_chunks,
    completion_response,
    generation_options,
    parse_messages,
)

#: The generation options every call takes (the CLI's flags under OpenAI-style names).
_OPTIONS = (
    "max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty",
    "presence_penalty", "frequency_penalty", "repeat_last_n", "logit_bias", "seed", "stop",
    "ignore_eos", "json_schema", "response_format", "grammar", "lookup", "draft", "draft_k",
    "beams", "length_penalty", "early_stopping",
)  # fmt: skip

_OPTIONS_DOC = """
    Generation options (the same as ``edgevl run``'s flags):
        max_tokens: most tokens to generate; None: as many as the context has room for.
        temperature: 0 is greedy (argmax); default 0.8.
        top_k, top_p, min_p: the sampler's filters (0, 1.0 and 0 turn them off).
        repeat_penalty: CTRL-style repetition penalty (1.0: off).
        presence_penalty, frequency_penalty: OpenAI's penalties (0: off).
        repeat_last_n: tokens the penalties look back over (-1: all, 0: off).
        logit_bias: {token id: bias} added to the logits; float("-inf") bans a token.
        seed: the sampler's seed (None: random).
        stop: a string or strings that end the reply (not included in it).
        ignore_eos: keep generating past end-of-sequence tokens.
        json_schema: a JSON Schema (dict or text): the reply is a document valid under it.
        response_format: OpenAI's {"type": "json_object"} or {"type": "json_schema", ...}.
        grammar: GBNF text (llama.cpp's dialect): the reply is a sentence of its language.
        lookup: speculative decoding from the context's n-grams (n <= lookup; 0: off).
        draft: speculative decoding with a small .evb of the same tokenizer.
        draft_k: most tokens drafted per verification.
        beams: beam search with this many beams (1: off); length_penalty, early_stopping
            (True, False or "never") as in transformers.
        stream: False returns one dict; True an iterator of chunks as they are generated.
"""


def _with_options_doc(f: Any) -> Any:
    f.__doc__ = inspect.cleandoc(f.__doc__ or "") + "\n\n" + inspect.cleandoc(_OPTIONS_DOC)
    return f


class Tokenizer:
    """The model's tokenizer (read from its .evb)."""

    def __init__(self, m: "_edgevl.Model") -> None:
        self._m = m

    @property
    def vocab_size(self) -> int:
        return self._m.vocab_size

    @property
    def bos_id(self) -> int:
        return self._m.bos_id

    @property
    def eos_id(self) -> int:
        return self._m.eos_id

    @property
    def stop_ids(self) -> List[int]:
        """Token ids that end a generation (EOS and single-token stop strings)."""
        return self._m.stop_ids

    def encode(self, text: Union[str, bytes], add_bos: bool = True, special: bool = True) -> List[int]:
        """Token ids of ``text`` (BOS first when the tokenizer adds one and ``add_bos``;
        ``special``: special-token strings such as ``<|im_end|>`` become their ids)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return self._m.tokenize(text, add_bos, special)

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        """The text of ``ids`` (special tokens left out unless ``skip_special`` is False)."""
        return self._m.detokenize(list(ids), skip_special)

    def piece(self, id: int) -> str:
        """The vocabulary's spelling of one token."""
        return self._m.piece(id)


class Model:
    """A compiled model (.evb) opened to answer, on this CPU's best kernels.

    >>> m = edgevl.Model("v.evb")
    >>> m.chat([{"role": "user", "content": "Hi"}], max_tokens=16)["choices"][0]["message"]

    Args:
        path: the .evb file (``edgevl compile`` or :func:`edgevl.compile`).
        threads: threads for the kernels (None: the physical cores).
        isa: force a lower kernel level for the whole process ("avx2", "avx512", "scalar", ...;
            :func:`edgevl.isa_levels`); None: the best this CPU runs.
        max_tiles: InternVL's most tiles per image (None: the model's).
        max_pixels: the largest image accepted (width x height).
        image_cache_mb: features of images seen again are kept up to this size.
        backend: "cpu", or an HTP target compiled into the model ("htp", "htp-v75", ...).
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        threads: Optional[int] = None,
        isa: Optional[str] = None,
        *,
        max_tiles: Optional[int] = None,
        max_pixels: int = 50_000_000,
        image_cache_mb: int = 64,
        backend: str = "cpu",
    ) -> None:
        if isa is not None:
            _edgevl.select_isa(isa)
        self._m = _edgevl.Model(
            os.fspath(path), threads or 0, max_tiles or 0, max_pixels, image_cache_mb, backend
        )
        self._chat: Optional[_edgevl.Chat] = None  # chat() and generate()'s session
        self.tokenizer = Tokenizer(self._m)

    def __repr__(self) -> str:
        return (
            f"<edgevl.Model {os.path.basename(self.path)}: {self.family}, quant {self.quant}, "
            f"context {self.context}, vision {self.vision}, {self.threads} threads>"
        )

    # --- what it is ---------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._m.path

    @property
    def family(self) -> str:
        """The LLM family ("qwen2", "qwen3", "internlm2", "llama", ...)."""
        return self._m.family

    @property
    def vision(self) -> bool:
        """Whether the model takes images."""
        return self._m.has_vision

    @property
    def context(self) -> int:
        """Tokens of KV cache compiled in."""
        return self._m.context

    @property
    def quant(self) -> str:
        """The projections' storage, as its preset is named ("w8a8", "w4a8", "f16", ...)."""
        return self._m.quant

    @property
    def threads(self) -> int:
        return self._m.threads

    @property
    def isa(self) -> str:
        """The kernel level in use (process-wide)."""
        return _edgevl.active_isa()

    @property
    def generating(self) -> bool:
        """True while a generation runs on this model (from any thread)."""
        return self._m.generating

    # --- tokens -------------------------------------------------------------------------
    def tokenize(self, text: Union[str, bytes], add_bos: bool = True, special: bool = True) -> List[int]:
        """Token ids of ``text`` (see :meth:`Tokenizer.encode`)."""
        return self.tokenizer.encode(text, add_bos, special)

    def detokenize(self, ids: Sequence[int], skip_special: bool = True) -> str:
        """Text of token ids (see :meth:`Tokenizer.decode`)."""
        return self.tokenizer.decode(ids, skip_special)

    # --- generation ---------------------------------------------------------------------
    def _default_chat(self) -> "_edgevl.Chat":
        if self._chat is None:
            self._chat = self._m.new_chat(0)
        return self._chat

    @_with_options_doc
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        images: Optional[Sequence[ImageLike]] = None,
        max_tokens: Optional[int] = None,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_last_n: int = 64,
        logit_bias: Optional[Mapping[int, float]] = None,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        ignore_eos: bool = False,
        json_schema: Union[str, Mapping[str, Any], None] = None,
        response_format: Optional[Mapping[str, Any]] = None,
        grammar: Optional[str] = None,
        lookup: int = 0,
        draft: Optional[str] = None,
        draft_k: int = 8,
        beams: int = 1,
        length_penalty: float = 1.0,
        early_stopping: Union[bool, str] = False,
        thinking: bool = True,
        stream: bool = False,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """The assistant's reply to OpenAI-shaped ``messages``, through the model's chat template.

        ``messages`` is a list of ``{"role": "system" | "user" | "assistant", "content": ...}``;
        content is text or a list of parts: ``{"type": "text", "text": ...}``,
        ``{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..." or a path}}``,
        ``{"type": "image", "image": bytes | PIL.Image | numpy array}``. ``images`` (the same
        forms) are attached to the last user message, as ``edgevl run -i`` does.

        Returns a ``chat.completion`` dict (``choices[0].message.content``, ``usage``, and the
        runtime's ids and timings under ``"edgevl"``), or with ``stream=True`` an iterator of
        ``chat.completion.chunk`` dicts. The session behind ``chat`` keeps the KV cache of the
        last call: a call that extends the previous conversation evaluates its new tokens only.
        ``thinking=False`` opens the reply with the template's thinking-off block (Qwen3.5).
        Ctrl-C raises KeyboardInterrupt between two tokens; the model stays usable.
        """
        opts = self._options(locals())
        msgs = parse_messages(self._m, messages, images)
        return self._respond(self._default_chat(), msgs, thinking, opts, stream)

    @_with_options_doc
    def generate(
        self,
        prompt: Union[str, Sequence[int]],
        *,
        add_bos: bool = True,
        max_tokens: Optional[int] = None,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_last_n: int = 64,
        logit_bias: Optional[Mapping[int, float]] = None,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        ignore_eos: bool = False,
        json_schema: Union[str, Mapping[str, Any], None] = None,
        response_format: Optional[Mapping[str, Any]] = None,
        grammar: Optional[str] = None,
        lookup: int = 0,
        draft: Optional[str] = None,
        draft_k: int = 8,
        beams: int = 1,
        length_penalty: float = 1.0,
        early_stopping: Union[bool, str] = False,
        stream: bool = False,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """A continuation of raw text (no chat template), as ``edgevl run --raw``.

        ``prompt`` is text (BOS first when the tokenizer adds one and ``add_bos``) or token ids
        as they are. Returns a ``text_completion`` dict (``choices[0].text``, ``usage``,
        ``"edgevl"``: ids and timings), or with ``stream=True`` an iterator of its chunks.
        """
        opts = self._options(locals())
        chat = self._default_chat()
        p = prompt if isinstance(prompt, str) else list(prompt)
        out = chat.complete(p, add_bos, opts, stream)
        if stream:
            return completion_chunks(out, self._name())
        return completion_response(out, self._name())

    def session(self, system: Optional[str] = None, context: int = 0, thinking: bool = True) -> "Session":
        """A multi-turn conversation with its own KV cache (see :class:`Session`)."""
        return Session(self, system, context, thinking)

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]], images: Optional[Sequence[ImageLike]] = None, thinking: bool = True) -> List[int]:
        """The token ids ``chat`` would evaluate for ``messages`` (no graph runs)."""
        return self._default_chat().prompt_ids(parse_messages(self._m, messages, images), thinking)

    # --- images -------------------------------------------------------------------------
    def image(self, image: ImageLike) -> "_edgevl.Image":
        """An image decoded and preprocessed for this model (reusable across calls)."""
        return prepare(self._m, image)

    def embed_image(self, image: ImageLike) -> Any:
        """The projector's features of an image: a read-only float32 numpy array over the
        runtime's buffer (no copy), ``[tiles, tokens per tile, hidden]`` for InternVL's tiles,
        else ``[tokens, hidden]``."""
        return self._m.embed_image(prepare(self._m, image))

    # --- speed --------------------------------------------------------------------------
    def bench(self, prompt_tokens: int = 128, gen_tokens: int = 32, reps: int = 3, seed: int = 1) -> Dict[str, Any]:
        """Prefill and decode speed on random token ids: medians of ``reps`` runs after a
        warm-up, each on an empty KV cache, greedy, ignoring EOS. ``edgevl bench`` measures
        more (depths, vision tiles, kernel paths); this is the quick check from Python."""
        rng = random.Random(seed)
        stops = set(self.tokenizer.stop_ids)
        ids = [i for i in (rng.randrange(self.tokenizer.vocab_size) for _ in range(4 * prompt_tokens)) if i not in stops]
        ids = ids[:prompt_tokens]
        chat = self._m.new_chat(0)
        opts = {"max_tokens": gen_tokens, "temperature": 0.0, "ignore_eos": True}
        pp: List[float] = []
        tg: List[float] = []
        for rep in range(reps + 1):
            chat.reset()
            r = chat.complete(ids, False, opts, False)
            if rep == 0:
                continue  # warm-up: first touches of the weights and arenas
            pp.append(r["prompt_tokens"] * 1000.0 / r["prefill_ms"] if r["prefill_ms"] > 0 else 0.0)
            tg.append(r["decode_tok_s"])
        info = _edgevl.cpu_info()
        return {
            "prompt_tokens": len(ids),
            "gen_tokens": gen_tokens,
            "reps": reps,
            "prefill_tok_s": statistics.median(pp),
            "decode_tok_s": statistics.median(tg),
            "threads": self.threads,
            "isa": info["level"],
            "cpu": info["cpu_model"],
        }

    # --- internals ----------------------------------------------------------------------
    def _name(self) -> str:
        return os.path.basename(self.path)

    @staticmethod
    def _options(args: Mapping[str, Any]) -> Dict[str, Any]:
        return generation_options(**{k: args[k] for k in _OPTIONS if k in args})

    def _respond(
        self,
        chat: "_edgevl.Chat",
        msgs: List[RuntimeMessage],
        thinking: bool,
        opts: Dict[str, Any],
        stream: bool,
        on_end: Any = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        out = chat.respond(msgs, thinking, opts, stream)
        if stream:
            return chat_chunks(out, self._name(), on_end)
        if on_end is not None:
            on_end(out)
        return chat_response(out, self._name())


class Session:
    """A multi-turn conversation: its messages, and a KV cache that keeps them, so that each
    turn evaluates only its new tokens (images already seen are not encoded again).

    >>> s = m.session(system="Be brief.")
    >>> s.send("What is in the picture?", images=["photo.jpg"], max_tokens=64)
    >>> s.send("And the colour?")        # reuses the first turn's KV rows

    A turn joins the history once answered; a reply cut short (Ctrl-C, a stream left early)
    leaves the history as it was.
    """

    def __init__(self, model: Model, system: Optional[str] = None, context: int = 0, thinking: bool = True) -> None:
        self._model = model
        self._chat = model._m.new_chat(context)
        self._messages: List[RuntimeMessage] = [("system", system, [])] if system else []
        self.thinking = thinking
        self.history: List[Dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        self.last: Optional[Dict[str, Any]] = None  # the runtime's statistics of the last reply

    @property
    def context(self) -> int:
        return self._chat.context

    def send(
        self,
        content: Union[str, Sequence[Mapping[str, Any]]],
        *,
        images: Optional[Sequence[ImageLike]] = None,
        stream: bool = False,
        **options: Any,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """The reply to a user message (text, or OpenAI content parts), with ``images``
        attached; takes every generation option of :meth:`Model.chat`. Returns a
        ``chat.completion`` dict, or with ``stream=True`` an iterator of chunks."""
        unknown = set(options) - set(_OPTIONS)
        if unknown:
            raise TypeError(f"unexpected option(s): {', '.join(sorted(unknown))}")
        user: Dict[str, Any] = {"role": "user", "content": content}
        msgs = self._messages + parse_messages(self._model._m, [user], images)
        if images:  # the history shows them as parts (the prepared images, reusable as they are)
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            added = msgs[-1][2][len(msgs[-1][2]) - len(images):]  # after the parts' own, in order
            user = {"role": "user", "content": parts + [{"type": "image", "image": i} for i in added]}
        opts = generation_options(**options)

        def commit(r: Dict[str, Any]) -> None:
            self.last = r
            if r["stop_reason"] != "cancelled":
                self._messages = msgs + [("assistant", r["text"], [])]
                self.history += [user, {"role": "assistant", "content": r["text"]}]

        return self._model._respond(self._chat, msgs, self.thinking, opts, stream, commit)

    def reset(self) -> None:
        """Forgets the conversation (the system message stays) and the KV cache."""
        self._messages = [m for m in self._messages if m[0] == "system"]
        self.history = [m for m in self.history if m["role"] == "system"]
        self._chat.reset()
