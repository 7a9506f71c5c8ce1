#!/usr/bin/env bash
# The main job end to end: checkpoint -> edgevl compile -> .evb -> edgevl run, for text and
# for an image question.
#  - text: the real stories260K Llama when ../shared/data is beside the checkout (it tells a
#    story); otherwise a random-weight Qwen2-0.5B-shaped checkpoint from `edgevl synth`.
#  - image: a random-weight InternVL2-1B-shaped checkpoint (2 LLM + 2 vision layers, real
#    widths) from `edgevl synth`, asked about a photo (../shared/data/images when present,
#    else an image bundled with the tests). Its words are noise: the weights are random; the
#    tiles, image tokens and timings are real.
set -euo pipefail
cd "$(dirname "$0")/.."
EDGEVL=build/edgevl
out=build/demo
mkdir -p "$out"
if [ -d ../shared/data/stories260k ]; then
  echo "== text: stories260K (real weights) =="
  $EDGEVL compile ../shared/data/stories260k -o "$out/stories260k.evb" --quant f32 -q
  $EDGEVL run -m "$out/stories260k.evb" --raw -p "Once upon a time" -n 120 --temp 0
else
  echo "== text: random-weight qwen2-0.5b shape (2 layers) =="
  [ -f "$out/qwen2/config.json" ] || $EDGEVL synth --arch qwen2-0.5b --layers 2 --out "$out/qwen2"
  $EDGEVL compile "$out/qwen2" -o "$out/qwen2.evb" --quant f16 -q
  $EDGEVL run -m "$out/qwen2.evb" -p "Why is the sky blue?" -n 32 --temp 0
fi

echo "== image: random-weight internvl2-1b shape (2 + 2 layers) =="
image=tests/fixtures/images/src/wide_3to1.png
[ -f ../shared/data/images/image1.jpg ] && image=../shared/data/images/image1.jpg
[ -f "$out/internvl/config.json" ] ||
  $EDGEVL synth --arch internvl2-1b --layers 2 --vision-layers 2 --out "$out/internvl"
$EDGEVL compile "$out/internvl" -o "$out/internvl.evb" --quant f16 -q
$EDGEVL inspect "$out/internvl.evb" --no-ops --no-tensors
$EDGEVL run -m "$out/internvl.evb" -i "$image" --max-tiles 4 -p "Describe the image." -n 16 --temp 0
