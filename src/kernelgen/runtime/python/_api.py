"""Types the generated launchers return and raise (imported by every built module of the package)."""

from __future__ import annotations

import operator
from collections.abc import Callable

# The package these helpers belong to ("kernelgen_ops"), for messages.
_PACKAGE = __name__.rpartition(".")[0]

# Process-wide launcher settings, read by the built modules (see the package's set_strict
# and refresh).
STRICT = False
_refreshers: dict[int, Callable[[], object]] = {}  # one refresh function per loaded target library


# The error categories after which a fallback chain tries its next member (device limits: GRID,
# BLOCK, SHARED_MEM, LAUNCH_BOUNDS, CORESIDENT), as KG_FALLS_THROUGH in kernelgen/plan_codes.h;
# kernelgen.plan.FALLS_THROUGH is where they are defined (a unit test holds the two together).
_FALLS_THROUGH = frozenset({3, 4, 5, 8, 10})


# Outcome codes are int32_t (kernelgen/abi.h).
_CODE_RANGE = (-(1 << 31), (1 << 31) - 1)


def _type_name(value: object) -> str:
    """The type of ``value`` as launchers' messages name it (``str``, ``numpy.float32``)."""
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _where(helper: str, name: str) -> str:
    """The start of a runtime helper's argument error, as a launcher's names its kernel and
    argument: ``kernelgen_ops.limit_sms: argument 'n'``."""
    return f"{_PACKAGE}.{helper}: argument {name!r}" if _PACKAGE else f"{helper}: argument {name!r}"


def _is_numpy_bool(value: object) -> bool:
    t = type(value)
    return t.__module__ == "numpy" and t.__name__ in ("bool", "bool_")


def _index(value: object) -> int | None:
    """``value`` as an integer (an int, or an object with ``__index__`` such as numpy.int64), or None."""
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _flag(helper: str, name: str, value: object) -> bool:
    """Argument ``name`` of runtime helper ``helper`` as a flag: what a launcher's bool argument
    takes (True, False, numpy's bools, the integers 0 and 1); a TypeError (ValueError for another
    integer) naming the helper and argument for anything else."""
    if isinstance(value, bool) or _is_numpy_bool(value):
        return bool(value)
    number = None if isinstance(value, float) else _index(value)
    if number in (0, 1):
        return bool(number)
    error = ValueError if number is not None else TypeError
    got = str(number) if number is not None else _type_name(value)
    raise error(f"{_where(helper, name)}: expected a bool (True, False, 0 or 1), got {got}")


def _integer(helper: str, name: str, value: object, least: int, most: int, what: str = "") -> int:
    """Argument ``name`` of runtime helper ``helper`` as an integer in [least, most], as a
    launcher's integer argument takes it (an int or an ``__index__`` object; no bool or float): a
    TypeError for another type, a ValueError out of range (``what`` says what it counts), naming
    the helper and argument."""
    number = None if isinstance(value, (bool, float)) or _is_numpy_bool(value) else _index(value)
    if number is None:
        raise TypeError(f"{_where(helper, name)}: expected an integer, got {_type_name(value)}")
    if not least <= number <= most:
        raise ValueError(f"{_where(helper, name)}: {number} is out of range [{least}, {most}]"
                         + (f" ({what})" if what else ""))
    return number


def falls_through(code: int) -> bool:
    """Whether a fallback chain tries its next member after outcome ``code`` (a launcher's
    ``Outcome.code`` or a plan's ``"code"``, an int32): an error from a device limit (a grid over
    CUDA's limits, a block outside the target's or over ``__launch_bounds__``, dynamic shared
    memory over the opt-in limit, a cooperative grid over the co-residency limit)."""
    if type(code) is not int or not _CODE_RANGE[0] <= code <= _CODE_RANGE[1]:
        code = _integer("falls_through", "code", code, *_CODE_RANGE)
    return code < 0 and (-code) >> 16 in _FALLS_THROUGH


class KernelError(Exception):
    """Base of the errors raised by kernelgen launchers.

    ``kernel`` names the kernel; ``code`` is the launcher's outcome code (kernelgen/abi.h),
    0 for argument checks done before the launcher runs; ``argument`` names the offending
    argument when one is known.
    """

    kernel: str = ""
    code: int = 0
    argument: str | None = None


class ArgumentError(KernelError, TypeError, ValueError):
    """An argument is invalid: wrong type, dtype, device, layout, size or range.

    The message names the kernel and the argument. It is both a TypeError and a
    ValueError, so callers catching either see it.
    """


class LaunchError(KernelError, RuntimeError):
    """CUDA refused the launch, or geometry exceeds the device's limits."""


class CudaFatalError(LaunchError):
    """A sticky CUDA error (e.g. an illegal address): the CUDA context is unusable."""


class NotLaunchedError(KernelError):
    """Raised in strict mode when a launcher would return "not launched"."""


class Outcome:
    """What a launcher did. Launchers return cached, shared instances, so outcomes are immutable:
    setting or deleting an attribute raises AttributeError. Being immutable, an outcome is its
    own copy (``copy.copy`` and ``copy.deepcopy`` return it); it pickles by value, and outcomes
    with the same fields are equal (and hash alike).

    ``bool(outcome)`` is ``outcome.launched``. When not launched, ``reason`` says why
    (the failed clause, empty work, the kill switch, or the kernel's absence on this
    target); ``kernel`` names the kernel the outcome is about (for a fallback chain, the
    one that ran).
    """

    __slots__ = ("_code", "_kernel", "_launched", "_module", "_reason")
    _code: int
    _kernel: str
    _launched: bool
    _module: str
    _reason: str | None

    def __init__(self, module: str, kernel: str, launched: int, code: int, reason: str) -> None:
        if hasattr(self, "_code"):  # __init__ called again on a shared outcome
            self._refuse("code")
        for name, value in (("_module", module), ("_kernel", kernel), ("_launched", bool(launched)),
                            ("_code", code), ("_reason", reason or None)):
            object.__setattr__(self, name, value)

    @property
    def module(self) -> str:
        return self._module

    @property
    def kernel(self) -> str:
        return self._kernel

    @property
    def launched(self) -> bool:
        return self._launched

    @property
    def code(self) -> int:
        return self._code

    @property
    def reason(self) -> str | None:
        return self._reason

    def _refuse(self, name: str) -> None:
        raise AttributeError(f"Outcome is read-only (cannot change {name!r}): launchers return the same "
                             "Outcome object from many calls")

    def __setattr__(self, name: str, value: object) -> None:
        self._refuse(name)

    def __delattr__(self, name: str) -> None:
        self._refuse(name)

    def __bool__(self) -> bool:
        return self.launched

    def _fields(self) -> tuple[str, str, bool, int, str | None]:
        return (self._module, self._kernel, self._launched, self._code, self._reason)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __copy__(self) -> Outcome:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Outcome:
        return self

    def __reduce__(self) -> tuple[type[Outcome], tuple[str, str, int, int, str]]:
        return (Outcome, (self._module, self._kernel, int(self._launched), self._code, self._reason or ""))

    def __repr__(self) -> str:
        if self.launched:
            return f"<Outcome {self.module}.{self.kernel}: launched>"
        return f"<Outcome {self.reason}>"


def _attribute(module: str, name: str) -> object:
    """``<module>.<name>``, its module imported: what a launcher pickles to (by reference, as a
    module-level function does), so that unpickling it in another process imports its module."""
    import importlib

    return getattr(importlib.import_module(module), name)


def _launcher_signature(names: tuple[str, ...], npositional: int, doc: str) -> object:
    """A launcher's ``__signature__``: its arguments in order (the first ``npositional`` positional
    or keyword, the rest keyword-only), then ``stream=None``, annotated with the spec types its
    docstring's first line spells (``(x: const f32*, n: u32, *, stream=None) -> Outcome``)."""
    import inspect

    spelled: dict[str, str] = {}
    first = doc.split("\n", 1)[0]
    if first.startswith("(") and ") -> " in first:
        for part in first[1:first.rindex(") -> ")].split(", "):
            name, sep, text = part.partition(": ")
            if sep:
                spelled[name] = text
    p = inspect.Parameter
    params = [p(n, p.POSITIONAL_OR_KEYWORD if i < npositional else p.KEYWORD_ONLY,
                annotation=spelled.get(n, p.empty)) for i, n in enumerate(names)]
    params.append(p("stream", p.KEYWORD_ONLY, default=None))
    return inspect.Signature(params, return_annotation="Outcome")
