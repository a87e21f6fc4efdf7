"""`python -m detect.tune.tether WORKER_PID LOCK_FILE -- COMMAND ...`: run COMMAND tied to the tune worker.

A trial's train.py runs in a session of its own, so that a Ctrl-C at the terminal reaches the tune worker alone,
which then sends exactly one SIGTERM (a second one makes train.py stop without saving). This small process sits
between the two:
- it passes on the first SIGTERM or SIGINT it gets as one SIGTERM to COMMAND, and ignores the rest;
- Linux's parent-death signal sends it SIGTERM when the worker dies, even by SIGKILL, so COMMAND saves last.pt
  and exits instead of training on unwatched. That signal comes again each time an orphan is handed to another
  of the dying worker's threads, which is why it reaches this single-threaded process and not train.py;
- COMMAND gets SIGKILL if this process is killed (the worker's last resort), so nothing outlives it;
- LOCK_FILE (in the run folder) stays locked while COMMAND runs, so a retry of the trial waits for it.
It exits with COMMAND's status (128 + N for a signal N). Only the standard library runs here.
"""

import ctypes
import fcntl
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent(signum: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    except (OSError, AttributeError):  # not Linux: the lock and the worker's own stop remain
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m detect.tune.tether WORKER_PID LOCK_FILE -- COMMAND ...", file=sys.stderr)
        return 2
    worker, lock_file, command = int(argv[0]), argv[1], argv[3:]
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # released when this process and COMMAND (which inherits it) are gone
    os.set_inheritable(fd, True)
    child, signals = None, []

    def forward(signum, frame):  # the first signal only, as one SIGTERM
        if not signals and child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)
        signals.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    _die_with_parent(signal.SIGTERM)
    if os.getppid() != worker or signals:  # the worker died, or asked for a stop, before the child started
        return 128 + signal.SIGTERM
    # this process is single-threaded, so the child's own tie can be made between fork and exec
    child = subprocess.Popen(command, pass_fds=(fd,), preexec_fn=lambda: _die_with_parent(signal.SIGKILL))
    if signals:  # a signal between the check and the start
        child.send_signal(signal.SIGTERM)
    code = child.wait()  # waits on through the signals (PEP 475)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
