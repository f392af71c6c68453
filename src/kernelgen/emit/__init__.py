"""Emitters: lowered modules -> the text of every generated file, in memory.

One emitter per output language, each the only place that spells its language:

- :mod:`~kernelgen.emit.cpp`: C++ launchers and API (``src/<m>.cu``, ``include/kernelgen/<m>.h``);
- :mod:`~kernelgen.emit.c`: the C ABI (``include/kernelgen/<m>_c.h``, ``plan_codes.h``);
- :mod:`~kernelgen.emit.python`: the pybind11 modules, the target package and the binding
  support's type tables (``python/<m>.cpp``, ``python/__init__.py``, ``python/_runtime.cpp``,
  ``include/kernelgen/types.h``);
- :mod:`~kernelgen.emit.pyi`: the ``.pyi`` stubs;
- :mod:`~kernelgen.emit.tests`: the generated contract tests;
- :mod:`~kernelgen.emit.cmake`: the target's CMake list;
- :mod:`~kernelgen.emit.rust`: the Rust crate (``rust/``).

Generated symbol names come from :mod:`kernelgen.names`; the one Jinja environment is in
:mod:`~kernelgen.emit.base`.
"""

from __future__ import annotations

import hashlib

from kernelgen.emit import c, cmake, cpp, pyi, python, rust, tests
from kernelgen.emit.base import stamp
from kernelgen.errors import GenerationError
from kernelgen.lower import lower_module
from kernelgen.model import Catalog, Target

# Per module, in this order.
MODULE_EMITTERS = (cpp, c, python, pyi, tests)


def library_name(target: str, modules: list[str]) -> str:
    """The target library's name: distinct per set of modules, so builds of two projects for
    one target (with different SONAMEs) can be loaded into one process."""
    digest = hashlib.sha256("\n".join(sorted(modules)).encode()).hexdigest()[:8]
    return f"kernelgen_{target}_{digest}"


class Renderer:
    """Renders every generated file of a catalog: ``{relative path: text}``."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def render(self, targets: list[Target] | None = None) -> dict[str, str]:
        files: dict[str, str] = {}
        for t in targets or list(self.catalog.targets):
            files.update(self.render_target(t))
        _check_test_basenames(files)
        return files

    def render_target(self, t: Target) -> dict[str, str]:
        lowered = [lower_module(self.catalog, m, t) for m in self.catalog.modules]
        names = [m.name for m in lowered]
        lib = library_name(t.name, names)
        out: dict[str, str] = {}
        for lm in lowered:
            for emitter in MODULE_EMITTERS:
                out.update(emitter.render_module(lm))
        out.update(cmake.render_target(t, names, lib))
        out.update(python.render_target(t, names))
        out.update(c.render_target(t))
        out.update(rust.render_crate(self.catalog, t, lowered, lib, stamp))
        return {f"generated/{t.name}/{path}": text for path, text in out.items()}


def _check_test_basenames(files: dict[str, str]) -> None:
    """pytest's default import mode imports a test file by its basename, so two generated test
    files with one basename (``<module>_<target>`` spelling one name twice, as module ``a_b`` on
    target ``c`` and module ``a`` on target ``b_c``) would break ``pytest generated/``."""
    seen: dict[str, str] = {}
    for path in sorted(files):
        if not path.endswith(".py") or "/tests/" not in path:
            continue
        base = path.rsplit("/", 1)[1]
        if base in seen:
            raise GenerationError(
                f"{seen[base]} and {path} have the same file name, which pytest cannot collect in one run; "
                "rename a module or a target"
            )
        seen[base] = path


def render_catalog(catalog: Catalog, targets: list[Target] | None = None) -> dict[str, str]:
    return Renderer(catalog).render(targets)


__all__ = ["Renderer", "library_name", "render_catalog", "stamp"]
