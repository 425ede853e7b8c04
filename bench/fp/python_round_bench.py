#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tiebreak.round (the Python package) on 16 Mi f32 -> bf16 beside the C++ bulk path (convert_bench).

Times ``tiebreak.round(x, "bf16", mode, errors=...)`` on the data compare_convert.py uses, one
thread and every core, best of --repeat, including the allocation of the returned arrays (values
float32 + bits uint16, and with errors=True error_ulps float64 + flags uint8), and runs the
convert_bench binary (one thread, preallocated output) for the C++ figure. docs/python.md.

Usage: PYTHONPATH=build/python bench/fp/python_round_bench.py [--bench build/bench/convert_bench]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_convert import make_input, run_bench  # noqa: E402

import tiebreak  # noqa: E402


def best_rate(fn, n: int, repeat: int) -> tuple:
    """(elements per second of wall time, elements per second of this process's CPU time), best of
    `repeat`. Google Benchmark's items_per_second (the C++ figure) is per CPU second, so the CPU
    figure is the comparable one on a shared machine; with threads > 1 it adds every thread's time."""
    fn()  # warm up (page faults of a first allocation)
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        r = fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        del r
    return n / wall, n / cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "..", "build", "bench", "convert_bench"))
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    n = a.size
    x = make_input(n)
    cores = os.cpu_count() or 1
    print(f"f32 -> bf16, {n} elements (elements per second; Python figures include allocating the results)")
    cpp = {}
    if os.path.exists(a.bench):
        cpp = run_bench(a.bench, n)
        for mode in ("rne", "sr"):
            print(f"{'C++ bulk ' + mode + ' (convert_bench, 1 thread, per CPU s)':<52}{'':>12}{cpp[mode]:>12.3e}")
    else:
        print(f"(no {a.bench}: C++ figures skipped)")
    print(f"{'':<52}{'wall':>12}{'CPU':>12}  CPU vs C++")
    for mode in ("rne", "sr"):
        for errors in (False, True):
            for threads in sorted({1, cores}):
                wall, cpu = best_rate(lambda: tiebreak.round(x, "bf16", mode, seed=1, errors=errors, threads=threads),
                                      n, a.repeat)
                ratio = f"{cpu / cpp[mode]:>8.2f}x" if mode in cpp else ""
                label = f"tiebreak.round {mode} errors={errors} threads={threads}"
                print(f"{label:<52}{wall:>12.3e}{cpu:>12.3e}  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
