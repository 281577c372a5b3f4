#!/usr/bin/env bash
# What `make` asks pip for torch, printed as pip arguments (one line):
# - an NVIDIA GPU (`nvidia-smi -L` lists one): "torch", PyPI's default build (CUDA);
# - no GPU: the CPU build, pinned by its local version (`torch==2.13.0+cpu`, which no CUDA wheel
#   carries), from PyTorch's CPU index when it answers within a few seconds, else from what pip
#   finds without it (its cache, find-links, a local index); pip then fails with
#   "No matching distribution" rather than fall back to the CUDA build.
# Environment: KOE_TORCH_VERSION (2.13.0), KOE_TORCH_INDEX (https://download.pytorch.org/whl/cpu),
# KOE_TORCH_GPU=0|1 to say whether to take the GPU build instead of asking nvidia-smi.
set -u
version="${KOE_TORCH_VERSION:-2.13.0}"
index="${KOE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
gpu="${KOE_TORCH_GPU:-}"
if [ -z "$gpu" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; else gpu=0; fi
fi
if [ "$gpu" = 1 ]; then
    echo "torch"
    exit 0
fi
if command -v curl >/dev/null 2>&1 && curl -fsS -o /dev/null --connect-timeout 3 -m 8 "$index/torch/" 2>/dev/null; then
    echo "--extra-index-url $index torch==$version+cpu"
else
    echo "torch==$version+cpu"
fi
