"""OpenAI-shaped messages in, OpenAI-shaped responses and stream chunks out.

Messages follow the chat completions API (and ``edgevl serve``): ``content`` is a string or a
list of parts; ``text`` parts are joined with newlines, ``image_url`` parts (a ``data:`` URI, a
local path or ``file://`` URL) and ``image`` parts (bytes, PIL image, numpy array) attach to the
message and take their places at ``<image>`` placeholders in the text, or go first.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from . import _edgevl
from ._images import prepare

#: (role, content, images): what the runtime takes for one message.
RuntimeMessage = Tuple[str, str, List["_edgevl.Image"]]


def parse_messages(
    model: "_edgevl.Model",
    messages: Sequence[Mapping[str, Any]],
    images: Optional[Sequence[Any]] = None,
) -> List[RuntimeMessage]:
    """OpenAI-shaped messages as runtime messages; ``images`` join the last user message."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts")
    if not messages:
        raise ValueError("messages must not be empty")
    out: List[RuntimeMessage] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping) or "role" not in m:
            raise ValueError(f"{where}: a message is a dict with a 'role'")
        role = m["role"]
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"{where}.role: unsupported role '{role}' (system, user, assistant)")
        content = m.get("content")
        texts: List[str] = []
        imgs: List[_edgevl.Image] = []
        if content is None:
            if role != "assistant":
                raise ValueError(f"{where}.content is required")
        elif isinstance(content, str):
            texts.append(content)
        elif isinstance(content, Sequence):
            for j, part in enumerate(content):
                what = f"{where}.content[{j}]"
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind == "text":
                    texts.append(part["text"])
                elif kind == "image_url":
                    url = part["image_url"]
                    if isinstance(url, Mapping):
                        url = url["url"]
                    imgs.append(prepare(model, url, what))
                elif kind in ("image", "input_image"):
                    imgs.append(prepare(model, part.get("image", part.get("image_url")), what))
                elif kind == "video_url":
                    url = part["video_url"]
                    url = url["url"] if isinstance(url, Mapping) else url
                    if url.startswith("file://"):
                        url = url[len("file://"):]
                    imgs.append(model.video_file(url))
                else:
                    raise ValueError(f"{what}: unsupported content part type '{kind}'")
        else:
            raise TypeError(f"{where}.content must be a string or a list of parts")
        if imgs and role != "user":
            raise ValueError(f"{where}: only user messages can carry images")
        out.append((role, "\n".join(texts), imgs))
    if out[-1][0] != "user":
        raise ValueError("the last message must be the user's")
    for x in images or ():
        out[-1][2].append(prepare(model, x, "images[]"))
    return out


def generation_options(
    *,
    json_schema: Any = None,
    response_format: Optional[Mapping[str, Any]] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Keyword options for the runtime: a schema dict as JSON text, OpenAI's response_format."""
    if response_format is not None:
        kind = response_format.get("type")
        if kind == "json_object":
            options["json_object"] = True
        elif kind == "json_schema":
            spec = response_format.get("json_schema", {})
            json_schema = spec.get("schema", spec) if isinstance(spec, Mapping) else spec
        elif kind != "text":
            raise ValueError(f"response_format: unsupported type '{kind}'")
    if json_schema is not None:
        options["json_schema"] = (
            json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
        )
    return options


def finish_reason(r: Mapping[str, Any]) -> str:
    return {"length": "length", "cancelled": "cancelled"}.get(r["stop_reason"], "stop")


def usage(r: Mapping[str, Any]) -> Dict[str, int]:
    return {
        "prompt_tokens": r["prompt_tokens"],
        "completion_tokens": r["generated_tokens"],
        "total_tokens": r["prompt_tokens"] + r["generated_tokens"],
    }


def chat_response(r: Dict[str, Any], model_name: str) -> Dict[str, Any]:
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": r["text"]},
                "finish_reason": finish_reason(r),
            }
        ],
        "usage": usage(r),
        "edgevl": r,
    }


def completion_response(r: Dict[str, Any], model_name: str) -> Dict[str, Any]:
    return {
        "id": "cmpl-" + uuid.uuid4().hex,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [{"index": 0, "text": r["text"], "finish_reason": finish_reason(r)}],
        "usage": usage(r),
        "edgevl": r,
    }


def chat_chunks(
    stream: "_edgevl.Stream",
    model_name: str,
    on_end: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> Iterator[Dict[str, Any]]:
    """``chat.completion.chunk`` dicts: the role, one per text piece, then the finish reason with
    ``usage`` and the runtime's ``edgevl`` statistics. Leaving the loop early (break, an
    exception, Ctrl-C) stops the generation; the session stays usable."""
    head = {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model_name,
    }
    try:
        yield {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
        for piece in stream:
            yield {
                **head,
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
        r = stream.result()
        if on_end is not None:
            on_end(r)
        yield {
            **head,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason(r)}],
            "usage": usage(r),
            "edgevl": r,
        }
    finally:
        stream.cancel()


def completion_chunks(stream: "_edgevl.Stream", model_name: str) -> Iterator[Dict[str, Any]]:
    """``text_completion`` chunks, one per text piece, then the finish reason and statistics."""
    head = {
        "id": "cmpl-" + uuid.uuid4().hex,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model_name,
    }
    try:
        for piece in stream:
            yield {**head, "choices": [{"index": 0, "text": piece, "finish_reason": None}]}
        r = stream.result()
        yield {
            **head,
            "choices": [{"index": 0, "text": "", "finish_reason": finish_reason(r)}],
            "usage": usage(r),
            "edgevl": r,
        }
    finally:
        stream.cancel()
