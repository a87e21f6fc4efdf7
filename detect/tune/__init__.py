"""Hyperparameter search over train.py (`python -m detect.tune`): the search space (space), the options
(options), the storage and its interrupted trials (storage), one trial as a watched train.py run (trial_run,
tether), the worker loop (worker), the workers of one machine (launch), and the report (report, pictures).
Optuna is an optional dependency: `pip install -e ".[tune]"`.
"""
