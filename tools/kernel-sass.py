#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Static profile of one attention kernel, without a GPU (issue 18: "profile before changing").

Compiles one instantiation of the forward kernel (attn::flash_forward_block with the backend the tree's
sm_90a image runs: the warpgroup backend, wgmma, where its launcher has one; --backend mma or wgmma to choose)
or of a gradient kernel (flash_dkdv_block, flash_dq_block; a tree with the dQ chain of fa4b4a7, reverted,
has no flash_dq_block and passes its dK/dV block a chain) for sm_90a with the library's flags
(--fmad=false, no fast math), then prints what ptxas reports (registers, spills, stack) and, where
cuobjdump exists, the machine code: SASS instructions in all and in the tile loop (the largest
backward branch whose body holds tensor-core instructions, HMMA or HGMMA), the loop's tensor-core, ldmatrix,
MUFU, local-memory and barrier counts, ptxas's schedule of the loop for one warp (the stall counts of its
control words, in all and along the part every tile runs, and that part's length with the variable
latencies assumed in SB_LATENCY: a static comparison of two forms, see cycles), and with --opcodes the
loop's opcode histogram. With --tree
twice, the two source trees side by side (e.g. a branch against tools/ab-base.sh's export of main),
opcode differences included.

cuobjdump: $CUOBJDUMP, else on PATH, else next to nvcc. The CUDA toolkit's Debian packages may lack
it; PyPI's `nvidia-cuda-cuobjdump` wheel has it (unzip it anywhere and point $CUOBJDUMP at
nvidia/cu13/bin/cuobjdump). Without it only ptxas's figures are printed.

  tools/kernel-sass.py [--kernel fwd|dkdv|dq] [--dim 128] [--mode bf16] [--probe] [--exp sfu]
                       [--scaling unfused] [--min-blocks N] [--tree DIR [--tree DIR2]] [--opcodes]
  tools/kernel-sass.py --self-test    the loop finder on a made-up listing, then the forward kernel of
                                      this tree compiled and its figures checked (ctest kernel_sass)
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNEL_SRC = r"""
#include "tiebreak/attn/flash.hpp"
#include "flash_device.cuh"  // cuda/attention, on the include path
using namespace tiebreak;
using be_t = gpu::detail::%(backend)s<%(threads)s>;
__global__ void __launch_bounds__(%(threads)s%(min_blocks)s)
    probe_kernel(attn::flash_args a, attn::flash_consts c, probe::head_counters* partial, int n_qt) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  %(smem)s
  const int blk = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int heads = static_cast<int>(a.prob.shape.heads);
  %(body)s
}
"""

BODIES = {
    "fwd": "attn::flash_forward_block<be_t, %(dim)d, attn::out_mode::%(mode)s, attn::score_scaling::%(scaling)s, "
           "%(probe)s, attn::exp2_policy::%(exp)s>(be, a, c, bh / heads, bh %% heads, blk, "
           "%(probe)s::enabled ? partial + static_cast<std::size_t>(bh) * n_qt + blk : nullptr);",
    "dkdv": "attn::flash_dkdv_block<be_t, %(dim)d, attn::score_scaling::%(scaling)s, attn::exp2_policy::%(exp)s>"
            "(be, a, c, bh / heads, bh %% heads, blk%(chain)s);",
    # (not in a tree with the dQ chain, fa4b4a7: its dK/dV block computes dQ)
    "dq": "attn::flash_dq_block<be_t, %(dim)d, attn::score_scaling::%(scaling)s, attn::exp2_policy::%(exp)s>"
          "(be, a, c, bh / heads, bh %% heads, blk);",
}


def find_tool(name, env, nvcc):
    if os.environ.get(env):
        return os.environ[env]
    p = shutil.which(name)
    if p:
        return p
    q = os.path.join(os.path.dirname(nvcc), name)
    return q if os.path.exists(q) else None


# The wgmma backend's tiles start on a 1024-byte boundary (the launchers give 1 KB more); the device
# backend takes the block's shared memory as it comes.
SMEM = {
    "device_backend": "be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};",
    "wgmma_backend": "const unsigned misalign = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)) & 1023u;\n"
                     "  be_t be{{reinterpret_cast<std::uint16_t*>(smem_raw + ((1024u - misalign) & 1023u))}};",
}


def backend_of(tree, kernel, choice):
    """The backend the tree's sm_90a image gives the kernel (auto), or the one asked for."""
    if choice != "auto":
        return {"mma": "device_backend", "wgmma": "wgmma_backend"}[choice]
    src = "flash_forward.cu" if kernel == "fwd" else "flash_backward.cu"
    try:
        with open(os.path.join(tree, "cuda", "attention", src)) as f:
            launcher = f.read()
    except OSError:
        launcher = ""
    return "wgmma_backend" if "wgmma_backend" in launcher else "device_backend"


def compile_kernel(tree, args, nvcc, work):
    threads = "attn::fwd_threads" if args.kernel == "fwd" else "attn::bwd_threads"
    backend = backend_of(tree, args.kernel, getattr(args, "backend", "auto"))
    with open(os.path.join(tree, "include", "tiebreak", "attn", "flash.hpp")) as f:
        header = f.read()  # what the tree has decides the wrapper's bound and the body's arguments
    if args.min_blocks is not None:
        mb = ", %d" % args.min_blocks
    else:
        per_probe = re.search(r"template <bool Probed>\s*inline constexpr int fwd_min_blocks", header)
        per_shape = re.search(r"template <bool Probed, int D, exp2_policy E>\s*inline constexpr int fwd_min_blocks", header)
        if args.kernel != "fwd":  # the gradient kernels' bound, in trees that have one
            mb = (", attn::bwd_kv_min_blocks<%d, attn::exp2_policy::%s>" % (args.dim, args.exp)
                  if args.kernel == "dkdv" and "inline constexpr int bwd_kv_min_blocks" in header else "")
        elif per_shape:  # trees whose bound depends on the probe, the head dim and the exponential
            mb = ", attn::fwd_min_blocks<%s, %d, attn::exp2_policy::%s>" % (
                "true" if args.probe else "false", args.dim, args.exp)
        elif per_probe:  # trees whose bound depends on the probe
            mb = ", attn::fwd_min_blocks<%s>" % ("true" if args.probe else "false")
        else:
            mb = ", attn::fwd_min_blocks"
    probe = "attn::thread_counting_probe" if args.probe else "probe::no_probe"
    if args.kernel == "dq" and "flash_dq_block" not in header:
        sys.exit("kernel-sass: %s has no dQ kernel (the dK/dV kernel computes dQ: --kernel dkdv)" % tree)
    chain = ", attn::dq_chain{}" if "struct dq_chain" in header else ""  # the dK/dV block's dQ chain
    body = BODIES[args.kernel] % dict(dim=args.dim, mode=args.mode, scaling=args.scaling, exp=args.exp, probe=probe,
                                      chain=chain)
    src = os.path.join(work, "k.cu")
    with open(src, "w") as f:
        f.write(KERNEL_SRC % dict(threads=threads, min_blocks=mb, body=body, backend=backend, smem=SMEM[backend]))
    cubin = os.path.join(work, "k.cubin")
    cmd = [nvcc, "-I" + os.path.join(tree, "include"), "-I" + os.path.join(tree, "cuda", "include"),
           "-I" + os.path.join(tree, "cuda", "attention"),
           "-O3", "-DNDEBUG", "-std=c++20", "--fmad=false", "--expt-relaxed-constexpr", "-Xcompiler=-ffp-contract=off",
           "-diag-suppress", "177", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-cubin", "-o", cubin, src]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("kernel-sass: nvcc failed for %s:\n%s" % (tree, r.stderr[-4000:]))
    info = {"backend": backend.replace("_backend", "")}
    lines = r.stderr.splitlines()
    for i, l in enumerate(lines):
        if "Compiling entry function" in l and "probe_kernel" in l:
            for m in lines[i:i + 4]:
                for key, pat in (("registers", r"Used (\d+) registers"), ("spill_stores", r"(\d+) bytes spill stores"),
                                 ("spill_loads", r"(\d+) bytes spill loads"), ("stack", r"(\d+) bytes stack frame")):
                    mm = re.search(pat, m)
                    if mm:
                        info[key] = int(mm.group(1))
    return cubin, info


class SassUnavailable(Exception):
    """cuobjdump ran and failed (e.g. no nvdisasm on PATH): the figures fall back to ptxas's."""


def sass_text(cubin, cuobjdump):
    r = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True)
    if r.returncode != 0:
        raise SassUnavailable((r.stderr or r.stdout).strip().splitlines()[-1:] or ["exit %d" % r.returncode])
    return r.stdout


def opcode(text):
    t = text.split()
    if t and t[0].startswith("@"):
        t = t[1:]
    return t[0].split(".")[0] if t else ""


TENSOR_CORE = ("HMMA", "HGMMA")  # mma.sync's, wgmma's


def tile_loop(ins):
    """The largest backward branch whose body holds HMMA or HGMMA: the tile loop."""
    at = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, t) in enumerate(ins):
        if opcode(t) != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", t)
        if not m:
            continue
        tgt = int(m.group(1), 16)
        if tgt < a and tgt in at and any(opcode(x) in TENSOR_CORE for _, x in ins[at[tgt]:i + 1]):
            if best is None or i + 1 - at[tgt] > best[1] - best[0]:
                best = (at[tgt], i + 1)
    return ins[best[0]:best[1]] if best else []


def summary(ins):
    loop = tile_loop(ins)
    c = collections.Counter(opcode(t) for _, t in loop)
    everywhere = collections.Counter(opcode(t) for _, t in ins)
    return {
        "sass": len(ins), "loop": len(loop), "HMMA": c["HMMA"], "HGMMA": c["HGMMA"], "LDSM": c["LDSM"], "MUFU": c["MUFU"],
        "BAR": c["BAR"], "STL loop": c["STL"], "LDL loop": c["LDL"],
        "STL other": everywhere["STL"] - c["STL"], "LDL other": everywhere["LDL"] - c["LDL"],
    }, c


FAKE_SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0020*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0030*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0040*/               @P0 BRA 0x20 ;
        /*0050*/                   STL [R1], R4 ;
        /*0060*/                   ISETP.NE.AND P1, PT, R3, RZ, PT ;
        /*0070*/              @!P1 BRA 0x60 ;
        /*0080*/                   EXIT ;
"""
# wgmma's loop: HGMMA and its waits, no HMMA.
FAKE_SASS_WG = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   WARPGROUP.ARRIVE ;
        /*0020*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0030*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0040*/               @P0 BRA 0x10 ;
        /*0050*/                   EXIT ;
"""


# The same kind of loop with its control words (the line after each instruction, as cuobjdump prints
# them): stall counts 4, 1, 2, 1, 5, 1, 1; the SHFL sets write scoreboard 0, which the FADD waits on;
# the @P1 BRA skips the FMUL (a conditional part).
FAKE_SASS_CTL = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
                                                              /* 0x%016x */
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
                                                              /* 0x%016x */
        /*0020*/                   SHFL.BFLY PT, R3, R4, 0x1, 0x1f ;
                                                              /* 0x%016x */
        /*0030*/                   FADD R5, R3, R4 ;
                                                              /* 0x%016x */
        /*0040*/               @P1 BRA 0x60 ;
                                                              /* 0x%016x */
        /*0050*/                   FMUL R5, R5, R5 ;
                                                              /* 0x%016x */
        /*0060*/               @P0 BRA 0x10 ;
                                                              /* 0x%016x */
        /*0070*/                   EXIT ;
                                                              /* 0x%016x */
""" % tuple((stall << 41) | (wr << 46) | (7 << 49) | (wait << 52) for stall, wr, wait in
            ((4, 7, 0), (1, 7, 0), (2, 0, 0), (1, 7, 1), (5, 7, 0), (1, 7, 0), (1, 7, 0), (1, 7, 0)))


def parse(listing):
    """The (address, instruction) pairs of a cuobjdump -sass listing."""
    return [(a, t) for a, t, _ in parse_with_control(listing)]


def parse_with_control(listing):
    """(address, instruction, control) of a cuobjdump -sass listing: control is the instruction's
    second 64-bit word (the line after it, `/* 0x... */`), or None where the listing has no encodings."""
    ins = []
    lines = listing.splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", l)
        if m:
            ctl = None
            if i + 1 < len(lines):
                mc = re.match(r"\s+/\* (0x[0-9a-f]{16}) \*/\s*$", lines[i + 1])
                if mc:
                    ctl = int(mc.group(1), 16)
            ins.append((int(m.group(1), 16), m.group(2), ctl))
    return ins


def control(hi):
    """The scheduling fields ptxas sets in an instruction's control bits (bits 105-125 of the 128-bit
    word since Volta, bits 41-61 of the second 64-bit word): the stall count (cycles before the warp's
    next instruction issues: ptxas's fixed-latency schedule), the yield hint, the scoreboards the
    instruction sets on its write and read (7: none; variable-latency results: shuffles, MUFU, shared
    and global loads) and the mask of scoreboards it waits on."""
    return {"stall": (hi >> 41) & 0xF, "yield": (hi >> 45) & 1, "wr": (hi >> 46) & 7, "rd": (hi >> 49) & 7,
            "wait": (hi >> 52) & 0x3F}


def cycles(ins_ctl):
    """ptxas's schedule of the tile loop for one warp: the stall counts summed over the loop, and over
    its unconditional part (the instructions no predicated forward branch inside the loop skips: what
    every tile issues; of an if/else, the else part counts), that part's scoreboard waits (each may add
    a variable latency the stall counts leave out) and its timeline (those latencies assumed). A static
    comparison of two forms of one kernel, not a time: other warps fill the stalls, and the real
    variable latencies, wgmma's completion and the barriers are not in it."""
    loop = tile_loop([(a, t) for a, t, _ in ins_ctl])
    if not loop or any(c is None for _, _, c in ins_ctl):
        return {}
    lo, hi = loop[0][0], loop[-1][0]
    body = [(a, t, c) for a, t, c in ins_ctl if lo <= a <= hi]
    skipped = []
    for a, t, _ in body:
        if opcode(t) == "BRA" and t.startswith("@"):
            m = re.search(r"0x([0-9a-f]+)", t)
            tgt = int(m.group(1), 16) if m else -1
            if a < tgt <= hi:
                skipped.append((a, tgt))
    always = [(a, t, c) for a, t, c in body if not any(s < a < e for s, e in skipped)]
    return {
        "loop cycles": sum(control(c)["stall"] for _, _, c in body),
        "every-tile SASS": len(always),
        "every-tile cycles": sum(control(c)["stall"] for _, _, c in always),
        "every-tile waits": sum(1 for _, _, c in always if control(c)["wait"]),
        "every-tile timeline": timeline(always),
    }


# Latencies assumed for the results of variable-latency instructions (the ones that set a write
# scoreboard), in cycles: rough figures of the kind microbenchmarks of recent GPUs report, the same for
# every form compared. Global loads and cp.async are not waited for inside the tile loop's
# every-tile part (their waits are the block's barrier), and wgmma's completion (WARPGROUP.DEPBAR) is
# not a scoreboard: both are left out, alike in the forms of one kernel.
SB_LATENCY = {"SHFL": 24, "MUFU": 20, "LDS": 30, "LDSM": 30, "POPC": 12, "FLO": 12, "BREV": 12, "S2R": 20,
              "S2UR": 20, "LDC": 20, "ULDC": 20, "VOTE": 8}
SB_DEFAULT = 20


def timeline(seq):
    """One warp through seq in order, alone on its scheduler: each instruction issues after the
    previous one's stall count and once the scoreboards it waits on are released (a write scoreboard
    SB_LATENCY[op] after its instruction issues, a read scoreboard 4 cycles after). The cycle the last
    one's stall count has passed: the path's length in cycles, ptxas's fixed latencies and the assumed
    variable ones."""
    t, ready = 0, [0] * 6
    for _, text, c in seq:
        f = control(c)
        wait = [ready[i] for i in range(6) if f["wait"] >> i & 1]
        t = max([t] + wait)
        if f["wr"] != 7:
            ready[f["wr"]] = t + SB_LATENCY.get(opcode(text), SB_DEFAULT)
        if f["rd"] != 7:
            ready[f["rd"]] = max(ready[f["rd"]], t + 4)
        t += f["stall"]
    return t


def self_test(nvcc, cuobjdump):
    s, _ = summary(parse(FAKE_SASS))
    # The loop is 0x20..0x40 (its body holds HMMA); 0x60..0x70 is a loop without one.
    want = {"sass": 9, "loop": 3, "HMMA": 1, "LDSM": 1, "STL loop": 0, "STL other": 1}
    bad = {k: (s[k], v) for k, v in want.items() if s[k] != v}
    if bad:
        sys.exit("kernel-sass: self-test: the made-up listing gave %s (got, want)" % bad)
    s, _ = summary(parse(FAKE_SASS_WG))
    if (s["loop"], s["HGMMA"], s["HMMA"]) != (4, 1, 0):
        sys.exit("kernel-sass: self-test: the made-up wgmma listing gave %s" % s)
    # The loop 0x10..0x60: stalls 1 + 2 + 1 + 5 + 1 + 1 = 11; without the skipped FMUL 10, 5 SASS; the
    # FADD waits for the SHFL (issued at cycle 1, released at 1 + 24 = 25): the last BRA issues at
    # 25 + 1 + 5 = 31.
    c = cycles(parse_with_control(FAKE_SASS_CTL))
    want = {"loop cycles": 11, "every-tile SASS": 5, "every-tile cycles": 10, "every-tile waits": 1,
            "every-tile timeline": 31 + 1}
    if c != want:
        sys.exit("kernel-sass: self-test: the made-up listing's control words gave %s, want %s" % (c, want))
    if control(0x000E620000000A00) != {"stall": 1, "yield": 1, "wr": 1, "rd": 7, "wait": 0}:
        sys.exit("kernel-sass: self-test: an LDC's control word decoded as %s" % control(0x000E620000000A00))

    msgs = []
    for backend in ("mma", "auto"):  # mma.sync; and what the sm_90a image runs (wgmma)
        class A:  # the forward kernel's defaults
            kernel, dim, mode, probe, exp, scaling, min_blocks = "fwd", 128, "bf16", False, "sfu", "unfused", None
        A.backend = backend
        work = tempfile.mkdtemp(prefix="kernel-sass-")
        try:
            cubin, info = compile_kernel(ROOT, A, nvcc, work)
            if not 0 < info.get("registers", 0) <= 255 or "spill_stores" not in info:
                sys.exit("kernel-sass: self-test: ptxas's figures not found: %s" % info)
            want_be = "device" if backend == "mma" else "wgmma"
            if info["backend"] != want_be:
                sys.exit("kernel-sass: self-test: --backend %s compiled the %s backend" % (backend, info["backend"]))
            msg = "%s: registers %d, spills %d bytes" % (info["backend"], info["registers"], info["spill_stores"])
            ins = None
            if cuobjdump:
                try:
                    ins_ctl = parse_with_control(sass_text(cubin, cuobjdump))
                    ins = [(a, t) for a, t, _ in ins_ctl]
                except SassUnavailable as e:
                    msg += " (%s -sass failed, %s: the SASS part is not checked)" % (cuobjdump, e.args[0][0])
            if ins is not None:
                s, _ = summary(ins)
                if backend == "mma":
                    every = sum(1 for _, t in ins if opcode(t) == "HMMA")
                    # Every mma of the forward lies in its tile loop: 2 (D / 16) (64 / 8) per m-tile of a warp.
                    ok = s["loop"] and s["HMMA"] == every and s["HMMA"] % (2 * (128 // 16) * 8) == 0 and s["LDSM"]
                    tc = "HMMA"
                else:
                    every = sum(1 for _, t in ins if opcode(t) == "HGMMA")
                    # Per m-tile of the warpgroup: D / 16 products for S, 64 / 16 for O, none of mma.sync.
                    ok = s["loop"] and s["HGMMA"] == every and s["HGMMA"] % (128 // 16 + 64 // 16) == 0 and not s["HMMA"]
                    tc = "HGMMA"
                if not ok:
                    sys.exit("kernel-sass: self-test: the forward's tile loop not found as expected: %s (%s in all %d)"
                             % (s, tc, every))
                c = cycles(ins_ctl)
                # Every instruction carries its control word; the loop's stall counts are at least 1 each
                # but for a few (dual issue), and the unconditional part is a part.
                if not c or not (0 < c["every-tile SASS"] < s["loop"] and c["loop cycles"] >= s["loop"] // 2
                                 and c["every-tile timeline"] >= c["every-tile cycles"] > 0):
                    sys.exit("kernel-sass: self-test: the forward's schedule not read as expected: %s (loop %d SASS)"
                             % (c, s["loop"]))
                msg += ", tile loop %d SASS with all %d %s, every-tile timeline %d cycles" % (
                    s["loop"], every, tc, c["every-tile timeline"])
            elif not cuobjdump:
                msg += " (no cuobjdump: the SASS part is not checked)"
            msgs.append(msg)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("kernel-sass: self-test passed: the made-up listings' loops found; the forward kernel: " + "; ".join(msgs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", choices=["fwd", "dkdv", "dq"], default="fwd")
    ap.add_argument("--dim", type=int, choices=[64, 128], default=128)
    ap.add_argument("--mode", choices=["bf16", "fp32", "debias", "stochastic"], default="bf16")
    ap.add_argument("--probe", action="store_true", help="the counting probe (forward only)")
    ap.add_argument("--exp", choices=["software", "sfu"], default="sfu")
    ap.add_argument("--scaling", choices=["unfused", "fused"], default="unfused")
    ap.add_argument("--min-blocks", type=int, help="__launch_bounds__ minimum (default: the kernel's own)")
    ap.add_argument("--backend", choices=["auto", "mma", "wgmma"], default="auto",
                    help="auto: the one the tree's sm_90a image runs (wgmma where its launcher has wgmma_backend)")
    ap.add_argument("--tree", action="append", help="source tree (default: this one); twice to compare")
    ap.add_argument("--opcodes", action="store_true", help="the tile loop's opcode histogram")
    ap.add_argument("--sass-out", metavar="FILE",
                    help="write the whole SASS listing there (with --tree twice: FILE.1, FILE.2)")
    ap.add_argument("--self-test", action="store_true", help="check the tool (ctest kernel_sass)")
    args = ap.parse_args()
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    cuobjdump = find_tool("cuobjdump", "CUOBJDUMP", nvcc)
    if args.self_test:
        self_test(nvcc, cuobjdump)
        return
    if args.kernel != "fwd" and (args.probe or args.mode != "bf16"):
        ap.error("--probe and --mode are the forward kernel's")
    trees = args.tree or [ROOT]
    if len(trees) > 2:
        ap.error("at most two trees")
    what = "%s D=%d %s %s%s %s" % (args.kernel, args.dim, args.mode if args.kernel == "fwd" else "",
                                   args.exp, " +probe" if args.probe else "", args.scaling)
    print("kernel-sass: %s, sm_90a" % " ".join(what.split()))
    rows, hists = [], []
    sass_failed = False
    for tree in trees:
        work = tempfile.mkdtemp(prefix="kernel-sass-")
        try:
            cubin, info = compile_kernel(tree, args, nvcc, work)
            s, h, text = {}, collections.Counter(), None
            if cuobjdump:
                try:
                    text = sass_text(cubin, cuobjdump)
                except SassUnavailable as e:
                    print("kernel-sass: %s -sass failed (%s): ptxas's figures only" % (cuobjdump, e.args[0][0]))
                    cuobjdump, sass_failed = None, True
            if text is not None:
                ins_ctl = parse_with_control(text)
                s, h = summary([(a, t) for a, t, _ in ins_ctl])
                s.update(cycles(ins_ctl))
                if args.sass_out:
                    dest = args.sass_out if len(trees) == 1 else "%s.%d" % (args.sass_out, len(rows) + 1)
                    with open(dest, "w") as f:
                        f.write(text)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append((tree, {**info, **s}))
        hists.append(h)
    keys = ["backend", "registers", "spill_stores", "spill_loads", "stack"]
    if cuobjdump:
        keys += ["sass", "loop", "HMMA", "HGMMA", "LDSM", "MUFU", "BAR", "STL loop", "LDL loop", "STL other", "LDL other",
                 "loop cycles", "every-tile SASS", "every-tile cycles", "every-tile waits", "every-tile timeline"]
    elif not sass_failed:
        print("kernel-sass: no cuobjdump (set $CUOBJDUMP): ptxas's figures only")
    w = max(len(k) for k in keys)
    print("%-*s  %s" % (w, "", "  ".join("%12s" % os.path.basename(os.path.normpath(t))[:12] for t, _ in rows)))
    for k in keys:
        print("%-*s  %s" % (w, k, "  ".join("%12s" % r.get(k, "-") for _, r in rows)))
    if args.opcodes and cuobjdump:
        print("\ntile loop opcodes" + (" (first tree, second, difference)" if len(rows) == 2 else ""))
        ops = set(hists[0]) | (set(hists[1]) if len(hists) == 2 else set())
        order = sorted(ops, key=lambda o: (-(abs(hists[1][o] - hists[0][o]) if len(hists) == 2 else hists[0][o]), o))
        for o in order:
            if len(hists) == 2:
                if hists[0][o] != hists[1][o]:
                    print("  %-8s %6d %6d %+6d" % (o, hists[0][o], hists[1][o], hists[1][o] - hists[0][o]))
            else:
                print("  %-8s %6d" % (o, hists[0][o]))


if __name__ == "__main__":
    main()
