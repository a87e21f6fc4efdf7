"""The training engine: the Trainer loop, its setup, optimiser and schedule, EMA, loss and target
assignment, fine-tune plan, anchor fit, checkpoints and resume, what a run reports (plots, results.csv,
TensorBoard, MLflow), typed configuration."""
