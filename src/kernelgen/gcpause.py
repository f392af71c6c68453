"""Generation without cyclic garbage collection.

Loading and rendering a large spec allocate millions of small, acyclic objects (nodes,
argument records, text pieces). The cycle collector scans them again and again as they
accumulate; on a 1 MB spec that was about a third of the generation time, for nothing it
could free. Reference counting still frees everything as usual, and collection resumes when
the outermost paused call returns.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def collection_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` with the cycle collector off (calls may nest; the outermost one restores it)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper
