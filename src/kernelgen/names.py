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
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kernelgen import kernel_source


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

    @property
    def header_dir(self) -> str:
        """The folder (under include/) of the modules' C++ and C API headers: the namespace's path
        (``myops/scale.h`` for ``myops::scale``), so that two projects' modules of one name do not
        share a header; kernelgen's own headers (runtime.h, abi.h, ...) stay in ``kernelgen/``."""
        return self.namespace.replace("::", "/")


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


def module_header(module: str, suffix: str = "") -> str:
    """A module's API header (``suffix`` "": C++, "_c": C), under include/."""
    return f"{current().header_dir}/{module}{suffix}.h"


def contract_test(module: str, target: str) -> str:
    """A module's contract tests, in generated/<target>/: ``tests/test_<module>_<target>_contract.py``,
    with ``<package>_`` before the module in a project with a package of its own. pytest's default
    import mode needs every collected test file's basename to be unique: the target keeps one
    project's targets apart, the package two projects' modules of one name (two projects with the
    default package cannot be imported in one process anyway)."""
    pkg = current().package
    prefix = "" if pkg == DEFAULT.package else f"{pkg}_"
    return f"tests/test_{prefix}{module}_{target}_contract.py"


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


def source_namespaces(text: str) -> set[str]:
    """The named namespaces C++ source ``text`` declares, by their full names (``a::b`` for
    ``namespace a { namespace b {`` and for ``namespace a::b {``; an inline namespace's name is
    part of it). Comments and literals are skipped; preprocessor conditionals are not evaluated,
    and a brace they leave unbalanced may misplace what follows."""
    return {ns for _, ns in kernel_source.namespaces_at(_code(text)) if ns}


def _code(text: str) -> str:
    """``text`` without comments and with its literals blanked: what declares and calls."""
    return kernel_source.blank_literals(kernel_source.strip_comments(text))


def namespace_clashes(text: str, namespace: str, launchers: Iterable[str]) -> list[str] | None:
    """Where C++ source ``text`` declares ``namespace`` (a module's generated ``<namespace>::<module>``):
    the names of ``launchers`` (and their ``plan_`` and ``sizes_`` functions) it calls or declares as functions
    (``name(``), which the generated ones of that namespace would redeclare; None where it does not
    declare the namespace."""
    if namespace not in source_namespaces(text):
        return None
    code = _code(text)
    out = []
    for name in launchers:
        for n in (name, f"plan_{name}", f"sizes_{name}"):
            if re.search(rf"\b{re.escape(n)}\s*\(", code) and n not in out:
                out.append(n)
    return out
