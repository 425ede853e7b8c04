#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/ncu-source-summary.py on a small source page written here: the tile loop is found (the
last backward branch whose body holds an HMMA or HGMMA), samples and executions are split before / inside /
after it, a kernel's repeated tables count once, and a file without tables is an error (exit 1).

  ncu_summary_test.py REPO_ROOT
"""
import csv
import os
import subprocess
import sys
import tempfile

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "# Samples", "Instructions Executed", "stall_barrier", "stall_wait", "stall_no_inst"]


def table(w, name, base, rows):
    w.writerow(["Kernel Name", name])
    w.writerow(HEADER)
    for off, text, samples, executed, barrier, wait, no_inst in rows:
        w.writerow([hex(base + off), "      " + text, samples, samples, samples, executed, barrier, wait, no_inst])


def main():
    root = sys.argv[1]
    tool = os.path.join(root, "tools", "ncu-source-summary.py")
    base = 0x7F0000000000
    rows = [
        (0x00, "LDC R1, c[0x0][0x28]", 10, 100, 0, 10, 0),
        (0x10, "S2R R0, SR_TID.X", 5, 100, 0, 5, 0),
        (0x20, "HMMA.16816.F32.BF16 R4, R8, R12, R4", 40, 800, 0, 30, 10),   # loop start
        (0x30, "FSETP.GE.AND P0, PT, R4, R5, PT", 7, 800, 0, 7, 0),
        (0x40, "@P0 BRA " + hex(base + 0x60), 3, 800, 0, 3, 0),               # forward branch
        (0x50, "NOP", 20, 800, 20, 0, 0),
        (0x60, "@!P1 BRA " + hex(base + 0x20), 2, 800, 0, 2, 0),              # the loop's back branch
        (0x70, "STG.E [R2], R4", 8, 100, 0, 8, 0),
        (0x80, "EXIT", 1, 100, 0, 1, 0),
    ]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "source.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL)
            table(w, "kernel_a(int)", base, rows)
            table(w, "kernel_a(int)", base, rows)  # a second launch of the same kernel: ignored
        out = subprocess.run([sys.executable, tool, path, "--top", "3"], capture_output=True, text=True)
        text = out.stdout
        expect = [
            "## kernel_a(int)",
            "9 SASS instructions; tile loop 0x20-0x60",
            "- before the loop: 2 instructions (0 never executed), 15 samples (15.6 %), 200 warp instructions executed",
            "- loop: 5 instructions (0 never executed), 72 samples (75.0 %), 4000 warp instructions executed",
            "- after the loop: 2 instructions (0 never executed), 9 samples (9.4 %), 200 warp instructions executed",
            "  stalls: wait 42, barrier 20, no_inst 10",
        ]
        bad = [e for e in expect if e not in text]
        if out.returncode != 0 or bad or text.count("## kernel_a") != 1:
            print(text, out.stderr, "missing:", bad, sep="\n")
            return 1
        # wgmma's HGMMA marks the loop as HMMA does (the sm_90a kernels have no HMMA).
        wg = [(o, t.replace("HMMA.16816.F32.BF16 R4, R8, R12, R4", "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24, gsb0"),
               *rest) for o, t, *rest in rows]
        path_wg = os.path.join(d, "source-wg.csv")
        with open(path_wg, "w", newline="") as f:
            table(csv.writer(f, quoting=csv.QUOTE_ALL), "kernel_wg(int)", base, wg)
        out = subprocess.run([sys.executable, tool, path_wg], capture_output=True, text=True)
        if out.returncode != 0 or "9 SASS instructions; tile loop 0x20-0x60" not in out.stdout:
            print("the HGMMA loop was not found:", out.stdout, out.stderr)
            return 1
        empty = os.path.join(d, "empty.csv")
        open(empty, "w").close()
        out = subprocess.run([sys.executable, tool, empty], capture_output=True, text=True)
        if out.returncode != 1 or "no source tables" not in out.stderr:
            print("an empty file was not refused:", out.returncode, out.stdout, out.stderr)
            return 1
    print("ncu-source-summary: loop found, samples split, repeated tables once, empty input refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
