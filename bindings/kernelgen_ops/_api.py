"""Types the generated launchers return and raise (imported by every built module of the package)."""

from __future__ import annotations

# Process-wide launcher settings, read by the built modules (see the package's set_strict
# and refresh).
STRICT = False
_refreshers: dict = {}  # one refresh function per loaded target library


# The error categories after which a fallback chain tries its next member (device limits: GRID,
# BLOCK, SHARED_MEM, LAUNCH_BOUNDS, CORESIDENT), as KG_FALLS_THROUGH in kernelgen/plan_codes.h;
# kernelgen.plan.FALLS_THROUGH is where they are defined (a unit test holds the two together).
_FALLS_THROUGH = frozenset({3, 4, 5, 8, 10})


def falls_through(code: int) -> bool:
    """Whether a fallback chain tries its next member after outcome ``code`` (a launcher's
    ``Outcome.code`` or a plan's ``"code"``): an error from a device limit (a grid over CUDA's
    limits, a block outside the target's or over ``__launch_bounds__``, dynamic shared memory over
    the opt-in limit, a cooperative grid over the co-residency limit)."""
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
    """What a launcher did. Launchers return cached instances; treat them as read-only.

    ``bool(outcome)`` is ``outcome.launched``. When not launched, ``reason`` says why
    (the failed clause, empty work, the kill switch, or the kernel's absence on this
    target); ``kernel`` names the kernel the outcome is about (for a fallback chain, the
    one that ran).
    """

    __slots__ = ("code", "kernel", "launched", "module", "reason")

    def __init__(self, module: str, kernel: str, launched: int, code: int, reason: str) -> None:
        self.module = module
        self.kernel = kernel
        self.launched = bool(launched)
        self.code = code
        self.reason = reason or None

    def __bool__(self) -> bool:
        return self.launched

    def __repr__(self) -> str:
        if self.launched:
            return f"<Outcome {self.module}.{self.kernel}: launched>"
        return f"<Outcome {self.reason}>"
