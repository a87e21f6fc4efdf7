"""The documentation stays true to the repository: every relative link in the Markdown pages points at a file
(and a heading) that exists, every repository file they name exists, and every command line they show names
only flags its entry point accepts.

Commands are found in fenced blocks and in inline code: lines that start with `python train.py`,
`python -m detect.<tool>`, `python -m benchmarks <name>` (a clone's benchmarks, outside the package),
`torchrun ... train.py` (or `torchrun ... -m detect.<tool>`), `detect-<tool>`, or, in prose, `train.py --flag`
and `detect.<tool> --flag`. Each entry point's own argparse parser is taken from the entry point itself (the
console script pyproject.toml names, or `benchmarks.__main__.main`, called with its `parse_args`
intercepted), so the check follows the code wherever its modules live; torchrun's flags are checked against
torchrun's parser.
`...` and `[...]` placeholders are skipped: the flags that are there are checked.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "data" / "README.md",
        ROOT / "weights" / "README.md", ROOT / "cfg" / "README.md"]
TOOLS = ("train", "val", "predict", "export", "bench", "tune", "audit")
BENCHMARKS = "benchmarks"  # `python -m benchmarks <name>`: a clone's benchmarks, no console script
SUBCOMMANDS = ("bench", BENCHMARKS)  # tools whose first word names a benchmark
FENCE = re.compile(r"^(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {"&&", "||", ";", "|"}


# ----------------------------------------------------------------------------------------------- page text


def split_fences(text: str) -> tuple[list[str], str]:
    """The fenced blocks (as text) and the prose with every fenced block blanked out (lines kept)."""
    blocks, prose, current, fence = [], [], None, None
    for line in text.splitlines():
        opening = FENCE.match(line.strip())
        if current is None and opening:
            current, fence = [], opening.group(1)[0] * len(opening.group(1))
            prose.append("")
        elif current is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append("\n".join(current))
            current = None
            prose.append("")
        elif current is not None:
            current.append(line)
        else:
            prose.append(line)
    return blocks, "\n".join(prose)


def block_commands(block: str) -> list[str]:
    """The logical lines of a fenced block: `\\` continuations joined."""
    lines, pending = [], ""
    for line in block.splitlines():
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return [line.strip() for line in lines if line.strip()]


def inline_spans(prose: str) -> list[str]:
    """Inline code spans of the prose (a span may wrap across lines, never across a blank line)."""
    return [" ".join(m.group(2).split()) for m in INLINE_CODE.finditer(prose) if "\n\n" not in m.group(2)]


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens,
    repeated headings numbered -1, -2, ..."""
    _, prose = split_fences(text)
    anchors: set[str] = set()
    for line in prose.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


# ----------------------------------------------------------------------------------------------- links


def broken_links(doc: Path, text: str | None = None) -> list[str]:
    """Relative links of one page whose file (or heading anchor, for a Markdown target) does not exist."""
    text = doc.read_text() if text is None else text
    _, prose = split_fences(text)
    prose = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), prose)
    broken = []
    for m in LINK.finditer(prose):
        target = m.group(1)
        if SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.exists():
            broken.append(f"{doc.relative_to(ROOT)}: [{target}]: no such file {path_part}")
        elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path.read_text()):
            broken.append(f"{doc.relative_to(ROOT)}: [{target}]: {path.name} has no heading #{anchor}")
    return broken


# ----------------------------------------------------------------------------------------------- named files

# the folders whose files a page names are checked; data/, weights/, runs/ hold placeholders
REPO_PATH = re.compile(r"^(?:cfg|detect|benchmarks|docs|tests|\.ci)/[\w./-]*\w$")


def missing_files(doc: Path, text: str | None = None) -> list[str]:
    """Repository files a page names in inline code or in a command (`cfg/yolov3-tiny.cfg`,
    `tests/support/train_hooks.py`, `python -m tests.support.small_objects`) that do not exist."""
    text = doc.read_text() if text is None else text
    blocks, prose = split_fences(text)
    lines = inline_spans(prose) + [line for block in blocks for line in block_commands(block)
                                   if commands_in(line) or line.startswith(("python", "bash"))]
    missing = []
    for line in lines:
        words = tokens_of(line)
        for i, word in enumerate(words):
            path = word.strip("()[],;:")
            if i > 0 and words[i - 1] == "-m" and path.startswith("tests."):
                path = path.replace(".", "/") + ".py"
            if REPO_PATH.match(path) and not (ROOT / path).exists():
                missing.append(f"{doc.relative_to(ROOT)}: `{line}` names {path}, which does not exist")
    return missing


# ----------------------------------------------------------------------------------------------- commands


@dataclass
class Command:
    tool: str  # train, val, predict, export, bench, tune, benchmarks (python -m benchmarks), torchrun
    sub: str | None  # the benchmark of `detect.bench <sub>` or `benchmarks <sub>`
    args: list[str]
    text: str


def tokens_of(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote in prose: plain words will do
        return line.split("#", 1)[0].split()


def entry_of(words: list[str], prose: bool) -> tuple[str, list[str]] | None:
    """(tool, the words after it) when `words` run one of the project's entry points. In prose (inline code)
    `train.py --flag` and `detect.<tool> --flag` count too; in a code block, where a bare `train.py` may be a
    file listing, they do not."""
    if not words:
        return None
    first = words[0]
    if first in ("python", "python3") and len(words) > 1:
        if words[1].endswith("train.py"):
            return "train", words[2:]
        if words[1] == "-m" and len(words) > 2:
            return module_entry(words[2], words[3:])
        return None
    if prose and first == "train.py":
        return "train", words[1:]
    if m := re.fullmatch(r"detect-(\w+)", first):
        return (m.group(1), words[1:]) if m.group(1) in TOOLS else None
    if prose and re.fullmatch(r"detect\.\w+", first) and any(w.startswith("--") for w in words[1:]):
        return module_entry(first, words[1:])
    return None


def module_entry(module: str, rest: list[str]) -> tuple[str, list[str]] | None:
    if module == BENCHMARKS:
        return BENCHMARKS, rest
    m = re.fullmatch(r"detect\.(\w+)", module)
    return (m.group(1), rest) if m and m.group(1) in TOOLS else None


def commands_in(line: str, prose: bool = False) -> list[Command]:
    """The entry-point commands one line (or inline span) runs; torchrun's own flags become a command too."""
    found, words = [], tokens_of(line.removeprefix("$ "))
    segments, current = [], []
    for w in words:
        if w in SEPARATORS:
            segments.append(current)
            current = []
        else:
            current.append(w)
    segments.append(current)
    for seg in segments:
        while seg and ENV_ASSIGNMENT.match(seg[0]):
            seg = seg[1:]
        if seg and seg[0] == "torchrun":
            script = next((i for i, w in enumerate(seg) if w.endswith("train.py") or (
                w in ("-m", "--module") and i + 1 < len(seg) and seg[i + 1].startswith("detect."))), None)
            if script is None:
                continue
            found.append(Command("torchrun", None, seg[1:script], line))
            seg = (["python", *seg[script:]] if seg[script].endswith("train.py")
                   else ["python", "-m", *seg[script + 1:]])
        entry = entry_of(seg, prose)
        if entry is None:
            continue
        tool, args = entry
        sub = None
        if tool in SUBCOMMANDS and args and not args[0].startswith("-"):
            sub, args = args[0], args[1:]
            if sub == "..." or sub.startswith("<"):  # `python -m benchmarks <benchmark> --help`
                sub = None
        found.append(Command(tool, sub, args, line))
    return found


def doc_commands(text: str) -> list[Command]:
    blocks, prose = split_fences(text)
    return ([c for block in blocks for line in block_commands(block) for c in commands_in(line)]
            + [c for span in inline_spans(prose) for c in commands_in(span, prose=True)])


# ----------------------------------------------------------------------------------------------- parsers


class _Parsed(BaseException):  # BaseException: the tools' `except Exception` must not swallow it
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__()
        self.parser = parser


def _console_scripts() -> dict[str, str]:
    """`detect-<tool>` -> `module:function`, as pyproject.toml installs them."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^\s*([\w-]+)\s*=\s*"([^"]+)"', section, re.MULTILINE))


@cache
def parser_of(tool: str, sub: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser of an entry point: its console-script function, called with `parse_args`
    intercepted, so that nothing after the parse runs. torchrun's is torch's own."""
    if tool == "torchrun":
        from torch.distributed.run import get_args_parser

        return get_args_parser()
    target = "benchmarks.__main__:main" if tool == BENCHMARKS else _console_scripts()[f"detect-{tool}"]
    module, _, function = target.partition(":")
    main = getattr(importlib.import_module(module), function)

    def intercept(self, *args, **kwargs):
        raise _Parsed(self)

    saved = {name: getattr(argparse.ArgumentParser, name)
             for name in ("parse_args", "parse_known_args", "parse_intermixed_args")}
    for name in saved:
        setattr(argparse.ArgumentParser, name, intercept)
    try:
        main([sub] if sub is not None else [])
    except _Parsed as parsed:
        return parsed.parser
    finally:
        for name, original in saved.items():
            setattr(argparse.ArgumentParser, name, original)
    raise LookupError(f"{tool} {sub or ''}: the entry point returned without parsing any arguments")


def flag_of(word: str) -> str | None:
    """The option a word names (`--img-size=416` -> `--img-size`, `[--slice` -> `--slice`), or None."""
    word = word.strip("[](),")
    if re.match(r"^--?[A-Za-z]", word) and word != "--":
        return word.split("=", 1)[0]
    return None


def unknown_flags(command: Command) -> list[str]:
    """The flags of a command its entry point does not accept (empty when all are fine)."""
    if command.tool in SUBCOMMANDS and command.sub is None:
        return []  # `python -m detect.bench ...`, `python -m benchmarks`: the list of benchmarks, no flags
    try:
        parser = parser_of(command.tool, command.sub)
    except LookupError as e:
        return [str(e)]
    known = parser._option_string_actions
    bad, args, rest = [], command.args, []
    if "--" in args:  # `benchmarks finetune ... -- --hyp h.yaml`, `tune ... -- ...`: the rest is train.py's
        cut = args.index("--")
        args, rest = args[:cut], args[cut + 1:]
    bad += [flag for w in args if (flag := flag_of(w)) and flag not in known]
    if rest and command.tool in (*SUBCOMMANDS, "tune"):  # `tune ... -- --cfg C`: every trial's train.py flags
        train = parser_of("train")._option_string_actions
        bad += [flag for w in rest if (flag := flag_of(w)) and flag not in train]
    return bad


# ----------------------------------------------------------------------------------------------- tests


def test_the_pages_exist():
    missing = [str(p.relative_to(ROOT)) for p in DOCS if not p.is_file()]
    assert not missing, f"documentation pages missing: {missing}"


def test_relative_links_reach_their_files():
    broken = [line for doc in DOCS for line in broken_links(doc)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_named_repository_files_exist():
    missing = [line for doc in DOCS for line in missing_files(doc)]
    assert not missing, "files the docs name that are not in the repository:\n" + "\n".join(missing)


def test_every_command_names_flags_its_entry_point_accepts():
    problems, seen = [], 0
    for doc in DOCS:
        for command in doc_commands(doc.read_text()):
            seen += 1
            if bad := unknown_flags(command):
                where = f"{command.tool} {command.sub or ''}".strip()
                problems.append(f"{doc.relative_to(ROOT)}: `{command.text}`: {where} does not accept {bad}")
    assert seen > 50, f"only {seen} commands found in the docs: is the command finder broken?"
    assert not problems, "commands with flags their entry point does not accept:\n" + "\n".join(problems)


def test_readme_keeps_what_ci_and_newcomers_need():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    (install,) = [line for line in readme.splitlines() if line.startswith("Install: `pip install -e ")]
    command = install.removeprefix("Install: `").removesuffix("`")
    extras = set(command.split('".[')[1].split(']"')[0].split(","))
    assert {"dev", "export", "tensorboard", "mlflow", "tune", "track"} <= extras  # what the tests need, so CI runs them all
    assert "Test: `python -m pytest -q`" in readme.splitlines()
    assert command in ci.splitlines() and "python -m pytest -q" in ci.splitlines()  # CI runs the README's lines
    assert "torchrun --nproc_per_node=2 train.py" in readme.splitlines()
    assert len(readme.splitlines()) < 250, "README.md is the front page: topics and figures go under docs/"


FAKE_PAGE = """# A page

See [the data specs](data/README.md), [a missing page](docs/no-such-page.md) and
[a missing heading](README.md#no-such-heading).

```bash
torchrun --nproc_per_node=2 train.py --epochs 3 --made-up-train-flag 1
python -m detect.val --weights best.pt ... --no-such-val-flag
torchrun --nnodes 2 --not-a-torchrun-flag 1 -m detect.val --weights best.pt
python -m benchmarks finetune --data data/kangaroo.yaml -- --hyp h.yaml --not-a-train-flag
python -m detect.bench no-such-benchmark --x
python -m benchmarks no-such-benchmark --x
```

Prose with `python -m detect.predict --weights best.pt --source x [--slice S] --imaginary` in it, a wrapped
`detect.export --weights best.pt
--fake-export-flag` and a fine one, `python train.py --resume runs/train/exp/last.pt --epochs 300`.
Files: `tests/no_such_helper.py`, `python -m tests.no_such_module OUT` and `cfg/yolov3-tiny.cfg` (there).
"""


def test_the_checks_catch_made_up_flags_and_missing_files():
    """Self-check: a page with one mistake of each kind is caught, each mistake by name, and nothing else."""
    page = ROOT / "FAKE.md"
    assert sorted(broken_links(page, FAKE_PAGE)) == sorted([
        "FAKE.md: [docs/no-such-page.md]: no such file docs/no-such-page.md",
        "FAKE.md: [README.md#no-such-heading]: README.md has no heading #no-such-heading",
    ])
    assert missing_files(page, FAKE_PAGE) == [
        "FAKE.md: `tests/no_such_helper.py` names tests/no_such_helper.py, which does not exist",
        "FAKE.md: `python -m tests.no_such_module OUT` names tests/no_such_module.py, which does not exist",
    ]
    flagged = {}
    for command in doc_commands(FAKE_PAGE):
        flagged.setdefault(f"{command.tool} {command.sub or ''}".strip(), []).extend(unknown_flags(command))
    assert flagged.pop("bench no-such-benchmark")[0].startswith("bench no-such-benchmark")
    assert flagged.pop("benchmarks no-such-benchmark")[0].startswith("benchmarks no-such-benchmark")
    assert flagged == {
        "torchrun": ["--not-a-torchrun-flag"],
        "train": ["--made-up-train-flag"],
        "val": ["--no-such-val-flag"],
        "benchmarks finetune": ["--not-a-train-flag"],
        "predict": ["--imaginary"],
        "export": ["--fake-export-flag"],
    }


@pytest.mark.parametrize("text, expected", [
    ("python train.py --epochs 3", [("train", None, ["--epochs", "3"])]),
    ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --max-restarts 3 train.py --project p",
     [("torchrun", None, ["--max-restarts", "3"]), ("train", None, ["--project", "p"])]),
    ("python -m benchmarks scale --stages eval  # the evaluation only",
     [("benchmarks", "scale", ["--stages", "eval"])]),
    ("python -m detect.bench model --cfg c.cfg", [("bench", "model", ["--cfg", "c.cfg"])]),
    ("detect-val --weights a.pt", [("val", None, ["--weights", "a.pt"])]),
    ("python -m detect.bench <benchmark> --help", [("bench", None, ["--help"])]),
    ("python -m benchmarks", [("benchmarks", None, [])]),
    ("python -m pytest -q", []),
    ("python -m tests.support.small_objects OUT", []),
])
def test_commands_are_recognised(text, expected):
    assert [(c.tool, c.sub, c.args) for c in commands_in(text)] == expected


def test_bare_entry_points_count_in_prose_only():
    assert [c.tool for c in commands_in("train.py --epochs 3", prose=True)] == ["train"]
    assert [c.tool for c in commands_in("detect.val --split test", prose=True)] == ["val"]
    assert commands_in("train.py        thin entry point") == []
