"""A build command stopped with kernelgen (Ctrl-C, SIGINT or SIGTERM sent to kernelgen alone, an
error while its output is read) is stopped with everything it started before kernelgen goes on
stopping: no compiler outlives the build and its lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgen import build

# A command like `cmake --build`: it starts a process in its own process group (as ninja starts each
# compiler) and one in its own, prints the three ids, and waits. With IGNORE set it ignores SIGINT
# and SIGTERM (so do its children), as a command that does not stop when asked.
CHILD = """
import os, signal, subprocess, sys, time
if os.environ.get("IGNORE"):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
same = subprocess.Popen(["sleep", "300"])
own = subprocess.Popen(["sleep", "300"], preexec_fn=os.setpgrp)
print("pids", os.getpid(), same.pid, own.pid, flush=True)
time.sleep(300)
"""


def _running(pid: int) -> bool:
    """Whether the process runs (an exited one that waits to be collected does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(_running(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc")


@pytest.mark.parametrize("error", [KeyboardInterrupt, BrokenPipeError, RuntimeError])
def test_an_error_while_a_command_runs_stops_it_and_what_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]) -> None:
    monkeypatch.setattr(build, "STOP_WAITS", (2.0, 2.0, 2.0))
    pids: list[int] = []

    def echo(line: str) -> None:
        if line.strip().startswith("pids "):
            pids.extend(int(p) for p in line.split()[1:])
            raise error()

    with pytest.raises(error):
        build._run([sys.executable, "-c", CHILD], tmp_path, echo, True)
    assert len(pids) == 3
    assert _gone(pids, within=0.5)  # _run returned only after they were gone


def test_a_command_that_ignores_sigint_and_sigterm_is_killed_after_bounded_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "STOP_WAITS", (0.5, 0.5, 3.0))
    monkeypatch.setenv("IGNORE", "1")
    pids: list[int] = []

    def echo(line: str) -> None:
        if line.strip().startswith("pids "):
            pids.extend(int(p) for p in line.split()[1:])
            raise KeyboardInterrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        build._run([sys.executable, "-c", CHILD], tmp_path, echo, True)
    assert time.monotonic() - start < 3.5
    assert _gone(pids, within=0.5)


# kernelgen's own handling, in a process of its own: the command's output is shown, and a signal is
# sent to that process alone (not to its process group, as a terminal's Ctrl-C would).
KERNELGEN = f"""
import sys
from pathlib import Path
from kernelgen import build
build.STOP_WAITS = (2.0, 2.0, 2.0)
try:
    build._run([sys.executable, "-c", {CHILD!r}], Path.cwd(), lambda s: print(s, flush=True), True)
except KeyboardInterrupt:
    print("kernelgen: interrupted", file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_kernelgen_alone_stops_the_command_it_runs(tmp_path: Path, signum: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", KERNELGEN], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        pids = [int(p) for p in line.split()[1:]]
        assert len(pids) == 3, line
        os.kill(proc.pid, signum)
        rc = proc.wait(timeout=30)
        stderr = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    if signum == signal.SIGINT:
        assert (rc, stderr) == (130, "kernelgen: interrupted\n")
    else:
        assert rc == -signal.SIGTERM  # ended by the signal, as without a command running
    assert _gone(pids, within=1.0)
