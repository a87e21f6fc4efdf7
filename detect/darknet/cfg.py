"""Darknet `.cfg` lexing and typed option access, with Darknet's lexical rules (reference §1).

Every error a user can cause raises `CfgError` whose message starts with `file:line:`.
Numbers are parsed strictly (Darknet's atoi/atof would silently accept junk); an empty or non-numeric value
where a number is needed is an error, not a zero.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from detect.runtime.assets import find_user_file, missing_file_hint

log = logging.getLogger(__name__)

# cfg header -> canonical layer type (reference §1.2)
SECTION_TYPES = {
    "[net]": "net", "[network]": "net",
    "[convolutional]": "convolutional", "[conv]": "convolutional",
    "[route]": "route",
    "[shortcut]": "shortcut",
    "[maxpool]": "maxpool", "[max]": "maxpool",
    "[local_avgpool]": "local_avgpool", "[local_avg]": "local_avgpool",
    "[upsample]": "upsample",
    "[yolo]": "yolo",
    "[reorg3d]": "reorg3d",
    "[reorg]": "reorg",
    "[sam]": "sam",
    "[scale_channels]": "scale_channels",
    "[avgpool]": "avgpool", "[avg]": "avgpool",
    "[dropout]": "dropout",
    "[connected]": "connected", "[conn]": "connected",
    "[softmax]": "softmax", "[soft]": "softmax",
    "[batchnorm]": "batchnorm",
    "[activation]": "activation",
    "[empty]": "empty", "[silence]": "empty",
}
# Darknet knows these, this project does not build them: say so instead of "unknown section".
UNSUPPORTED_TYPES = {
    "[region]", "[Gaussian_yolo]", "[implicit]", "[crnn]", "[rnn]", "[gru]", "[lstm]", "[conv_lstm]",
    "[history]", "[local]", "[crop]", "[cost]", "[detection]", "[lrn]", "[normalization]", "[contrastive]",
}
# Keys Darknet reads for every layer section (reference §1.4), with their defaults.
COMMON_KEYS = {
    "clip": 0.0, "onlyforward": 0, "dont_update": 0, "burnin_update": 0, "stopbackward": 0,
    "train_only_bn": 0, "dontload": 0, "dontloadscales": 0, "learning_rate": 1.0,
}

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


MAX_SHOWN = 80  # characters of a cfg value quoted in a message: a 4 MB value is named, not echoed
# a layer's size limits: a cfg beyond them is a typo (Darknet's largest layers are far below), refused in one line
# instead of a failed allocation of terabytes
MAX_CHANNELS = 65536  # filters / outputs of one layer
MAX_LAYER_WEIGHTS = 2**30  # weights of one layer: 4 GiB of float32
MAX_INT_DIGITS = 18  # an integer key holds a count or a size: more digits is a typo, and int() would refuse 4300+


class CfgError(ValueError):
    """A malformed cfg; the message starts with `file:line:`."""


def shown(value: str) -> str:
    """`value` as a message quotes it: whole up to MAX_SHOWN characters, else its start and its length."""
    value = str(value)
    if len(value) <= MAX_SHOWN:
        return value
    return f"{value[:MAX_SHOWN - 20]}... ({len(value):,} characters)"


@dataclass
class Option:
    value: str
    line: int
    used: bool = False


@dataclass
class Section:
    """One `[...]` block: its canonical type, the line of its header, its options (first duplicate wins)."""

    type: str
    header: str
    line: int
    index: int  # layer index (the [net] section is -1)
    source: str
    options: dict[str, Option] = field(default_factory=dict)

    # -- errors --------------------------------------------------------------------------------------------
    def error(self, message: str, key: str | None = None) -> CfgError:
        line = self.options[key].line if key is not None and key in self.options else self.line
        where = f"layer {self.index} {self.header}" if self.index >= 0 else self.header
        return CfgError(f"{self.source}:{line}: {where}: {message}")

    # -- typed access (marks the key as used) ----------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.options

    def _raw(self, key: str) -> str | None:
        opt = self.options.get(key)
        if opt is None:
            return None
        opt.used = True
        return opt.value

    def get_str(self, key: str, default: str | None = None) -> str | None:
        raw = self._raw(key)
        return default if raw is None else raw

    def get_int(self, key: str, default: int | None = None) -> int | None:
        raw = self._raw(key)
        if raw is None:
            return default
        if not _INT.fullmatch(raw):
            raise self.error(f"'{key}={shown(raw)}': expected an integer", key)
        if len(raw.lstrip("+-")) > MAX_INT_DIGITS:
            raise self.error(f"'{key}={shown(raw)}': out of range (an integer of at most {MAX_INT_DIGITS} digits)",
                             key)
        return int(raw)

    def get_float(self, key: str, default: float | None = None) -> float | None:
        raw = self._raw(key)
        if raw is None:
            return default
        if not _FLOAT.fullmatch(raw):
            raise self.error(f"'{key}={shown(raw)}': expected a number", key)
        return float(raw)

    def _items(self, key: str, raw: str) -> list[str]:
        items = raw.split(",")
        if any(item == "" for item in items):
            raise self.error(f"'{key}={shown(raw)}': empty list item (stray comma?)", key)
        return items

    def _get_list(self, key: str, default, pattern, convert, kind: str):
        raw = self._raw(key)
        if raw is None:
            return default
        items = self._items(key, raw)
        bad = [item for item in items if not pattern.fullmatch(item)]
        if bad:
            raise self.error(f"'{key}={shown(raw)}': '{shown(bad[0])}' is not {kind}", key)
        if convert is int and any(len(item.lstrip("+-")) > MAX_INT_DIGITS for item in items):
            raise self.error(f"'{key}={shown(raw)}': out of range (integers of at most {MAX_INT_DIGITS} digits)", key)
        return [convert(item) for item in items]

    def get_int_list(self, key: str, default: list[int] | None = None) -> list[int] | None:
        return self._get_list(key, default, _INT, int, "an integer")

    def get_float_list(self, key: str, default: list[float] | None = None) -> list[float] | None:
        return self._get_list(key, default, _FLOAT, float, "a number")

    def get_layer_refs(self, key: str) -> list[int]:
        """A required list of layer references, resolved to absolute indices before this layer (§1.3)."""
        refs = self.get_int_list(key)
        if refs is None:
            raise self.error(f"missing required key '{key}' (layer references, e.g. {key}=-1)")
        resolved = []
        for ref in refs:
            absolute = self.index + ref if ref < 0 else ref
            if not 0 <= absolute < self.index:
                raise self.error(
                    f"'{key}': reference {ref} resolves to layer {absolute}; it must name an earlier layer "
                    f"(0..{self.index - 1}, or -1..-{self.index} relative)", key)
            resolved.append(absolute)
        return resolved

    def check_weights(self, count: int, terms: str, key: str) -> None:
        """Refuse a layer of more than MAX_LAYER_WEIGHTS weights (`terms`: how `count` is made, `key`: the key
        whose line the error names)."""
        if count > MAX_LAYER_WEIGHTS:
            raise self.error(f"{terms} makes {count:,} weights, more than the {MAX_LAYER_WEIGHTS:,} (4 GiB of "
                             f"float32) a layer may have: is '{key}={shown(self.options[key].value)}' a typo?"
                             if key in self.options else f"{terms} makes {count:,} weights, more than the "
                             f"{MAX_LAYER_WEIGHTS:,} a layer may have", key)

    def set(self, key: str, value) -> None:
        """Overwrite (or add) an option, keeping the line of the original for error messages."""
        line = self.options[key].line if key in self.options else self.line
        self.options[key] = Option(str(value), line)

    def read_common(self) -> dict:
        """The keys every layer section has (§1.4), typed, with Darknet defaults."""
        return {key: (self.get_float(key, d) if isinstance(d, float) else self.get_int(key, d))
                for key, d in COMMON_KEYS.items()}

    def warn_unused(self) -> None:
        for key, opt in self.options.items():
            if not opt.used:
                log.warning("%s:%d: %s: unused key '%s = %s' (ignored)", self.source, opt.line,
                            self.header, key, shown(opt.value))


def parse_cfg(text: str, source: str = "<cfg>") -> list[Section]:
    """Lex cfg text into sections; the first is `[net]`. Layer indices count from the first section after it."""
    sections: list[Section] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = "".join(line.split())  # Darknet deletes every whitespace character, not only at the ends
        if not stripped or stripped[0] in "#;":
            continue
        if stripped[0] == "[":
            sections.append(_new_section(stripped, number, len(sections) - 1, source))
            continue
        if not sections:
            raise CfgError(f"{source}:{number}: option '{shown(stripped)}' before the first section ([net] must come "
                           "first)")
        key, sep, value = stripped.partition("=")
        if not sep or not key:
            raise CfgError(f"{source}:{number}: '{shown(stripped)}': expected key=value")
        if value == "":
            raise CfgError(f"{source}:{number}: '{shown(stripped)}': empty value for '{shown(key)}'")
        sections[-1].options.setdefault(key, Option(value, number))  # first duplicate wins
    if not sections:
        raise CfgError(f"{source}:1: no sections; a cfg starts with [net]")
    if sections[0].type != "net":
        raise CfgError(f"{source}:{sections[0].line}: the first section must be [net] or [network], "
                       f"not {sections[0].header}")
    extra_net = [s for s in sections[1:] if s.type == "net"]
    if extra_net:
        raise CfgError(f"{source}:{extra_net[0].line}: a second {extra_net[0].header} section; only the first "
                       "section may be [net]")
    return sections


def _new_section(header: str, line: int, index: int, source: str) -> Section:
    kind = SECTION_TYPES.get(header)
    if kind is None:
        if header in UNSUPPORTED_TYPES:
            raise CfgError(f"{source}:{line}: section {header} is a Darknet layer this project does not build")
        known = ", ".join(sorted({h for h in SECTION_TYPES}))
        raise CfgError(f"{source}:{line}: unknown section type {shown(header)}; known: {known}")
    return Section(kind, header, line, index, source)


def read_cfg_source(cfg) -> tuple[str, str, Path | None]:
    """(text, source name for messages, path or None) from a path or from cfg text."""
    if isinstance(cfg, Path) or ("\n" not in str(cfg) and not str(cfg).lstrip().startswith("[")):
        path = find_user_file(cfg, "cfg")
        if not path.is_file():
            raise FileNotFoundError(f"cfg file not found: {path}; {missing_file_hint('cfg', ('.cfg',))}")
        return path.read_text(), str(path), path
    return str(cfg), "<cfg>", None


def render_cfg(sections: list[Section]) -> str:
    """Cfg text for sections (used after a rewrite such as num_classes, so the text rebuilds the same model)."""
    blocks = []
    for section in sections:
        lines = [section.header] + [f"{k}={opt.value}" for k, opt in section.options.items()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
