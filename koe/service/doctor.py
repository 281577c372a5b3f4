"""`koe doctor`: is this machine set up to run koe well? Each check says ok, warn or fail, and why."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from koe.service.config.settings import Settings
from koe.service.errors import KoeError, Unavailable
from koe.service.store.resolve import hub_cache_dir, hub_offline

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, how it went, and what to do about it."""

    name: str
    status: Status
    detail: str


def system_memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def nvidia_gpu_present() -> bool:
    """An NVIDIA GPU and driver are visible to the OS (whatever torch thinks)."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


def amd_gpu_present() -> bool:
    return Path("/dev/kfd").exists()


def _gb(n: float) -> str:
    """Bytes in the largest unit that keeps a digit before the point (MB for small models)."""
    for unit, size in (("GB", 2**30), ("MB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 2**10:.0f} KB"


def check_torch() -> tuple[list[Check], dict]:
    """The torch build against the hardware: CUDA present but a CPU build, a CUDA build without GPU, ..."""
    checks: list[Check] = []
    facts: dict = {}
    try:
        import torch
    except ImportError:
        return [Check("torch", "fail", "PyTorch is not installed: pip install torch")], facts
    cuda_build = torch.version.cuda
    hip_build = getattr(torch.version, "hip", None)
    build = f"CUDA {cuda_build}" if cuda_build else (f"ROCm {hip_build}" if hip_build else "CPU-only")
    checks.append(Check("torch", "ok", f"torch {torch.__version__} ({build} build), {torch.get_num_threads()} CPU threads"))
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        mem = [torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())]
        facts["gpu_memory"] = max(mem)
        checks.append(Check("gpu", "ok", "; ".join(f"cuda:{i} {n} ({_gb(m)})" for i, (n, m) in enumerate(zip(names, mem, strict=True)))))
    elif nvidia_gpu_present() and not cuda_build:
        checks.append(
            Check(
                "gpu",
                "warn",
                "an NVIDIA GPU is present but this torch is a CPU-only build; install a CUDA build: "
                "pip install torch --index-url https://download.pytorch.org/whl/cu124",
            )
        )
    elif nvidia_gpu_present():
        checks.append(
            Check(
                "gpu",
                "warn",
                f"an NVIDIA GPU is present and torch is built for CUDA {cuda_build}, but CUDA is unavailable: "
                "check the driver (nvidia-smi) supports that CUDA version",
            )
        )
    elif amd_gpu_present() and not hip_build:
        checks.append(Check("gpu", "warn", "an AMD GPU is present but this torch is not a ROCm build"))
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        checks.append(Check("gpu", "ok", "Apple GPU (mps) available"))
    elif cuda_build:
        checks.append(Check("gpu", "ok", f"no GPU found (torch is a CUDA {cuda_build} build); running on the CPU"))
    else:
        checks.append(Check("gpu", "ok", "no GPU; running on the CPU (float32, bit-exact with upstream; slower than real time for large models)"))
    return checks, facts


def check_codecs() -> Check:
    import av

    wanted = {"mp3": "libmp3lame", "opus": "libopus", "aac": "aac", "flac": "flac"}
    missing = [fmt for fmt, codec in wanted.items() if codec not in av.codecs_available]
    if missing:
        return Check("codecs", "warn", f"PyAV {av.__version__} lacks encoders for {', '.join(missing)}: those output formats will fail")
    return Check("codecs", "ok", f"PyAV {av.__version__}: wav, flac, mp3, opus, aac, m4a, pcm")


def check_home(settings: Settings) -> list[Check]:
    from koe.service.home import KoeHome

    try:
        home = KoeHome(settings)
        probe = settings.home / ".doctor-probe.tmp"
        probe.write_bytes(b"ok")
        probe.unlink()
        mode = home.db.journal_mode
    except (KoeError, OSError) as e:
        return [Check("KOE_HOME", "fail", f"{settings.home}: {e}")]
    free = shutil.disk_usage(settings.home).free
    checks = [Check("KOE_HOME", "ok", f"{settings.home} (writable; koe.db journal={mode}; {_gb(free)} free)")]
    checks.extend(check_models(home, settings))
    return checks


def check_models(home, settings: Settings) -> list[Check]:
    """Each installed model: complete? what does it need, and does this machine have it? A random-weight
    test model is a warning: it speaks noise, and a `koe speak` without --model may pick it."""
    from koe.service.store.models import RANDOM_WEIGHTS_NOTE, inspect_model, size_label

    _, facts = check_torch() if "torch" in sys.modules else ([], {})
    ram = system_memory_bytes()
    gpu = facts.get("gpu_memory")
    out: list[Check] = []
    models = home.models.list()
    if not models:
        out.append(Check("models", "warn", "no models installed: koe models import PATH | koe models pull ID | koe demo (test model)"))
    for d in models:
        if d.missing:
            out.append(Check(f"model {d.ref.name}", "fail", f"incomplete: missing {', '.join(d.missing)}"))
            continue
        need32, need16 = d.memory_bytes("float32"), d.memory_bytes("bfloat16")
        where = f"needs ~{_gb(need32)} RAM in float32 (CPU) or ~{_gb(need16)} GPU memory in bfloat16"
        status: Status = "ok"
        if gpu is None and ram is not None and need32 > 0.8 * ram:
            status = "warn"
            where += f"; this machine has {_gb(ram)} RAM"
        elif gpu is not None and need16 > 0.9 * gpu:
            status = "warn"
            where += f"; the GPU has {_gb(gpu)}"
        what = f"{d.ref.variant}, {size_label(d.parameters) or 'unknown'} parameters"
        if d.random_weights:
            status, what = "warn", f"{RANDOM_WEIGHTS_NOTE} ({what})"
        out.append(Check(f"model {d.ref.name}", status, f"{what}; {where}; for {d.uses}"))
    default = settings.models.default
    if default:
        try:
            ref = home.models.resolve(default, download=False)  # a check never downloads
            d = inspect_model(ref)
            bad = d.missing
            status = "fail" if bad else "warn" if d.random_weights else "ok"
            detail = f" (missing {', '.join(bad)})" if bad else f" ({RANDOM_WEIGHTS_NOTE})" if d.random_weights else ""
            out.append(Check("default model", status, f"{default} -> {ref.path}{detail}"))
        except Unavailable as e:
            later = settings.models.download and not hub_offline()
            out.append(
                Check(
                    "default model",
                    "warn" if later else "fail",
                    f"models.default={default!r} is not here yet" + ("; the first use downloads it" if later else f": {e}"),
                )
            )
        except KoeError as e:
            out.append(Check("default model", "fail", f"models.default={default!r}: {e}"))
    out.append(check_hub(settings))
    return out


def check_hub(settings: Settings) -> Check:
    """Where hub ids are looked for (the Hugging Face cache) and whether a missing one is downloaded."""
    cache = hub_cache_dir()
    if hub_offline():
        how = "HF_HUB_OFFLINE is set: hub ids come from the store or this cache only"
    elif not settings.models.download:
        how = "models.download = false: hub ids come from the store or this cache only"
    else:
        how = "a hub id found nowhere here is downloaded into the store on first use (models.download = false to stay offline)"
    return Check("hub cache", "ok", f"Hugging Face cache {cache}{'' if cache.is_dir() else ' (empty)'}; {how}")


def check_exact_products() -> Check:
    """Whether the exact float32 path runs its products on koe's kernel here (same bits, ~3x faster)."""
    from koe.runtime import exact

    reason = exact.unused_reason()
    if reason is None:
        return Check(
            "exact products",
            "ok",
            f"koe's kernel: torch's summation order ({exact.describe_orders(exact.summation_orders())}), weights read as bf16 where they are bf16",
        )
    return Check("exact products", "warn", f"torch's own (same output, about 3x slower on the CPU): {reason}")


def run_checks(settings: Settings) -> list[Check]:
    """All checks, in the order `koe doctor` prints them."""
    from koe import __version__

    checks = [Check("koe", "ok", f"koe {__version__}, Python {platform.python_version()} on {platform.system()} {platform.machine()}")]
    torch_checks, _ = check_torch()
    checks.extend(torch_checks)
    checks.append(check_exact_products())
    checks.append(check_codecs())
    checks.extend(check_home(settings))
    return checks
