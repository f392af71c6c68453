"""Work on a second core: a function computed in a forked child while the caller goes on.

Rendering a large catalog is pure Python, so one process uses one core; forking after the
catalog is loaded lets a child render one part (it inherits everything, copy-on-write) while
the parent renders the rest. Where that cannot help or is unsafe (no fork, one core, other
threads running, a small catalog), or when the child fails in any way, the function simply
runs in the caller's process, where any error it raises is raised as usual.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


# Kernel arguments in a catalog from which a second process pays off (this repository's
# whole catalog has a few hundred; forking costs more than it saves there).
WORTH_ARGS = 2000


def possible(args: int) -> bool:
    """Whether work on a catalog of ``args`` kernel arguments should use a child process."""
    return args >= WORTH_ARGS and hasattr(os, "fork") and (os.cpu_count() or 1) >= 2 \
        and threading.active_count() == 1


def start(fn: Callable[[], T]) -> Callable[[], T]:
    """Begins ``fn()`` in a child process; returns a function that waits for the result
    (computing it here if the child did not deliver)."""
    try:
        r, w = os.pipe()
        pid = os.fork()
    except OSError:
        return fn
    if pid == 0:  # the child: compute, send, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(r)
            data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BaseException:  # the parent computes it again and reports
            code = 1
        os._exit(code)
    os.close(w)

    def wait() -> T:
        with os.fdopen(r, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
        if data and os.waitstatus_to_exitcode(status) == 0:
            try:
                return pickle.loads(data)  # our own child's output
            except Exception:  # fall back to computing it here
                pass
        return fn()

    return wait
