"""CosyVoice's config, read from the release's own files without executing them.

A released folder's `cosyvoice2.yaml` / `cosyvoice3.yaml` is HyperPyYAML: `!new:module.Class`
builds an object from the mapping under it, `!name:module.function` binds arguments to a function,
`!apply:` calls one at load (the seeds), `!ref <key>` refers to another top-level value (or to
simple arithmetic over them: `!ref <chunk_size> * <token_mel_ratio>`). Upstream executes the
whole file, importing every class it names; koe parses it as data: each tagged node becomes a
`Node` (its tag, its target, its arguments) and references are resolved. The LM's backbone is
`CosyVoice-BlankEN/config.json` (a transformers Qwen2 config).

Torch-free: a spec reads it to describe a folder.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from koe.runtime.files import read_json_object

__all__ = [
    "VERSIONS",
    "ConfigError",
    "CosyVoiceConfig",
    "LMConfig",
    "Node",
    "QwenConfig",
    "SamplingConfig",
    "TokenizerConfig",
    "parse_qwen_config",
    "parse_yaml",
    "plain",
    "read_config",
    "yaml_name",
]

VERSIONS = (2, 3)
BLANK_FOLDER = "CosyVoice-BlankEN"  # the Qwen2 config and tokenizer files the LM is built from
LM_CLASSES = {2: "cosyvoice.llm.llm.Qwen2LM", 3: "cosyvoice.llm.llm.CosyVoice3LM"}
LM_BACKBONE = "cosyvoice.llm.llm.Qwen2Encoder"
RAS_SAMPLING = "cosyvoice.utils.common.ras_sampling"
TOKENIZER_FUNCTION = "cosyvoice.tokenizer.tokenizer.get_qwen_tokenizer"
SPEECH_TOKENS = 6561  # FSQ 3^8: every release's speech vocabulary


class ConfigError(ValueError):
    """A yaml or Qwen config that is not a CosyVoice 2/3 release's, or one with impossible values."""


def yaml_name(version: int) -> str:
    """The yaml a release of `version` keeps at its root."""
    if version not in VERSIONS:
        raise ConfigError(f"CosyVoice version {version!r}: koe reads 2 or 3")
    return f"cosyvoice{version}.yaml"


# --------------------------------------------------------------------------- the HyperPyYAML reader


@dataclass(frozen=True)
class Node:
    """A tagged yaml node: `kind` "new" (an object), "name" (a function with bound arguments) or
    "apply" (a call made at load); `target` the dotted name; `args` its mapping (keyword
    arguments) or list (positional), references resolved."""

    kind: str
    target: str
    args: Any = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.args.get(key, default) if isinstance(self.args, dict) else default


@dataclass(frozen=True)
class _Ref:
    expression: str


class _Loader(yaml.SafeLoader):
    """yaml's safe loader, with HyperPyYAML's tags read as data (nothing imported or called)."""


def _tagged(kind: str):
    def construct(loader: _Loader, suffix: str, node: yaml.Node) -> Node:
        if isinstance(node, yaml.MappingNode):
            args: Any = loader.construct_mapping(node, deep=True)
        elif isinstance(node, yaml.SequenceNode):
            args = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_scalar(node)
            args = {} if value in ("", None) else [value]
        return Node(kind, suffix, args)

    return construct


# YAML 1.2 floats (what HyperPyYAML's ruamel reads): "1e-06" is a number, not a string as in YAML 1.1.
_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))
for _kind in ("new", "name", "apply"):
    _Loader.add_multi_constructor(f"!{_kind}:", _tagged(_kind))
_Loader.add_constructor("!ref", lambda loader, node: _Ref(str(loader.construct_scalar(node))))


_REF = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv}


def _arithmetic(expression: str, values: dict[str, Any]) -> Any:
    """`<a> * <b>`-style arithmetic over numbers (nothing else is evaluated)."""
    text = _REF.sub(lambda m: f"_{m.group(1)}", expression)
    names = {f"_{k}": v for k, v in values.items()}

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and node.id in names and isinstance(names[node.id], (int, float)):
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ConfigError(f"!ref {expression!r}: koe reads references and arithmetic over numbers only")

    try:
        return walk(ast.parse(text, mode="eval"))
    except SyntaxError as e:
        raise ConfigError(f"!ref {expression!r}: {e.msg}") from None


def _resolve(value: Any, top: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    if isinstance(value, _Ref):
        names = _REF.findall(value.expression)
        if not names:
            raise ConfigError(f"!ref {value.expression!r} names no key")
        for name in names:
            if name not in top:
                raise ConfigError(f"!ref {value.expression!r}: no top-level key {name!r}")
            if name in seen:
                raise ConfigError(f"!ref {value.expression!r}: {name!r} refers to itself")
        if value.expression.strip() == f"<{names[0]}>":
            return _resolve(top[names[0]], top, (*seen, names[0]))
        return _arithmetic(value.expression, {n: _resolve(top[n], top, (*seen, n)) for n in names})
    if isinstance(value, Node):
        return Node(value.kind, value.target, _resolve(value.args, top, seen))
    if isinstance(value, dict):
        return {k: _resolve(v, top, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, top, seen) for v in value]
    return value


def parse_yaml(text: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A HyperPyYAML document as data: its top-level keys, tagged nodes as `Node`s, references
    resolved (`overrides` replace top-level values first, as upstream's loader takes them)."""
    try:
        raw = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass: tags become data
    except yaml.YAMLError as e:
        raise ConfigError(f"not a readable yaml: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError("the yaml's top level is not a mapping")
    raw.update(overrides or {})
    return {k: _resolve(v, raw, (k,)) for k, v in raw.items()}


def plain(value: Any) -> Any:
    """`value` with every `Node` replaced by its arguments (the nesting upstream's constructors
    get): what the part modules take (`hift_args`-style mappings)."""
    if isinstance(value, Node):
        return plain(value.args)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- the parts koe reads


def _int(where: str, value: Any, least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ConfigError(f"{where} must be an integer of at least {least}, got {value!r}")
    return value


def _number(where: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return float(value)


def _node(where: str, value: Any, kind: str, targets: tuple[str, ...]) -> Node:
    if not isinstance(value, Node) or value.kind != kind or value.target not in targets:
        found = f"!{value.kind}:{value.target}" if isinstance(value, Node) else repr(value)
        raise ConfigError(f"{where} must be {' or '.join(f'!{kind}:{t}' for t in targets)}, found {found}")
    return value


@dataclass(frozen=True)
class SamplingConfig:
    """RAS sampling (repetition-aware): nucleus sampling over at most `top_k` tokens whose
    probabilities reach `top_p`; a token that already appears `win_size * tau_r` times or more in
    the last `win_size` is drawn again from the whole distribution without it."""

    top_p: float = 0.8
    top_k: int = 25
    win_size: int = 10
    tau_r: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"llm.sampling.top_p must be in (0, 1], got {self.top_p!r}")
        _int("llm.sampling.top_k", self.top_k)
        _int("llm.sampling.win_size", self.win_size)
        if self.tau_r < 0:
            raise ConfigError(f"llm.sampling.tau_r must not be negative, got {self.tau_r!r}")


@dataclass(frozen=True)
class LMConfig:
    """The speech-token LM (`llm:`): v2's `Qwen2LM` (sos and task id in their own 2-row
    embedding; 3 extra speech ids: eos 6561, 6562, fill 6563), v3's `CosyVoice3LM` (200 extra ids
    from 6561: sos, eos, task id, fill, ...; the head has no bias)."""

    version: int
    input_size: int
    output_size: int
    speech_token_size: int = SPEECH_TOKENS
    mix_ratio: tuple[int, int] = (5, 15)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)

    @property
    def extra_tokens(self) -> int:
        """Ids past the speech vocabulary in the embedding and the head (3 for v2, 200 for v3)."""
        return 3 if self.version == 2 else 200

    @property
    def vocab_size(self) -> int:
        return self.speech_token_size + self.extra_tokens

    @property
    def sos(self) -> int:
        """The start id (v3: a speech-embedding row; v2: row 0 of `llm_embedding`)."""
        return self.speech_token_size if self.version == 3 else 0

    @property
    def task_id(self) -> int:
        return self.speech_token_size + 2 if self.version == 3 else 1

    @property
    def eos(self) -> int:
        return self.speech_token_size + (1 if self.version == 3 else 0)

    @property
    def fill(self) -> int:
        return self.speech_token_size + (3 if self.version == 3 else 2)

    @property
    def stop_tokens(self) -> range:
        """Every id that ends decoding (all the ids past the speech vocabulary)."""
        return range(self.speech_token_size, self.vocab_size)


@dataclass(frozen=True)
class TokenizerConfig:
    """`get_tokenizer:`: the Qwen tokenizer of `CosyVoice-BlankEN/` with the special tokens of
    `version` ("cosyvoice2" or "cosyvoice3") added."""

    version: str = "cosyvoice2"
    skip_special_tokens: bool = True
    allowed_special: str = "all"


@dataclass(frozen=True)
class CosyVoiceConfig:
    """A release's yaml, as koe needs it: the rates, the LM, the text tokenizer, and the flow, HiFT
    and mel-feature arguments as plain mappings (upstream's keys; nested objects as mappings of
    their arguments), with each object's class in `classes` (by dotted path: "flow.decoder")."""

    version: int
    sample_rate: int
    token_frame_rate: int
    token_mel_ratio: int
    chunk_size: int
    num_decoding_left_chunks: int
    spk_embed_dim: int
    lm: LMConfig
    tokenizer: TokenizerConfig
    flow: dict[str, Any]
    hift: dict[str, Any]
    feat_extractor: dict[str, Any]
    classes: dict[str, str]


def _classes(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, Node):
        out[prefix] = value.target
        value = value.args
    if isinstance(value, dict):
        for k, v in value.items():
            _classes(f"{prefix}.{k}", v, out)


def parse_config(data: dict[str, Any], version: int) -> CosyVoiceConfig:
    """The parsed yaml of a `version` release (`parse_yaml`'s result), validated."""
    yaml_name(version)
    where = yaml_name(version)
    for key in ("sample_rate", "llm", "flow", "hift", "get_tokenizer", "feat_extractor"):
        if key not in data:
            raise ConfigError(f"{where}: no {key!r}")
    llm = _node(f"{where}: llm", data["llm"], "new", (LM_CLASSES[version],))
    _node(f"{where}: llm.llm", llm.get("llm"), "new", (LM_BACKBONE,))
    sampling_node = _node(f"{where}: llm.sampling", llm.get("sampling"), "name", (RAS_SAMPLING,))
    sampling = SamplingConfig(
        top_p=_number("llm.sampling.top_p", sampling_node.get("top_p", 0.8)),
        top_k=_int("llm.sampling.top_k", sampling_node.get("top_k", 25)),
        win_size=_int("llm.sampling.win_size", sampling_node.get("win_size", 10)),
        tau_r=_number("llm.sampling.tau_r", sampling_node.get("tau_r", 0.1)),
    )
    mix = llm.get("mix_ratio", [5, 15])
    if not (isinstance(mix, list) and len(mix) == 2):
        raise ConfigError(f"{where}: llm.mix_ratio must be two integers, got {mix!r}")
    lm = LMConfig(
        version=version,
        input_size=_int("llm.llm_input_size", llm.get("llm_input_size")),
        output_size=_int("llm.llm_output_size", llm.get("llm_output_size")),
        speech_token_size=_int("llm.speech_token_size", llm.get("speech_token_size")),
        mix_ratio=(_int("llm.mix_ratio[0]", mix[0]), _int("llm.mix_ratio[1]", mix[1])),
        sampling=sampling,
    )
    if lm.speech_token_size != SPEECH_TOKENS:
        raise ConfigError(
            f"{where}: llm.speech_token_size is {lm.speech_token_size}, every CosyVoice 2/3 release has {SPEECH_TOKENS} (upstream hard-codes ids past it)"
        )
    tok = _node(f"{where}: get_tokenizer", data["get_tokenizer"], "name", (TOKENIZER_FUNCTION,))
    tokenizer = TokenizerConfig(
        version=str(tok.get("version", "cosyvoice2")),
        skip_special_tokens=bool(tok.get("skip_special_tokens", True)),
        allowed_special=str(data.get("allowed_special", "all")),
    )
    if tokenizer.version != f"cosyvoice{version}":
        raise ConfigError(f"{where}: get_tokenizer.version is {tokenizer.version!r}, a v{version} release uses 'cosyvoice{version}'")
    feat = _node(f"{where}: feat_extractor", data["feat_extractor"], "name", ("matcha.utils.audio.mel_spectrogram",))
    flow = _node(f"{where}: flow", data["flow"], "new", ("cosyvoice.flow.flow.CausalMaskedDiffWithXvec", "cosyvoice.flow.flow.CausalMaskedDiffWithDiT"))
    hift = _node(f"{where}: hift", data["hift"], "new", ("cosyvoice.hifigan.generator.HiFTGenerator", "cosyvoice.hifigan.generator.CausalHiFTGenerator"))
    want_flow = "CausalMaskedDiffWithXvec" if version == 2 else "CausalMaskedDiffWithDiT"
    if not flow.target.endswith(want_flow):
        raise ConfigError(f"{where}: a v{version} release's flow is {want_flow}, found {flow.target}")
    classes: dict[str, str] = {}
    for key in ("llm", "flow", "hift"):
        _classes(key, data[key], classes)
    return CosyVoiceConfig(
        version=version,
        sample_rate=_int("sample_rate", data["sample_rate"]),
        token_frame_rate=_int("token_frame_rate", data.get("token_frame_rate", 25)),
        token_mel_ratio=_int("token_mel_ratio", data.get("token_mel_ratio", 2)),
        chunk_size=_int("chunk_size", data.get("chunk_size", 25)),
        num_decoding_left_chunks=int(data.get("num_decoding_left_chunks", -1)),
        spk_embed_dim=_int("spk_embed_dim", data.get("spk_embed_dim", 192)),
        lm=lm,
        tokenizer=tokenizer,
        flow=plain(flow),
        hift=plain(hift),
        feat_extractor=plain(feat),
        classes=classes,
    )


# --------------------------------------------------------------------------- the Qwen2 backbone


@dataclass(frozen=True)
class QwenConfig:
    """`CosyVoice-BlankEN/config.json`: the Qwen2 decoder the LM runs (transformers' `Qwen2Config`
    defaults where a field is left out)."""

    vocab_size: int = 151936
    hidden_size: int = 4096
    intermediate_size: int = 22016
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 32
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
            _int(f"{BLANK_FOLDER}/config.json: {name}", getattr(self, name))
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"{BLANK_FOLDER}/config.json: hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"{BLANK_FOLDER}/config.json: num_attention_heads {self.num_attention_heads} is not a multiple of num_key_value_heads {self.num_key_value_heads}"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def parse_qwen_config(raw: dict[str, Any]) -> QwenConfig:
    """A Qwen2 `config.json` (model_type "qwen2"; rope scaling and sliding windows refused: no
    release uses them, and koe would not run them as transformers does)."""
    where = f"{BLANK_FOLDER}/config.json"
    if raw.get("model_type") != "qwen2":
        raise ConfigError(f"{where}: model_type is {raw.get('model_type')!r}, CosyVoice's LM is a 'qwen2'")
    if raw.get("rope_scaling"):
        raise ConfigError(f"{where}: rope_scaling {raw['rope_scaling']!r} is not supported")
    if raw.get("use_sliding_window"):
        raise ConfigError(f"{where}: use_sliding_window is not supported")
    if raw.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"{where}: hidden_act {raw['hidden_act']!r}, Qwen2's is 'silu'")
    known = QwenConfig.__dataclass_fields__
    return QwenConfig(**{k: v for k, v in raw.items() if k in known})


def read_config(folder: str | Path) -> tuple[CosyVoiceConfig, QwenConfig]:
    """The yaml and the Qwen2 config of a released folder (v2 or v3, by which yaml it holds),
    checked against each other (the LM's widths are the backbone's)."""
    folder = Path(folder)
    found = [v for v in VERSIONS if (folder / yaml_name(v)).is_file()]
    if len(found) != 1:
        names = " or ".join(yaml_name(v) for v in VERSIONS)
        raise ConfigError(f"{folder}: a CosyVoice 2/3 folder holds exactly one of {names}, found {len(found)}")
    version = found[0]
    text = (folder / yaml_name(version)).read_text(encoding="utf-8")
    config = parse_config(parse_yaml(text, {"qwen_pretrain_path": str(folder / BLANK_FOLDER)}), version)
    qwen = parse_qwen_config(read_json_object(folder / BLANK_FOLDER / "config.json"))
    if config.lm.input_size != qwen.hidden_size or config.lm.output_size != qwen.hidden_size:
        raise ConfigError(
            f"{folder}: the yaml's llm_input_size/llm_output_size ({config.lm.input_size}/{config.lm.output_size}) are not the backbone's hidden_size ({qwen.hidden_size})"
        )
    return config, qwen
