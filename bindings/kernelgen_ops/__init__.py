"""kernelgen's built kernel modules, one subpackage per GPU target.

``from kernelgen_ops import rms_norm`` picks the build that matches the current GPU: each
installed target's package names its compute capability (``COMPUTE_CAPABILITY``, from the
project's specs/targets.yaml; here 12.1 -> ``gb10``, 9.0 -> ``hopper``). Set ``KERNELGEN_TARGET`` to
choose one explicitly (plans and generated tests need no GPU), or import a target's
modules directly: ``from kernelgen_ops.hopper import rms_norm``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from kernelgen_ops._api import (
    ArgumentError,
    CudaFatalError,
    KernelError,
    LaunchError,
    NotLaunchedError,
    Outcome,
)

__all__ = [
    "ArgumentError",
    "CudaFatalError",
    "KernelError",
    "LaunchError",
    "NotLaunchedError",
    "Outcome",
    "TargetError",
    "available_targets",
    "built_targets",
    "device_values",
    "refresh",
    "set_strict",
    "strict",
    "target",
    "use_target_table",
]

_here = os.path.dirname(__file__)
_selected: str | None = None

# Builds installed elsewhere (another project's `kernelgen build --install-dir`) are found
# first when their kernelgen_ops folders are listed in KERNELGEN_OPS_PATH.
__path__ = [p for p in os.environ.get("KERNELGEN_OPS_PATH", "").split(os.pathsep) if p] + list(__path__)


class TargetError(ImportError):
    """No build of kernelgen_ops matches this machine."""


def built_targets() -> dict[tuple[int, int], str]:
    """Compute capability -> target, for every target whose build is installed on the package
    path (each build's ``__init__`` names its compute capability)."""
    found: dict[tuple[int, int], str] = {}
    for d in __path__:
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.startswith("_") or not os.path.isfile(os.path.join(d, name, "__init__.py")):
                continue
            try:
                cc = importlib.import_module(f"kernelgen_ops.{name}").COMPUTE_CAPABILITY
            except (ImportError, AttributeError):
                continue
            found.setdefault(tuple(cc), name)  # type: ignore[arg-type]
    return found


def available_targets() -> list[str]:
    """Targets whose build is installed on the package path."""
    return sorted(set(built_targets().values()))


def _runtime(name: str) -> ModuleType:
    return importlib.import_module(f"kernelgen_ops.{name}._runtime")


def target() -> str:
    """The target whose modules ``from kernelgen_ops import X`` returns (chosen once)."""
    global _selected
    if _selected is not None:
        return _selected
    by_cc = built_targets()
    built = sorted(set(by_cc.values()))
    forced = os.environ.get("KERNELGEN_TARGET")
    if forced:
        if forced not in built:
            raise TargetError(
                f"target {forced!r} is not built (built: {built}); run: kernelgen build --target {forced}"
            )
        _selected = forced
        return forced
    if not built:
        raise TargetError("no kernelgen target is built; run: kernelgen build")
    rt = _runtime(built[0])  # any build can ask the driver which GPU is present
    if rt.device_count() < 1:
        raise TargetError(
            "no CUDA GPU is visible, so no target can be chosen; set KERNELGEN_TARGET to one of "
            f"{built} to use plans without a GPU, or import kernelgen_ops.<target>.<module> directly"
        )
    dev = max(rt.current_device(), 0)
    cc = rt.device_capability(dev)
    name = by_cc.get(tuple(cc) if cc else None)  # type: ignore[arg-type]
    if name is None:
        raise TargetError(
            f"GPU {dev} has compute capability {cc[0] if cc else '?'}.{cc[1] if cc else '?'}; the built targets are "
            + ", ".join(f"{t} ({a}.{b})" for (a, b), t in sorted(by_cc.items()))
            + "; build the target of this GPU (kernelgen build --target T, T from specs/targets.yaml)"
        )
    _selected = name
    return name


def refresh() -> None:
    """Re-read every kill switch from the environment, in every loaded module's library.

    Modules loaded later read the environment when first used.
    """
    from kernelgen_ops import _api

    for fn in list(_api._refreshers.values()):
        fn()


def device_values(target_name: str | None = None) -> dict:
    """The values plans read for device names (``device.sm_count``, ... and the limits
    ``kernel.blocks_per_sm`` is computed from): the current device's, queried once per device,
    when it is the target's; else the target's table from specs/targets.yaml (``device`` -1)."""
    return _runtime(target_name or target()).device_values()


def use_target_table(on: bool = True, target_name: str | None = None) -> None:
    """Process-wide, per target library: plans (and the plans launches make) read the target's
    table instead of the device, giving the answers of a machine without a GPU."""
    _runtime(target_name or target()).use_target_table(bool(on))


def set_strict(strict: bool = True) -> None:
    """Process-wide: in strict mode a launcher that would not launch raises
    NotLaunchedError instead of returning a "not launched" Outcome."""
    from kernelgen_ops import _api

    _api.STRICT = bool(strict)


def strict() -> bool:
    """Whether strict mode is on."""
    from kernelgen_ops import _api

    return _api.STRICT


def __getattr__(name: str) -> ModuleType:
    if name.startswith("_"):
        raise AttributeError(name)
    t = target()
    try:
        mod = importlib.import_module(f"kernelgen_ops.{t}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"kernelgen_ops.{t}.{name}":
            raise AttributeError(f"kernelgen_ops has no module {name!r} for target {t!r}") from None
        raise
    return mod
