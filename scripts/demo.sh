#!/usr/bin/env bash
# The main job end to end: checkpoint -> edgevl compile -> .evb -> edgevl run.
# Uses the real stories260K Llama when ../shared/data is beside the checkout (it then tells a
# story); otherwise a random-weight Qwen2-0.5B-shaped checkpoint made by `edgevl synth`
# (its text is noise, but every stage runs on the real architecture and sizes).
set -euo pipefail
cd "$(dirname "$0")/.."
EDGEVL=build/edgevl
out=build/demo
mkdir -p "$out"
if [ -d ../shared/data/stories260k ]; then
  echo "== demo: stories260K (real weights) =="
  $EDGEVL compile ../shared/data/stories260k -o "$out/stories260k.evb" --quant f32
  $EDGEVL inspect "$out/stories260k.evb" --no-ops --no-tensors
  $EDGEVL run -m "$out/stories260k.evb" --raw -p "Once upon a time" -n 120 --temp 0
else
  echo "== demo: random-weight qwen2-0.5b shape (2 layers) =="
  [ -f "$out/qwen2/config.json" ] || $EDGEVL synth --arch qwen2-0.5b --layers 2 --out "$out/qwen2"
  $EDGEVL compile "$out/qwen2" -o "$out/qwen2.evb" --quant f16
  $EDGEVL inspect "$out/qwen2.evb" --no-ops --no-tensors
  $EDGEVL run -m "$out/qwen2.evb" -p "Why is the sky blue?" -n 32 --temp 0
fi
