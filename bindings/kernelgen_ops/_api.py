"""Types the generated launchers return and raise (imported by every built module of the package)."""

from __future__ import annotations

# Process-wide launcher settings, read by the built modules (see the package's set_strict
# and refresh).
STRICT = False
_refreshers: dict = {}  # one refresh function per loaded target library


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
