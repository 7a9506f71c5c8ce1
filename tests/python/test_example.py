"""examples/python/chat_with_image.py runs as a script (on the golden InternVL, to stay quick;
without --model it synthesizes its own, which README's Python section shows)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import IMAGES, ROOT


def test_example_script_streams_a_reply(internvl_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "examples/python/chat_with_image.py"), "--model", internvl_path,
         "--image", str(IMAGES / "baseline.jpg"), "--max-tokens", "12", "--threads", "2"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "[1 image" in out and "12 tokens" in out
    assert "turn 2 reused" in out
    caption = out.split("JSON:", 1)[1].strip()
    assert "caption" in json.loads(caption)
