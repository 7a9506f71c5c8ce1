"""Fixtures of the Python package's tests: the golden checkpoints compiled once per session
with the CLI of the same build (EDGEVL_CLI, or build/edgevl), and the CLI's own answers to
compare with. CTest runs this suite with PYTHONPATH=build/python (python/CMakeLists.txt)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any, Dict, List

import pytest

edgevl = pytest.importorskip(
    "edgevl", reason="the module is not built: cmake -DEDGEVL_PYTHON=ON, PYTHONPATH=build/python"
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "golden"
IMAGES = FIXTURES / "images" / "src"


def cli_path() -> pathlib.Path:
    return pathlib.Path(os.environ.get("EDGEVL_CLI", ROOT / "build" / "edgevl"))


def run_cli(*args: str) -> Dict[str, Any]:
    """The CLI's --json answer (the runtime through `edgevl run`)."""
    p = subprocess.run([str(cli_path()), *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    path = cli_path()
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return path


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory, cli: pathlib.Path):
    """compiled(name, quant): a golden checkpoint compiled by the CLI, once per session."""
    cache: Dict[tuple, str] = {}
    root = tmp_path_factory.mktemp("evb")

    def get(name: str, quant: str = "f32") -> str:
        key = (name, quant)
        if key not in cache:
            out = root / f"{name}_{quant}.evb"
            subprocess.run(
                [str(cli), "compile", str(GOLDEN / name), "-o", str(out), "--quant", quant, "-q"],
                check=True, capture_output=True, timeout=600,
            )  # fmt: skip
            cache[key] = str(out)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def qwen2_path(compiled) -> str:
    return compiled("qwen2")


@pytest.fixture(scope="session")
def qwen2(qwen2_path: str) -> "edgevl.Model":
    return edgevl.Model(qwen2_path, threads=2)


@pytest.fixture(scope="session")
def internvl_path(compiled) -> str:
    return compiled("internvl_qwen2")


@pytest.fixture(scope="session")
def internvl(internvl_path: str) -> "edgevl.Model":
    return edgevl.Model(internvl_path, threads=2)


def golden(name: str) -> Dict[str, Any]:
    return json.loads((GOLDEN / name / "golden.json").read_text())


def ids_of(r: Dict[str, Any]) -> List[int]:
    return r["edgevl"]["tokens"]


def text_of(r: Dict[str, Any]) -> str:
    c = r["choices"][0]
    return c["message"]["content"] if "message" in c else c["text"]
