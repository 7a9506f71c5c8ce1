#!/usr/bin/env bash
# Image-path figures of the InternVL2-1B shape (InternViT-300M + Qwen2-0.5B, random weights):
# one 448x448 tile through the vision graph, time to first token for a 1-tile image and a
# question of <= 30 tokens, and a real photo at 4 tiles + thumbnail end to end, for the f16,
# w8a8 and w4a8 presets, with a per-op profile. Prints a markdown snapshot on stdout.
#
#   bench/image_bench.sh [threads] [reps]        (defaults: 2 threads, 3 reps)
#
# Needs build/edgevl. The checkpoint is `edgevl synth --arch internvl2-1b`; when
# ../shared/data/qwen2-tokenizer exists, its real Qwen2 vocabulary replaces the synthetic one so
# that prompts have realistic token counts (the synthetic vocabulary splits the InternVL system
# prompt into ~5x more tokens). The 4-tile run uses ../shared/data/images/image1.jpg (skipped
# when absent). Work files go to build/image-bench (about 4 GB; removed at the end).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
edgevl="${EDGEVL:-$root/build/edgevl}"
threads="${1:-2}"
reps="${2:-3}"
work="$root/build/image-bench"
shared="$root/../shared/data"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

"$edgevl" synth --arch internvl2-1b --out "$work/src" >&2
if [ -d "$shared/qwen2-tokenizer" ]; then
  cp "$shared/qwen2-tokenizer/vocab.json" "$shared/qwen2-tokenizer/merges.txt" "$work/src/"
  vocab="real Qwen2 vocabulary (../shared/data/qwen2-tokenizer)"
else
  vocab="synthetic vocabulary (prompts are longer than with the real one)"
fi

echo "# edgevl bench --image, internvl2-1b synth shape — $(date -u '+%Y-%m-%d %H:%M') UTC"
echo
echo "Random weights of the real shapes (24 InternViT layers + Qwen2-0.5B), $vocab;"
echo "\`edgevl bench -m M -t $threads --pp 512 --tg 32 --image --reps $reps --profile\`, mean ± sd of $reps"
echo "after one warm-up. Load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
first=1
for q in f16 w8a8 w4a8; do
  "$edgevl" compile "$work/src" -o "$work/$q.evb" --quant "$q" -t "$threads" -q >&2
  json="$work/$q.json"
  "$edgevl" bench -m "$work/$q.evb" -t "$threads" --pp 512 --tg 32 --image --reps "$reps" \
    --profile --json >"$json"
  four="n/a"
  if [ -f "$shared/images/image1.jpg" ]; then
    four=$("$edgevl" run -m "$work/$q.evb" -t "$threads" -i "$shared/images/image1.jpg" \
      --max-tiles 4 -p "Describe the image in detail." -n 1 --json 2>/dev/null |
      python3 -c 'import json,sys; j=json.load(sys.stdin); print("%d tiles: vision %.0f ms, ttft %.0f ms" % (j["tiles"], j["vision_ms_per_tile"] * j["tiles"], j["ttft_ms"]))')
  fi
  python3 - "$json" "$q" "$first" "$four" "$work/profiles.md" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); q = sys.argv[2]; first = sys.argv[3] == "1"; four = sys.argv[4]
t = {x["name"]: x for x in j["tests"]}
if first:
    print("- CPU: %s; features `%s`" % (j["cpu_model"], j["cpu"]))
    print("- kernel paths: `%s`" % " ".join("%s=%s" % kv for kv in sorted(j["kernels"].items())))
    print()
    print("| preset | pp512 tok/s | tg32 tok/s | vision ms/tile (GFLOP/s) | ttft ms (prompt tokens) | photo, 4 tiles + thumbnail | peak RSS MB | load ms |")
    print("|---|---|---|---|---|---|---|---|")
pp, tg, v, tt = t["pp512"], t["tg32@d0"], t["vision"], t["ttft"]
print("| %s | %.1f ± %.1f | %.1f ± %.1f | %.0f ± %.0f (%.0f) | %.0f ± %.0f (%d) | %s | %.0f | %.1f |" % (
    q, pp["tok_s"], pp["sd"], tg["tok_s"], tg["sd"], v["ms_per_tile"], v["sd"], v["gflop_s"],
    tt["ms"], tt["sd"], tt["prompt_tokens"], four, j["peak_rss_mb"], j["load_ms"]))
with open(sys.argv[5], "a") as out:
    for test in ("vision", "ttft"):
        prof = j["profile"][test]
        tot = sum(r["ms"] for r in prof)
        out.write("- %s, %s: %s\n" % (q, test, "; ".join(
            "%s/%s %.0f%%" % (r["graph"], r["op"], 100 * r["ms"] / tot)
            for r in prof if r["ms"] / tot > 0.005)))
EOF
  first=0
  rm -f "$work/$q.evb"
done
echo
echo "Per-op share of the timed vision and ttft runs (\`--profile\`; ops under 0.5% left out):"
echo
cat "$work/profiles.md"
