"""The shared entry of the command-line tools: parse, run, and turn a user's mistake into one line + exit 2."""

from __future__ import annotations

import sys
from collections.abc import Callable


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
