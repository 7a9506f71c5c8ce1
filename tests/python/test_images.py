"""Images through Python: every input form gives the tokens `edgevl run -i` gives, and the
projector's features come out as numpy arrays without a copy."""

from __future__ import annotations

import base64
import io

import pytest
from conftest import IMAGES, edgevl, ids_of, run_cli

QUESTION = "Describe the image."


def _ask(m, image_part=None, images=None):
    content = [{"type": "text", "text": QUESTION}]
    if image_part is not None:
        content.insert(0, image_part)
    return ids_of(m.chat([{"role": "user", "content": content}], images=images, max_tokens=8,
                         temperature=0, ignore_eos=True))  # fmt: skip


@pytest.mark.parametrize("name", ["baseline.jpg", "wide_3to1.png"])
def test_every_image_form_gives_the_clis_tokens(internvl, internvl_path, name):
    path = IMAGES / name
    cli = run_cli("run", "-m", internvl_path, "-i", str(path), "-p", QUESTION, "-n", "8",
                  "--temp", "0", "--ignore-eos", "--json")  # fmt: skip
    want = cli["tokens"]
    data = path.read_bytes()
    mime = "image/jpeg" if name.endswith(".jpg") else "image/png"
    uri = f"data:{mime};base64," + base64.b64encode(data).decode()
    assert _ask(internvl, images=[str(path)]) == want
    assert _ask(internvl, images=[path]) == want  # a pathlib.Path
    assert _ask(internvl, images=[data]) == want
    assert _ask(internvl, {"type": "image_url", "image_url": {"url": uri}}) == want
    assert _ask(internvl, {"type": "image_url", "image_url": {"url": str(path)}}) == want
    assert _ask(internvl, {"type": "image_url", "image_url": "file://" + str(path)}) == want
    assert _ask(internvl, {"type": "image", "image": data}) == want
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    pil = Image.open(io.BytesIO(data))
    assert _ask(internvl, images=[pil]) == want
    rgb = np.asarray(pil.convert("RGB"))
    assert _ask(internvl, images=[rgb]) == want
    assert _ask(internvl, {"type": "image", "image": rgb}) == want
    # A strided view (not contiguous) is copied into place, with the same pixels.
    wide = np.zeros((rgb.shape[0], rgb.shape[1] * 2, 3), np.uint8)
    wide[:, ::2] = rgb
    assert _ask(internvl, images=[wide[:, ::2]]) == want


def test_image_errors(internvl):
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match="uint8"):
        internvl.chat([{"role": "user", "content": "x"}], images=[np.zeros((8, 8, 3), np.float32)])
    with pytest.raises(ValueError, match="remote"):
        internvl.chat([{"role": "user", "content": "x"}], images=["https://example.com/a.jpg"])
    with pytest.raises(edgevl.Error):
        internvl.chat([{"role": "user", "content": "x"}], images=[b"not an image"])
    with pytest.raises(ValueError, match="base64"):
        internvl.chat([{"role": "user", "content": "x"}], images=["data:image/png,abc"])


def test_embed_image_is_the_projectors_features_without_a_copy(internvl):
    np = pytest.importorskip("numpy")
    img = internvl.image(IMAGES / "baseline.jpg")
    f = internvl.embed_image(img)
    assert f.dtype == np.float32
    assert f.shape == (img.tiles, img.tokens // img.tiles, 64)
    assert not f.flags.owndata and not f.flags.writeable
    assert np.isfinite(f).all()
    again = internvl.embed_image(img)  # the same buffer: computed once
    assert again.__array_interface__["data"][0] == f.__array_interface__["data"][0]
    assert np.array_equal(internvl.embed_image(IMAGES / "baseline.jpg"), f)


def test_session_with_an_image_encodes_it_once(internvl_path):
    m = edgevl.Model(internvl_path, threads=2)
    s = m.session()
    r1 = s.send(QUESTION, images=[IMAGES / "baseline.jpg"], max_tokens=6, temperature=0, ignore_eos=True)
    assert r1["edgevl"]["images"] == 1 and r1["edgevl"]["vision_ms"] > 0
    r2 = s.send("And the colours?", max_tokens=6, temperature=0, ignore_eos=True)
    assert r2["edgevl"]["reused_tokens"] >= r1["usage"]["prompt_tokens"]
    assert r2["edgevl"]["vision_ms"] == 0


def test_qwen3_vl_image_through_python_gives_the_clis_tokens(compiled):
    # Qwen-VL's path (aspect-keeping resize, 3D positions, DeepStack rows) from an RGB array.
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    path = compiled("qwen3vl")
    image = IMAGES / "tall_1to4.png"
    cli = run_cli("run", "-m", path, "-i", str(image), "-p", "What is this?", "-n", "8",
                  "--temp", "0", "--ignore-eos", "--json")  # fmt: skip
    m = edgevl.Model(path, threads=2)
    rgb = np.asarray(Image.open(image).convert("RGB"))
    for form in (str(image), rgb):
        r = m.chat([{"role": "user", "content": "What is this?"}], images=[form], max_tokens=8,
                   temperature=0, ignore_eos=True)  # fmt: skip
        assert ids_of(r) == cli["tokens"]
        assert r["usage"]["prompt_tokens"] == cli["prompt_tokens"]
