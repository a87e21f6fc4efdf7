"""run_command: success is 0; a user's mistake is one `error:` line and exit 2; anything else propagates."""

import pytest

from detect.runtime.commands import run_command


def _parse(argv):
    return argv


def test_success_and_user_errors(capsys):
    seen = []
    assert run_command(_parse, seen.append, ["x"]) == 0 and seen == [["x"]]

    def missing(args):
        raise FileNotFoundError("weights file w.pt does not exist")

    assert run_command(_parse, missing) == 2
    assert capsys.readouterr().err == "error: weights file w.pt does not exist\n"


def test_bugs_are_not_dressed_as_user_errors():
    def broken(args):
        raise RuntimeError("internal")

    with pytest.raises(RuntimeError, match="internal"):
        run_command(_parse, broken)
