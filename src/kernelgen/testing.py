"""Helpers for the generated contract tests (and the project's own tests and benchmarks).

The generated tests import a target's built module with :func:`built_module`. When the
module has not been built, they are skipped with the command that builds it, unless
``KERNELGEN_REQUIRE_BUILT`` is set (CI sets it), in which case that is a failure.
:func:`ccache_stats`, :func:`private_sccache` and :func:`sccache_counts` measure builds through a
compiler cache.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

__all__ = ["built_module", "ccache_stats", "fake_pointer", "not_built_reason", "private_sccache", "sccache_counts",
           "sccache_stats"]


def not_built_reason(package: str, target: str, module: str, root: Path | None = None) -> str | None:
    """Why ``<package>.<target>.<module>`` cannot be imported, as one sentence with the command that
    fixes it; None when it can. ``root`` is the project's folder, to tell "not built" from "built
    but not on this Python's path"."""
    name = f"{package}.{target}.{module}"
    try:
        importlib.import_module(name)
        return None
    except ImportError as exc:
        error = exc
    cmd = f"kernelgen build --target {target}" + (f" (in {root})" if root else "")
    built_dir = root / "bindings" / package / target if root else None
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        pkg = None
    if pkg is None:
        if built_dir is not None and (built_dir / "__init__.py").is_file():
            return (f"{target} is built in {built_dir}, but the package {package} is not on this Python's path "
                    f"({sys.executable}); run: {cmd}, which makes it importable in the active environment")
        return f"{package} is not built for target {target}; run: {cmd}"
    try:
        importlib.import_module(f"{package}.{target}")
    except ImportError:
        where = ", ".join(getattr(pkg, "__path__", []))
        if built_dir is not None and (built_dir / "__init__.py").is_file():
            return (f"{target} is built in {built_dir}, but the {package} this Python imports ({where}) is another "
                    f"copy without it; run: {cmd}, or uninstall the other copy")
        return f"{package} is not built for target {target} (looked in {where}); run: {cmd}"
    return f"{name} cannot be imported: {error}; run: {cmd}"


def built_module(target: str, module: str, package: str = "kernelgen_ops", test_file: str | None = None
                 ) -> ModuleType:
    """``<package>.<target>.<module>``, or a skip of the calling test file (a failure where
    ``KERNELGEN_REQUIRE_BUILT`` is set) that says why it cannot be imported and what to run.
    ``test_file`` is a generated test's ``__file__`` (``<root>/generated/<target>/tests/``)."""
    name = f"{package}.{target}.{module}"
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    root = Path(test_file).resolve().parents[3] if test_file else None
    msg = not_built_reason(package, target, module, root) or f"{name} cannot be imported"
    import pytest

    if os.environ.get("KERNELGEN_REQUIRE_BUILT"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg, allow_module_level=True)
    raise AssertionError("unreachable: pytest.skip raises")


def fake_pointer(index: int) -> int:
    """A non-null, aligned address for launches that must not reach the GPU."""
    return 0x10000 * (index + 1)


class FakeCudaArray:
    """An object with a ``__cuda_array_interface__`` over a fake address, for argument checks
    that must not reach the GPU (element count, element type)."""

    def __init__(self, typestr: str, shape: tuple[int, ...], index: int = 0) -> None:
        self._cai = {"shape": tuple(shape), "typestr": typestr, "data": (fake_pointer(index), False),
                     "strides": None, "version": 3}

    @property
    def __cuda_array_interface__(self) -> dict:
        return dict(self._cai)


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
