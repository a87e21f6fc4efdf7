"""Benchmarks of a model on the user's own machine, its speed and its memory: `python -m detect.bench` with
model, data, train or val (the console script detect-bench) prints figures; they never pass or fail."""
