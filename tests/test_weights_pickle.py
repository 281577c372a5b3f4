"""Pickled checkpoints (.pt/.pth) load tensors only: a pickle that would run code is refused, never executed."""

from __future__ import annotations

import os
import pickle

import pytest
import torch
from torch import nn

from koe.runtime.weights import WeightsError, checkpoint_tensors, load_state


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_a_pt_checkpoint_loads_its_tensors_through_nested_dicts(tmp_path):
    layer = nn.Linear(3, 2)
    path = tmp_path / "model_1200.pt"
    torch.save({"ema_model_state_dict": {f"ema_model.{k}": v for k, v in layer.state_dict().items()}, "step": 1200}, path)
    names = dict(checkpoint_tensors(path))
    assert sorted(names) == ["ema_model_state_dict.ema_model.bias", "ema_model_state_dict.ema_model.weight"]
    fresh = nn.Linear(3, 2)
    load_state(fresh, [path], rename=lambda k: k.removeprefix("ema_model_state_dict.ema_model."))
    assert torch.equal(fresh.weight, layer.weight) and torch.equal(fresh.bias, layer.bias)


def test_a_pickle_that_runs_code_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"weight": _Payload()}, f, protocol=2)
    with pytest.raises(WeightsError, match="refused"):
        list(checkpoint_tensors(path))
    assert not (tmp_path / "PWNED").exists()
