"""Inputs of the `qwen_emotion` golden (koe's side): IndexTTS 2's emotion from a text, upstream's
`QwenEmotion` (indextts/infer_v2.py) on koe's tiny emotion LM folders.

- `untied/`: the tiny LM of `koe_indextts.fixtures2.write_emotion_lm` (Qwen3, 2 layers of width 16,
  Qwen's released vocabulary and ids, Qwen3-0.6B's generation settings, weights in bfloat16), shaped
  to answer in JSON's marks, digits and the emotion labels and to end within tens of tokens: its
  answers are gibberish, read by upstream's parser as calm, as `label: number` pairs, after a think
  block, or not at all (an error);
- `tied/`: the same shape with a tied head (as Qwen3-0.6B), plain draws: its last logits only;
- `window/`: `untied/` with a `sliding_window` in its config (unused: `use_sliding_window` is false),
  shorter than the prompts: transformers then attends through an explicit mask (`WINDOW_CASES`);
- cases: (text, seed) pairs read by upstream's `QwenEmotion.inference` right after
  `torch.manual_seed(seed)`, in float16 (upstream's `torch_dtype`) and in float32;
- answers: fixed strings (with the text they answer) through upstream's parsing: JSON, the regex
  fallback, the melancholic swap, label values and aliases, clamping, calm, and its errors.
"""

from __future__ import annotations

import json
from pathlib import Path

from koe_indextts.fixtures2 import write_emotion_lm

TEXTS = (
    "今天天气很好，我们去公园散步吧。",
    "I can't believe you did this to me!",
    "I feel so gloomy and depressed today.",  # melancholic words: the sad score becomes melancholic
    "你吓死我了！你是鬼吗？",
)
CASES = ((0, 0), (0, 50), (1, 0), (1, 58), (2, 0), (2, 2), (2, 42), (3, 16), (3, 1))  # (text, seed)
DTYPES = ("float16", "float32")
WINDOW = 24  # the window folder's sliding_window: every prompt is longer
WINDOW_CASES = ((0, 0), (3, 16))
MELANCHOLIC = "I feel so gloomy today."
ANSWERS = (  # (the LM's answer, the text it read)
    ('{"高兴": 0.8, "愤怒": 0, "悲伤": 0.1, "恐惧": 0, "反感": 0, "低落": 0, "惊讶": 0.3, "自然": 0.2}', "今天很开心"),
    ('{"高兴": 0.8, "愤怒": 0, "悲伤": 0.1, "恐惧": 0, "反感": 0, "低落": 0, "惊讶": 0.3, "自然": 0.2}', MELANCHOLIC),
    ('{"悲伤": 0.7}', "低落的一天"),
    ('{"happy": 0.5}', "text"),
    ('{"emotion": "sad"}', "text"),
    ('{"情绪": " Surprised "}', "text"),
    ('{"emotion": "happy", "label": "sad"}', "text"),
    ('{"emotion": "melancholic", "惊讶": 0.2}', "text"),
    ('"Angry"', "text"),
    ('{"高兴": "悲伤"}', "text"),
    ('{"高兴": "0.4", "反感": true}', "text"),
    ('{"高兴": -0.5, "自然": 0}', "text"),
    ('{"高兴": NaN, "愤怒": Infinity, "悲伤": 1e400}', "text"),
    ("[1, 2]", "text"),
    ("5", "text"),
    ("null", "text"),
    ("", "text"),
    ("高兴: 0.9, 悲伤: 2.5", "text"),
    ('"高兴":0.3,"自然":0.7}', "text"),
    ("happy: 0.7, 0cal:010", "text"),
    ("高兴: ５", "text"),
    ('{"高兴": 0.3, "高兴": 0.6}', "text"),
    ("高兴: 1.2.3", "text"),  # errors from here on
    ('{"高兴": "very"}', "text"),
    ('{"高兴": [0.5]}', "text"),
    ('{"高兴": ' + "1" * 400 + "}", "text"),
    ("[1, 2]", MELANCHOLIC),
    ("5", MELANCHOLIC),
    ('"sad"', MELANCHOLIC),
)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{name} {write_emotion_lm(folder / name, tied=name == 'tied')}" for name in ("untied", "tied")]
    write_emotion_lm(folder / "window", sliding_window=WINDOW)  # untied's weights
    setup = {"texts": TEXTS, "cases": CASES, "window_cases": WINDOW_CASES, "dtypes": DTYPES, "answers": ANSWERS}
    (folder / "setup.json").write_text(json.dumps(setup, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")
