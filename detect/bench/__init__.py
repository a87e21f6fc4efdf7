"""Benchmarks: `python -m detect.bench {model,data,train,val} ...` print figures; they never pass or fail."""
