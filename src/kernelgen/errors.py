"""Error types and source locations.

Every error kernelgen raises about user input is a :class:`KernelgenError` whose message
names the file and line it is about and, where one is known, how to fix it. The CLI prints
such errors without a traceback and exits with status 2.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class SourceLoc:
    """A position in a spec file (1-based line and column)."""

    path: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.path
        return f"{self.path}:{self.line}"


class KernelgenError(Exception):
    """Base of every error kernelgen reports to its user."""


class SpecError(KernelgenError):
    """A spec (or the target registry) is invalid.

    ``field`` is the dotted path of the offending entry (``kernels.rms_norm.grid``).
    """

    def __init__(self, loc: SourceLoc, field: str, message: str, hint: str = "") -> None:
        self.loc = loc
        self.field = field
        self.message = message
        self.hint = hint
        text = f"{loc}: {field}: {message}" if field else f"{loc}: {message}"
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class SpecErrors(SpecError):
    """Several specs are invalid: the first :class:`SpecError` of each kernel, or of each spec file
    where its module's own entries are wrong (later errors of one kernel or entry are often its
    consequences), in file order. Its own ``loc``, ``field``, ``message`` and ``hint`` are the
    first error's."""

    SHOWN = 50  # errors listed in the message; the rest are counted

    def __init__(self, errors: list[SpecError]) -> None:
        first = errors[0]
        super().__init__(first.loc, first.field, first.message, first.hint)
        self.errors = list(errors)
        self.args = ("\n".join([str(e) for e in self.errors[: self.SHOWN]] + [self.summary()]),)

    def summary(self) -> str:
        """How many errors, in how many files (and how many the message leaves out)."""
        files = len({e.loc.path for e in self.errors})
        more = len(self.errors) - self.SHOWN
        return (f"{len(self.errors)} errors in {files} spec file{'s' if files != 1 else ''}"
                + (f" (the first {self.SHOWN} shown)" if more > 0 else ""))

    def __str__(self) -> str:
        return str(self.args[0])


def raise_collected(errors: list[SpecError]) -> None:
    """Raise the errors found: nothing for none, the error itself for one, else :class:`SpecErrors`
    (with the errors of an inner :class:`SpecErrors` listed one by one)."""
    flat: list[SpecError] = []
    for e in errors:
        flat.extend(e.errors if isinstance(e, SpecErrors) else [e])
    if len(flat) == 1:
        raise flat[0]
    if flat:
        raise SpecErrors(flat)


class ExprError(KernelgenError):
    """An expression cannot be evaluated (division by zero, overflow, bad shift).

    ``code`` is the KG_EXPR_* detail: 1 overflow, 2 division by zero, 3 shift count.
    """

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class GenerationError(KernelgenError):
    """Generated output could not be written, or is stale under ``--check``."""


class ToolkitError(KernelgenError):
    """No usable CUDA toolkit, CMake or pybind11 was found."""


class BuildError(KernelgenError):
    """CMake or the compiler failed."""


def closest(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """The valid choice closest to ``word``, if one is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """A hint naming the closest valid choice, or listing the valid ones."""
    close = closest(word, choices)
    if close:
        return f"did you mean '{close}'?"
    return "expected one of: " + ", ".join(sorted(choices)) if choices else ""


def relpath(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when inside it, for messages and stamps."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, RuntimeError, OSError):  # outside root, or a symlink loop
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return path.as_posix()
