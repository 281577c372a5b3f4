"""Stand-in for `wandb`: f5_tts imports its Trainer (and so wandb) at package import; inference never uses it."""
