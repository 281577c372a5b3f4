"""Reading SoVITS files (`s2G*.pth`) as upstream reads them, and the random fixture's release layout.

Upstream's own reading of the fixture is proven by the `sovits` and `latent` goldens (its
`init_vits_weights` loads it with nothing unexpected and only `enc_q` missing, and its sniffed
version is recorded); these tests cover the file variants the goldens do not: a plain zip, v1, an
`HParams` config from upstream's training script, later versions koe does not build, damaged files.
"""

from __future__ import annotations

import hashlib
import io
import sys
import types

import pytest
import torch

from koe.engines.gpt_sovits.fixtures_sovits import random_sovits_state, sovits_config, sovits_file_bytes, write_sovits
from koe.engines.gpt_sovits.sovits import SoVITS
from koe.engines.gpt_sovits.sovits_config import SoVITSConfig, SoVITSConfigError
from koe.engines.gpt_sovits.sovits_weights import (
    PRETRAINED_MD5,
    SoVITSVersion,
    load_sovits,
    read_sovits,
    released_shapes,
    sniff_version,
    sovits_state,
)
from koe.runtime.weights import WeightsError, build_on_meta, fold_weight_norm, state_sha256


@pytest.fixture(scope="module")
def v2_bytes():
    return sovits_file_bytes("tiny", seed=3)


def test_real_size_is_the_releases():
    shapes = released_shapes(SoVITSConfig())
    count = sum(torch.Size(s).numel() for k, s in shapes.items() if "_codebook." not in k or k.endswith(".embed"))
    assert 41e6 < count < 43e6  # s2G2333k.pth: ~83 MB of fp16
    assert shapes["enc_p.text_embedding.weight"] == (732, 192) and shapes["ref_enc.spectral.0.fc.weight"] == (128, 704)
    assert shapes["dec.ups.0.weight_g"] == (512, 1, 1) and shapes["dec.ups.0.weight_v"] == (512, 256, 16)
    assert shapes["flow.flows.6.enc.cond_layer.weight_g"] == (1536, 1, 1) and "flow.flows.1.pre.weight" not in shapes
    assert shapes["quantizer.vq.layers.0._codebook.inited"] == (1,) and not any(k.startswith("enc_q.") for k in shapes)


def test_fixture_is_the_released_format(tmp_path, v2_bytes):
    assert v2_bytes[:2] == b"01" and sovits_file_bytes("tiny", seed=3, header=None)[:2] == b"PK"
    path = write_sovits(tmp_path, "tiny", seed=3)
    assert path.name == "s2G_tiny_v2.pth" and path.read_bytes() == v2_bytes
    file = read_sovits(path)
    assert file.version == SoVITSVersion("v2", "v2") and file.info.endswith("iteration")
    assert all(t.dtype == torch.float16 for t in file.weight.values())
    assert list(file.weight) == list(released_shapes(sovits_config("tiny")))
    assert state_sha256(file.weight) == state_sha256(random_sovits_state("tiny", 3))
    assert file.weight["quantizer.vq.layers.0._codebook.inited"].item() == 1
    assert file.hps["model"]["gin_channels"] == 512 and file.hps["data"]["filter_length"] == 2048
    with pytest.raises(ValueError, match="size"):
        sovits_config("huge")


@pytest.mark.filterwarnings("ignore:.*weight_norm.*:FutureWarning")
def test_loading_upcasts_folds_and_names_what_it_ignores(tmp_path, v2_bytes):
    path = tmp_path / "s2G.pth"
    path.write_bytes(v2_bytes)
    model = load_sovits(path)
    assert model.ignored == (
        "quantizer.vq.layers.0._codebook.cluster_size",
        "quantizer.vq.layers.0._codebook.embed_avg",
        "quantizer.vq.layers.0._codebook.inited",
    )
    assert all(p.dtype == torch.float32 for p in model.state_dict().values()) and not model.training
    stored = read_sovits(path).weight
    g, v = stored["dec.ups.1.weight_g"].float(), stored["dec.ups.1.weight_v"].float()
    assert torch.equal(model.dec.ups[1].weight, torch._weight_norm(v, g, 0))
    hooked = torch.nn.utils.weight_norm(torch.nn.ConvTranspose1d(32, 16, 16, 8, padding=4))  # upstream's layer, its hook's weight
    hooked.load_state_dict({"weight_g": g, "weight_v": v, "bias": stored["dec.ups.1.bias"].float()})
    x = torch.randn(1, 32, 9)
    assert torch.equal(hooked(x), model.dec.ups[1](x))


def test_plain_zip_and_v1(tmp_path):
    plain = tmp_path / "plain.pth"
    plain.write_bytes(sovits_file_bytes("tiny", seed=3, header=None))
    assert sniff_version(plain) == SoVITSVersion("v1", "v1")  # a small plain zip: v1 by its size ...
    assert read_sovits(plain).version == SoVITSVersion("v2", "v2")  # ... v2 by its 732 symbols, as upstream decides
    v1 = write_sovits(tmp_path / "v1.pth", "tiny", seed=4, version="v1")
    assert v1.read_bytes()[:2] == b"00"
    model = load_sovits(v1)
    assert model.config.version == "v1" and model.enc_p.text_embedding.weight.shape == (322, 192)
    assert model.ref_enc.spectral["0"].fc.weight.shape == (128, 1025)  # v1 reads every bin
    spec = torch.rand(1, 1025, 40)
    assert model.decode(torch.zeros(1, 1, 5, dtype=torch.long), torch.zeros(1, 7, dtype=torch.long), [spec]).shape == (1, 1, 6400)


@pytest.mark.parametrize("header, model", [(b"05", "v2Pro"), (b"06", "v2ProPlus")])
def test_pro_header_on_v2_weights_is_refused(tmp_path, header, model):
    """A v2Pro/ProPlus header makes the file a Pro model, which a v2 file's weights do not fill."""
    path = tmp_path / "pro.pth"
    path.write_bytes(sovits_file_bytes("tiny", seed=3, header=header))
    assert read_sovits(path).version.model == model
    with pytest.raises(
        WeightsError, match=rf"does not match SoVITS {model}: missing \['ge_to512.bias', 'ge_to512.weight', 'prelu.weight', 'sv_emb.bias', 'sv_emb.weight'\]"
    ):
        load_sovits(path)


@pytest.mark.parametrize("header, model", [(b"02", "v3"), (b"04", "v4")])
def test_later_versions_are_named_and_refused(tmp_path, header, model):
    path = tmp_path / "later.pth"
    path.write_bytes(sovits_file_bytes("tiny", seed=3, header=header))
    assert read_sovits(path).version.model == model
    with pytest.raises(WeightsError, match=f"SoVITS {model} is not supported yet"):
        load_sovits(path)


def test_pretrained_files_are_told_by_their_md5(tmp_path, monkeypatch, v2_bytes):
    path = tmp_path / "s2G2333k.pth"
    path.write_bytes(v2_bytes)
    md5 = hashlib.md5(v2_bytes[:8192]).hexdigest()
    monkeypatch.setitem(PRETRAINED_MD5, md5, SoVITSVersion("v2", "v2Pro"))
    assert sniff_version(path) == SoVITSVersion("v2", "v2Pro")


def test_training_scripts_hparams_config_is_read_as_data(tmp_path, monkeypatch):
    """upstream's s2_train pickles its hps as `utils.HParams`: read as plain data, never imported."""
    utils = types.ModuleType("utils")

    class HParams:
        def __init__(self, **kwargs):
            for k, v in kwargs.items():
                setattr(self, k, HParams(**v) if isinstance(v, dict) else v)

    HParams.__module__, HParams.__qualname__ = "utils", "HParams"
    utils.HParams = HParams
    monkeypatch.setitem(sys.modules, "utils", utils)
    buffer = io.BytesIO()
    torch.save({"weight": random_sovits_state("tiny", 5), "config": HParams(**sovits_config("tiny").hps()), "info": "1epoch_1iteration"}, buffer)
    monkeypatch.delitem(sys.modules, "utils")
    path = tmp_path / "trained.pth"
    path.write_bytes(buffer.getvalue())
    file = read_sovits(path)
    assert file.hps == sovits_config("tiny").hps()
    assert load_sovits(path).config == sovits_config("tiny")


def test_code_in_a_pickle_is_refused(tmp_path):
    class Payload:
        def __reduce__(self):
            return (print, ("ran",))

    buffer = io.BytesIO()
    torch.save({"weight": {}, "config": Payload()}, buffer)
    path = tmp_path / "evil.pth"
    path.write_bytes(b"01" + buffer.getvalue()[2:])
    with pytest.raises(WeightsError, match="refused to load"):
        read_sovits(path)


def test_damaged_and_foreign_files_are_refused(tmp_path):
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"xx not a checkpoint")
    with pytest.raises(WeightsError, match="neither a zip nor one of upstream's version headers"):
        read_sovits(junk)
    torn = tmp_path / "torn.pth"
    torn.write_bytes(sovits_file_bytes("tiny", seed=3)[:5000])
    with pytest.raises(WeightsError, match="not a readable checkpoint"):
        read_sovits(torn)
    torn.write_bytes(sovits_file_bytes("tiny", seed=3, header=None)[:5000])
    with pytest.raises(WeightsError, match="not a readable checkpoint"):
        read_sovits(torn)
    other = tmp_path / "other.pth"
    torch.save({"model": {"x": torch.zeros(2)}}, other)
    with pytest.raises(WeightsError, match=r"expected 'weight' and 'config', found \['model'\]"):
        read_sovits(other)
    with pytest.raises(FileNotFoundError):
        read_sovits(tmp_path / "none.pth")


def _rewrite(tmp_path, edit):
    weight = random_sovits_state("tiny", 5)
    edit(weight)
    buffer = io.BytesIO()
    torch.save({"weight": weight, "config": sovits_config("tiny").hps(), "info": ""}, buffer)
    path = tmp_path / "edited.pth"
    path.write_bytes(b"01" + buffer.getvalue()[2:])
    return path


def test_missing_unexpected_and_misshapen_tensors_are_named(tmp_path):
    with pytest.raises(WeightsError, match=r"missing \['enc_p.mrte.c_post.bias'\]"):
        load_sovits(_rewrite(tmp_path, lambda w: w.pop("enc_p.mrte.c_post.bias")))
    with pytest.raises(WeightsError, match=r"unexpected \['sv_emb.weight'\]"):
        load_sovits(_rewrite(tmp_path, lambda w: w.update({"sv_emb.weight": torch.zeros(512, 20480, dtype=torch.half)})))
    with pytest.raises(WeightsError, match=r"misshapen \['dec.conv_pre.weight \(64, 192, 5\) \(expected \(64, 192, 7\)\)'\]"):
        load_sovits(_rewrite(tmp_path, lambda w: w.update({"dec.conv_pre.weight": torch.zeros(64, 192, 5, dtype=torch.half)})))
    with pytest.raises(WeightsError, match="weight_v is missing"):
        load_sovits(_rewrite(tmp_path, lambda w: w.pop("dec.ups.0.weight_v")))
    model = load_sovits(_rewrite(tmp_path, lambda w: w.update({"enc_q.proj.weight": torch.zeros(384, 192, 1, dtype=torch.half)})))
    assert "enc_q.proj.weight" in model.ignored


def test_state_without_weight_norm_folding_matches_the_model():
    state, ignored = sovits_state(random_sovits_state("tiny", 1))
    model = build_on_meta(lambda: SoVITS(sovits_config("tiny")))
    assert set(state) == set(model.state_dict()) and len(ignored) == 3
    assert fold_weight_norm({"a.weight_g": torch.ones(2, 1), "a.weight_v": torch.ones(2, 3)})["a.weight"].shape == (2, 3)


def test_configs_upstream_cannot_build_are_refused():
    with pytest.raises(SoVITSConfigError, match="hidden_channels must be 192"):
        SoVITSConfig(hidden_channels=256)
    with pytest.raises(SoVITSConfigError, match="gin_channels must be 512"):
        SoVITSConfig(gin_channels=256)
    with pytest.raises(SoVITSConfigError, match="not supported"):
        SoVITSConfig(version="v3")
    assert SoVITSConfig(version="v2Pro", gin_channels=1024).is_pro  # Pro projects its embedding to 512
    with pytest.raises(SoVITSConfigError, match="lacks an entry"):
        SoVITSConfig.from_hps({"model": {}, "data": {}}, "v2")
