#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The device-call helpers, run here on stand-ins for the GPU programs:
- tools/quick-bin.sh packs a build's attention_bench and flash_gpu_test with a label (a base export's
  .ab-base-ref first), and refuses a binary older than a source file of its tree, one without sm_90a
  code (where cuobjdump exists), and a destination that is not an earlier pack;
- tools/env-sweep.sh runs the bench once per value of a variable (the variable reaches the program),
  tables TFLOP/s per value with the fastest marked, and on the device ($OUT) packs all but the table;
- tools/device-quick.sh with TIEBREAK_QUICK_BIN skips the build, and runs one source-counter profile per
  (binary, argument set) with TIEBREAK_QUICK_NCU_SOURCE_ARGS split at ';' and the base's included;
- tools/wgmma-check.sh runs the tests and memcheck (or racecheck: WG_RACECHECK) on WG_BIN's programs, then tables each case's better
  median of two rounds for WG_BIN and WG_BASE with their ratio.
    device_tools_test.py REPO_ROOT      exit 0: passed; 1: failed"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def fake_build(d, src):
    """A CUDA build folder as quick-bin.sh reads it: CMakeCache.txt naming the tree, two programs."""
    b = os.path.join(d, "build")
    write(os.path.join(b, "CMakeCache.txt"), "CMAKE_HOME_DIRECTORY:INTERNAL=%s\n" % src)
    write(os.path.join(b, "bench", "attention_bench"), "#!/bin/sh\necho bench\n", 0o755)
    write(os.path.join(b, "tests", "gpu", "flash_gpu_test"), "#!/bin/sh\necho test\n", 0o755)
    return b


def quick_bin(root, d, fails):
    script = os.path.join(root, "tools", "quick-bin.sh")
    src = os.path.join(d, "src")
    for sub in ("include", "cuda", "bench", "src"):
        write(os.path.join(src, sub, "x.hpp"), "// source\n")
    old = time.time() - 100
    for dp, _, fs in os.walk(src):
        for f in fs:
            os.utime(os.path.join(dp, f), (old, old))
    write(os.path.join(src, ".ab-base-ref"), "abc1234\n")
    b = fake_build(d, src)
    bins = os.path.join(d, "bin")
    env = dict(os.environ, PATH=bins + os.pathsep + "/usr/bin:/bin")
    # cuobjdump stand-in: lists an sm_90a cubin unless FAKE_ARCH says otherwise.
    write(os.path.join(bins, "cuobjdump"), '#!/bin/sh\necho "ELF file    1: x.${FAKE_ARCH:-sm_90a}.cubin"\n', 0o755)
    out = os.path.join(d, "pack")
    p = subprocess.run(["bash", script, b, out], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fails.append("quick-bin: exit %d on a good build: %s" % (p.returncode, p.stderr.strip()))
    elif sorted(os.listdir(out)) != [".quick-bin-ref", "attention_bench", "flash_gpu_test"]:
        fails.append("quick-bin: packed %s" % sorted(os.listdir(out)))
    elif open(os.path.join(out, ".quick-bin-ref")).read().strip() != "abc1234":
        fails.append("quick-bin: the label is not the export's .ab-base-ref")
    p = subprocess.run(["bash", script, b, out, "mine"], capture_output=True, text=True, env=env)
    if p.returncode != 0 or open(os.path.join(out, ".quick-bin-ref")).read().strip() != "mine":
        fails.append("quick-bin: an earlier pack was not replaced with the given label")
    p = subprocess.run(["bash", script, b, out], capture_output=True, text=True, env=dict(env, FAKE_ARCH="sm_80"))
    if p.returncode != 2 or "sm_90a" not in p.stderr:
        fails.append("quick-bin: a binary without sm_90a code was not refused (exit %d)" % p.returncode)
    other = os.path.join(d, "other")
    write(os.path.join(other, "keep"), "x")
    p = subprocess.run(["bash", script, b, other], capture_output=True, text=True, env=env)
    if p.returncode != 2 or not os.path.exists(os.path.join(other, "keep")):
        fails.append("quick-bin: a folder that is no earlier pack was replaced (exit %d)" % p.returncode)
    write(os.path.join(src, "cuda", "new.cu"), "// edited after the build\n")
    p = subprocess.run(["bash", script, b, out], capture_output=True, text=True, env=env)
    if p.returncode != 2 or "newer" not in p.stderr:
        fails.append("quick-bin: a binary older than its sources was not refused (exit %d)" % p.returncode)


def result(v, seq, causal, tflops, probe=False):
    return json.dumps({"kind": "result", "backend": "tiebreak", "pass": "fwd+bwd", "dim": 64, "seq": seq,
                       "causal": causal, "mode": "bf16", "exp": "sfu", "probe": probe, "tflops": tflops})


def env_sweep(root, d, fails):
    script = os.path.join(root, "tools", "env-sweep.sh")
    # The stand-in bench's speed follows the variable: value 2 is the fastest on one case, 1 on the other.
    bench = os.path.join(d, "sweep-bench")
    write(bench, "#!/usr/bin/env python3\nimport os, json\nv = float(os.environ['KNOB'])\n"
          "print(json.dumps({'kind': 'meta'}))\n"
          "print(%r %% (100 + 10 * v))\nprint(%r %% (120 - 10 * v))\n"
          % (result(0, 1024, False, 0).replace('"tflops": 0', '"tflops": %s'),
             result(0, 4096, True, 0, True).replace('"tflops": 0', '"tflops": %s')), 0o755)
    base = os.path.join(d, "sweep-base")
    write(base, "#!/bin/sh\necho '%s'\necho '%s'\n" % (result(0, 1024, False, 150), result(0, 4096, True, 90, True)), 0o755)
    out = os.path.join(d, "sweep-out")
    p = subprocess.run(["bash", script, bench, "KNOB", "1 2", base, "--", "--dims", "64"], capture_output=True,
                       text=True, env=dict(os.environ, OUT=out))
    table = open(os.path.join(out, "sweep.md")).read() if os.path.exists(os.path.join(out, "sweep.md")) else ""
    if p.returncode != 0:
        fails.append("env-sweep: exit %d: %s" % (p.returncode, p.stderr.strip()))
    if "| fwd+bwd | 64 | 1024 | no | bf16 sfu | 110 | 120* | 150 |" not in table:
        fails.append("env-sweep: no row 110 | 120* | 150 for S = 1k in\n" + table)
    if "| fwd+bwd | 64 | 4096 | yes | bf16 sfu +probe | 110* | 100 | 90 |" not in table:
        fails.append("env-sweep: no row 110* | 100 | 90 for S = 4k causal, probed, in\n" + table)
    if "(2 results)" not in p.stdout:
        fails.append("env-sweep: the results were not counted: %r" % p.stdout)
    if sorted(os.listdir(out)) != ["sweep-logs.tar.gz", "sweep.md"]:
        fails.append("env-sweep: $OUT holds %s, not the table and one tarball" % sorted(os.listdir(out)))
    else:
        with tarfile.open(os.path.join(out, "sweep-logs.tar.gz")) as t:
            if "sweep-KNOB-2.jsonl" not in t.getnames():
                fails.append("env-sweep: the tarball lacks the JSON lines: %s" % t.getnames())


def device_quick(root, d, fails):
    bins = os.path.join(d, "dq-bin")
    for name, text in (("ncu", 'echo ncu "$@"'), ("nvidia-smi", "echo NVIDIA H100 80GB HBM3, 1980 MHz"),
                       ("compute-sanitizer", 'if [ "$2" = racecheck ]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed"; '
                                             'else echo "========= ERROR SUMMARY: 0 errors"; fi')):
        write(os.path.join(bins, name), "#!/bin/sh\n%s\n" % text, 0o755)
    qb = os.path.join(d, "qb")
    write(os.path.join(qb, "flash_gpu_test"), "#!/bin/sh\necho '[  PASSED  ] 5 tests.'\n", 0o755)
    write(os.path.join(qb, "attention_bench"), "#!/bin/sh\necho '{}'\n", 0o755)
    write(os.path.join(qb, ".quick-bin-ref"), "new1\n")
    write(os.path.join(d, "qbase", "attention_bench"), "#!/bin/sh\necho '{}'\n", 0o755)
    out = os.path.join(d, "dq-out")
    env = dict(os.environ, PATH=bins + os.pathsep + os.environ.get("PATH", ""), OUT=out,
               TIEBREAK_DEVICE_BUILD=os.path.join(d, "dq-build"), TIEBREAK_QUICK_BIN=qb,
               TIEBREAK_QUICK_BASE_BIN=os.path.join(d, "qbase", "attention_bench"), TIEBREAK_QUICK_NCU_SOURCE="1",
               TIEBREAK_QUICK_NCU_SOURCE_BASE="1", TIEBREAK_QUICK_NCU_SOURCE_ARGS="--dims 128;--dims 64",
               TIEBREAK_QUICK_BENCH="0", TIEBREAK_QUICK_RACECHECK="1")
    p = subprocess.run(["bash", os.path.join(root, "tools", "device-quick.sh")], capture_output=True, text=True,
                       env=env, cwd=root)
    log = open(os.path.join(out, "quick.log")).read() if os.path.exists(os.path.join(out, "quick.log")) else ""
    if p.returncode != 0:
        fails.append("device-quick: exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-500:]))
    if "prebuilt binaries from %s (new1)" % qb not in log or "built" in log.replace("prebuilt", ""):
        fails.append("device-quick: did not take the prebuilt binaries without a build:\n" + log)
    if "exit 0: [  PASSED  ] 5 tests." not in log or "racecheck exit 0" not in log:
        fails.append("device-quick: the test or racecheck line is missing:\n" + log)
    profiles = [l for l in log.splitlines() if "ncu source counters" in l]
    want = ["qb/attention_bench --dims 128", "qb/attention_bench --dims 64",
            "qbase/attention_bench --dims 128", "qbase/attention_bench --dims 64"]
    if len(profiles) != 4 or any(w not in l for w, l in zip(want, profiles)):
        fails.append("device-quick: the profiles are not (this tree, base) x (D = 128, D = 64):\n" + "\n".join(profiles))
    summary = open(os.path.join(out, "quick-ncu-source.txt")).read() if os.path.exists(
        os.path.join(out, "quick-ncu-source.txt")) else ""
    if summary.count("=== ") != 4:
        fails.append("device-quick: quick-ncu-source.txt has %d sections, not 4" % summary.count("=== "))


def wgmma_check(root, d, fails):
    bins = os.path.join(d, "wg-path")
    for name, text in (("nvidia-smi", "echo NVIDIA H100 80GB HBM3, 1980 MHz"),
                       ("compute-sanitizer", 'if [ "$2" = racecheck ]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed"; '
                                             'else echo "========= ERROR SUMMARY: 0 errors"; fi')):
        write(os.path.join(bins, name), "#!/bin/sh\n%s\n" % text, 0o755)
    wb = os.path.join(d, "wg-bin")
    write(os.path.join(wb, "flash_gpu_test"), "#!/bin/sh\necho \"filter $1\"\necho '[  PASSED  ] 3 tests.'\n", 0o755)
    # A bench whose call n reports base + 10 n TFLOP/s (a file counts the calls), for one forward case.
    bench = ("#!/bin/sh\nc=$(cat \"$0.n\" 2>/dev/null || echo 0); c=$((c + 1)); echo $c > \"$0.n\"\n"
             "echo '{\"kind\":\"result\",\"pass\":\"fwd\",\"dim\":64,\"seq\":1024,\"causal\":false,\"probe\":false,"
             "\"tflops\":'$(( %d + 10 * c ))'}'\n")
    write(os.path.join(wb, "attention_bench"), bench % 200, 0o755)
    write(os.path.join(d, "wg-base", "attention_bench"), bench % 100, 0o755)
    out = os.path.join(d, "wg-out")
    os.makedirs(out)
    env = dict(os.environ, PATH=bins + os.pathsep + os.environ.get("PATH", ""), OUT=out, WG_BIN=wb,
               WG_BASE=os.path.join(d, "wg-base", "attention_bench"), WG_FILTER="FlashGpu.X")
    p = subprocess.run(["bash", os.path.join(root, "tools", "wgmma-check.sh")], capture_output=True, text=True,
                       env=env, cwd=root)
    if p.returncode != 0:
        fails.append("wgmma-check: exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-500:]))
    if "flash_gpu_test exit 0" not in p.stdout or "filter --gtest_filter=FlashGpu.X" not in open(
            os.path.join(out, "flash-gpu.log")).read():
        fails.append("wgmma-check: the tests did not run with WG_FILTER:\n" + p.stdout)
    if "memcheck exit 0: ========= ERROR SUMMARY: 0 errors" not in p.stdout:
        fails.append("wgmma-check: no memcheck line:\n" + p.stdout)
    # Rounds: this tree 210 then 220, the base 110 then 120: the better of each, 220 / 120.
    if "fwd 64 1024 False False | 220.0 | 120.0 | 1.833" not in p.stdout:
        fails.append("wgmma-check: the row is not the better of two rounds for each:\n" + p.stdout)
    if "racecheck" in p.stdout:
        fails.append("wgmma-check: racecheck ran without WG_RACECHECK=1:\n" + p.stdout)
    env.update(WG_RACECHECK="1", WG_MEMCHECK="0")
    p = subprocess.run(["bash", os.path.join(root, "tools", "wgmma-check.sh")], capture_output=True, text=True,
                       env=env, cwd=root)
    if "racecheck exit 0: ========= RACECHECK SUMMARY: 0 hazards" not in p.stdout or "memcheck" in p.stdout:
        fails.append("wgmma-check: WG_RACECHECK=1 WG_MEMCHECK=0 is not racecheck alone:\n" + p.stdout)


def main(root):
    fails = []
    with tempfile.TemporaryDirectory() as d:
        quick_bin(root, d, fails)
        env_sweep(root, d, fails)
        device_quick(root, d, fails)
        wgmma_check(root, d, fails)
    for f in fails:
        print("FAIL:", f)
    print("device_tools_test: %s" % ("passed" if not fails else "%d failures" % len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "..")))
