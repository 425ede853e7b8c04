#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""f32 -> bf16 bulk conversion: tiebreak (every mode) side by side with numpy + ml_dtypes.

Runs the convert_bench Google Benchmark binary (--benchmark_format=json) and times
ml_dtypes' cast (round to nearest even) on the same number of elements and the same kind of data,
in this process, on one thread: into a preallocated array (np.copyto, the fair comparison, since
convert_bench writes into a preallocated buffer; the ratios use it) and as ``x.astype(bfloat16)``
(which also allocates and faults in its output). Prints elements per second and ratios:
each mode against ml_dtypes, and each mode against tiebreak's own rne.

Usage: bench/fp/compare_convert.py [--bench build/bench/convert_bench] [--size 16777216] [--repeat 20]
Goals (issue 2): rne >= 5x ml_dtypes on one core; every other mode within 2x of rne.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    sys.exit("compare_convert: needs ml_dtypes (pip install ml_dtypes)")


def make_input(n: int) -> np.ndarray:
    """Finite f32: random sign and fraction, exponent field in [64, 190] (as convert_bench.cpp)."""
    rng = np.random.default_rng(1)
    r = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    e = (64 + (r >> np.uint32(23)) % np.uint32(127)).astype(np.uint32)
    return ((r & np.uint32(0x807FFFFF)) | (e << np.uint32(23))).view(np.float32)


def time_ml_dtypes(n: int, repeat: int) -> tuple:
    """(elements/s into a preallocated array via np.copyto, elements/s of astype with allocation)."""
    x = make_input(n)
    out = np.empty(n, dtype=ml_dtypes.bfloat16)
    np.copyto(out, x, casting="unsafe")  # warm up: the same ml_dtypes cast loop as astype
    best_into = best_astype = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.copyto(out, x, casting="unsafe")
        best_into = min(best_into, time.perf_counter() - t0)
        t0 = time.perf_counter()
        y = x.astype(ml_dtypes.bfloat16)
        best_astype = min(best_astype, time.perf_counter() - t0)
        del y
    return n / best_into, n / best_astype


def copy_bandwidth(n: int, repeat: int) -> float:
    """Bytes per second (read + written) of np.copyto between two n-element uint32 arrays: the
    memory ceiling one thread sees. A conversion moves 6 bytes per element (4 read, 2 written)."""
    src = np.ones(n, dtype=np.uint32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 8 * n / best


def run_bench(path: str, n: int) -> dict:
    cmd = [path, "--benchmark_format=json", f"--benchmark_filter=bm_convert/.*/{n}$",
           "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"]
    res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    rates = {}
    for b in res["benchmarks"]:
        if b.get("aggregate_name") != "max" and b.get("aggregate_name") != "mean":
            continue
        mode = b["run_name"].split("/")[1]
        rate = b["items_per_second"]
        rates[mode] = max(rates.get(mode, 0.0), rate)
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "..", "build", "bench", "convert_bench"))
    ap.add_argument("--size", type=int, default=1 << 24, choices=[1 << 16, 1 << 24])
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    ml, ml_astype = time_ml_dtypes(a.size, a.repeat)
    tb = run_bench(a.bench, a.size)
    print(f"f32 -> bf16, {a.size} elements, one thread (elements per second)")
    print(f"{'implementation':<28}{'elem/s':>14}{'vs ml_dtypes':>14}{'vs tiebreak rne':>17}")
    print(f"{'ml_dtypes copyto (rne)':<28}{ml:>14.3e}{1.0:>14.2f}{ml / tb['rne']:>17.2f}")
    print(f"{'ml_dtypes astype+alloc':<28}{ml_astype:>14.3e}{ml_astype / ml:>14.2f}{ml_astype / tb['rne']:>17.2f}")
    for mode in tb:  # every mode convert_bench registers (the core's all_round_modes), in its order
        print(f"{'tiebreak ' + mode:<28}{tb[mode]:>14.3e}{tb[mode] / ml:>14.2f}{tb[mode] / tb['rne']:>17.2f}")
    bw = copy_bandwidth(a.size, a.repeat)
    print(f"memory ceiling: np.copyto of {a.size} uint32 moves {bw / 1e9:.1f} GB/s (read + write), "
          f"i.e. at most {bw / 6:.3e} elem/s at 6 bytes per element "
          f"({bw / 6 / ml:.2f}x ml_dtypes; tiebreak rne moves {tb['rne'] * 6 / 1e9:.1f} GB/s)")
    ok_rne = tb["rne"] >= 5 * ml
    ok_modes = all(tb[m] * 2 >= tb["rne"] for m in tb)
    print(f"goal rne >= 5x ml_dtypes: {'met' if ok_rne else 'NOT met'}; "
          f"every mode within 2x of rne: {'met' if ok_modes else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
