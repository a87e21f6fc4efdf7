"""The shared entry of the command-line tools: parse, run, and turn a user's mistake into one line + exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def spelt(option: str, value) -> str:
    """An option with its value as its user writes it: `--backend ncnn` for a command-line flag, `backend='ncnn'`
    for a Python keyword (an option spelt ending in "=", as the API's detect.inference.loading.API spells them)."""
    return f"{option}{value!r}" if option.endswith("=") else f"{option} {value}"


def check_at_least(flag: str, value, minimum: int = 1, allow_none: bool = False) -> None:
    """One line for a count flag below its minimum (None passes where the flag is optional)."""
    if value is None and allow_none:
        return
    if value is None or value < minimum:
        raise ValueError(f"{flag} must be at least {minimum}, got {value}")


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """`--help` that states a flag's default where it says something: not for on/off switches (their help says
    what they switch), not for None (the help says what happens), not twice where the help names it already."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default in (None, argparse.SUPPRESS) or isinstance(action.default, bool) or action.nargs == 0
                or "(default" in text or "%(default)" in text or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def run_command(parse_args: Callable, run: Callable, argv=None) -> int:
    """0 on success; 2 with `error: ...` on stderr for bad input (a ValueError or a missing file), which the
    tools raise before any long work with a message that names the file or value at fault."""
    args = parse_args(argv)
    try:
        run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def run_tool(tool: str, parse_args: Callable, run: Callable, argv, log) -> int:
    """`run_command` for a tool: 0 on success; 2 and one line for a user's mistake; 130 on Ctrl-C; 1 and one
    `error: <tool> failed: ...` line for any other failure, its traceback in `log`'s debug output."""
    try:
        return run_command(parse_args, run, argv)
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except Exception as e:
        log.debug("%s failed", tool, exc_info=True)
        print(f"error: {tool} failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def dispatch(argv, package: str, commands: dict[str, str], program: str, see_also: str) -> int:
    """`program <command> [options]`: run `<package>.<command>`'s main on the rest of `argv`; without a known
    command, the usage (each command with its line of `commands`, then `see_also`) and exit status 2."""
    import importlib

    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in commands:
        width = max(map(len, commands)) + 1
        lines = "\n".join(f"  {name:{width}s} {text}" for name, text in commands.items())
        print(f"usage: {program} <benchmark> [options]\n\nbenchmarks:\n{lines}\n\n{see_also}", file=sys.stderr)
        return 2
    return importlib.import_module(f"{package}.{argv[0]}").main(argv[1:]) or 0


TRAIN_MODULE = "detect.train"  # run as `python -m detect.train`: a clone and an installed package alike


def train_launcher(nproc: int) -> list[str]:
    """The command that starts train.py (the tools that train runs of their own: tune, audit --folds): alone, or
    under torchrun with `nproc` processes (a free port of its own: several runs at once)."""
    if nproc == 1:
        return [sys.executable, "-m", TRAIN_MODULE]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", TRAIN_MODULE]
