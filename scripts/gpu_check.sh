#!/usr/bin/env bash
# koe GPU check: the GPU tests, every other family's tiny model through the engine contract (fp32, bf16,
# fp32 against the CPU), and the decode-loop benchmark (random-weight 0.6B and 1.7B models built
# here), in under 8 minutes, on one NVIDIA GPU with PyTorch installed and no network.
# Writes ONE JSON file (default: ./gpu_check.json, or the first argument) and prints its summary.
#
#   scripts/gpu_check.sh [out.json]
#
# Python: $PYTHON if set, else the repo's .venv (from `make venv`), else python3. koe's own
# dependencies must be importable by it (`make venv` on the GPU machine installs a CUDA torch).
set -u
cd "$(dirname "$0")/.."
OUT="${1:-$PWD/gpu_check.json}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
BUDGET="${KOE_GPU_CHECK_BUDGET:-450}"   # seconds for the Python part; the hard stop below adds a margin
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
echo "koe gpu_check: python=$PYTHON out=$OUT budget=${BUDGET}s"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi not available"

timeout --kill-after=10 $((BUDGET + 20)) "$PYTHON" scripts/gpu_check.py --out "$OUT" --budget "$BUDGET"
rc=$?
if [ ! -s "$OUT" ]; then
  # The Python side never got to write its file (import error, hard kill): still leave one JSON.
  "$PYTHON" - "$OUT" "$rc" <<'PY' 2>/dev/null || printf '{"error": "gpu_check.py failed before writing results", "returncode": %s}\n' "$rc" > "$OUT"
import json, sys
out, rc = sys.argv[1], int(sys.argv[2])
info = {"error": "gpu_check.py failed before writing results", "returncode": rc}
try:
    import torch
    info.update(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
except Exception as e:
    info["torch_import_error"] = repr(e)
json.dump(info, open(out, "w"), indent=2)
PY
elif [ "$rc" -ne 0 ]; then
  echo "gpu_check.py exited with $rc (124/137: stopped by the time limit); partial results are in $OUT"
fi
echo "results: $OUT"
exit "$rc"
