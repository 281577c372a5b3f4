"""koe.runtime.weights on files stored in another dtype than the model runs in (released bf16 weights
for the exact float32 path): the same bits as `.to(dtype)` of the memory-mapped tensor, a fresh
aligned tensor rather than a view, no second copy resident; files already in the wanted dtype stay
zero-copy views of the mapped file; shards and strict errors as before; F5-TTS and VoxCPM still load."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from koe.runtime import weights
from koe.runtime.weights import WeightsError, build_from_weights, load_state, weight_files


class Net(nn.Module):
    """Odd sizes (tensors that do not start or end on a page), a 2-D and a 1-D weight, an integer buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1031, 67)
        self.proj = nn.Linear(67, 45)
        self.norm = nn.LayerNorm(45)
        self.register_buffer("steps", torch.zeros(3, dtype=torch.int64))


def special_values(n: int) -> torch.Tensor:
    """Random normals with the values a conversion could get wrong: signed zeros, infinities, NaNs, subnormals, extremes."""
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40, 3.0e38, -3.0e38, 1.17e-38])
    x[: len(specials)] = specials
    return x


def write(path, dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    state = {k: (special_values(v.numel()).view(v.shape).to(dtype) if v.is_floating_point() else torch.arange(3)) for k, v in Net().state_dict().items()}
    save_file(state, str(path))
    return state


def mapped_bf16_as(path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """What the loader used to do: `.to(dtype)` of each memory-mapped tensor."""
    with safe_open(str(path), "pt") as f:
        return {k: (t.to(dtype) if t.is_floating_point() else t) for k in f.keys() for t in [f.get_tensor(k)]}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({4: torch.int32, 2: torch.int16, 8: torch.int64}[t.element_size()]) if t.is_floating_point() else t


def file_backed(t: torch.Tensor, path) -> bool:
    """Whether `t`'s memory lies in a mapping of `path` (/proc/self/maps)."""
    ptr = t.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= ptr < hi:
                return len(fields) > 5 and fields[5] == str(path.resolve())
    return False


@pytest.mark.parametrize(
    "stored, wanted", [(torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float16)]
)
@pytest.mark.parametrize("chunk", [None, 4096 + 6])  # whole tensors at once, and many chunks that straddle pages
def test_converted_tensors_are_bit_identical_to_to_dtype(tmp_path, monkeypatch, stored, wanted, chunk) -> None:
    if chunk:
        monkeypatch.setattr(weights, "CONVERT_CHUNK_BYTES", chunk)
    path = tmp_path / "model.safetensors"
    write(path, stored)
    model = build_from_weights(Net, [path], dtype=wanted)
    reference = mapped_bf16_as(path, wanted)
    for name, t in model.state_dict().items():
        assert t.dtype == reference[name].dtype, name
        assert torch.equal(bits(t), bits(reference[name])), name
        if t.is_floating_point():
            assert not file_backed(t, path), f"{name} should be a fresh tensor, not a view of the file"
            assert t.data_ptr() % 64 == 0 and t.is_contiguous(), name
    assert model.steps.dtype == torch.int64 and torch.equal(model.steps, torch.arange(3))


def test_bf16_to_float32_is_exact(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    state = write(path, torch.bfloat16)
    model = build_from_weights(Net, [path], dtype=torch.float32)
    stored = state["embed.weight"].view(torch.int16).to(torch.int32) & 0xFFFF
    assert torch.equal(bits(model.embed.weight).view(-1), (stored << 16).view(-1))  # a 16-bit shift, NaNs included


def test_files_in_the_wanted_dtype_stay_zero_copy_views(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    state = write(path, torch.float32)
    model = build_from_weights(Net, [path], dtype=torch.float32)
    for name, t in model.state_dict().items():
        assert file_backed(t, path), f"{name} should be a view of the mapped file"
        assert torch.equal(bits(t), bits(state[name])), name
    bf16 = tmp_path / "bf16.safetensors"
    write(bf16, torch.bfloat16)
    assert file_backed(build_from_weights(Net, [bf16], dtype=torch.bfloat16).proj.weight, bf16)  # the opt-in bf16 mode: views too


def test_module_dtype_is_the_target_when_no_dtype_is_given(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    write(path, torch.bfloat16)
    model = Net()
    load_state(model, [path])
    assert model.proj.weight.dtype == torch.float32
    assert torch.equal(bits(model.proj.weight), bits(mapped_bf16_as(path, torch.float32)["proj.weight"]))


def test_shards_convert_the_same(tmp_path) -> None:
    single = tmp_path / "single"
    single.mkdir()
    state = write(single / "model.safetensors", torch.bfloat16)
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    names = sorted(state)
    weight_map = {}
    for i, part in enumerate((names[:2], names[2:]), 1):
        shard = f"model-0000{i}-of-00002.safetensors"
        save_file({n: state[n] for n in part}, str(sharded / shard))
        weight_map.update(dict.fromkeys(part, shard))
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert len(weight_files(sharded)) == 2
    a = build_from_weights(Net, weight_files(single), dtype=torch.float32).state_dict()
    b = build_from_weights(Net, weight_files(sharded), dtype=torch.float32).state_dict()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a)


def test_strict_errors_name_the_tensor_in_bf16_files(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    state = write(path, torch.bfloat16)
    wrong = tmp_path / "wrong.safetensors"
    save_file({**state, "proj.weight": state["proj.weight"][:-1].contiguous()}, str(wrong))
    with pytest.raises(WeightsError, match=r"tensor proj.weight has shape \(44, 67\), the model expects \(45, 67\)"):
        build_from_weights(Net, [wrong], dtype=torch.float32)
    missing = tmp_path / "missing.safetensors"
    save_file({k: v for k, v in state.items() if k != "norm.bias"}, str(missing))
    with pytest.raises(WeightsError, match=r"missing tensors: norm.bias \(1 in all\)"):
        build_from_weights(Net, [missing], dtype=torch.float32)
    extra = tmp_path / "extra.safetensors"
    save_file({**state, "head.weight": torch.zeros(2, dtype=torch.bfloat16)}, str(extra))
    with pytest.raises(WeightsError, match=r"unexpected tensors: head.weight \(1 in all\)"):
        build_from_weights(Net, [extra], dtype=torch.float32)


def test_renamed_and_skipped_tensors(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    state = write(path, torch.bfloat16)
    prefixed = tmp_path / "prefixed.safetensors"
    save_file({f"model.{k}": v for k, v in state.items()} | {"model.unused": torch.ones(4, dtype=torch.bfloat16)}, str(prefixed))
    model = build_from_weights(Net, [prefixed], dtype=torch.float32, rename=lambda k: None if k == "model.unused" else k.removeprefix("model."))
    assert torch.equal(bits(model.norm.weight), bits(state["norm.weight"].float()))


def test_no_second_copy_is_resident(tmp_path) -> None:
    """In a fresh process: loading 256 MB of float32 weights from a bf16 file raises the peak RSS by about
    the float32 bytes alone (the old `.to(float32)` of the mapped file kept its 128 MB resident too)."""
    path = tmp_path / "big.safetensors"
    save_file({f"w{i}": torch.randn(2048, 4096).to(torch.bfloat16) for i in range(8)}, str(path))
    script = textwrap.dedent(f"""
        import torch
        from torch import nn
        from koe.runtime.weights import build_from_weights

        class Big(nn.Module):
            def __init__(self):
                super().__init__()
                for i in range(8):
                    self.register_parameter(f"w{{i}}", nn.Parameter(torch.empty(2048, 4096)))

        def hwm():
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

        before = hwm()
        model = build_from_weights(Big, [{str(path)!r}], dtype=torch.float32)
        print(hwm() - before, sum(p.nbytes for p in model.parameters()))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300).stdout.split()
    grown, fp32 = int(out[0]), int(out[1])
    assert fp32 == 8 * 2048 * 4096 * 4
    assert grown <= 1.05 * fp32 + (24 << 20), f"peak RSS grew by {grown / 2**20:.0f} MiB for {fp32 / 2**20:.0f} MiB of float32 weights"


def test_other_families_still_load(tmp_path) -> None:
    """F5-TTS (a safetensors DiT and a pickled Vocos) and VoxCPM (bf16 weights, float32 AudioVAE) load through the same code."""
    from koe.engines.f5_tts.fixtures import write_random_model as write_f5
    from koe.engines.registry import load_engine
    from koe.engines.voxcpm.fixtures import write_random_model as write_vox

    f5 = load_engine(write_f5(tmp_path / "f5", "F5TTS_v1_Base", "tiny"))
    assert {p.dtype for p in f5.model.parameters()} == {torch.float32}
    vox = load_engine(write_vox(tmp_path / "vox", "VoxCPM2", "tiny", dtype=torch.bfloat16))
    assert {p.dtype for p in vox.vae.parameters()} == {torch.float32} and len({p.dtype for p in vox.model.parameters()}) == 1


def test_the_meta_build_skips_random_init(tmp_path) -> None:
    """Building on meta runs no `torch.nn.init` on meta tensors (the first meta `normal_`, as in
    nn.Embedding, imports torch's compiler: about a second of every load); afterwards, and for real
    tensors, `torch.nn.init` is torch's own. In a fresh process, so nothing imported it before."""
    path = tmp_path / "model.safetensors"
    save_file(
        {"0.weight": torch.randn(10, 4).to(torch.bfloat16), "1.weight": torch.randn(3, 4).to(torch.bfloat16), "1.bias": torch.zeros(3, dtype=torch.bfloat16)},
        str(path),
    )
    script = textwrap.dedent(f"""
        import sys
        import torch
        from torch import nn
        from koe.runtime.weights import build_from_weights

        original = torch.nn.init.normal_
        model = build_from_weights(lambda: nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 3)), [{str(path)!r}], dtype=torch.float32)
        assert "torch._dynamo" not in sys.modules, "the meta build imported torch._dynamo"
        assert torch.nn.init.normal_ is original and model[0].weight.dtype == torch.float32
        torch.manual_seed(0)
        fresh = nn.Embedding(10, 4)
        torch.manual_seed(0)
        assert torch.equal(fresh.weight, torch.randn(10, 4)), "real tensors are initialised as before"
        print("ok")
    """)
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300).stdout.strip() == "ok"
