#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The empty probe compiles to the same machine code as a probe whose every hook would trap
# (tests/gpu/attn/probe_sass_check.cu): nothing of a disabled probe reaches the kernel. Compiles the
# forward kernel (head dim 128, debias) to sm_90a cubins three times and compares them byte for byte:
# no_probe vs the disabled trapping probe must be identical; the trapping probe *enabled* must differ
# (the self-test: otherwise the comparison would prove nothing). Needs nvcc only, no GPU; where
# cuobjdump exists the SASS instruction count is printed too. ctest `probe_sass_check` runs it.
#   tools/probe-sass-check.sh [out_dir]      exit 0: identical; 1: differs (or the self-test failed)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
nvcc=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
src="$root/tests/gpu/attn/probe_sass_check.cu"
flags=(-diag-suppress 177 -I"$root/include" -I"$root/cuda/include" -O3 -std=c++20 --fmad=false --expt-relaxed-constexpr
       -arch=sm_90a -cubin)
"$nvcc" "${flags[@]}" "$src" -o "$out/no_probe.cubin"
"$nvcc" "${flags[@]}" -DTIEBREAK_TRAP_PROBE "$src" -o "$out/trap_probe.cubin"
"$nvcc" "${flags[@]}" -DTIEBREAK_TRAP_PROBE -DTIEBREAK_TRAP_PROBE_ENABLED "$src" -o "$out/enabled_probe.cubin"
if cmp -s "$out/no_probe.cubin" "$out/enabled_probe.cubin"; then
  echo "probe-sass-check: self-test failed: an enabled trapping probe left the cubin unchanged" >&2
  exit 1
fi
if ! cmp -s "$out/no_probe.cubin" "$out/trap_probe.cubin"; then
  echo "probe-sass-check: the disabled probe changed the kernel (cubins in $out differ)" >&2
  exit 1
fi
n=""
if command -v cuobjdump >/dev/null; then
  n=", $(cuobjdump -sass "$out/no_probe.cubin" | grep -cE '^\s+/\*[0-9a-f]{4}\*/') SASS instructions"
fi
echo "probe-sass-check: no_probe and a disabled trapping probe give byte-identical sm_90a cubins ($(stat -c %s "$out/no_probe.cubin") bytes$n); enabled, the cubin differs"
