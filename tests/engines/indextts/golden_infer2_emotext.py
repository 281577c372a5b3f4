"""Golden topic `infer2_emotext` (koe's side): upstream's IndexTTS 2 end to end with the emotion read
from a text (`use_emo_text=True`), on koe's tiny random release 2 (`infer2`'s folder and clips) with the
tiny emotion LM of `koe_indextts.fixtures2.write_emotion_lm` in its `qwen0.6bemo4-merge/`. Each job runs
after `torch.manual_seed(seed)` with the voice caches emptied (upstream's first call with its clips):
the text itself read (`emo_text=None`), another text with a weight, an emotion clip that the text's
emotion replaces, and a reading upstream cannot parse (it raises). The emotion LM's weights are
gibberish-shaped (see the `qwen_emotion` topic): what the jobs check is the order of the draws (the
emotion LM's sampling first, then w2v-BERT's, the search's and flow matching's) and the weights'
way into the speech. The oracle side is tests/oracle_indextts/golden_infer2_emotext.py.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from koe_indextts.fixtures2 import EMOTION_LM_FOLDER, write_emotion_lm

HERE = Path(__file__).resolve().parent


def _infer2():
    spec = importlib.util.spec_from_file_location("indextts_golden_infer2_for_emotext", HERE / "golden_infer2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# upstream's infer keyword arguments per job (seed first)
JOBS = [
    {"seed": 1, "text": "你好，欢迎使用语音合成。", "use_emo_text": True},
    {"seed": 42, "text": "Hello there, this is a test.", "use_emo_text": True, "emo_text": "I feel so gloomy and depressed today.", "emo_alpha": 0.6},
    {"seed": 16, "text": "今天天气很好。", "use_emo_text": True, "emo_text": "你吓死我了！你是鬼吗？", "emo_audio_prompt": "emotion.wav", "emo_alpha": 0.7},
    {"seed": 2, "text": "See you soon.", "use_emo_text": True, "emo_text": "I feel so gloomy and depressed today."},  # upstream raises
]


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    infer2 = _infer2()
    infer2.write_inputs(folder)
    digest = write_emotion_lm(folder / "model" / EMOTION_LM_FOLDER)
    job = {"jobs": JOBS, "max_text_tokens_per_segment": infer2.SEGMENT_TOKENS, "generation": infer2.GENERATION}
    (folder / "job.json").write_text(json.dumps(job, ensure_ascii=False))
    with (folder / "state_sha256.txt").open("a") as f:
        f.write(f"emotion_lm {digest}\n")
