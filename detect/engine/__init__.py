"""The training engine: the Trainer loop, its setup, optimiser and schedule, EMA, loss and target
assignment, fine-tune plan, anchor fit, checkpoints and resume, run monitor, typed configuration."""
