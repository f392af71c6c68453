"""Helpers for the generated contract tests, and for the project's own tests and benchmarks.

The generated tests import a target's built module with :func:`built_module`; a project's own
tests do the same, or take whichever target is built with :func:`built_target`. When the package
or the module has not been built, the calling test file is skipped with one sentence saying why
(not built; built but not on this Python's path; built but another copy is imported) and the
command that fixes it, unless ``KERNELGEN_REQUIRE_BUILT`` is on (CI sets it to 1; unset, empty,
``0``, ``false``, ``no`` and ``off`` are off: :func:`kernelgen.toolkit.env_flag`), in which case that
is a failure. :func:`project_root` finds the project a test belongs to. :func:`ccache_stats`,
:func:`private_sccache` and :func:`sccache_counts` measure builds through a compiler cache.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import NoReturn

__all__ = ["built_module", "built_target", "ccache_stats", "expected_sizes", "fake_pointer", "kill_switches_unset",
           "not_built_reason", "private_sccache", "project_root", "sccache_counts", "sccache_stats", "stale_reason"]


def project_root(package: str | None = None, start: str | Path | None = None) -> Path | None:
    """The folder of the project a test belongs to: the nearest folder at or above ``start`` (a
    test's ``__file__``, or a folder) that holds specs/project.yaml or specs/targets.yaml; else the
    folder ``package`` was built in (its ``_project.ROOT``), where the package is importable; else
    the nearest such folder at or above the current folder; else None."""
    def above(here: Path) -> Path | None:
        for d in [here, *here.parents]:
            if (d / "specs" / "project.yaml").is_file() or (d / "specs" / "targets.yaml").is_file():
                return d
        return None

    found = above(Path(start).resolve()) if start is not None else None
    if found is None and package is not None:
        try:
            built_in = importlib.import_module(f"{package}._project").ROOT
        except ImportError:
            built_in = None
        found = Path(built_in) if built_in else None
    return found or above(Path.cwd().resolve())


def _built_dirs(root: Path | None, package: str, target: str | None) -> list[Path]:
    """The builds under the project's ``bindings/<package>/``: ``target``'s, or every target's."""
    folder = root / "bindings" / package if root else None
    if folder is None or not folder.is_dir():
        return []
    found = [folder / target] if target else sorted(p for p in folder.iterdir() if not p.name.startswith("_"))
    return [p for p in found if (p / "__init__.py").is_file()]


def not_built_reason(package: str, target: str | None = None, module: str | None = None,
                     root: Path | None = None, test_file: str | Path | None = None) -> str | None:
    """Why ``<package>.<target>.<module>`` cannot be imported (without ``module``: the target's
    package; without ``target``: why the package has no built target), as one sentence with the
    command that fixes it; None when it can. ``root`` is the project's folder, to tell "not built"
    from "built but not on this Python's path", and where its specs no longer have the target or
    the module (renamed or removed: no build makes them importable), to say what they have instead.
    ``test_file`` is the calling test's file: one inside ``root`` asking for a package other than
    the project's asks for a name the project's package no longer has."""
    reason = _import_reason(package, target, module, root)
    if reason is not None and root is not None:
        inside = test_file is not None and Path(test_file).resolve().is_relative_to(root.resolve())
        return _spec_reason(root, package, target, module, inside) or reason
    return reason


def _spec_reason(root: Path, package: str, target: str | None, module: str | None, inside: bool) -> str | None:
    """Where the project's specs lack the target or the module a test asks for, or (for a test
    ``inside`` the project) name another package: one sentence saying what they have instead;
    None where they have it, or cannot be read. Only the project's names are read (not its
    modules' specs)."""
    from kernelgen.errors import KernelgenError
    from kernelgen.loader import PROJECT_FILE, load_project, load_targets, spec_files

    specs = root / "specs"
    try:
        now = load_project(specs / PROJECT_FILE, root).package
        if now != package:
            if not inside:  # a test of another project's package, say
                return None
            return (f"the project's package is now {now}, not {package} (specs/project.yaml in {root}); "
                    f"change {package} to {now} in the test")
        if target is not None and (specs / "targets.yaml").is_file():
            targets = [t.name for t in load_targets(specs / "targets.yaml", root)]
            if target not in targets:
                return (f"the project has no target '{target}' (its targets: {', '.join(targets) or 'none'}; "
                        f"specs/targets.yaml in {root}); change the test's target")
        if module is not None and specs.is_dir():
            # a module's spec is specs/<module>.yaml (in any subfolder): the loader requires it
            modules = sorted(p.stem for p in spec_files(specs, root))
            if module not in modules:
                return (f"the project has no module '{module}' (its modules: {', '.join(modules) or 'none'}; "
                        f"specs/ in {root}); change the test's module")
    except (KernelgenError, OSError, ValueError):
        return None
    return None


def _import_reason(package: str, target: str | None, module: str | None, root: Path | None) -> str | None:
    """:func:`not_built_reason` from what this Python imports and what is built, without the specs."""
    name = ".".join(x for x in (package, target, module) if x)
    cmd = "kernelgen build" + (f" --target {target}" if target else "") + (f" (in {root})" if root else "")
    not_built = f"{package} is not built" + (f" for target {target}" if target else "")
    built = _built_dirs(root, package, target)
    # what is built, and where: the target's folder, or the package's folder of built targets
    what, built_at = (target, built[0]) if target and built else (package, built[0].parent if built else None)
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        if built:
            return (f"{what} is built in {built_at}, but the package {package} is not on this Python's path "
                    f"({sys.executable}); run: {cmd}, which makes it importable in the active environment")
        return f"{not_built}; run: {cmd}"
    prefix = _install_dir(pkg, root)
    if prefix is not None:  # the project's build, installed with --install-dir: a new build goes there too
        cmd = ("kernelgen build" + (f" --target {target}" if target else "") + f" --install-dir {prefix}"
               + (f" (in {root})" if root else ""))
    if target is None:
        lacks = not _available_targets(pkg)
    else:
        try:
            importlib.import_module(f"{package}.{target}")
            lacks = False
        except ImportError:
            lacks = True
    if lacks:
        where = ", ".join(getattr(pkg, "__path__", []))
        if built:
            return (f"{what} is built in {built_at}, but the {package} this Python imports ({where}) is another "
                    f"copy without it; run: {cmd}, or uninstall the other copy")
        return f"{not_built} (looked in {where}); run: {cmd}"
    try:
        importlib.import_module(name)
        return None
    except ImportError as exc:
        return f"{name} cannot be imported: {exc}; run: {cmd}"


def _install_dir(pkg: ModuleType, root: Path | None) -> Path | None:
    """The folder that ``kernelgen build --install-dir`` installed ``pkg`` into, where ``pkg`` (the
    package this Python imports) is the build of the project in ``root`` (kernelgen's install, whose
    generated ``_project.py`` names ``root``) outside the project's ``bindings/``; else None."""
    from kernelgen.project import is_package_folder

    file = getattr(pkg, "__file__", None)
    if root is None or not file or not is_package_folder(Path(file).parent):
        return None
    try:
        built_in = importlib.import_module(f"{pkg.__name__}._project").ROOT
    except ImportError:
        return None
    if not isinstance(built_in, str) or Path(built_in).resolve() != root.resolve():
        return None
    prefix = Path(file).resolve().parent.parent
    return None if prefix == (root / "bindings").resolve() else prefix


def _available_targets(pkg: ModuleType) -> list[str]:
    """The package's built targets; none where it is not a package kernelgen built (a folder of
    the same name that Python imports as a namespace package, say)."""
    available = getattr(pkg, "available_targets", None)
    return list(available()) if callable(available) else []


def _skip(reason: str) -> NoReturn:
    """Skips the calling test file, or fails it where ``KERNELGEN_REQUIRE_BUILT`` is on. This
    helper, and each helper that calls it for its caller, hides its frame from pytest, so the skip
    (or failure) is reported at the test file's line: one per file, also under pytest-xdist."""
    __tracebackhide__ = True
    import pytest

    from kernelgen.toolkit import env_flag

    if env_flag("KERNELGEN_REQUIRE_BUILT"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)
    raise AssertionError("unreachable: pytest.skip raises")


def built_module(target: str, module: str, package: str = "kernelgen_ops", test_file: str | None = None,
                 plan_digest: str | None = None) -> ModuleType:
    """``<package>.<target>.<module>``, or a skip of the calling test file (a failure where
    ``KERNELGEN_REQUIRE_BUILT`` is on) that says why it cannot be imported and what to run, in
    which folder. ``test_file`` is the calling test's ``__file__``, from which the project's folder
    is found (:func:`project_root`). ``plan_digest``: the digest of the specs the calling tests
    were generated from (:func:`kernelgen.emit.tests.plan_digest`); a module whose
    ``PLAN_DIGEST`` differs was built from other specs, and is skipped (or failed) the same way
    (:func:`stale_reason`)."""
    __tracebackhide__ = True
    name = f"{package}.{target}.{module}"
    try:
        found = importlib.import_module(name)
    except ImportError:
        found = None
    if found is not None:
        stale = stale_reason(found, plan_digest, project_root(package, test_file), target)
        if stale is None:
            return found
        _skip(stale)
    root = project_root(package, test_file)
    _skip(not_built_reason(package, target, module, root, test_file) or f"{name} cannot be imported")


def stale_reason(module: ModuleType, plan_digest: str | None, root: Path | None = None,
                 target: str | None = None) -> str | None:
    """Why a built ``module`` does not match the tests generated with ``plan_digest``: one
    sentence ("... is built from other specs than these tests ...; run: kernelgen build"), or
    None where it matches, where no digest is given, or where the module records none."""
    built = getattr(module, "PLAN_DIGEST", None)
    if plan_digest is None or not isinstance(built, str) or built == plan_digest:
        return None
    cmd = "kernelgen build" + (f" --target {target}" if target else "") + (f" (in {root})" if root else "")
    return (f"{module.__name__} is built from other specs than these tests were generated from (plan digest "
            f"{built}; the tests': {plan_digest}); run: {cmd}")


def built_target(package: str, test_file: str | None = None) -> str:
    """The first (by name) of ``package``'s built targets, or a skip of the calling test file, as
    :func:`built_module`'s, where it has none: for tests that need some build (plans need no GPU)."""
    __tracebackhide__ = True
    try:
        targets = _available_targets(importlib.import_module(package))
    except ImportError:
        targets = []
    if targets:
        return targets[0]
    root = project_root(package, test_file)
    _skip(not_built_reason(package, root=root, test_file=test_file) or f"{package} has no built target")


def fake_pointer(index: int) -> int:
    """A non-null, aligned address for launches that must not reach the GPU."""
    return 0x10000 * (index + 1)


def launch_args(other: Mapping[str, object], case: Mapping[str, object],
                derived: Mapping[str, tuple[str, tuple[str, ...]]] = {}) -> dict[str, object]:
    """A launcher call's keyword arguments from the tests' other arguments and an argument set:
    each value of a host integer the launcher reads from a struct argument's field (``derived``:
    name -> (struct argument, field path)) is set in that field instead (the struct copied)."""
    full = {**other, **case}
    for name, (struct, path) in derived.items():
        if name not in full:
            continue
        value = full.pop(name)
        top = dict(full[struct])  # type: ignore[call-overload]
        node = top
        for part in path[:-1]:
            node[part] = dict(node[part])
            node = node[part]
        node[path[-1]] = value
        full[struct] = top
    return full


class FakeCudaArray:
    """An object with a ``__cuda_array_interface__`` over a fake address, for argument checks
    that must not reach the GPU (element count, element type)."""

    def __init__(self, typestr: str, shape: tuple[int, ...], index: int = 0) -> None:
        self._cai = {"shape": tuple(shape), "typestr": typestr, "data": (fake_pointer(index), False),
                     "strides": None, "version": 3}

    @property
    def __cuda_array_interface__(self) -> dict:
        return dict(self._cai)


def expected_sizes(sizes: Iterable[tuple[str, Callable[[object, Mapping[str, int]], int]]], args: Mapping[str, int],
                   u64: Iterable[str] = ()) -> dict[str, int] | None:
    """What a plan's ``sizes`` holds for ``args``, as the plan's C++ computes it: each sized array
    argument's element count from ``sizes`` ((argument, evaluator) pairs: the spec's size
    expressions as the generated tests write them, over a :class:`kernelgen.pyexpr.Status` and
    the arguments), the negative ones left out; None when any of them fails (overflow, division by
    zero, a shift out of range), or a ``u64`` argument (one that expressions use) is above
    2**63 - 1."""
    from kernelgen import pyexpr

    st = pyexpr.Status()
    env = dict(args)
    for name in u64:
        env[name] = pyexpr.from_u64(st, env[name])
    counts = {name: int(evaluate(st, env)) for name, evaluate in sizes}
    if st.code:
        return None
    return {name: n for name, n in counts.items() if n >= 0}


@contextlib.contextmanager
def kill_switches_unset(package: str, target: str, modules: Iterable[str]) -> Iterator[list[str]]:
    """For the duration: the kill switches of ``<package>.<target>.<module>`` for each of ``modules``
    (their ``KILL_SWITCH``; modules that cannot be imported are left out) unset in this process's
    environment, and re-read by every loaded library (``<package>.refresh()``); afterwards the
    environment as it was, re-read again, so that the launchers' state agrees with it. Yields the
    switches' names. The generated contract tests run inside it: they expect launchers that no
    kill switch turns off, whatever the environment sets."""
    names: set[str] = set()
    for module in modules:
        with contextlib.suppress(ImportError):
            switch = getattr(importlib.import_module(f"{package}.{target}.{module}"), "KILL_SWITCH", None)
            if switch:
                names.add(switch)
    refresh = importlib.import_module(package).refresh
    saved = {name: os.environ.get(name) for name in names}
    try:
        for name in names:
            os.environ.pop(name, None)
        refresh()
        yield sorted(names)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        refresh()


def ccache_stats(env: dict[str, str]) -> dict[str, int]:
    """ccache's numeric counters (``--print-stats``), with env added to this process's environment."""
    out = subprocess.run(["ccache", "--print-stats"], env=dict(os.environ, **env), capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return {k: int(v) for k, v in (ln.split("\t") for ln in out.splitlines() if "\t" in ln) if v.isdigit()}


@contextlib.contextmanager
def private_sccache(sccache: str, workdir: Path) -> Iterator[dict[str, str]]:
    """A sccache server of its own for the duration: a free local port (concurrent runs never share
    a server), its cache under workdir, an empty config and no inherited ``SCCACHE_*`` setting (no
    remote storage or distributed compilation). Yields the complete environment for the builds."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = workdir / "sccache.conf"
    conf.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCCACHE_")}
    env.update(SCCACHE_DIR=str(workdir / "sccache"), SCCACHE_SERVER_PORT=str(port), SCCACHE_CONF=str(conf),
               SCCACHE_IDLE_TIMEOUT="120", PATH=os.pathsep.join([str(Path(sccache).parent), os.environ["PATH"]]))
    subprocess.run([sccache, "--start-server"], env=env, capture_output=True, text=True, check=True, timeout=60)
    try:
        yield env
    finally:
        subprocess.run([sccache, "--stop-server"], env=env, capture_output=True, timeout=60)


def sccache_stats(sccache: str, env: dict[str, str]) -> dict:
    """The server's counters (``--show-stats --stats-format json``)."""
    out = subprocess.run([sccache, "--show-stats", "--stats-format", "json"], env=env, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return json.loads(out)["stats"]


def sccache_counts(before: dict, after: dict) -> dict[str, object]:
    """What sccache counted between two :func:`sccache_stats` snapshots (``before`` may be ``{}``):
    hits and misses per compile step, and the count of calls it could not cache."""

    def per_step(key: str) -> dict[str, int]:
        a, b = after[key]["adv_counts"], before.get(key, {}).get("adv_counts", {})
        return {k: a.get(k, 0) - b.get(k, 0) for k in sorted(a.keys() | b.keys()) if a.get(k, 0) != b.get(k, 0)}

    return {"hits": per_step("cache_hits"), "misses": per_step("cache_misses"),
            "not_cacheable": after["non_cacheable_compilations"] - before.get("non_cacheable_compilations", 0)}
