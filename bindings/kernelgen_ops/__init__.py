"""A kernelgen project's built kernel modules, one subpackage per GPU target.

``from <package> import rms_norm`` picks the build that matches the current GPU: the project's
target registry (``_project.TARGETS``, from its specs/targets.yaml) maps each target to its compute
capability, and each installed target's package names its own (``COMPUTE_CAPABILITY``); where
several installed targets have the GPU's compute capability, the first by name is chosen. Set
``KERNELGEN_TARGET`` to choose one explicitly (any installed target: plans and generated tests need
no GPU), or import a target's modules directly: ``from <package>.hopper import rms_norm``.

This file is kernelgen's package shell: ``kernelgen build`` and the project's wheel install it, the
same for every project, beside ``_api.py`` and the project's ``_project.py``.
"""

from __future__ import annotations

import difflib
import importlib
import os
from types import ModuleType

from ._api import (
    ArgumentError,
    CudaFatalError,
    KernelError,
    LaunchError,
    NotLaunchedError,
    Outcome,
    falls_through,
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
    "falls_through",
    "limit_sms",
    "refresh",
    "registry",
    "set_strict",
    "strict",
    "target",
    "use_target_table",
]

_PACKAGE = __name__
_selected: str | None = None

try:  # the project's target registry and where it was built (absent in kernelgen's own wheel)
    from ._project import ROOT as _ROOT  # type: ignore[import-not-found]
    from ._project import TARGETS as _REGISTRY  # type: ignore[import-not-found]
except ImportError:
    _REGISTRY: dict[str, tuple[int, int]] = {}  # type: ignore[no-redef]
    _ROOT = None

# Builds installed elsewhere (`kernelgen build --install-dir DIR`) are found first when their
# package folders (DIR/<package>) are listed in KERNELGEN_OPS_PATH.
__path__ = [p for p in os.environ.get("KERNELGEN_OPS_PATH", "").split(os.pathsep) if p] + list(__path__)


class TargetError(ImportError):
    """No build of this package matches this machine."""


# Present in a target's folder while ``kernelgen build`` installs it (kernelgen.build.INSTALL_MARKER).
_INSTALLING = ".kernelgen-installing"


def _unloadable(target: str, what: str, exc: BaseException) -> ImportError:
    """The error for a part of target's installed build (a module, its runtime) that fails to load:
    the install did not finish, or its files were damaged since; a new build installs them again."""
    try:
        folders = list(importlib.import_module(f"{_PACKAGE}.{target}").__path__)
    except ImportError:
        folders = []
    if any(os.path.exists(os.path.join(d, _INSTALLING)) for d in folders):
        why = f"the last install of target {target!r} was interrupted or failed"
    else:
        why = f"the installed build of target {target!r} is incomplete or damaged"
    return ImportError(f"{_PACKAGE}: {what} of target {target!r} cannot be loaded ({type(exc).__name__}: {exc}); "
                        f"{why}; run: {_build_cmd(target)}", name=f"{_PACKAGE}.{target}")


def _install_dir(target: str | None = None) -> str | None:
    """The folder ``kernelgen build --install-dir`` installed this package's build of ``target``
    into (the package's own folder without a target, or where the target is not installed): None
    where it is the project's default (``bindings/`` in the project root)."""
    folder = os.path.dirname(os.path.abspath(__file__))
    if target is not None:
        try:
            folder = os.path.dirname(next(iter(importlib.import_module(f"{_PACKAGE}.{target}").__path__)))
        except (ImportError, StopIteration):
            pass
    prefix = os.path.dirname(folder)
    if _ROOT and os.path.realpath(prefix) == os.path.realpath(os.path.join(_ROOT, "bindings")):
        return None
    return prefix


def _build_cmd(target: str | None = None, built: list[str] | None = None) -> str:
    """What to run for a build of ``target``: in the project (a local build, into the folder this
    build was installed in), or, for an installed wheel (no project root), a wheel that holds it and
    the targets ``built`` into this one."""
    if _ROOT:
        prefix = _install_dir(target)
        return (f"cd {_ROOT} && kernelgen build" + (f" --target {target}" if target else "")
                + (f" --install-dir {prefix}" if prefix else ""))
    wanted = [t for t in built or [] if t != target] + [target or "TARGET"]
    targets = wanted[0] if len(wanted) == 1 else '"' + ";".join(wanted) + '"'
    return (f"pip wheel --no-build-isolation . -Ccmake.define.KERNELGEN_TARGETS={targets} in {_PACKAGE}'s project "
            f"folder (this {_PACKAGE} is an installed wheel), then install that wheel")


def _cc(cc: tuple[int, int] | list[int] | None) -> str:
    return f"{cc[0]}.{cc[1]}" if cc else "?"


def _installed() -> dict[str, tuple[int, int]]:
    """Every target whose build is installed on the package path, with its compute capability
    (each build's ``__init__`` names it). A target installed in several of the package's folders
    is the one Python imports: the first folder's."""
    found: dict[str, tuple[int, int]] = {}
    for d in __path__:
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name in found or name.startswith("_") or not os.path.isfile(os.path.join(d, name, "__init__.py")):
                continue
            try:
                cc = importlib.import_module(f"{_PACKAGE}.{name}").COMPUTE_CAPABILITY
            except (ImportError, AttributeError):
                continue
            found[name] = (int(cc[0]), int(cc[1]))
    return found


def built_targets() -> dict[tuple[int, int], str]:
    """Compute capability -> the target chosen for a GPU of it, among the targets whose build is
    installed on the package path: where several installed targets have one compute capability
    (a variant build), the first by name (:func:`available_targets` lists them all)."""
    chosen: dict[tuple[int, int], str] = {}
    for name, cc in sorted(_installed().items()):
        chosen.setdefault(cc, name)
    return chosen


def available_targets() -> list[str]:
    """Targets whose build is installed on the package path, by name."""
    return sorted(_installed())


def registry() -> dict[str, tuple[int, int]]:
    """Every target of the project's specs/targets.yaml (built or not) and its compute capability."""
    return dict(_REGISTRY)


def _runtime(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"{_PACKAGE}.{name}._runtime")
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == f"{_PACKAGE}.{name}":
            raise  # no such target is installed
        raise _unloadable(name, "the runtime", exc) from exc


def target() -> str:
    """The target whose modules ``from <package> import X`` returns (chosen once)."""
    global _selected
    if _selected is not None:
        return _selected
    installed = _installed()
    built = sorted(installed)
    forced = os.environ.get("KERNELGEN_TARGET")
    if forced:
        if forced not in built:
            if _REGISTRY and forced not in _REGISTRY:
                raise TargetError(f"KERNELGEN_TARGET={forced}: {_PACKAGE} has no target {forced!r} (its "
                                  f"specs/targets.yaml has: {', '.join(sorted(_REGISTRY))})")
            raise TargetError(f"{_PACKAGE}: target {forced!r} is not built (built: {', '.join(built) or 'none'}); "
                              f"run: {_build_cmd(forced, built)}")
        _selected = forced
        return forced
    if not built:
        known = f" (its targets: {', '.join(sorted(_REGISTRY))})" if _REGISTRY else ""
        raise TargetError(f"{_PACKAGE}: no target is built{known}; run: {_build_cmd()}")
    rt = _runtime(built[0])  # any build can ask the driver which GPU is present
    if rt.device_count() < 1:
        raise TargetError(
            f"{_PACKAGE}: no CUDA GPU is visible (no GPU, or no NVIDIA driver), so no target can be chosen; set "
            f"KERNELGEN_TARGET to one of {', '.join(built)} to use plans without a GPU, or import "
            f"{_PACKAGE}.<target>.<module> directly"
        )
    dev = max(rt.current_device(), 0)
    cc = rt.device_capability(dev)
    key = tuple(cc) if cc else None
    name = next((t for t, c in sorted(installed.items()) if c == key), None)  # as built_targets() chooses
    if name is None:
        have = ", ".join(f"{t} ({a}.{b})" for t, (a, b) in sorted(installed.items(), key=lambda x: (x[1], x[0])))
        want = [t for t, c in sorted(_REGISTRY.items()) if tuple(c) == key]
        if want:
            fix = f"its target {want[0]} is for this GPU but not built here; run: {_build_cmd(want[0], built)}"
        else:
            fix = (f"no target of specs/targets.yaml has compute capability {_cc(cc)}: add one (arch "
                   f"sm_{_cc(cc).replace('.', '')}), then run: {_build_cmd('NAME', built)}")
        raise TargetError(f"{_PACKAGE}: no build for this GPU: GPU {dev} has compute capability {_cc(cc)}; the "
                          f"built targets are {have}; {fix}")
    _selected = name
    return name


def refresh() -> None:
    """Re-read every kill switch from the environment, in every loaded module's library.

    Modules loaded later read the environment when first used.
    """
    from . import _api

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


def limit_sms(n: int, target_name: str | None = None) -> None:
    """Process-wide, per target library: plans (and the plans launches make) see at most ``n``
    SMs (``device.sm_count``, the co-residency bound of cooperative launches), as on a part with
    fewer SMs or inside a CUDA green context confined to ``n`` SMs, which CUDA's device attributes
    do not report. ``limit_sms(0)`` lifts the limit."""
    _runtime(target_name or target()).limit_sms(int(n))


def set_strict(strict: bool = True) -> None:
    """Process-wide: in strict mode a launcher that would not launch raises
    NotLaunchedError instead of returning a "not launched" Outcome."""
    from . import _api

    _api.STRICT = bool(strict)


def strict() -> bool:
    """Whether strict mode is on."""
    from . import _api

    return _api.STRICT


def _built_modules() -> set[str]:
    """The modules of every installed target's build (each build's ``MODULES``)."""
    found: set[str] = set()
    for t in available_targets():
        found.update(getattr(importlib.import_module(f"{_PACKAGE}.{t}"), "MODULES", ()))
    return found


def _no_attribute(name: str, modules: set[str]) -> AttributeError:
    near = difflib.get_close_matches(name, sorted(modules | set(__all__)), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    have = f" (its modules: {', '.join(sorted(modules))})" if modules else ""
    return AttributeError(f"module {_PACKAGE!r} has no attribute or module {name!r}{have}{hint}")


def __getattr__(name: str) -> ModuleType:
    # Only the names of built modules resolve the target (which may raise TargetError without a
    # GPU); any other name is an AttributeError, so hasattr() and getattr(pkg, name, default) work.
    # With no build installed the modules are unknown: the target's TargetError says what to build.
    if name.startswith("_"):
        raise _no_attribute(name, set())
    modules = _built_modules()
    if modules and name not in modules:
        raise _no_attribute(name, modules)
    # A module the target lists that does not load (an install that did not finish, a file removed)
    # is an ImportError that says so and what to run.
    t = target()
    try:
        mod = importlib.import_module(f"{_PACKAGE}.{t}.{name}")
    except ImportError as exc:
        if name in getattr(importlib.import_module(f"{_PACKAGE}.{t}"), "MODULES", ()):
            raise _unloadable(t, f"module {name!r}", exc) from exc
        if isinstance(exc, ModuleNotFoundError) and exc.name == f"{_PACKAGE}.{t}.{name}":
            raise AttributeError(f"{_PACKAGE} has no module {name!r} for target {t!r}") from None
        raise
    # The target is chosen once per process: later lookups of the name find the module here
    # without scanning the installed builds again.
    globals()[name] = mod
    return mod
