"""Images in every form a caller has them, turned into the runtime's prepared images.

Paths, ``file://`` URLs, ``data:`` URIs, encoded bytes (JPEG, PNG, BMP), PIL images and numpy
``H x W x 3`` uint8 arrays all end in the same decoder and preprocessor as ``edgevl run -i``:
encoded forms are decoded by the runtime (libjpeg-turbo, bit-identical to Pillow), pixel forms
are handed over as RGB without copying where the array already is contiguous uint8.
"""

from __future__ import annotations

import base64
import io
import os
from typing import Any, Union

from . import _edgevl

#: Anything :meth:`edgevl.Model.chat` accepts as an image.
ImageLike = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]


def _from_data_uri(uri: str) -> bytes:
    head, sep, payload = uri.partition(",")
    if not sep or not head.endswith(";base64"):
        raise ValueError("a data: URI must be base64-encoded (data:image/...;base64,...)")
    kind = head[5:-7]
    if kind and not kind.startswith("image/"):
        raise ValueError(f"data: URI of type '{kind}' is not an image")
    try:
        data = base64.b64decode(payload, validate=False)
    except ValueError as e:
        raise ValueError(f"the data: URI's base64 payload is malformed: {e}") from None
    if not data:
        raise ValueError("the data: URI holds no bytes")
    return data


def _rgb_array(arr: Any) -> Any:
    import numpy as np

    a = np.asarray(arr)
    if a.dtype != np.uint8:
        raise TypeError(f"an image array must be uint8 (got {a.dtype}); scale floats to 0..255")
    if a.ndim == 2:  # grayscale: the same value in R, G and B, as Pillow's convert("RGB")
        a = np.repeat(a[:, :, None], 3, axis=2)
    elif a.ndim == 3 and a.shape[2] == 4:  # RGBA: alpha dropped, as Pillow's convert("RGB")
        a = a[:, :, :3]
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"an image array is height x width x 3 (got shape {a.shape})")
    return np.ascontiguousarray(a)


def _is_pil(x: Any) -> bool:
    return type(x).__module__.startswith("PIL.") and hasattr(x, "convert")


def prepare(model: "_edgevl.Model", x: ImageLike, what: str = "image") -> "_edgevl.Image":
    """One image of any accepted form, decoded and preprocessed for ``model``."""
    if isinstance(x, _edgevl.Image):
        return x
    if isinstance(x, (bytes, bytearray, memoryview)):
        return model.image_bytes(x, what)
    if isinstance(x, (str, os.PathLike)):
        s = os.fspath(x)
        if s.startswith("data:"):
            return model.image_bytes(_from_data_uri(s), what)
        if s.startswith(("http://", "https://")):
            raise ValueError(
                f"{what}: remote image URLs are not fetched; download the image and pass its "
                "path, bytes or a data: URI"
            )
        if s.startswith("file://"):
            s = s[len("file://"):]
        return model.image_file(s)
    if _is_pil(x):
        rgb = x.convert("RGB")
        try:
            return model.image_rgb(_rgb_array(rgb))
        except ImportError:  # no numpy: the pixels through a lossless PNG
            buf = io.BytesIO()
            rgb.save(buf, format="PNG")
            return model.image_bytes(buf.getvalue(), what)
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
        return model.image_rgb(_rgb_array(x))
    raise TypeError(
        f"{what}: expected a path, a data: URI, bytes, a PIL image or a numpy HxWx3 uint8 array "
        f"(got {type(x).__name__})"
    )
