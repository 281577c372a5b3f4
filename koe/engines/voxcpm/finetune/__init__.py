"""VoxCPM fine-tuning: upstream's `scripts/train_voxcpm_finetune.py` recipe (voxcpm 2.0.3), whole
model, on koe's modules (`run.py`; docs/engines/voxcpm.md, "Fine-tuning")."""
