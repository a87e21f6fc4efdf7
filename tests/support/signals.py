"""Child processes that a test interrupts with SIGINT, as a terminal's Ctrl-C would.

A process started in the background by a non-interactive shell (`pytest ... &`, `nohup`) inherits SIGINT ignored,
and Python then never raises KeyboardInterrupt: the Ctrl-C tests would test nothing, or hang. The child gets
SIGINT's default back before it starts, so it behaves as in a terminal however the tests were launched.
"""

import signal


def sigint_as_in_a_terminal() -> None:
    """A Popen `preexec_fn`: SIGINT's default disposition (Python turns it into KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
