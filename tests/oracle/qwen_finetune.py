"""Oracle: upstream's speaker fine-tuning recipe (QwenLM/Qwen3-TTS `finetuning/`, at 022e286).

The recipe (`sft_12hz.py` + `dataset.py`) is not in the qwen-tts wheel, so this script restates
it around upstream's own classes (`Qwen3TTSModel`, its processor, `mel_spectrogram`, the talker
and its `forward_sub_talker_finetune`) and accelerate's `Accelerator`, step for step:

  data      each line of the prepared JSONL becomes (text ids minus their last 5 tokens, codes,
            reference mels); a DataLoader (shuffle=True, the recipe's batch size) collates them
            into the recipe's two-channel layout; `accelerator.prepare` wraps model, AdamW
            (lr, weight_decay=0.01) and loader; gradient accumulation over `grad_accum` steps
  step      speaker embedding of the reference mels (detached; the first batch's is the target),
            text embedding x mask + codec embedding x mask with the speaker at position 6, plus
            the 15 code-predictor embeddings of codebooks 1..15 on the code frames; the talker on
            all but the last position with labels `codec_0_labels[:, 1:]`; the sub-talker on the
            last hidden states at `codec_mask[:, :-1]` (the 022e286 fix); loss = talker + 0.3 x
            sub-talker; `accelerator.backward`; clip 1.0 on sync steps; step; zero_grad
  export    after every epoch `checkpoint-epoch-N` under job["out"]: a copy of the base folder,
            config with tts_model_type custom_voice and the speaker at codec id 3000 (not a
            dialect), the weights without `speaker_encoder.*`, codec_embedding row 3000 = target

Differences from the recipe, all deliberate: `torch.manual_seed(seed)` before anything else
(koe's contract: koe with seed N equals upstream run right after torch.manual_seed(N)); float32
weights and `mixed_precision="no"` (the recipe loads bf16 and autocasts bf16; exactness is checked
in float32 on the CPU); no flash attention (CPU: sdpa, upstream's default); no tensorboard logger;
the loading goes through `common.load_upstream_model` (device_map="cpu") to record its report.

With job["recipe_dir"] naming a folder holding upstream's own `dataset.py`, its `TTSDataset` is
used instead of the restatement below (a cross-check of the restatement, bit for bit).

Job: {"model", "train_jsonl", "seed", "batch_size", "lr", "num_epochs", "speaker_name", "out",
      optional "grad_accum" (default 4, the recipe's), optional "recipe_dir"}
Tensors: loss / talker_loss / sub_talker_loss (steps,), grad_norm (sync steps,), batch0.<name>
(the first batch's 8 collated tensors), target_speaker_embedding (1, hidden).
Info: loading report, per-step records (epoch, step, sync, losses), the dataset indices each
epoch's loader asked for, parameters without a gradient / with an all-zero gradient at the first
sync step, the checkpoint folders.
"""

import json
import os
import shutil
import sys

import librosa
import numpy as np
import torch
from common import load_upstream_model, read_job, write_results

BATCH_KEYS = ("input_ids", "ref_mels", "attention_mask", "text_embedding_mask", "codec_embedding_mask", "codec_0_labels", "codec_ids", "codec_mask")
SPEAKER_CODEC_ID = 3000
SUB_TALKER_WEIGHT = 0.3


class RecipeExamples(torch.utils.data.Dataset):
    """The recipe's `TTSDataset` restated: one example per JSONL row, and its collate."""

    def __init__(self, rows: list[dict], processor, config):
        self.rows, self.processor, self.config = rows, processor, config

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, idx):
        row = self.rows[idx]
        prompt = f"<|im_start|>assistant\n{row['text']}<|im_end|>\n<|im_start|>assistant\n"
        ids = self.processor(text=prompt, return_tensors="pt", padding=True)["input_ids"]
        ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
        ref = row["ref_audio"][0] if isinstance(row["ref_audio"], list) else row["ref_audio"]
        wav, sr = librosa.load(ref, sr=None, mono=True)
        return {
            "text_ids": ids[:, :-5],  # drops "<|im_end|>\n<|im_start|>assistant\n"
            "audio_codes": torch.tensor(row["audio_codes"], dtype=torch.long),
            "ref_mel": reference_mels(wav.astype(np.float32), int(sr)),
        }

    def collate(self, examples):
        """Rows of [role (3) | think prefix + speaker slot (5) | text | eos | bos | codes | eos]."""
        cfg, tcfg = self.config, self.config.talker_config
        lengths = [e["text_ids"].shape[1] + e["audio_codes"].shape[0] for e in examples]
        b, t = len(examples), max(lengths) + 8
        input_ids = torch.zeros((b, t, 2), dtype=torch.long)
        codec_ids = torch.zeros((b, t, 16), dtype=torch.long)
        text_mask = torch.zeros((b, t), dtype=torch.bool)
        codec_emb_mask = torch.zeros((b, t), dtype=torch.bool)
        codec_mask = torch.zeros((b, t), dtype=torch.bool)
        attention = torch.zeros((b, t), dtype=torch.long)
        labels = torch.full((b, t), -100, dtype=torch.long)
        for i, e in enumerate(examples):
            text, codes = e["text_ids"][0], e["audio_codes"]
            n_text, n_codes = text.shape[0], codes.shape[0]
            first_code, end = 8 + n_text - 1, 8 + n_text + n_codes  # end: one past the final eos
            # text channel: role, 4 pads, bos, the text, eos, pads to the end
            input_ids[i, :3, 0] = text[:3]
            input_ids[i, 3:7, 0] = cfg.tts_pad_token_id
            input_ids[i, 7, 0] = cfg.tts_bos_token_id
            input_ids[i, 8 : first_code - 2, 0] = text[3:]
            input_ids[i, first_code - 2, 0] = cfg.tts_eos_token_id
            input_ids[i, first_code - 1 : end, 0] = cfg.tts_pad_token_id
            text_mask[i, :end] = True
            # codec channel: nothink, think bos/eos, speaker slot (0), pads under the text, bos, codebook 0, eos
            input_ids[i, 3:8, 1] = torch.tensor([tcfg.codec_nothink_id, tcfg.codec_think_bos_id, tcfg.codec_think_eos_id, 0, tcfg.codec_pad_id])
            input_ids[i, 8 : first_code - 1, 1] = tcfg.codec_pad_id
            input_ids[i, first_code - 1, 1] = tcfg.codec_bos_id
            input_ids[i, first_code : first_code + n_codes, 1] = codes[:, 0]
            input_ids[i, first_code + n_codes, 1] = tcfg.codec_eos_token_id
            labels[i, first_code : first_code + n_codes] = codes[:, 0]
            labels[i, first_code + n_codes] = tcfg.codec_eos_token_id
            codec_ids[i, first_code : first_code + n_codes, :] = codes
            codec_emb_mask[i, 3:end] = True
            codec_emb_mask[i, 6] = False  # the speaker embedding goes there
            codec_mask[i, first_code : first_code + n_codes] = True
            attention[i, :end] = 1
        return {
            "input_ids": input_ids,
            "ref_mels": torch.cat([e["ref_mel"] for e in examples], dim=0),
            "attention_mask": attention,
            "text_embedding_mask": text_mask.unsqueeze(-1),
            "codec_embedding_mask": codec_emb_mask.unsqueeze(-1),
            "codec_0_labels": labels,
            "codec_ids": codec_ids,
            "codec_mask": codec_mask,
        }


@torch.inference_mode()
def reference_mels(wav: np.ndarray, sr: int) -> torch.Tensor:
    """(1, frames, 128) log-mels of a 24 kHz reference, with upstream's `mel_spectrogram`."""
    from qwen_tts.core.models.modeling_qwen3_tts import mel_spectrogram

    assert sr == 24000, "the recipe only takes 24 kHz references"
    mels = mel_spectrogram(torch.from_numpy(wav).unsqueeze(0), n_fft=1024, num_mels=128, sampling_rate=24000, hop_size=256, win_size=1024, fmin=0, fmax=12000)
    return mels.transpose(1, 2)


def examples_for(job: dict, rows: list[dict], processor, config):
    """(dataset, collate, asked): the restatement, or upstream's own TTSDataset from job["recipe_dir"].
    `asked` fills with the dataset indices in the order the loader asks for them."""
    asked: list[int] = []
    if job.get("recipe_dir"):
        sys.path.insert(0, job["recipe_dir"])
        from dataset import TTSDataset as base
    else:
        base = RecipeExamples

    class Recording(base):
        def __getitem__(self, idx):
            asked.append(int(idx))
            return super().__getitem__(idx)

    dataset = Recording(rows, processor, config)
    return dataset, (dataset.collate_fn if job.get("recipe_dir") else dataset.collate), asked


def training_loss(model, batch):
    """(loss, talker loss, sub-talker loss, speaker embedding) of one batch, as the recipe computes them."""
    talker = model.talker
    speaker = model.speaker_encoder(batch["ref_mels"].to(model.device).to(model.dtype)).detach()
    text_ids, codec_in = batch["input_ids"][:, :, 0], batch["input_ids"][:, :, 1]
    text_part = talker.model.text_embedding(text_ids) * batch["text_embedding_mask"]
    codec_part = talker.model.codec_embedding(codec_in) * batch["codec_embedding_mask"]
    codec_part[:, 6, :] = speaker
    embeds = text_part + codec_part
    frames = batch["codec_mask"].unsqueeze(-1)
    for group in range(1, 16):
        embeds = embeds + talker.code_predictor.get_input_embeddings()[group - 1](batch["codec_ids"][:, :, group]) * frames
    out = talker(
        inputs_embeds=embeds[:, :-1, :], attention_mask=batch["attention_mask"][:, :-1], labels=batch["codec_0_labels"][:, 1:], output_hidden_states=True
    )
    last_hidden = out.hidden_states[0][-1]
    _, sub_loss = talker.forward_sub_talker_finetune(batch["codec_ids"][batch["codec_mask"]], last_hidden[batch["codec_mask"][:, :-1]])
    return out.loss + SUB_TALKER_WEIGHT * sub_loss, out.loss, sub_loss, speaker


def export_checkpoint(base: str, folder: str, speaker_name: str, model, target: torch.Tensor) -> None:
    """The recipe's per-epoch CustomVoice folder (weights as the model holds them after the epoch)."""
    from safetensors.torch import save_file

    shutil.copytree(base, folder, dirs_exist_ok=True)
    with open(os.path.join(base, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["tts_model_type"] = "custom_voice"
    talker = config.get("talker_config", {})
    talker["spk_id"] = {speaker_name: SPEAKER_CODEC_ID}
    talker["spk_is_dialect"] = {speaker_name: False}
    config["talker_config"] = talker
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    # as the recipe: on the CPU `.to("cpu")` is the live tensor, so row 3000 is written into the model too
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items() if not k.startswith("speaker_encoder")}
    table = state["talker.model.codec_embedding.weight"]
    table[SPEAKER_CODEC_ID] = target[0].detach().to(table.device).to(table.dtype)
    save_file(state, os.path.join(folder, "model.safetensors"))


def main():
    job, out = read_job()
    torch.manual_seed(int(job["seed"]))
    from accelerate import Accelerator
    from transformers import AutoConfig

    accelerator = Accelerator(gradient_accumulation_steps=int(job.get("grad_accum", 4)), mixed_precision="no")
    tts, loading = load_upstream_model(job["model"])
    config = AutoConfig.from_pretrained(job["model"])
    with open(job["train_jsonl"]) as f:
        rows = [json.loads(line) for line in f]
    dataset, collate, asked = examples_for(job, rows, tts.processor, config)
    loader = torch.utils.data.DataLoader(dataset, batch_size=int(job["batch_size"]), shuffle=True, collate_fn=collate)
    optimizer = torch.optim.AdamW(tts.model.parameters(), lr=float(job["lr"]), weight_decay=0.01)
    model, optimizer, loader = accelerator.prepare(tts.model, optimizer, loader)
    model.train()

    tensors: dict[str, torch.Tensor] = {}
    info: dict = {"loading": loading, "steps": [], "order": [], "checkpoints": [], "attn": model.talker.config._attn_implementation}
    losses, norms, target = [], [], None
    for epoch in range(int(job["num_epochs"])):
        asked.clear()
        for step, batch in enumerate(loader):
            if not tensors:
                tensors.update({f"batch0.{k}": batch[k] for k in BATCH_KEYS})
            with accelerator.accumulate(model):
                loss, talker_loss, sub_loss, speaker = training_loss(model, batch)
                if target is None:
                    target = speaker
                accelerator.backward(loss)
                sync = bool(accelerator.sync_gradients)
                if sync:
                    if "no_grad_params" not in info:
                        info["no_grad_params"] = [n for n, p in model.named_parameters() if p.grad is None]
                        info["zero_grad_params"] = [n for n, p in model.named_parameters() if p.grad is not None and not p.grad.any()]
                    norms.append(accelerator.clip_grad_norm_(model.parameters(), 1.0).detach().clone())
                optimizer.step()
                optimizer.zero_grad()
            losses.append(torch.stack([loss, talker_loss, sub_loss]).detach().clone())
            info["steps"].append(
                {"epoch": epoch, "step": step, "sync": sync, "loss": loss.item(), "talker_loss": talker_loss.item(), "sub_talker_loss": sub_loss.item()}
            )
            if step % 10 == 0:  # the recipe's progress line
                accelerator.print(f"Epoch {epoch} | Step {step} | Loss: {loss.item():.4f}")
        info["order"].append(list(asked))
        folder = os.path.join(job["out"], f"checkpoint-epoch-{epoch}")
        export_checkpoint(job["model"], folder, job["speaker_name"], accelerator.unwrap_model(model), target)
        info["checkpoints"].append(folder)

    stacked = torch.stack(losses)
    tensors.update({"loss": stacked[:, 0], "talker_loss": stacked[:, 1], "sub_talker_loss": stacked[:, 2]})
    tensors["grad_norm"] = torch.stack(norms)
    tensors["target_speaker_embedding"] = target
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
