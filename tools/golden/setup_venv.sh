#!/usr/bin/env bash
# Recreate the Python environment used by tools/golden/*.py under build/venv (or $VENV).
# Only needed to REGENERATE goldens: the fixtures are committed, CI needs no Python.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/build/venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --disable-pip-version-check -r "$ROOT/tools/golden/requirements.txt"
"$VENV/bin/python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
