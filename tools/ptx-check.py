#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a CUDA kernel compiled to nothing: every .entry of the given PTX files must store.

nvcc turns undefined behaviour it can prove (for example a host strlen reached from a kernel, see
tiebreak::literal in include/tiebreak/fp/format.hpp) into `unreachable`, and the optimiser then
deletes everything after it: the kernel launches, reports no error and writes nothing. A kernel of
this project always writes its results to global memory (st.global, atom, red) or runs a tensor-core
or shared-memory store, so an entry without any store is such a vanished kernel.

    tools/ptx-check.py [--allow REGEX]... FILE.ptx...
        exit 0: every entry stores (or its name matches an --allow pattern: kernels empty on
        purpose, like the availability check in cuda/src/device.cu); 1: names the empty ones
"""
import re
import sys

STORE = re.compile(r"\b(st\.global|st\.shared|st\.local|atom\.|red\.|wgmma\.|mma\.sync|stmatrix)")


def main(args):
    allow, paths = [], []
    it = iter(args)
    for a in it:
        if a == "--allow":
            allow.append(re.compile(next(it)))
        else:
            paths.append(a)
    bad, total = [], 0
    for path in paths:
        text = open(path, encoding="utf-8", errors="replace").read()
        # An entry's text runs to the next top-level declaration (inline asm blocks contain braces,
        # so matching the closing brace would cut kernels short).
        starts = [m for m in re.finditer(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+(\S+?)\s*\(", text, re.M)]
        decl = [m.start() for m in re.finditer(r"^(?:\.visible|\.weak|\.entry|\.func|\.extern|\.global|// \.globl)", text, re.M)]
        for m in starts:
            end = next((d for d in decl if d > m.end()), len(text))
            body = text[m.end():end]
            total += 1
            if not STORE.search(body) and not any(p.search(m.group(1)) for p in allow):
                bad.append(f"{path}: {m.group(1)} ({len(body.splitlines())} lines, no store)")
    for b in bad:
        print("ptx-check: kernel compiled to nothing:", b)
    print(f"ptx-check: {total} kernels, {len(bad)} without a store")
    return 1 if bad or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
