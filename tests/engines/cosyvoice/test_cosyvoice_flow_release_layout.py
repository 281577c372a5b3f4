"""The fixture writers' released-size `flow.pt` / `hift.pt` layouts against upstream's modules built
from upstream's own yamls (CosyVoice@ace7c47's examples/libritts/cosyvoice{2,3}/conf, the released
architectures), and koe's yaml sections against those yamls: the same modules, argument for argument."""

from __future__ import annotations

import pytest
from oracle_harness import run_oracle

from koe.engines.cosyvoice.fixtures_flow import flow_shapes, hift_shapes, yaml_sections

pytestmark = pytest.mark.oracle


def _upstream_names(shapes: dict) -> dict:
    """The writer's v2 `weight_g` / `weight_v` as upstream's modules name them (torch maps them on load)."""
    renamed = {
        k.replace(".weight_g", ".parametrizations.weight.original0").replace(".weight_v", ".parametrizations.weight.original1"): v for k, v in shapes.items()
    }
    return {k: list(v) for k, v in renamed.items()}


@pytest.mark.parametrize("version", [2, 3])
def test_released_layouts_match_upstream(version, tmp_path):
    _, info = run_oracle("flow_release_layout", {"version": version, "yaml": yaml_sections(version, "real")}, tmp_path, family="cosyvoice", timeout=600)
    assert info["same_flow"] and info["same_hift"], "koe's yaml sections build other modules than upstream's released yaml"
    assert info["flow_chunk"] == [50, 50]
    assert {k: list(v) for k, v in flow_shapes(version, "real").items()} == info["flow"]
    assert _upstream_names(hift_shapes(version, "real")) == info["hift"]
    assert len(info["hift"]) == 328
