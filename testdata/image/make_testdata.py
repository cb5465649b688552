#!/usr/bin/python3
"""Writes the small images and golden values tests/image reads. Run with Debian's python3
(python3-pil, python3-torch):  /usr/bin/python3 testdata/image/make_testdata.py

- png_<type>_<depth>.png: every PNG colour type and bit depth, written by hand (zlib +
  struct) so the pixels follow a formula the C++ test recomputes:
    8-bit sample (y, x, c) = (x * 37 + y * 11 + c * 71) % 256; 16-bit = v * 256 + 0x7f
    (high byte v; truncating and rounding to 8 bits agree); 1/2/4-bit gray = (x + y) % 2**depth; palette index
    (x + 2 * y) % 7 into PALETTE below, tRNS alpha = index * 36.
- photo_64x48.jpg: a crop of a Debian wallpaper photo (plasma-workspace-wallpapers,
  "Autumn"), encoded by Pillow at quality 90, 4:2:0; photo_64x48.rgb is Pillow's decode
  (libjpeg-turbo, islow IDCT, fancy upsampling) and photo_32x24.rgb its 1/2 DCT-scaled
  decode (Image.draft).
- bilinear_*.f32 / area_*.f32: torch.nn.functional.interpolate on the decoded photo
  (bilinear, align_corners=False, antialias=False; area at an integer factor), the
  reference framework's values for tf.image.resize's bilinear and area.
"""
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
W, H = 13, 7
PALETTE = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (10, 20, 30), (200, 100, 50), (0, 0, 0), (255, 255, 255)]


def chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)


def png(path, color_type, depth, rows, extra=b""):
    raw = b"".join(b"\x00" + r for r in rows)
    ihdr = struct.pack(">IIBBBBB", W, H, depth, color_type, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    with open(os.path.join(HERE, path), "wb") as f:
        f.write(data)


def v8(y, x, c):
    return (x * 37 + y * 11 + c * 71) % 256


def pack_bits(vals, depth):
    out, acc, n = bytearray(), 0, 0
    for v in vals:
        acc = (acc << depth) | v
        n += depth
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def main():
    channels = {0: 1, 2: 3, 4: 2, 6: 4}
    for ct, ch in channels.items():
        for depth in (8, 16):
            rows = []
            for y in range(H):
                r = bytearray()
                for x in range(W):
                    for c in range(ch):
                        v = v8(y, x, c)
                        r += bytes([v]) if depth == 8 else struct.pack(">H", v * 256 + 0x7F)
                rows.append(bytes(r))
            png(f"png_ct{ct}_{depth}.png", ct, depth, rows)
    for depth in (1, 2, 4):
        rows = [pack_bits([(x + y) % (1 << depth) for x in range(W)], depth) for y in range(H)]
        png(f"png_ct0_{depth}.png", 0, depth, rows)
    plte = chunk(b"PLTE", b"".join(bytes(p) for p in PALETTE))
    rows = [bytes([(x + 2 * y) % 7 for x in range(W)]) for y in range(H)]
    png("png_ct3_8.png", 3, 8, rows, plte)
    trns = chunk(b"tRNS", bytes([i * 36 for i in range(7)]))
    png("png_ct3_8_trns.png", 3, 8, rows, plte + trns)

    src = "/usr/share/wallpapers/Autumn/contents/images/640x480.jpg"
    photo = Image.open(src).convert("RGB").crop((300, 200, 364, 248))
    buf = io.BytesIO()
    photo.save(buf, "JPEG", quality=90, subsampling=2)  # 2 = 4:2:0
    jpg = buf.getvalue()
    with open(os.path.join(HERE, "photo_64x48.jpg"), "wb") as f:
        f.write(jpg)
    full = Image.open(io.BytesIO(jpg))
    full.load()
    rgb = np.asarray(full.convert("RGB"), dtype=np.uint8)
    rgb.tofile(os.path.join(HERE, "photo_64x48.rgb"))
    half = Image.open(io.BytesIO(jpg))
    half.draft("RGB", (32, 24))
    half.load()
    assert half.size == (32, 24), half.size
    np.asarray(half.convert("RGB"), dtype=np.uint8).tofile(os.path.join(HERE, "photo_32x24.rgb"))

    t = torch.from_numpy(rgb.astype(np.float32)).permute(2, 0, 1)[None]  # [1, C, H, W]
    for oh, ow in ((20, 27), (60, 70), (48, 64)):
        out = F.interpolate(t, size=(oh, ow), mode="bilinear", align_corners=False, antialias=False)
        out[0].permute(1, 2, 0).contiguous().numpy().astype(np.float32).tofile(
            os.path.join(HERE, f"bilinear_{oh}x{ow}.f32"))
    out = F.interpolate(t, size=(12, 16), mode="area")
    out[0].permute(1, 2, 0).contiguous().numpy().astype(np.float32).tofile(os.path.join(HERE, "area_12x16.f32"))

    # Corrupt inputs for the error tests: a truncated JPEG and a PNG with a bad CRC.
    with open(os.path.join(HERE, "truncated.jpg"), "wb") as f:
        f.write(jpg[: len(jpg) // 2])
    bad = bytearray(open(os.path.join(HERE, "png_ct2_8.png"), "rb").read())
    bad[40] ^= 0xFF  # inside IDAT: the chunk CRC no longer matches
    with open(os.path.join(HERE, "bad_crc.png"), "wb") as f:
        f.write(bytes(bad))


if __name__ == "__main__":
    main()
