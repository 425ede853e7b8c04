#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Pack and unpack the ex2 probe's u32 tables: first word, then int8 differences of consecutive
words, xz-compressed (the tables rise or fall by a few ulps per step).
    ex2-pack.py pack IN.u32 OUT.xz      ex2-pack.py unpack IN.xz OUT.u32
    ex2-pack.py table IN.u32 OUT.bin    the table T of ex2.approx (2^23 words, T[0] = 0x3f800000, steps of
                                        0..3) as the host library embeds it: step k (T[k] - T[k-1], k >= 1)
                                        in bits 2 (k mod 4) of byte k / 4; slot 0 holds 0
    ex2-pack.py untable IN.bin OUT.u32  and back"""
import lzma
import sys

import numpy as np


def pack(src, dst):
    a = np.fromfile(src, dtype=np.uint32).astype(np.int64)
    d = np.diff(a)
    if d.min() < -128 or d.max() > 127:
        sys.exit("ex2-pack: a step out of int8 range (%d..%d)" % (d.min(), d.max()))
    with open(dst, "wb") as f:
        f.write(lzma.compress(np.uint32(a[0]).tobytes() + d.astype(np.int8).tobytes(), preset=9))


def unpack(src, dst):
    raw = lzma.decompress(open(src, "rb").read())
    first = np.frombuffer(raw[:4], dtype=np.uint32).astype(np.int64)
    d = np.frombuffer(raw[4:], dtype=np.int8).astype(np.int64)
    np.concatenate([first, first[0] + np.cumsum(d)]).astype(np.uint32).tofile(dst)


def table(src, dst):
    a = np.fromfile(src, dtype=np.uint32).astype(np.int64)
    if len(a) != 1 << 23 or a[0] != 0x3F800000:
        sys.exit("ex2-pack: not a table of 2^23 words from 0x3f800000")
    d = np.concatenate([[0], np.diff(a)])
    if d.min() < 0 or d.max() > 3:
        sys.exit("ex2-pack: a step outside 0..3 (%d..%d)" % (d.min(), d.max()))
    d = d.astype(np.uint8).reshape(-1, 4)
    (d[:, 0] | d[:, 1] << 2 | d[:, 2] << 4 | d[:, 3] << 6).astype(np.uint8).tofile(dst)


def untable(src, dst):
    b = np.fromfile(src, dtype=np.uint8)
    d = np.stack([(b >> s) & 3 for s in (0, 2, 4, 6)], 1).reshape(-1).astype(np.int64)
    (0x3F800000 + np.cumsum(d)).astype(np.uint32).tofile(dst)


if __name__ == "__main__":
    {"pack": pack, "unpack": unpack, "table": table, "untable": untable}[sys.argv[1]](sys.argv[2], sys.argv[3])
