#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a, b, d of PyTorch's bf16 matrix product (cuBLAS) as safetensors for `tiebreak audit-gemm`.

    tools/gemm-torch-dump.py OUT_DIR [--shapes 4096x4096x4096,1024x1024x8192] [--seed 1]

For each shape MxNxK: a [M, K] and b [K, N] are bf16, N(0, 1) values from a seeded CPU generator
(the same bits on every machine), moved to the GPU. Files, per shape:
  torch_bf16_<M>x<N>x<K>.safetensors        d = torch.matmul(a, b)            (bf16 output, defaults)
  torch_bf16_noreduced_<M>x<N>x<K>.safetensors  the same with
      torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
  torch_bf16_f32out_<M>x<N>x<K>.safetensors d = torch.mm(a, b, out_dtype=torch.float32), when this
      torch supports out_dtype (f32 output: the accumulator itself, no final bf16 rounding)
and torch-info.txt (torch and CUDA versions, the device, the flags). Needs only torch (no
safetensors package: the writer below is 20 lines). Then, for each file:
    tiebreak audit-gemm FILE --identify -o FILE.json
"""
import json
import struct
import sys
from pathlib import Path

import torch

DTYPES = {torch.bfloat16: ("BF16", torch.int16), torch.float32: ("F32", torch.int32)}


def write_safetensors(path, tensors):
    """tensors: name -> CPU tensor (bf16 or f32), written little-endian in name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous().cpu()
        dtype, view = DTYPES[t.dtype]
        raw = t.view(view).numpy().astype("<i2" if view is torch.int16 else "<i4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    shapes, seed = "4096x4096x4096,1024x1024x8192", 1
    it = iter(argv[1:])
    for a in it:
        if a == "--shapes":
            shapes = next(it)
        elif a == "--seed":
            seed = int(next(it))
        else:
            print(f"gemm-torch-dump: unknown option {a}", file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("gemm-torch-dump: no CUDA device", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    info = [f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuBLAS via torch.matmul",
            f"device {torch.cuda.get_device_name(0)}",
            f"allow_bf16_reduced_precision_reduction default "
            f"{torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction}"]
    for shape in shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(M, K, generator=g).to(torch.bfloat16)
        b = torch.randn(K, N, generator=g).to(torch.bfloat16)
        ad, bd = a.to(dev), b.to(dev)
        tag = f"{M}x{N}x{K}"
        default = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        d = torch.matmul(ad, bd)
        torch.cuda.synchronize()
        write_safetensors(out / f"torch_bf16_{tag}.safetensors", {"a": a, "b": b, "d": d})
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        d = torch.matmul(ad, bd)
        torch.cuda.synchronize()
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = default
        write_safetensors(out / f"torch_bf16_noreduced_{tag}.safetensors", {"a": a, "b": b, "d": d})
        try:
            d = torch.mm(ad, bd, out_dtype=torch.float32)
            torch.cuda.synchronize()
            write_safetensors(out / f"torch_bf16_f32out_{tag}.safetensors", {"a": a, "b": b, "d": d})
        except (TypeError, RuntimeError) as e:
            info.append(f"{tag}: torch.mm(out_dtype=float32) not available: {e}")
        info.append(f"{tag}: written")
    (out / "torch-info.txt").write_text("\n".join(info) + "\n")
    print("\n".join(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
