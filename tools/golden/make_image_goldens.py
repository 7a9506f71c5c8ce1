#!/usr/bin/env python3
"""Golden data for edgevl's image preprocessing (src/vision), made with the reference stack.

The reference is InternVL's `load_image`: Image.open(f).convert('RGB'), then
`dynamic_preprocess` (grid choice, one resize of the whole image to (448*i, 448*j) with
Pillow's default filter, row-major crops, thumbnail of the ORIGINAL image when >1 tile),
then per tile torchvision's Resize((448,448), BICUBIC) -> ToTensor -> Normalize.
torch/torchvision are not installed here on purpose; the parts we need are reproduced:
  * torchvision Resize on a PIL image calls img.resize((w, h), BICUBIC); on a 448x448 crop
    Pillow returns a copy (Image.resize short-circuits size==self.size), so it is identity.
  * ToTensor: uint8 -> float32, then .div(255) in float32 (IEEE division, not a reciprocal).
  * Normalize: mean/std become float32 tensors; tensor.sub_(mean).div_(std) in float32.

Usage:  python3 -m venv build/venv-img && build/venv-img/bin/pip install pillow numpy
        build/venv-img/bin/python tools/golden/make_image_goldens.py [--shared ../shared/data]
Writes tests/fixtures/images/{src/*, golden/*, goldens.json}. Real photos are never
copied: for them only CRC32s of every tile plus a 1-in-7 pixel sample are written.
"""
import argparse
import io
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "images"
IMAGE_SIZE = 448
SAMPLE_STEP = 7  # sampling of big goldens: rows and columns 0, 7, 14, ...
FULL_LIMIT = 1 << 20  # store full uint8 tiles only below this many bytes per image


# ---------------------------------------------------------------- InternVL reference logic
def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in target_ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                best_ratio = ratio
    return best_ratio


def target_ratios(min_num, max_num):
    # Same construction as the reference: a set, then a stable sort by area.
    s = set((i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1)
            for j in range(1, n + 1) if min_num <= i * j <= max_num)
    return sorted(s, key=lambda x: x[0] * x[1])


def choose_grid(w, h, min_num, max_num, image_size=IMAGE_SIZE):
    return find_closest_aspect_ratio(w / h, target_ratios(min_num, max_num), w, h, image_size)


def dynamic_preprocess(image, min_num=1, max_num=12, image_size=IMAGE_SIZE, use_thumbnail=True):
    w, h = image.size
    cols, rows = choose_grid(w, h, min_num, max_num, image_size)
    resized = image.resize((image_size * cols, image_size * rows))  # default filter
    tiles = []
    for i in range(cols * rows):
        x, y = (i % cols) * image_size, (i // cols) * image_size
        tiles.append(resized.crop((x, y, x + image_size, y + image_size)))
    if use_thumbnail and len(tiles) != 1:
        tiles.append(image.resize((image_size, image_size)))
    # torchvision T.Resize((448,448), BICUBIC) on each PIL tile:
    tiles = [t.resize((image_size, image_size), Image.BICUBIC) for t in tiles]
    return (cols, rows), tiles


def normalize_lut():
    """float32 bits of (v/255 - mean)/std for every channel and byte value, torch order."""
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    v = np.arange(256, dtype=np.uint8).astype(np.float32) / np.float32(255)
    lut = (v[None, :] - mean[:, None]) / std[:, None]
    assert lut.dtype == np.float32
    return [[int(b) for b in row] for row in lut.view(np.uint32)]


# ---------------------------------------------------------------- helpers
def crc(a):
    return "%08x" % zlib.crc32(np.ascontiguousarray(a, dtype=np.uint8).tobytes())


def save_png(arr, path):
    Image.fromarray(np.ascontiguousarray(arr, dtype=np.uint8), "RGB").save(path, optimize=True)


def procedural(w, h):
    """Same formula as tests/vision/vision_test_util.h: half smooth ramps (wrapping to give
    hard edges that overshoot and hit the clip), half hashed noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.uint32)
    out = np.empty((h, w, 3), dtype=np.uint8)
    for c in range(3):
        hsh = (x * np.uint32(73856093)) ^ (y * np.uint32(19349663)) ^ np.uint32(c * 83492791 + 1)
        hsh = hsh * np.uint32(2654435761)
        hsh ^= hsh >> np.uint32(15)
        noise = (hsh >> np.uint32(24)).astype(np.uint8)
        ramp = ((x * (c + 1) + y * 2) & np.uint32(255)).astype(np.uint8)
        out[:, :, c] = np.where(x < w // 2, ramp, noise)
    return out


def write_png16_rgb(path, arr16):
    """Pillow cannot write 16-bit RGB PNGs, so build one by hand (filter 0 rows)."""
    h, w, _ = arr16.shape
    raw = b"".join(b"\x00" + arr16[r].astype(">u2").tobytes() for r in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                     chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def make_sources(src):
    """Small synthetic inputs, one per decoder path. Simple patterns keep them tiny."""
    src.mkdir(parents=True, exist_ok=True)

    def pattern(w, h, seed):
        y, x = np.mgrid[0:h, 0:w]
        a = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)),
                      ((x // 8 + y // 8 + seed) % 2) * 200 + 20], axis=-1)
        return a.astype(np.uint8)

    out = {}
    for name, (w, h) in {"square_64": (64, 64), "wide_3to1": (300, 100),
                         "tall_1to4": (100, 400), "tiny_20": (20, 20),
                         "strip_3000x200": (3000, 200)}.items():
        save_png(pattern(w, h, 0), src / f"{name}.png")
        out[name] = f"{name}.png"
    rgba = np.dstack([pattern(120, 80, 1), (np.mgrid[0:80, 0:120][1] * 2).astype(np.uint8)])
    Image.fromarray(rgba, "RGBA").save(src / "rgba.png")
    out["rgba"] = "rgba.png"
    pal = Image.fromarray(pattern(90, 60, 0), "RGB").quantize(16)
    pal.info["transparency"] = 3
    pal.save(src / "palette.png", transparency=3)
    out["palette"] = "palette.png"
    g16 = (np.mgrid[0:40, 0:50][1] * 1300).astype(np.uint16)  # 0..63700
    Image.fromarray(g16).save(src / "gray16.png")
    out["gray16"] = "gray16.png"
    yy, xx = np.mgrid[0:30, 0:45]
    rgb16 = np.stack([xx * 1450, yy * 2200, (xx + yy) * 800 + 257], -1).astype(np.uint16)
    write_png16_rgb(src / "rgb16.png", rgb16)
    out["rgb16"] = "rgb16.png"
    Image.fromarray(pattern(100, 75, 0)[:, :, 0], "L").save(src / "gray.jpg", quality=90)
    out["gray_jpeg"] = "gray.jpg"
    Image.fromarray(pattern(200, 150, 1), "RGB").save(src / "progressive.jpg", quality=85,
                                                      progressive=True)
    out["progressive_jpeg"] = "progressive.jpg"
    Image.fromarray(pattern(160, 120, 0), "RGB").save(src / "baseline.jpg", quality=90)
    out["baseline_jpeg"] = "baseline.jpg"
    Image.fromarray(pattern(80, 60, 1), "RGB").convert("CMYK").save(src / "cmyk.jpg", quality=90)
    out["cmyk_jpeg"] = "cmyk.jpg"
    Image.fromarray(pattern(70, 50, 1), "RGB").save(src / "bmp24.bmp")
    out["bmp"] = "bmp24.bmp"
    return out


def golden_entry(name, source, img, gold_dir, max_num=12, private=False):
    """img: the PIL image as opened. private: a real photo, never stored in full."""
    rgb = img.convert("RGB")  # what load_image does (drops alpha, no compositing)
    dec = np.asarray(rgb)
    (cols, rows), tiles = dynamic_preprocess(rgb, max_num=max_num)
    arr = np.concatenate([np.asarray(t) for t in tiles], axis=0)  # tiles stacked vertically
    e = {"name": name, "source": source, "width": rgb.width, "height": rgb.height,
         "max_num": max_num, "cols": cols, "rows": rows, "count": len(tiles),
         "thumbnail": len(tiles) > 1, "tile_crc32": [crc(np.asarray(t)) for t in tiles],
         "decoded_crc32": crc(dec)}
    full = not private and arr.nbytes < FULL_LIMIT
    step = 1 if full else SAMPLE_STEP
    save_png(arr[::step, ::step], gold_dir / f"{name}_tiles.png")
    e["tiles_png"] = f"golden/{name}_tiles.png"
    e["tiles_step"] = step
    if not source.startswith("procedural"):
        dstep = SAMPLE_STEP if private else 1
        save_png(dec[::dstep, ::dstep], gold_dir / f"{name}_decoded.png")
        e["decoded_png"] = f"golden/{name}_decoded.png"
        e["decoded_step"] = dstep
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    args = ap.parse_args()
    src, gold = OUT / "src", OUT / "golden"
    gold.mkdir(parents=True, exist_ok=True)
    for f in gold.glob("*.png"):
        f.unlink()
    entries = []
    for name, fname in make_sources(src).items():
        with Image.open(src / fname) as im:
            entries.append(golden_entry(name, f"fixture:src/{fname}", im, gold))
    for w, h, mx in [(1920, 1200, 12), (37, 23, 12), (448, 448, 12), (1000, 333, 6)]:
        im = Image.fromarray(procedural(w, h), "RGB")
        entries.append(golden_entry(f"proc_{w}x{h}_max{mx}", f"procedural:{w}x{h}", im, gold, mx))
    shared = Path(args.shared) / "images"
    for p in sorted(shared.glob("*.jpg")) if shared.is_dir() else []:
        with Image.open(p) as im:
            e = golden_entry(f"shared_{p.stem}", f"shared:images/{p.name}", im, gold,
                             private=True)
            e["progressive"] = bool(im.info.get("progressive") or im.info.get("progression"))
            entries.append(e)

    # Plain resizes of the procedural image: every filter-support regime and upscales.
    resizes = []
    for (w, h), (ow, oh) in [((1920, 1200), (448, 448)), ((37, 23), (448, 448)),
                             ((448, 448), (300, 500)), ((1000, 10), (13, 7)), ((5, 5), (1, 1)),
                             ((1, 1), (3, 3)), ((640, 480), (1344, 896)), ((97, 61), (96, 60)),
                             ((200, 3), (200, 40)), ((3000, 200), (5376, 448)),
                             # Pillow 13 runs the vertical pass first for these:
                             ((889, 500), (896, 448)), ((100, 31), (91, 8)), ((31, 116), (10, 43)),
                             ((300, 1000), (310, 40)), ((50, 5000), (40, 100)),
                             # ...and horizontal first for these (near the rule's edge):
                             ((119, 97), (69, 30)), ((110, 41), (99, 24)), ((120, 60), (100, 19))]:
        out = np.asarray(Image.fromarray(procedural(w, h), "RGB").resize((ow, oh),
                                                                         Image.BICUBIC))
        r = {"src": [w, h], "dst": [ow, oh], "crc32": crc(out)}
        if out.nbytes < 200_000:
            r["png"] = f"golden/resize_{w}x{h}_to_{ow}x{oh}.png"
            save_png(out, OUT / r["png"])
        resizes.append(r)

    # Grid cases: the reference algorithm on many sizes, including exact ties.
    grids = []
    sizes = [(1920, 1200), (600, 500), (448, 448), (896, 448), (1344, 448), (448, 1792),
             (20, 20), (3000, 200), (200, 3000), (1, 1), (1, 10000), (10000, 1), (1000, 667),
             (1500, 1000), (672, 448), (224, 149), (800, 600), (1280, 720), (720, 1280),
             (4032, 3024), (300, 100), (100, 400), (13, 7), (999, 1000), (1000, 999),
             (2000, 1000), (640, 480), (1000, 10), (300, 200), (450, 300), (1024, 768),
             (3000, 2000), (1792, 896), (1344, 1344), (900, 900), (3000, 1000), (896, 896),
             (897, 897), (2688, 1344)]
    for (w, h) in sizes:
        for mn, mx in [(1, 12), (1, 6), (1, 1), (1, 40), (2, 12)]:
            c, r = choose_grid(w, h, mn, mx)
            grids.append({"width": w, "height": h, "min_num": mn, "max_num": mx,
                          "cols": c, "rows": r})
    # edgevl orders equal-area candidates by (cols) rather than CPython's set order; check
    # that this never changes the result when min_num == 1 (argument in src/vision/tiling.cpp).
    for mx in range(1, 41):
        ref = target_ratios(1, mx)
        ours = sorted(ref, key=lambda x: (x[0] * x[1], x[0]))
        pts = {a / b for a, b in ref} | {(a / b + c / d) / 2 for a, b in ref for c, d in ref}
        for asp in pts:
            for area_w in (1, 10**7):
                assert find_closest_aspect_ratio(asp, ref, area_w, 1, 448) == \
                    find_closest_aspect_ratio(asp, ours, area_w, 1, 448), (mx, asp)

    manifest = {"pillow_version": PIL.__version__, "numpy_version": np.__version__,
                "image_size": IMAGE_SIZE, "normalize_lut_f32_bits": normalize_lut(),
                "images": entries, "resizes": resizes, "grids": grids}
    (OUT / "goldens.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"{len(entries)} images, {len(resizes)} resizes, {len(grids)} grids; "
          f"fixtures total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
