#!/usr/bin/env python3
"""Reads a .safetensors file with numpy only, following the format spec, and
prints each tensor's name, shape and a checksum-like summary.

Independent of dtrain's C++ reader, so it cross-checks that files dtrain writes
are what other tools expect. Exit status 1 (with a message) on a malformed file.

    scripts/check_safetensors.py RUN_DIR/checkpoints/latest/model.safetensors
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"header length {n} exceeds the file")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    data = raw[8 + n :]
    meta = header.pop("__metadata__", {})
    tensors = []
    expected = 0
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        begin, end = info["data_offsets"]
        if begin != expected:
            raise ValueError(f"{name}: data_offsets begin {begin}, expected {expected}")
        dtype = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize != end - begin:
            raise ValueError(f"{name}: shape {shape} does not match {end - begin} bytes")
        tensors.append((name, np.frombuffer(data, dtype=dtype, count=count, offset=begin).reshape(shape)))
        expected = end
    if expected != len(data):
        raise ValueError(f"tensors cover {expected} bytes, data holds {len(data)}")
    return meta, tensors, (8 + n) % 8 == 0


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        meta, tensors, aligned = read(argv[1])
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return 1
    print(f"metadata: {json.dumps(meta, sort_keys=True)}")
    print(f"data 8-byte aligned: {aligned}")
    for name, t in tensors:
        total = float(t.astype(np.float64).sum()) if t.size else 0.0
        print(f"{name} {t.dtype} {list(t.shape)} sum={total:.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
