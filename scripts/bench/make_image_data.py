#!/usr/bin/python3
"""Generated image data for the model benchmarks, with no download. Seeded: the same
arguments write the same bytes.

  cifar DIR    a CIFAR-10 binary folder: data_batch_1.bin .. data_batch_5.bin and
               test_batch.bin, each record 1 label byte + 3072 pixel bytes (the red, green
               and blue 32x32 planes, row-major). Class c is stripes at the angle c*18
               degrees with a class tint, at random phase, frequency and contrast, plus noise.
  folder DIR   an image folder: DIR/<class>/<i>.jpg (every 10th a .png, every 25th a .bmp),
               images of a few sizes between 128 and 200 pixels. Class 0 is a bright blob
               on a busy background, class 1 is oriented stripes, classes beyond alternate
               the two with other tints. Written with PIL when it is installed; otherwise
               .png (a minimal zlib writer) and .bmp only.

Usage: make_image_data.py cifar DIR [--records-per-file 1000] [--test-records 1000] [--seed 0]
       make_image_data.py folder DIR [--classes 2] [--per-class 600] [--seed 0]
"""
import argparse
import importlib.util
import os
import struct
import sys
import zlib

import numpy as np

CIFAR_SIDE = 32
CIFAR_CLASSES = 10
CIFAR_RECORD_BYTES = 1 + 3 * CIFAR_SIDE * CIFAR_SIDE  # 3073
CIFAR_TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
CIFAR_TEST_FILE = "test_batch.bin"
# (height, width) of the folder's images; the loader resizes them all to 96x96.
FOLDER_SIZES = [(128, 128), (160, 120), (150, 200), (176, 144), (200, 200), (140, 180)]


def have_pil():
    return importlib.util.find_spec("PIL") is not None


def stripes(rng, labels, h, w, angle_step, tints):
    """uint8 [N,h,w,3]: per image oriented stripes at its class's angle, a class tint,
    random phase, frequency and contrast, and Gaussian noise."""
    n = len(labels)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    x, y = x / w, y / h
    theta = labels * angle_step + rng.normal(0, 0.08, n)
    freq = rng.uniform(2.5, 5.0, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    proj = np.cos(theta)[:, None, None] * x + np.sin(theta)[:, None, None] * y
    wave = np.sin(2 * np.pi * freq[:, None, None] * proj + phase[:, None, None])
    contrast = rng.uniform(0.25, 0.45, n)[:, None, None, None]
    img = 0.5 + contrast * wave[..., None] * tints[labels][:, None, None, :]
    img += rng.normal(0, 0.08, img.shape)
    return (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)


def write_cifar(out_dir, records_per_file=1000, test_records=1000, seed=0):
    """Writes the six CIFAR-10 files; returns their paths."""
    rng = np.random.default_rng(seed)
    tints = rng.uniform(0.3, 1.0, (CIFAR_CLASSES, 3))
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, count in [(f, records_per_file) for f in CIFAR_TRAIN_FILES] + [(CIFAR_TEST_FILE, test_records)]:
        labels = rng.integers(0, CIFAR_CLASSES, count)
        pixels = stripes(rng, labels, CIFAR_SIDE, CIFAR_SIDE, np.pi / CIFAR_CLASSES, tints)
        records = np.empty((count, CIFAR_RECORD_BYTES), np.uint8)
        records[:, 0] = labels
        records[:, 1:] = pixels.transpose(0, 3, 1, 2).reshape(count, -1)  # HWC -> the CHW planes
        write_atomically(os.path.join(out_dir, name), records.tobytes())
        paths.append(os.path.join(out_dir, name))
    return paths


def blob(rng, h, w, tint):
    """uint8 [h,w,3]: a bright ellipse at a random place over a noisy two-tone background."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    cy, cx = rng.uniform(0.3, 0.7) * h, rng.uniform(0.3, 0.7) * w
    ry, rx = rng.uniform(0.15, 0.3) * h, rng.uniform(0.15, 0.3) * w
    inside = np.exp(-(((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2))
    background = 0.3 + 0.15 * np.sin(x / rng.uniform(6, 20) + rng.uniform(0, 6)) * np.cos(y / rng.uniform(6, 20))
    img = background[..., None] * rng.uniform(0.6, 1.0, 3) + 0.6 * inside[..., None] * tint
    img += rng.normal(0, 0.06, img.shape)
    return (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)


def image_extension(index, pil):
    if index % 25 == 24:
        return ".bmp"
    if index % 10 == 9 or not pil:
        return ".png"
    return ".jpg"


def write_folder(root, classes=2, per_class=600, seed=0):
    """Writes root/class<k>/<i>.<ext>; returns the number of images written."""
    pil = have_pil()
    rng = np.random.default_rng(seed)
    tints = rng.uniform(0.4, 1.0, (classes, 3))
    for c in range(classes):
        class_dir = os.path.join(root, f"class{c}")
        os.makedirs(class_dir, exist_ok=True)
        for i in range(per_class):
            h, w = FOLDER_SIZES[rng.integers(len(FOLDER_SIZES))]
            if c % 2 == 0:
                img = blob(rng, h, w, tints[c])
            else:
                img = stripes(rng, np.array([c]), h, w, np.pi / 3, tints)[0]
            write_image(os.path.join(class_dir, f"{i}{image_extension(i, pil)}"), img, pil)
    return classes * per_class


def write_image(path, img, pil):
    if pil:
        import PIL.Image
        tmp = path + ".tmp"
        PIL.Image.fromarray(img).save(tmp, format={".jpg": "JPEG", ".png": "PNG", ".bmp": "BMP"}[
            os.path.splitext(path)[1]], **({"quality": 90} if path.endswith(".jpg") else {}))
        os.replace(tmp, path)
    elif path.endswith(".png"):
        write_atomically(path, png_bytes(img))
    else:
        write_atomically(path, bmp_bytes(img))


def png_bytes(img):
    """A minimal PNG: 8-bit RGB, no interlace, every row with filter 0, one IDAT chunk."""
    h, w, _ = img.shape

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = np.concatenate([np.zeros((h, 1), np.uint8), img.reshape(h, w * 3)], axis=1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def bmp_bytes(img):
    """A 24-bit BMP: bottom-up rows of B,G,R, each padded to 4 bytes."""
    h, w, _ = img.shape
    stride = (w * 3 + 3) // 4 * 4
    rows = np.zeros((h, stride), np.uint8)
    rows[:, :w * 3] = img[::-1, :, ::-1].reshape(h, w * 3)
    header = struct.pack("<2sIHHI", b"BM", 54 + rows.size, 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, rows.size, 2835, 2835, 0, 0)
    return header + info + rows.tobytes()


def write_atomically(path, data):
    """Writes a temporary file and renames it, so no reader sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    c = sub.add_parser("cifar", help="a CIFAR-10 binary folder")
    c.add_argument("dir")
    c.add_argument("--records-per-file", type=int, default=1000)
    c.add_argument("--test-records", type=int, default=1000)
    c.add_argument("--seed", type=int, default=0)
    f = sub.add_parser("folder", help="an image folder, one sub-folder per class")
    f.add_argument("dir")
    f.add_argument("--classes", type=int, default=2)
    f.add_argument("--per-class", type=int, default=600)
    f.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.kind == "cifar":
        if a.records_per_file < 1 or a.test_records < 1:
            sys.exit("make_image_data: --records-per-file and --test-records must be at least 1")
        paths = write_cifar(a.dir, a.records_per_file, a.test_records, a.seed)
        print(f"make_image_data: wrote {len(paths)} CIFAR-10 files to {a.dir}")
    else:
        if a.classes < 1 or a.per_class < 1:
            sys.exit("make_image_data: --classes and --per-class must be at least 1")
        n = write_folder(a.dir, a.classes, a.per_class, a.seed)
        print(f"make_image_data: wrote {n} images in {a.classes} class folders to {a.dir}"
              f"{'' if have_pil() else ' (no PIL: .png and .bmp only)'}")


if __name__ == "__main__":
    main()
