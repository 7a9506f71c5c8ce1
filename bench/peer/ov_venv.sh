#!/usr/bin/env bash
# The OpenVINO peer's Python environment, for bench/peer/internvl_peer.py:
#
#   bench/peer/ov_venv.sh            -> build/venv-ov (prints its python)
#   OV_VENV=/path bench/peer/ov_venv.sh
#
# openvino (CPU plugin), nncf (weight compression and static int8), openvino-genai
# (LLMPipeline), optimum-intel with its openvino extra (the LLM export), transformers (the
# InternVL classes), torch as the CPU-only wheel (from download.pytorch.org when it answers,
# else PyPI's), pillow, numpy. A venv of its own: these pin versions of transformers / numpy
# that the main venv (build/venv) must not be moved to.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${OV_VENV:-$root/build/venv-ov}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
pip=("$venv/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip >/dev/null
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  if ! "${pip[@]}" torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null; then
    echo "[ov_venv] download.pytorch.org not reachable: torch from PyPI" >&2
    "${pip[@]}" torch
  fi
fi
"${pip[@]}" openvino openvino-genai openvino-tokenizers nncf "optimum-intel[openvino]" \
  transformers pillow numpy
"$venv/bin/python" - <<'PY'
import openvino, openvino_genai, nncf, transformers, torch, optimum.intel
print("[ov_venv] openvino", openvino.__version__, "genai", openvino_genai.__version__,
      "nncf", nncf.__version__, "transformers", transformers.__version__, "torch", torch.__version__)
PY
echo "$venv/bin/python"
