"""The names of generated symbols, in one place: every emitter asks here.

A project owns its names, from one setting: its Python package (``specs/project.yaml``,
``package: NAME``). From it come the C++ namespace of the generated API, the prefix of the C ABI
functions, the target libraries' names and the Rust crates' names (each can be set on its own
there). A project without ``specs/project.yaml`` has kernelgen's own names: package
``kernelgen_ops``, namespace ``kernelgen``, C prefix ``kg``, libraries ``kernelgen_<target>_*``.

C ABI functions are ``<c_prefix>_<module>__<launcher>`` with a ``__<part>`` suffix for the plan,
sizes and info entry points; the C++ API lives in ``<namespace>::<module>``, where a launcher's
plan function is ``plan_<launcher>``. The renderer makes a project's naming current while it
renders (:func:`using`); emitters and templates read it through :func:`current`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Naming:
    """A project's names. ``package`` is the Python package; the others derive from it unless set."""

    package: str = "kernelgen_ops"
    namespace: str = "kernelgen"
    c_prefix: str = "kg"
    library: str = "kernelgen"  # target libraries are <library>_<target>_<digest>, Rust crates <library>_<target>

    @staticmethod
    def for_package(package: str, namespace: str | None = None, c_prefix: str | None = None,
                    library: str | None = None) -> Naming:
        if package == DEFAULT.package:
            base = DEFAULT
            return Naming(package, namespace or base.namespace, c_prefix or base.c_prefix, library or base.library)
        return Naming(package, namespace or package, c_prefix or package, library or package)

    def crate(self, target: str) -> str:
        return f"{self.library}_{target}".lower()


DEFAULT = Naming()
_current: list[Naming] = [DEFAULT]


def current() -> Naming:
    """The naming of the project being rendered (kernelgen's own outside :func:`using`)."""
    return _current[-1]


@contextlib.contextmanager
def using(naming: Naming) -> Iterator[Naming]:
    _current.append(naming)
    try:
        yield naming
    finally:
        _current.pop()


def c_function(module: str, launcher: str, part: str = "") -> str:
    """A C ABI entry point: the launcher itself, or its ``plan``, ``sizes`` or ``info``."""
    assert part in ("", "plan", "sizes", "info"), part
    return f"{current().c_prefix}_{module}__{launcher}" + (f"__{part}" if part else "")


def cpp_namespace(module: str) -> str:
    return f"{current().namespace}::{module}"


def cpp_launcher(module: str, launcher: str) -> str:
    return f"{cpp_namespace(module)}::{launcher}"


def cpp_plan(module: str, launcher: str, qualified: bool = True) -> str:
    name = f"plan_{launcher}"
    return f"{cpp_namespace(module)}::{name}" if qualified else name


def c_struct(module: str, struct: str) -> str:
    """The C ABI's layout-identical C struct of a module's struct type."""
    return f"{current().c_prefix}_{module}__{struct}__t"
