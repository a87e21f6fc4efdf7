"""The search space of `python -m detect.tune`: which hyperparameters a trial draws, and from what.

A space file is a yaml mapping of hyp keys (the keys of cfg/hyp.yaml) to one of
    {low: L, high: H}               a number in [L, H]: a whole number for whole-number keys (warmup_min_steps)
    {low: L, high: H, log: true}    the same, drawn evenly on a log scale (learning rates, decays, gains)
    {low: L, high: H, step: S}      the same, on the grid L, L + S, ...
    {choices: [a, b, ...]}          one of these values (numbers, names, true/false or null)
Every bound and choice is checked by `detect.engine.config.Hyp` itself, so a space cannot draw a value that
train.py would refuse. cfg/tune-space.yaml is the default space, made for fine-tunes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from detect.engine.config import Hyp
from detect.runtime.assets import asset, find_user_file

DEFAULT_SPACE = asset("cfg", "tune-space.yaml")
SPEC_KEYS = ("low", "high", "log", "step", "choices")


@dataclass(frozen=True)
class Param:
    """One searched hyperparameter: a range (`kind` float or int) or a list of `choices` (kind categorical)."""

    key: str
    kind: str  # float | int | categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple = ()

    def suggest(self, trial):
        """The value an Optuna trial draws (or holds already: a retried trial keeps its parameters)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=self.log)

    def describe(self) -> str:
        if self.kind == "categorical":
            return f"{self.key}: one of {list(self.choices)}"
        extra = ", log" if self.log else f", step {self.step:g}" if self.step else ""
        return f"{self.key}: {self.kind} in [{self.low:g}, {self.high:g}]{extra}"


def _check_value(key: str, value, what: str, where: str) -> None:
    """`value` as hyp `key` must be one that train.py accepts; the error is Hyp's own, placed in the space file."""
    try:
        Hyp.from_dict({key: value}, where)
    except ValueError as e:
        reason = str(e).removeprefix(f"{where}: ")
        raise ValueError(f"{where}: {key}: {what} {value!r} is not a valid value ({reason})") from None


def _number(key: str, name: str, value, where: str) -> float:
    if isinstance(value, str):  # YAML 1.1 reads 1e-5 as text
        try:
            return float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {key}: {name} must be a number, got {value!r}")
    return float(value)


def _range(key: str, spec: dict, default, where: str) -> Param:
    low, high = (_number(key, name, spec[name], where) for name in ("low", "high"))
    kind = "int" if isinstance(default, int) and not isinstance(default, bool) else "float"
    log, step = spec.get("log", False), spec.get("step")
    if not isinstance(log, bool):
        raise ValueError(f"{where}: {key}: log must be true or false, got {log!r}")
    if step is not None:
        step = _number(key, "step", step, where)
        if step <= 0:
            raise ValueError(f"{where}: {key}: step must be positive, got {step:g}")
    if not low < high:
        raise ValueError(f"{where}: {key}: low {low:g} must be below high {high:g}")
    if log and low <= 0:
        raise ValueError(f"{where}: {key}: a log range needs low > 0, got {low:g}")
    if log and step is not None:
        raise ValueError(f"{where}: {key}: log and step cannot be combined (a log range has no even grid)")
    if kind == "int" and not all(v.is_integer() for v in (low, high, step or 1.0)):
        raise ValueError(f"{where}: {key} is a whole number: low, high and step must be whole numbers, got "
                         f"low {low:g}, high {high:g}" + (f", step {step:g}" if step else ""))
    for name, value in (("low", low), ("high", high)):
        _check_value(key, int(value) if kind == "int" else value, name, where)
    return Param(key, kind, low, high, log, step)


def _choices(key: str, spec: dict, where: str) -> Param:
    choices = spec["choices"]
    if not isinstance(choices, list) or not choices:
        raise ValueError(f"{where}: {key}: choices must be a non-empty list, got {choices!r}")
    for c in choices:
        if c is not None and not isinstance(c, (bool, int, float, str)):
            raise ValueError(f"{where}: {key}: a choice must be a number, a name, true/false or null (Optuna "
                             f"stores no lists or mappings), got {c!r}")
        _check_value(key, c, "choice", where)
    if len(set(map(repr, choices))) < len(choices):
        raise ValueError(f"{where}: {key}: choices repeat a value: {choices}")
    return Param(key, "categorical", choices=tuple(choices))


def parse_space(mapping, where: str = "space") -> dict[str, Param]:
    """{hyp key: Param} from a space mapping, in its order; every error names `where` and the key at fault."""
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"{where}: expected a mapping of hyperparameters to ranges, got {mapping!r}")
    defaults = Hyp().to_dict()
    space = {}
    for key, spec in mapping.items():
        if key not in defaults:
            near = difflib.get_close_matches(str(key), list(defaults), n=1, cutoff=0.5)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"{where}: unknown hyperparameter {key!r}{hint}; valid keys: {', '.join(defaults)}")
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: {key}: give a range {{low: L, high: H}} or {{choices: [...]}}, got {spec!r} "
                             "(a fixed value belongs in a hyp file passed to train.py: -- --hyp FILE)")
        unknown = [k for k in spec if k not in SPEC_KEYS]
        if unknown:
            raise ValueError(f"{where}: {key}: unknown field {', '.join(map(repr, unknown))}; a range has low, "
                             "high and optionally log or step, a list has choices")
        if "choices" in spec:
            if set(spec) != {"choices"}:
                raise ValueError(f"{where}: {key}: choices cannot be combined with {sorted(set(spec) - {'choices'})}")
            space[key] = _choices(key, spec, where)
        elif "low" in spec and "high" in spec:
            space[key] = _range(key, spec, defaults[key], where)
        else:
            raise ValueError(f"{where}: {key}: a range needs both low and high, got {spec}")
    return space


def load_space(path: str | Path | None = None) -> dict[str, Param]:
    """The space of a yaml file (None: cfg/tune-space.yaml)."""
    path = find_user_file(path, "cfg") if path is not None else DEFAULT_SPACE
    if not path.is_file():
        raise FileNotFoundError(f"--space {path}: no such file")
    try:
        mapping = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None
    return parse_space(mapping, str(path))


def suggest_all(space: dict[str, Param], trial) -> dict:
    """A trial's hyperparameters, one per searched key, in the space's order."""
    return {key: param.suggest(trial) for key, param in space.items()}
