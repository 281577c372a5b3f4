"""Drop-in for upstream GPT-SoVITS's `GPT_SoVITS.TTS_infer_pack.TTS`: code written for `TTS_Config`
and `TTS.run(inputs)` (as api_v2.py drives them) runs unchanged on koe's GPT-SoVITS engine.

`TTS_Config(configs)`: upstream's forms: None or "" (upstream's default configs), a dict of configs
by name (`{"custom": {...}}`; without "custom", its "v2", as upstream), or the path of a
`tts_infer.yaml` of that shape, read as data (`yaml.safe_load`: a yaml holding Python tags is an
error, never run). Each config's `device`, `is_half`, `version`, `t2s_weights_path`,
`vits_weights_path`, `bert_base_path`, `cnhuhbert_base_path`; a path that is missing falls back to
upstream's default for the version (`GPT_SoVITS/pretrained_models/...`, from the working directory),
with a warning, as upstream's does. koe never writes the yaml on its own (upstream writes
`GPT_SoVITS/configs/tts_infer.yaml` at each weights load); `save_configs(path)` writes it when asked.
koe's own `TTS_Config.from_folder(model)` names the files of a koe GPT-SoVITS folder (a path, a
store name or a hub id such as `lj1995/GPT-SoVITS/GPT-SoVITS-v2`).

`TTS(configs)`: `run(inputs)`, a generator of `(sample_rate, int16 numpy array (samples,))` as
upstream's: one item for the whole text, with `return_fragment=True` one per batch of fragments,
with `streaming_mode=True` (v1/v2/v2Pro/ProPlus) one per chunk of semantic tokens as the AR model
makes them and one of silence after each fragment (`koe.engines.gpt_sovits.streaming`). Its inputs
are upstream's (`text`, `text_lang`, `ref_audio_path`, `aux_ref_audio_paths`, `prompt_text`,
`prompt_lang`, `top_k`, `top_p`, `temperature`, `text_split_method`, `batch_size`,
`batch_threshold`, `split_bucket`, `speed_factor`, `fragment_interval`, `seed`, `parallel_infer`,
`repetition_penalty`, `return_fragment`, `streaming_mode` with `overlap_length`,
`min_chunk_length` and `fixed_length_chunk`, for v3/v4 `sample_steps` and for v3
`super_sampling`), with its defaults; keys it does not know are ignored, as upstream's `inputs.get`
ignores them, and so are `sample_steps` (but on v3/v4), `super_sampling` (but on v3) and the
streaming options without `streaming_mode`. As upstream's, `streaming_mode` turns
`return_fragment`, `parallel_infer` and `split_bucket` off; on v3/v4 it is `return_fragment`
instead (a warning; upstream prints it). The sample rate is 32 kHz (v3: 24 kHz, v4: 48 kHz); v3's
`super_sampling` takes each item through AP-BWE to 48 kHz (`koe.engines.gpt_sovits.ap_bwe`, loaded
at its first use as upstream's `init_sr_model` loads it, `sr_model`), from `24kto48k/` beside the
BERT folder or where upstream reads it, its tree's `tools/AP_BWE_main/24kto48k/` (above
`GPT_SoVITS/pretrained_models`, or under the working directory); without it, a warning and the
24 kHz audio (upstream prints and goes on). The samples are upstream's: `seed` (-1: a random one drawn with Python's `random`, as upstream) seeds Python's, numpy's and torch's generators, and a
reference read for the first time makes HuBERT's layer-drop draws after it, as upstream's does; a
reference already read (the same `ref_audio_path` as the last call, or one `set_ref_audio` read)
is not read again and makes none. The prompt cache is upstream's (`prompt_cache`: the reference by
its path, the auxiliary clips by their set, the transcript's features by its text), and a weights
swap (`init_t2s_weights`, `init_vits_weights`) keeps it, as upstream's does. `stop()` ends a run
after the batch being decoded (streaming_mode: the fragment being streamed, with its silence),
which then yields one second of zeros, as upstream's.

Runs on koe's engine (`koe.engines.gpt_sovits`), on the CPU in float32: a `device` other than the
CPU falls back to it with a warning (as upstream's does where CUDA is missing), `is_half` is off.

The drop-in runs every SoVITS version koe's engine runs (v1, v2, v2Pro, v2ProPlus, v3, v4; each
proven against upstream's `TTS.run` on its golden), on the engine `GPTSoVITSEngine.from_layout`
builds on the config's files. The files upstream reads from `GPT_SoVITS/pretrained_models` whatever
the config says (v2Pro/ProPlus's SV model, v3's BigVGAN, v4's vocoder, a v3/v4 LoRA's pretrained
model) are looked for beside the BERT folder (upstream's `pretrained_models`). `set_ref_audio` reads
the clip alone, as upstream's (for v3/v4 too: the transcript comes with `run`, which v3/v4 need);
v3/v4 do not use `aux_ref_audio_paths` (a warning), as upstream's v3/v4 path does not.

Errors, before any audio and with nothing written, where upstream asserts, prints or fails deep
inside; the inputs are checked when `run` is called (upstream checks them once the generator is
first read), a reference clip's length when it is read: a weights file or model folder that is not
there, or a file the version needs (FileNotFoundError naming it); a file that is not a SoVITS
checkpoint (ValueError); a missing reference
(`ReferenceNotFound`, a FileNotFoundError and, as upstream's, a ValueError) or none at all; a
reference outside upstream's 3-10 s (`ReferenceLengthError`, an OSError as upstream's); a
language the model does not speak or whose front end koe lacks (`UnsupportedLanguage`); empty text
or text with nothing to speak (`EmptyText`: upstream yields a second of silence at 16 kHz); no
`prompt_text` on v3/v4 (`UnsupportedVoice`, upstream's NO_PROMPT_ERROR);
options of the wrong type or outside koe's ranges, an unknown `text_split_method`
(`InvalidOption`); with `streaming_mode`, a `batch_size` over 1 (upstream's streaming decodes a
batch's first row alone: it fails with a transcript, and speaks only each batch's first fragment
without one) and an `overlap_length` of at least the first chunk's tokens (`min_chunk_length`, + 2
with cuts after mute-like tokens: upstream fails on the empty rest of that chunk) (`InvalidOption`);
an AP-BWE folder whose files koe cannot read, at the first super-sampled audio (ValueError,
`WeightsError`). A missing auxiliary clip is skipped with a warning, as upstream skips it.
"""

from __future__ import annotations

import copy
import gc
import os
import random
import warnings
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from koe.engines.base import Cancelled, EmptyText, InvalidOption, UnsupportedLanguage, UnsupportedVoice
from koe.engines.gpt_sovits import ap_bwe, spec
from koe.engines.gpt_sovits.ap_bwe import APBWE
from koe.engines.gpt_sovits.engine import GPTSoVITSEngine
from koe.engines.gpt_sovits.streaming import StreamSettings, stream
from koe.engines.gpt_sovits.synthesis import RunSettings, fragment_of, fragments, set_seed, to_int16
from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.text.clean import LanguageNotBuilt
from koe.engines.gpt_sovits.text.segment import SENTENCE_ENDS
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice

__all__ = ["TTS", "ReferenceLengthError", "ReferenceNotFound", "TTS_Config"]

PRETRAINED = "GPT_SoVITS/pretrained_models"
CONFIGS_PATH = "GPT_SoVITS/configs/tts_infer.yaml"
VERSIONS = ("v1", "v2", "v3", "v4", "v2Pro", "v2ProPlus")
DROP_IN_VERSIONS = spec.SUPPORTED  # the SoVITS versions this drop-in runs: every one koe's engine runs
_DEFAULT_WEIGHTS = {  # upstream's default_configs: version -> (GPT, SoVITS) under pretrained_models
    "v1": ("s1bert25hz-2kh-longer-epoch=68e-step=50232.ckpt", "s2G488k.pth"),
    "v2": ("gsv-v2final-pretrained/s1bert25hz-5kh-longer-epoch=12-step=369668.ckpt", "gsv-v2final-pretrained/s2G2333k.pth"),
    "v3": ("s1v3.ckpt", "s2Gv3.pth"),
    "v4": ("s1v3.ckpt", "gsv-v4-pretrained/s2Gv4.pth"),
    "v2Pro": ("s1v3.ckpt", "v2Pro/s2Gv2Pro.pth"),
    "v2ProPlus": ("s1v3.ckpt", "v2Pro/s2Gv2ProPlus.pth"),
}
UPSTREAM_AP_BWE = "tools/AP_BWE_main/24kto48k"  # where upstream's init_sr_model reads AP-BWE, under its source tree
PATH_KEYS = ("t2s_weights_path", "vits_weights_path", "bert_base_path", "cnhuhbert_base_path")
ENGINE_NAMES = {"batch_size": "batch_fragments"}  # run's inputs koe's engine names otherwise
PRECISION = "fp32"  # koe's engine in float32, its GPT's blocks on the exact kernel where it gives torch's bits


class ReferenceNotFound(FileNotFoundError, ValueError):
    """A `ref_audio_path` that is not there (upstream raises a ValueError)."""


class ReferenceLengthError(OSError, UnsupportedVoice):
    """A reference clip outside upstream's 3-10 s window (upstream raises an OSError)."""


def _default_configs() -> dict[str, dict[str, Any]]:
    return {
        version: {
            "device": "cpu",
            "is_half": False,
            "version": version,
            "t2s_weights_path": f"{PRETRAINED}/{gpt}",
            "vits_weights_path": f"{PRETRAINED}/{sovits}",
            "cnhuhbert_base_path": f"{PRETRAINED}/{spec.HUBERT}",
            "bert_base_path": f"{PRETRAINED}/{spec.BERT}",
        }
        for version, (gpt, sovits) in _DEFAULT_WEIGHTS.items()
    }


def _read_yaml(path: str) -> dict:
    """A tts_infer.yaml as data (safe_load: no Python objects are built from it)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            configs = yaml.safe_load(f)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a tts_infer.yaml koe can read as data ({e})") from e
    if not isinstance(configs, dict):
        raise ValueError(f"{path}: a tts_infer.yaml maps config names (custom, v1, v2, ...) to configs; this one holds {type(configs).__name__}")
    return configs


class TTS_Config:  # noqa: N801 - upstream's name
    """Upstream's `TTS_Config` (see the module's doc)."""

    v1_languages = list(spec.V1_LANGUAGES)
    v2_languages = list(spec.V2_LANGUAGES)

    def __init__(self, configs: dict | str | os.PathLike | None = None) -> None:
        self.configs_path = CONFIGS_PATH
        if configs in ("", None):
            configs = _default_configs()
        elif isinstance(configs, str | os.PathLike):
            self.configs_path = os.fspath(configs)
            if os.path.exists(self.configs_path):
                configs = _read_yaml(self.configs_path)
            else:
                warnings.warn(f"{self.configs_path}: no such config file; upstream's default configs are used", stacklevel=2)
                configs = _default_configs()
        if not isinstance(configs, dict):
            raise TypeError(f"TTS_Config takes a dict of configs, a tts_infer.yaml path or None, not {type(configs).__name__}")
        flat = [k for k, v in configs.items() if not isinstance(v, dict)]
        if flat:
            raise ValueError(
                f"TTS_Config's dict maps config names to configs, as tts_infer.yaml does: {{'custom': {{'device': ..., "
                f"'version': ..., 't2s_weights_path': ...}}}}; {', '.join(map(repr, flat))} are not configs"
            )
        merged = {**_default_configs(), **copy.deepcopy(configs)}
        self.default_configs = merged
        self.configs: dict = merged.get("custom", merged["v2"])
        self.version = self.configs.get("version")
        if self.version not in VERSIONS:
            raise ValueError(f"version {self.version!r}: upstream's versions are {', '.join(VERSIONS)}")
        self.device = self.configs.get("device", "cpu")
        if str(self.device) != "cpu":
            warnings.warn(f"device {str(self.device)!r}: koe runs GPT-SoVITS on the CPU; the CPU is used", stacklevel=2)
            self.device = "cpu"
        self.is_half = bool(self.configs.get("is_half", False))
        if self.is_half:
            warnings.warn("is_half: koe runs GPT-SoVITS in float32 on the CPU (as upstream does there); half precision is off", stacklevel=2)
            self.is_half = False
        self.given: dict[str, Any] = {}  # a path the config named that is not there (its default was taken)
        for key in PATH_KEYS:
            path = self.configs.get(key)
            if path in ("", None) or not os.path.exists(path):
                default = merged[self.version][key]
                if path not in ("", None, default):
                    self.given[key] = path
                    warnings.warn(f"{key} {path!r} is not there: upstream's default {default!r} is used", stacklevel=2)
                path = default
            setattr(self, key, os.fspath(path))
        self.languages = self.v1_languages if self.version == "v1" else self.v2_languages
        self.use_vocoder = False
        self.sampling_rate = spec.SAMPLE_RATE
        self.max_sec = None
        self.hz = 50
        self.update_configs()

    @classmethod
    def from_folder(cls, model: str | os.PathLike) -> TTS_Config:
        """koe's: the config naming the files of a koe GPT-SoVITS folder (a path, a store name or a hub id)."""
        from koe.service.store.resolve import model_folder

        folder = model_folder(model)
        try:
            layout = spec.find_layout(folder)
        except spec.SpecError as e:
            raise FileNotFoundError(str(e)) from e
        return cls(
            {
                "custom": {
                    "device": "cpu",
                    "is_half": False,
                    "version": layout.version,
                    "t2s_weights_path": str(layout.gpt),
                    "vits_weights_path": str(layout.sovits),
                    "bert_base_path": str(layout.bert),
                    "cnhuhbert_base_path": str(layout.hubert),
                }
            }
        )

    def update_configs(self) -> dict:
        self.config = {
            "device": str(self.device),
            "is_half": self.is_half,
            "version": self.version,
            **{key: getattr(self, key) for key in PATH_KEYS},
        }
        return self.config

    def update_version(self, version: str) -> None:
        self.version = version
        self.languages = self.v1_languages if version == "v1" else self.v2_languages
        self.use_vocoder = version in spec.VOCODER_VERSIONS

    def save_configs(self, configs_path: str | os.PathLike | None = None) -> None:
        """Writes the default configs and this one (as "custom") to `configs_path` (upstream's yaml)."""
        import yaml

        path = Path(configs_path if configs_path is not None else self.configs_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({**self.default_configs, "custom": self.update_configs()}, allow_unicode=True), encoding="utf-8")

    def __str__(self) -> str:
        lines = [f"{k.ljust(20)}: {v}" for k, v in self.update_configs().items()]
        return "\n".join(["TTS Config".center(100, "-"), *lines, "-" * 100]) + "\n"

    __repr__ = __str__


class _Files(spec.Layout):
    """The engine's layout of the files a `TTS_Config` names. The files upstream reads from its
    `pretrained_models` whatever the config says (v2Pro/ProPlus's SV model, v3's BigVGAN, v4's
    vocoder, a v3/v4 LoRA's pretrained model), G2PW's model, NLTK's data and fastText's model are
    looked for beside the BERT folder (upstream's `pretrained_models`, and a koe folder's places),
    G2PW's also in upstream's `GPT_SoVITS/text/G2PWModel`."""

    def __init__(self, config: TTS_Config, version: str) -> None:
        self._bert, self._hubert = Path(config.bert_base_path), Path(config.cnhuhbert_base_path)
        sovits, folder = Path(config.vits_weights_path), self._bert.parent
        base = folder / spec.RELEASES[version][1] if spec.is_lora(sovits) else None
        super().__init__(folder, Path(config.t2s_weights_path), sovits, version, base)

    def required(self) -> tuple[str, ...]:
        """The files the engine reads, as paths (the config's may lie outside the folder)."""
        named = (self.gpt, self.sovits, *(() if self.base is None else (self.base,)))
        hubert = tuple(self.hubert / Path(f).name for f in spec.HUBERT_FILES)
        bert = tuple(self.bert / Path(f).name for f in spec.BERT_FILES)
        return tuple(str(p) for p in (*named, *hubert, *bert, *(self.folder / f for f in spec.EXTRA_FILES.get(self.version, ()))))

    @property
    def hubert(self) -> Path:
        return self._hubert

    @property
    def bert(self) -> Path:
        return self._bert

    @property
    def ap_bwe(self) -> Path | None:
        """v3's super-sampler: the folder's (koe's place), else where upstream reads it, its source
        tree's `tools/AP_BWE_main/24kto48k` (above the BERT folder's `GPT_SoVITS/pretrained_models`,
        or under the working directory, upstream's root)."""
        upstreams = (self.folder.parent.parent / UPSTREAM_AP_BWE, Path.cwd() / UPSTREAM_AP_BWE)
        return super().ap_bwe or next((p for p in upstreams if spec.holds_ap_bwe(p)), None)

    @property
    def g2pw(self) -> Path | None:
        places = (self.folder / spec.G2PW, self.folder.parent / "text" / spec.G2PW)
        return next((p for p in places if (p / "g2pW.onnx").is_file()), None)


def _sovits_version(path: str) -> str:
    """The SoVITS file's version, as upstream sniffs it; a ValueError for one koe does not run yet."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"vits_weights_path {path!r}: no such SoVITS file")
    version = spec.sniff_version(Path(path))
    if version is None:
        raise ValueError(f"{path}: not a SoVITS checkpoint (neither a zip nor one of upstream's version headers)")
    if version not in DROP_IN_VERSIONS:
        raise ValueError(f"{path}: SoVITS {version} is not supported by koe's TTS drop-in yet (it runs {', '.join(DROP_IN_VERSIONS)})")
    return version


def _check_files(config: TTS_Config) -> None:
    named = {"t2s_weights_path": "GPT file", "vits_weights_path": "SoVITS file", "bert_base_path": "BERT folder", "cnhuhbert_base_path": "HuBERT folder"}
    for key, what in named.items():
        path = getattr(config, key)
        if not os.path.exists(path):
            given = f" (the config's {config.given[key]!r} is not there either)" if key in config.given else ""
            raise FileNotFoundError(f"{key} {path!r}: no such {what}{given}")


def _engine(config: TTS_Config) -> GPTSoVITSEngine:
    """koe's engine on the config's files (`GPTSoVITSEngine.from_layout`, float32 on the CPU)."""
    _check_files(config)
    return GPTSoVITSEngine.from_layout(_Files(config, _sovits_version(config.vits_weights_path)), "cpu", precision=PRECISION)


class _Stop:
    """`fragments`' cancel handle: raises once `TTS.stop()` was called."""

    def __init__(self, tts: TTS) -> None:
        self.tts = tts

    def raise_if_cancelled(self) -> None:
        if self.tts.stop_flag:
            raise Cancelled("stopped")


def _fresh_cache() -> dict[str, Any]:
    keys = ("ref_audio_path", "prompt_semantic", "prompt_text", "prompt_lang", "phones", "bert_features", "norm_text")
    return {**dict.fromkeys(keys), "refer_spec": [], "aux_ref_audio_paths": []}


class TTS:
    """Upstream's `TTS` on koe's GPT-SoVITS engine (see the module's doc)."""

    def __init__(self, configs: TTS_Config | dict | str | os.PathLike | None) -> None:
        self.configs = configs if isinstance(configs, TTS_Config) else TTS_Config(configs)
        self.engine = _engine(self.configs)
        self.configs.update_version(self.engine.version)
        self.configs.max_sec = self.engine.models.t2s.config.early_stop_num // self.configs.hz
        self.prompt_cache: dict[str, Any] = _fresh_cache()
        self._reference: GPTSoVITSVoice | None = None  # the main clip's voice (koe's, beside upstream's cache)
        self._references: GPTSoVITSVoice | None = None  # with the auxiliary clips
        self.stop_flag = False
        self.precision = torch.float32
        self.sr_model: APBWE | None = None  # v3's super-sampler, loaded on first use (upstream's init_sr_model)
        self.sr_model_not_exist = False

    # -- weights ---------------------------------------------------------------------------------
    def init_t2s_weights(self, weights_path: str) -> None:
        """Another GPT (`.ckpt`); the prompt cache is kept, as upstream's."""
        if not os.path.isfile(weights_path):
            raise FileNotFoundError(f"t2s_weights_path {weights_path!r}: no such GPT file")
        self.engine.models.t2s = load_t2s(weights_path, precision=PRECISION)
        self.configs.t2s_weights_path = os.fspath(weights_path)
        self.configs.max_sec = self.engine.models.t2s.config.early_stop_num // self.configs.hz

    def init_vits_weights(self, weights_path: str) -> None:
        """Another SoVITS (`.pth`, any version koe runs): the engine is built again on the config's
        files with it (a failed load keeps the model). Its version sets the languages; the prompt
        cache is kept, as upstream's, unless the version changed: the reference and transcript are
        then read again at the next run (another version's voice holds other parts)."""
        _sovits_version(weights_path)
        config = copy.copy(self.configs)
        config.vits_weights_path = os.fspath(weights_path)
        engine = _engine(config)
        self.engine, self.configs.vits_weights_path = engine, config.vits_weights_path
        self.configs.update_version(engine.version)
        if self._reference is not None and self._reference.version != engine.version:
            self.prompt_cache.update(_fresh_cache())
            self._reference = self._references = None

    # -- the reference ---------------------------------------------------------------------------
    def set_ref_audio(self, ref_audio_path: str) -> None:
        """Reads the reference clip (its semantic tokens and spectrogram) into the prompt cache."""
        if not os.path.isfile(ref_audio_path):
            raise ReferenceNotFound(f"{ref_audio_path} not exists")
        try:
            self._reference = self.engine.reference_voice(str(ref_audio_path))
        except UnsupportedVoice as e:
            if "3 to 10 seconds" in str(e):
                raise ReferenceLengthError(str(e)) from e
            raise
        self._references = None
        self.prompt_cache.update(ref_audio_path=ref_audio_path, prompt_semantic=self._reference.semantic)
        self._refer_spec()

    def _aux_references(self, paths: list) -> None:
        """Upstream's auxiliary clips: read again unless the same set as the cache's; a missing one
        is skipped with a warning, as upstream's."""
        cache = self.prompt_cache
        if len(set(paths) & set(cache["aux_ref_audio_paths"])) == len(paths) == len(cache["aux_ref_audio_paths"]) and self._references:
            return
        cache["aux_ref_audio_paths"] = list(paths)
        clips = []
        for path in paths:
            if path in ("", None):
                continue
            if not os.path.exists(path):
                warnings.warn(f"auxiliary reference {path!r} does not exist: skipped", stacklevel=3)
                continue
            clips.append(str(path))
        if clips and self.engine.version in spec.VOCODER_VERSIONS:
            warnings.warn(
                f"GPT-SoVITS {self.engine.version} takes its timbre from ref_audio_path alone: aux_ref_audio_paths are not used, as upstream's", stacklevel=3
            )
            clips = []
        self._references = self.engine.add_references(self._reference, clips)
        self._refer_spec()

    def _refer_spec(self) -> None:
        voice = self._references or self._reference
        self.prompt_cache["refer_spec"] = [(spec, None) for spec in voice.specs]

    def _transcript(self, prompt_text: str, prompt_lang: str) -> None:
        """The transcript's phonemes and BERT features, unless the cache holds this text's (upstream
        keys them by the text alone)."""
        cache = self.prompt_cache
        if cache["prompt_text"] == prompt_text:
            return
        try:
            fragment = fragment_of(self.engine.models, prompt_text, prompt_lang)
        except LanguageNotBuilt as e:
            raise UnsupportedLanguage(str(e)) from e
        cache.update(prompt_text=prompt_text, prompt_lang=prompt_lang, phones=fragment.phones, bert_features=fragment.bert, norm_text=fragment.norm_text)

    def _voice(self, transcript: bool) -> GPTSoVITSVoice:
        """koe's voice from the cache: the references, and the transcript's features or none."""
        c = self.prompt_cache
        if not transcript:
            return replace(self._references, text=None, prompt_lang=None, phones=None, bert=None, norm_text=None)
        return replace(
            self._references, text=c["prompt_text"], prompt_lang=c["prompt_lang"], phones=c["phones"], bert=c["bert_features"], norm_text=c["norm_text"]
        )

    # -- inference -------------------------------------------------------------------------------
    def _language(self, language: Any, key: str) -> str:
        if language not in self.configs.languages:
            known = ", ".join(self.configs.languages)
            raise UnsupportedLanguage(f"{key} {language!r}: GPT-SoVITS {self.configs.version} speaks {known}", param=key)
        return language

    def _settings(self, inputs: dict) -> RunSettings:
        """The inputs the engine takes as options, checked by its schema (types, ranges, choices)."""
        schema = self.engine.capabilities.options
        values = schema.validate({ENGINE_NAMES.get(k, k): v for k, v in inputs.items() if schema.get(ENGINE_NAMES.get(k, k)) is not None})
        values["batch_size"] = values.pop("batch_fragments", 1)
        return RunSettings(**{f.name: values[f.name] for f in fields(RunSettings) if f.name in values})

    def run(self, inputs: dict) -> Iterator[tuple[int, np.ndarray]]:
        """Upstream's `TTS.run`: a generator of (sample rate, int16 samples). Its inputs are checked
        here, at the call; the work (seed, reference, decoding) runs as the generator is read."""
        text = inputs.get("text", "")
        if not isinstance(text, str) or not text.strip():
            raise EmptyText("text is empty: there is nothing to speak")
        text_lang = self._language(inputs.get("text_lang", ""), "text_lang")
        prompt_text = inputs.get("prompt_text") or ""
        if not isinstance(prompt_text, str):
            raise TypeError(f"prompt_text must be a string, not {type(prompt_text).__name__}")
        prompt_text = prompt_text.strip("\n")  # blank: reference-free (upstream fails on a text of newlines)
        if prompt_text:
            self._language(inputs.get("prompt_lang", ""), "prompt_lang")
        elif self.engine.version in spec.VOCODER_VERSIONS:
            raise UnsupportedVoice(f"prompt_text cannot be empty with SoVITS {self.engine.version}: upstream has no reference-free mode for v3/v4")
        ref = inputs.get("ref_audio_path", "")
        if ref in ("", None):
            if self.prompt_cache["prompt_semantic"] is None or not self.prompt_cache["refer_spec"]:
                raise ValueError("ref_audio_path cannot be empty, when the reference audio is not set using set_ref_audio()")
        elif not os.path.isfile(ref):
            raise ReferenceNotFound(f"{ref} not exists")
        settings = self._settings(inputs)
        chunking, streamed = self._modes(inputs, settings)
        super_sampling = bool(inputs.get("super_sampling", False)) and self.engine.version == "v3"
        return self._run(inputs, text, text_lang, prompt_text, settings, chunking, streamed, super_sampling)

    def _modes(self, inputs: dict, settings: RunSettings) -> tuple[StreamSettings | None, bool]:
        """Upstream's choice between streaming_mode and return_fragment -> (the streaming_mode
        settings or None, whether batches are returned as they are made): streaming_mode wins over
        return_fragment; on v3/v4 it becomes return_fragment, with a warning (upstream prints it).
        Its options are checked only when it is on (upstream reads them only then)."""
        streaming, streamed = bool(inputs.get("streaming_mode", False)), bool(inputs.get("return_fragment", False))
        if not streaming:
            return None, streamed
        if self.engine.version in spec.VOCODER_VERSIONS:
            warnings.warn(f"streaming_mode: SoVITS {self.engine.version} does not stream by chunks; return_fragment is used, as upstream's", stacklevel=3)
            return None, True
        if settings.batch_size != 1:
            raise InvalidOption(
                f"batch_size={settings.batch_size} with streaming_mode: streaming decodes one fragment at a time, batch_size must be 1 "
                "(upstream's streaming fails on a larger batch with a transcript, and speaks only each batch's first fragment without one)",
                param="batch_size",
            )
        return StreamSettings.checked(inputs), False

    def _run(
        self,
        inputs: dict,
        text: str,
        text_lang: str,
        prompt_text: str,
        settings: RunSettings,
        chunking: StreamSettings | None,
        streamed: bool,
        super_sampling: bool,
    ) -> Iterator[tuple[int, np.ndarray]]:
        self.stop_flag = False
        seed = inputs.get("seed", -1)
        seed = int(-1 if seed in ("", None) else seed)
        set_seed(seed if seed != -1 else random.randint(0, 2**32 - 1))
        ref = inputs.get("ref_audio_path", "")
        models = self.engine.models
        if ref not in ("", None) and ref != self.prompt_cache["ref_audio_path"]:
            self.set_ref_audio(ref)  # HuBERT's layer-drop draws: `fragments` makes them after the seed
        else:
            models = replace(models, hubert_draws=0)  # a reference already read: no draws, as upstream
        self._aux_references(list(inputs.get("aux_ref_audio_paths") or []))
        if prompt_text:
            prompt_lang = inputs.get("prompt_lang", "")
            if prompt_text[-1] not in SENTENCE_ENDS:
                prompt_text += "." if prompt_lang == "en" else "。"
            self._transcript(prompt_text, prompt_lang)
        voice = self._voice(bool(prompt_text))
        rate = self.engine.sample_rate
        if chunking is not None:
            audio_chunks = stream(models, voice, text, text_lang, settings, chunking, cancel=_Stop(self))
        else:
            audio_chunks = fragments(models, voice, text, text_lang, settings, streamed=streamed, cancel=_Stop(self))
        try:
            for audio in audio_chunks:
                yield self._super_sampled(audio, rate) if super_sampling else (rate, to_int16(audio))
                if self.stop_flag and streamed:
                    yield rate, np.zeros(rate, dtype=np.int16)
                    return
        except Cancelled:
            yield rate, np.zeros(rate, dtype=np.int16)
        except LanguageNotBuilt as e:
            raise UnsupportedLanguage(str(e)) from e
        except ValueError as e:
            if "no text to read" in str(e):
                raise EmptyText("the text holds nothing to speak (only punctuation or symbols)") from e
            raise
        finally:
            self.empty_cache()

    def _super_sampled(self, audio: np.ndarray, rate: int) -> tuple[int, np.ndarray]:
        """`audio_postprocess(super_sampling=True)`'s end: AP-BWE to 48 kHz, a peak over 1 normalised,
        int16; without the model, the audio as it is, at its rate (upstream's fallback)."""
        self.init_sr_model()
        if self.sr_model is None:
            return rate, to_int16(audio)
        audio, rate = ap_bwe.postprocess(self.sr_model, audio, rate)
        return rate, to_int16(audio)

    def init_sr_model(self) -> None:
        """Upstream's: the super-sampler (AP-BWE), loaded once; a missing one is a warning (upstream
        prints one) and the audio is not super-sampled, looked for again at the next use."""
        if self.sr_model is not None:
            return
        folder = self.engine.layout.ap_bwe
        if folder is None:
            self.sr_model_not_exist = True
            places = f"{spec.AP_BWE}/ beside the BERT folder, or upstream's {UPSTREAM_AP_BWE}/"
            warnings.warn(
                f"super_sampling: no AP-BWE model ({' and '.join(spec.AP_BWE_FILES)} in {places}): the audio is not super-sampled, as upstream goes on without it",
                stacklevel=4,
            )
            return
        self.sr_model, self.sr_model_not_exist = ap_bwe.load_ap_bwe(folder), False

    def stop(self) -> None:
        """Ends the run after the batch being decoded (it then yields one second of zeros)."""
        self.stop_flag = True

    def empty_cache(self) -> None:
        gc.collect()
