"""IndexTTS 2's emotion from a text: a Qwen3 causal LM fine-tuned to answer a chat's "文本情感分类"
(text emotion classification) with scores, read into upstream's eight emotion weights.

What upstream's `QwenEmotion` (indextts/infer_v2.py) does, and koe here on its own blocks:
- the folder (`<model_dir>/<qwen_emo_path>`, released as `qwen0.6bemo4-merge/`) is a Qwen3 causal
  LM in Hugging Face's layout: `config.json`, `model.safetensors`, `generation_config.json` and
  Qwen's byte-level BPE tokenizer files (koe reads them with `QwenTokenizer`, the split regex
  transformers 4.52 uses);
- upstream loads the LM in float16 (`torch_dtype="float16"`, on the CPU too): `dtype` is float16 by
  default here as well; float32 is the exact path of koe's other modules;
- the prompt is the folder's own chat template rendered as transformers renders it (a sandboxed
  Jinja environment with trim_blocks, lstrip_blocks and its `tojson`), for a system message
  "文本情感分类" and the user's text, with the generation prompt and `enable_thinking=False`;
- generation is transformers' `generate` with the folder's generation settings (repetition
  penalty over the whole sequence, then temperature, top-k, top-p and one multinomial draw from
  torch's global generator per token, or argmax without sampling), up to 32,768 new tokens or an
  end-of-sequence id; the KV cache grows by concatenation, as transformers' dynamic cache does;
- the answer (after the last `</think>`, special tokens skipped) is parsed as upstream parses it:
  JSON, else `label: number` pairs found by a regex; a text holding one of the "melancholic"
  words swaps the sad and melancholic scores; labels given as values (`{"emotion": "sad"}`) and
  English names count; scores are clamped to [0, 1.2]; all zero means calm. An answer upstream
  cannot read (a non-numeric score, a malformed number, a JSON value that is not an object where
  the swap needs one) is an `EmotionAnswerError`, where upstream raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import nn

from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer, TokenizerFilesError, read_added_tokens
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.norm import RMSNorm
from koe.nn.rotary import inverse_frequencies, rotary_cos_sin
from koe.runtime.kv_cache import ConcatCache
from koe.runtime.sampling import SamplingConfig, draw, process_logits

__all__ = [
    "EMOTION_LABELS",
    "EmotionAnswerError",
    "EmotionLM",
    "EmotionLMConfig",
    "EmotionLMError",
    "GenerationSettings",
    "QwenEmotion",
    "weights_from_answer",
]

SYSTEM_PROMPT = "文本情感分类"  # the system message the LM was fine-tuned under
MAX_NEW_TOKENS = 32768  # what upstream passes to generate
THINK_END_ID = 151668  # Qwen3's `</think>`: the answer is what follows the last one
#: The LM's labels in upstream's vector order, with koe's (and upstream's) English names.
EMOTION_LABELS = (
    ("高兴", "happy"),
    ("愤怒", "angry"),
    ("悲伤", "sad"),
    ("恐惧", "afraid"),
    ("反感", "disgusted"),
    ("低落", "melancholic"),
    ("惊讶", "surprised"),
    ("自然", "calm"),
)
SAD, MELANCHOLIC, CALM = "悲伤", "低落", "自然"
#: Words in the text that make its "sad" score a "melancholic" one (the LM does not tell them apart).
MELANCHOLIC_WORDS = ("低落", "melancholy", "melancholic", "depression", "depressed", "gloomy")
LABEL_KEYS = ("emotion", "emotion_label", "label", "情感", "情绪")  # where an answer may name its one emotion
MIN_SCORE, MAX_SCORE = 0.0, 1.2
PAIR = re.compile(r'([^\s":.,]+?)"?\s*:\s*([\d.]+)')  # the fallback's `label: score`, as upstream finds them

_CLEAN_UP = (" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're")  # transformers' clean-up: each loses its space

#: generation_config.json keys whose non-default values add logits processors koe does not run here.
_UNSUPPORTED = {
    "num_beams": 1,
    "num_beam_groups": 1,
    "penalty_alpha": None,
    "min_length": 0,
    "min_new_tokens": None,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "encoder_repetition_penalty": 1.0,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "sequence_bias": None,
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "exponential_decay_length_penalty": None,
    "guidance_scale": None,
    "renormalize_logits": False,
    "remove_invalid_values": False,
    "stop_strings": None,
    "max_time": None,
    "use_cache": True,  # without its cache transformers runs the whole sequence again at every step
}


class EmotionLMError(ValueError):
    """The emotion LM's folder is missing, incomplete or not a Qwen3 causal LM koe runs."""


class EmotionAnswerError(ValueError):
    """The emotion LM's answer cannot be read as emotion scores (where upstream raises too)."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EmotionLMError(f"{path.name} not found in {path.parent}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EmotionLMError(f"{path} is not valid UTF-8 JSON ({e}): a damaged file; pull the release again") from None


def _ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in value) if isinstance(value, list) else (int(value),)


@dataclass(frozen=True)
class EmotionLMConfig:
    """The LM's `config.json` (a Qwen3 causal LM), validated."""

    decoder: DecoderSpec
    vocab_size: int
    tie_word_embeddings: bool
    eos_ids: tuple[int, ...]
    sliding_window: int | None = None  # not applied (use_sliding_window is false), but see `EmotionLM.last_logits`

    @classmethod
    def read(cls, folder: Path) -> EmotionLMConfig:
        return cls.from_dict(_read_json(folder / "config.json"), folder / "config.json")

    @classmethod
    def from_dict(cls, d: Any, path: Path | str = "config.json") -> EmotionLMConfig:
        if not isinstance(d, dict) or d.get("model_type") != "qwen3":
            raise EmotionLMError(f"{path}: model_type {d.get('model_type') if isinstance(d, dict) else None!r}: the emotion LM is a Qwen3 causal LM (qwen3)")
        if d.get("rope_scaling") or d.get("use_sliding_window") or d.get("hidden_act", "silu") != "silu":
            raise EmotionLMError(f"{path}: koe runs Qwen3 with default rotary positions, no sliding window and SiLU (as released)")
        try:
            heads = int(d["num_attention_heads"])
            decoder = DecoderSpec(
                hidden_size=int(d["hidden_size"]),
                intermediate_size=int(d["intermediate_size"]),
                num_layers=int(d["num_hidden_layers"]),
                num_heads=heads,
                num_kv_heads=int(d.get("num_key_value_heads", heads)),
                head_dim=int(d.get("head_dim") or int(d["hidden_size"]) // heads),
                rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                rope_theta=float(d.get("rope_theta", 10000.0)),
                attention_bias=bool(d.get("attention_bias", False)),
                qk_norm=True,
            )
            window = int(d["sliding_window"]) if d.get("sliding_window") else None
            return cls(decoder, int(d["vocab_size"]), bool(d.get("tie_word_embeddings", False)), _ids(d.get("eos_token_id")), window)
        except KeyError as e:
            raise EmotionLMError(f"{path}: the setting {e.args[0]!r} is missing: a damaged file; pull the release again") from None
        except (TypeError, ValueError) as e:
            raise EmotionLMError(f"{path}: {e}") from None


@dataclass(frozen=True)
class GenerationSettings:
    """`generation_config.json` as transformers' `generate` reads it (its defaults where a key is
    absent: greedy, temperature 1, top-k 50, top-p 1), and the ids that end the answer."""

    sampling: SamplingConfig
    eos_ids: tuple[int, ...]

    @classmethod
    def read(cls, folder: Path, config: EmotionLMConfig) -> GenerationSettings:
        path = folder / "generation_config.json"
        d = _read_json(path) if path.is_file() else {}
        if not isinstance(d, dict):
            raise EmotionLMError(f"{path} must hold a JSON object")
        for key, default in _UNSUPPORTED.items():
            if d.get(key, default) not in (default, [], {}):
                raise EmotionLMError(f"{path}: {key}={d[key]!r} is a generation setting koe does not run for the emotion LM")

        def given(key: str, default: float) -> float:
            return float(d[key]) if d.get(key) is not None else default

        try:
            eos = _ids(d["eos_token_id"]) if d.get("eos_token_id") is not None else config.eos_ids
            sampling = SamplingConfig(
                do_sample=bool(d.get("do_sample", False)),
                temperature=given("temperature", 1.0),
                top_k=int(given("top_k", 0)) if "top_k" in d else 50,
                top_p=given("top_p", 1.0),
                repetition_penalty=given("repetition_penalty", 1.0),
            )
        except (TypeError, ValueError) as e:
            raise EmotionLMError(f"{path}: {e}") from None
        return cls(sampling, eos)


class _Body(nn.Module):
    """`model.*` of the checkpoint: the token embedding, the Qwen3 decoder layers, the final norm."""

    def __init__(self, cfg: EmotionLMConfig) -> None:
        super().__init__()
        spec = cfg.decoder
        self.embed_tokens = nn.Embedding(cfg.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(spec) for _ in range(spec.num_layers)])
        for layer in self.layers:
            layer.self_attn.native_gqa = False  # K/V heads repeated before attention, as transformers 4.52's SDPA path does
        self.norm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)


class EmotionLM(nn.Module):
    """Qwen3ForCausalLM's inference: ids -> the last position's logits, with a growing KV cache."""

    inv_freq: torch.Tensor

    def __init__(self, cfg: EmotionLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = _Body(cfg)
        self.lm_head = nn.Linear(cfg.decoder.hidden_size, cfg.vocab_size, bias=False)
        self.register_buffer("inv_freq", inverse_frequencies(cfg.decoder.head_dim, cfg.decoder.rope_theta), persistent=False)

    @classmethod
    def load(cls, folder: Path, dtype: torch.dtype = torch.float16) -> EmotionLM:
        """The folder's `model.safetensors`, strictly, cast to `dtype` (upstream: float16); a tied
        head shares the embedding (a stored `lm_head.weight` is then not read)."""
        cfg = EmotionLMConfig.read(folder)
        path = folder / "model.safetensors"
        if not path.is_file():
            raise EmotionLMError(f"model.safetensors not found in {folder}: pull the release again")
        state = {k: v.to(dtype) for k, v in load_file(str(path)).items()}
        if cfg.tie_word_embeddings:
            state.pop("lm_head.weight", None)
            if "model.embed_tokens.weight" in state:
                state["lm_head.weight"] = state["model.embed_tokens.weight"]
        with torch.device("meta"):
            lm = cls(cfg)
        try:
            lm.load_state_dict(state, strict=True, assign=True)
        except RuntimeError as e:
            raise EmotionLMError(f"{path}: not the weights its config.json describes: {e}") from None
        if cfg.tie_word_embeddings:
            lm.lm_head.weight = lm.model.embed_tokens.weight
        return lm.eval()

    def last_logits(self, ids: torch.Tensor, start: int, cache: ConcatCache) -> torch.Tensor:
        """ids (1, T) at positions start..start+T-1 -> the last position's logits (1, V) in float32
        (the head runs on that position only, as generate asks transformers to).

        Attention is SDPA's causal flag, as transformers 4.52 runs it, except where the config names a
        `sliding_window` (unused) and the keys reach it: transformers then hands SDPA its additive
        causal mask (0 or the dtype's minimum) instead, and so does koe."""
        x = self.model.embed_tokens(ids)  # (1, T, C)
        t, keys = ids.shape[1], start + ids.shape[1]
        positions = torch.arange(start, keys)[None]
        cos, sin = rotary_cos_sin(self.inv_freq, positions, x.dtype)  # (1, T, D)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        mask = None
        if self.cfg.sliding_window is not None and keys >= self.cfg.sliding_window:
            blocked = torch.arange(keys)[None, :] > positions[0][:, None]  # (T, S): keys after the query
            mask = torch.zeros(t, keys, dtype=x.dtype).masked_fill(blocked, torch.finfo(x.dtype).min)[None, None]  # (1, 1, T, S)
        for layer, layer_cache in zip(self.model.layers, cache.layers, strict=True):
            x = layer(x, cos, sin, layer_cache, mask)
        x = self.model.norm(x)
        return self.lm_head(x[:, -1:, :])[:, -1, :].to(torch.float32)

    @torch.inference_mode()
    def generate(
        self, prompt: list[int], settings: GenerationSettings, max_new_tokens: int = MAX_NEW_TOKENS, check: Callable[[], None] | None = None
    ) -> list[int]:
        """The new ids after `prompt`, as transformers' `generate` makes them for one row: the
        processed logits of each step, one draw from torch's global generator when sampling; the
        end-of-sequence id that stops it is kept. `check` runs before each step (cancellation)."""
        seq = torch.tensor([prompt], dtype=torch.long)
        cache = ConcatCache(self.cfg.decoder.num_layers)
        logits = self.last_logits(seq, 0, cache)
        eos = set(settings.eos_ids)
        new: list[int] = []
        while True:
            scores = process_logits(logits, seq, settings.sampling)
            token = draw(scores, settings.sampling)  # (1,)
            seq = torch.cat([seq, token[:, None]], dim=1)
            new.append(int(token))
            if new[-1] in eos or len(new) >= max_new_tokens:
                return new
            if check is not None:
                check()
            logits = self.last_logits(token[:, None], seq.shape[1] - 1, cache)


def _tokenizer(folder: Path) -> QwenTokenizer:
    """Qwen's tokenizer from `vocab.json`, `merges.txt` and `tokenizer_config.json` (with the split
    regex transformers 4.52 uses: it never swaps Qwen's), or from `tokenizer.json` alone where the
    folder has only that (what transformers reads first)."""
    if (folder / "vocab.json").is_file() or not (folder / "tokenizer.json").is_file():
        return QwenTokenizer.from_folder(folder, branch="qwen2")
    try:
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as e:  # noqa: BLE001 - the tokenizers library's parse errors have no common class
        raise TokenizerFilesError(f"{folder / 'tokenizer.json'} is not a tokenizer file the tokenizers library reads: {e}") from None
    special = frozenset(spec.id for spec in read_added_tokens(folder / "tokenizer_config.json") if spec.special)
    return QwenTokenizer(backend, "qwen2", special)


# -- the prompt ------------------------------------------------------------------------------------
def _template_source(folder: Path, tokenizer_config: dict) -> str:
    """The folder's chat template: `chat_template.jinja` (which transformers prefers), else the one
    in `tokenizer_config.json` (a list of named templates: the "default")."""
    file = folder / "chat_template.jinja"
    if file.is_file():
        return file.read_text(encoding="utf-8")
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
    if not isinstance(template, str) or not template:
        raise EmotionLMError(f"{folder}: no chat template (chat_template.jinja or tokenizer_config.json's chat_template)")
    return template


def _special_tokens(tokenizer_config: dict) -> dict[str, Any]:
    """The named special tokens transformers hands a template (as its `special_tokens_map`)."""

    def content(value: Any) -> Any:
        return value.get("content") if isinstance(value, dict) else value

    out: dict[str, Any] = {}
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        value = content(tokenizer_config.get(key))
        if value is not None:
            out[key] = value
    extra = tokenizer_config.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [content(v) for v in extra]
    return out


class ChatTemplate:
    """A folder's chat template, compiled as transformers compiles it (sandboxed Jinja with
    trim_blocks and lstrip_blocks, loop controls, its `tojson` filter and `raise_exception`)."""

    def __init__(self, source: str, special: dict[str, Any]) -> None:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(source)
        self.special = special

    def render(self, messages: list[dict[str, str]], **kwargs: Any) -> str:
        return self.template.render(messages=messages, tools=None, documents=None, add_generation_prompt=True, **{**self.special, **kwargs})


# -- the answer ------------------------------------------------------------------------------------
def _label_key(value: Any) -> str | None:
    """The Chinese label a value names (a label or its English name, any case, spaces trimmed)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if any(value == chinese for chinese, _ in EMOTION_LABELS):
        return value
    lower = value.lower()
    for chinese, english in EMOTION_LABELS:
        if lower == english:
            return chinese
    return None


def _by_label(content: Any) -> dict:
    """Scores by Chinese label: the answer's object, with an emotion named by value (a bare label,
    or under one of `LABEL_KEYS` when no score is given) scored 1, and a label given as a
    label's value moved to its own key."""
    scores = dict(content) if isinstance(content, dict) else {}
    named = _label_key(content) if isinstance(content, str) else None
    if named is None:
        for key in LABEL_KEYS:
            named = _label_key(scores.get(key))
            if named is not None:
                break
    if named is not None and not any(chinese in scores for chinese, _ in EMOTION_LABELS):
        scores[named] = 1.0
    for chinese, _ in EMOTION_LABELS:
        named = _label_key(scores.get(chinese))
        if named is not None:
            scores[chinese] = 1.0 if named == chinese else 0.0
            if named != chinese:
                scores[named] = 1.0
    return scores


def _clamped(value: Any) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise EmotionAnswerError(f"the emotion model gave a non-numeric emotion score {value!r}: try the request again") from e
    return max(MIN_SCORE, min(MAX_SCORE, score))


def weights_from_answer(answer: str, text: str) -> tuple[float, ...]:
    """The eight emotion weights (koe's and upstream's order: happy, angry, sad, afraid, disgusted,
    melancholic, surprised, calm) the LM's `answer` for `text` gives; `EmotionAnswerError` where
    upstream cannot read it."""
    try:
        content: Any = json.loads(answer)
    except json.JSONDecodeError:
        content = {}
        for m in PAIR.finditer(answer):
            try:
                content[m.group(1)] = float(m.group(2))
            except ValueError as e:
                raise EmotionAnswerError(f"the emotion model gave a malformed score {m.group(2)!r} in {answer[:80]!r}: try the request again") from e
    lowered = text.lower()
    if any(word in lowered for word in MELANCHOLIC_WORDS):
        if not isinstance(content, dict):
            raise EmotionAnswerError(f"the emotion model's answer is not an object of scores: {answer[:80]!r}: try the request again")
        content[SAD], content[MELANCHOLIC] = content.get(MELANCHOLIC, 0.0), content.get(SAD, 0.0)
    scores = _by_label(content)
    weights = [_clamped(scores.get(chinese, 0.0)) for chinese, _ in EMOTION_LABELS]
    if all(w <= 0.0 for w in weights):
        weights[-1] = 1.0  # nothing detected: calm
    return tuple(weights)


# -- the whole ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmotionReading:
    """One reading: the prompt's ids, the generated ids, the decoded answer and its weights."""

    prompt: list[int]
    generated: list[int]
    answer: str
    weights: tuple[float, ...]


class QwenEmotion:
    """The emotion LM folder loaded: a text -> upstream's eight emotion weights."""

    def __init__(self, folder: Path, lm: EmotionLM, tokenizer: QwenTokenizer, template: ChatTemplate, settings: GenerationSettings, cleanup: bool) -> None:
        self.folder, self.lm, self.tokenizer, self.template, self.settings, self.cleanup = folder, lm, tokenizer, template, settings, cleanup

    @classmethod
    def load(cls, folder: str | Path, dtype: torch.dtype = torch.float16) -> QwenEmotion:
        """The folder (upstream's `<model_dir>/<qwen_emo_path>`), the LM in `dtype` (upstream's float16
        by default; float32 for koe's exact path)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise EmotionLMError(f"the emotion model's folder {folder} is missing: pull the release again")
        lm = EmotionLM.load(folder, dtype)
        try:
            tokenizer = _tokenizer(folder)
        except TokenizerFilesError as e:
            raise EmotionLMError(str(e)) from None
        config = _read_json(folder / "tokenizer_config.json")
        template = ChatTemplate(_template_source(folder, config), _special_tokens(config))
        cleanup = bool(config.get("clean_up_tokenization_spaces", False))
        return cls(folder, lm, tokenizer, template, GenerationSettings.read(folder, lm.cfg), cleanup)

    def prompt_ids(self, text: str) -> list[int]:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]
        return self.tokenizer.encode(self.template.render(messages, enable_thinking=False))

    def answer(self, generated: list[int]) -> str:
        """The generated ids after the last `</think>`, decoded without special tokens."""
        start = len(generated) - generated[::-1].index(THINK_END_ID) if THINK_END_ID in generated else 0
        text = self.tokenizer.decode(generated[start:], skip_special_tokens=True)
        return _clean_up_spaces(text) if self.cleanup else text

    def read(self, text: str, max_new_tokens: int = MAX_NEW_TOKENS, check: Callable[[], None] | None = None) -> EmotionReading:
        """Upstream's `QwenEmotion.inference(text)` (its draws from torch's global generator included)."""
        prompt = self.prompt_ids(text)
        generated = self.lm.generate(prompt, self.settings, max_new_tokens, check)
        answer = self.answer(generated)
        return EmotionReading(prompt, generated, answer, weights_from_answer(answer, text))

    def __call__(self, text: str) -> tuple[float, ...]:
        return self.read(text).weights


def _clean_up_spaces(text: str) -> str:
    """transformers' `clean_up_tokenization` (spaces before punctuation and English contractions)."""
    for old in _CLEAN_UP:
        text = text.replace(old, old.lstrip(" ") if old != " ' " else "'")
    return text
