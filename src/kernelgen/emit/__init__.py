"""Emitters: lowered modules -> the text of every generated file, in memory.

One emitter per output language, each the only place that spells its language:

- :mod:`~kernelgen.emit.cpp`: C++ launchers and API (``src/<m>.cu``, ``include/<namespace>/<m>.h``);
- :mod:`~kernelgen.emit.c`: the C ABI (``include/<namespace>/<m>_c.h``, ``plan_codes.h``);
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
from pathlib import Path

from kernelgen import forked, names
from kernelgen.emit import c, cmake, cpp, pyi, python, rust, tests
from kernelgen.emit.base import project_templates, stamp
from kernelgen.errors import GenerationError, SpecError
from kernelgen.gcpause import collection_paused
from kernelgen.lower import lower_module
from kernelgen.model import Catalog, Module, Target

# Per module, in this order.
MODULE_EMITTERS = (cpp, c, python, pyi, tests)


def library_name(target: str, modules: list[str]) -> str:
    """The target library's name: distinct per set of modules, so builds of two projects for
    one target (with different SONAMEs) can be loaded into one process."""
    digest = hashlib.sha256("\n".join(sorted(modules)).encode()).hexdigest()[:8]
    return f"{names.current().library}_{target}_{digest}"


class Renderer:
    """Renders every generated file of a catalog: ``{relative path: text}``, with the project's
    names (``catalog.naming``) and its ``templates/`` folder, when given, over kernelgen's templates."""

    def __init__(self, catalog: Catalog, templates: Path | None = None) -> None:
        self.catalog = catalog
        self.templates = templates

    def render(self, targets: list[Target] | None = None) -> dict[str, str]:
        files: dict[str, str] = {}
        with names.using(self.catalog.naming), project_templates(self.templates):
            for t in targets or list(self.catalog.targets):
                files.update(self.render_target(t))
        _check_test_basenames(files)
        return files

    def render_target(self, t: Target) -> dict[str, str]:
        lowered = [lower_module(self.catalog, m, t) for m in self.catalog.modules]
        names = [m.name for m in lowered]
        lib = library_name(t.name, names)
        out: dict[str, str] = {}
        owner: dict[str, str] = {f"include/{h}": "the runtime's header" for h in RUNTIME_HEADERS}
        # On a large catalog the Rust crate (about a third of the work) renders in a child
        # process on another core meanwhile.
        size = sum(len(k.all_args) for m in self.catalog.modules for k in m.kernels)
        def crate() -> dict[str, str]:
            return rust.render_crate(self.catalog, t, lowered, lib, stamp)

        crate_of = forked.start(crate) if forked.possible(size) else crate
        for lm in lowered:
            for emitter in MODULE_EMITTERS:
                _add(out, owner, emitter.render_module(lm), lm.name, self.catalog)
        _add(out, owner, cmake.render_target(t, names, lib, self.catalog), None, self.catalog)
        _add(out, owner, python.render_target(t, names), None, self.catalog)
        _add(out, owner, c.render_target(t), None, self.catalog)
        files = crate_of()
        by_module = {p: m for m in names for p in rust.module_paths(m)}
        for path, text in files.items():
            _add(out, owner, {path: text}, by_module.get(path), self.catalog)
        return {f"generated/{t.name}/{path}": text for path, text in out.items()}


# The runtime's headers, which generated files sit beside in include/kernelgen/.
RUNTIME_HEADERS = tuple(sorted(
    f"kernelgen/{p.name}" for p in (Path(__file__).resolve().parents[1] / "runtime" / "include" / "kernelgen").iterdir()
))

# The files a target generates besides its modules' (paths in generated/<target>/).
TARGET_PATHS = (
    "CMakeLists.txt", "package_target.cmake", "python/__init__.py", "python/_runtime.cpp",
    "include/kernelgen/types.h", "include/kernelgen/plan_codes.h", "include/kernelgen/target_table.h",
    "rust/Cargo.toml", "rust/build.rs", "rust/src/lib.rs",
)


def module_paths(module: str, target: str) -> tuple[str, ...]:
    """The files module ``module`` generates for target ``target`` (paths in generated/<target>/),
    as the emitters name them (tests/unit/test_generated_paths.py keeps the two in step)."""
    return (f"src/{module}.cu", f"include/{names.module_header(module)}",
            f"include/{names.module_header(module, '_c')}", f"python/{module}.cpp", f"python/{module}.pyi",
            names.contract_test(module, target), *rust.module_paths(module))


def check_paths(catalog: Catalog) -> None:
    """The generated files' paths, from the names alone, checked when the specs are loaded (so that
    `kernelgen list` refuses what `generate` would): a module's file that another module, the
    target's own files or a runtime header also produce (a module ``types``, ``runtime`` or
    ``lib``; modules ``probe`` and ``probe_c``) is a spec error at the module's name, as is a
    contract test file whose name another module's on another target has (see
    :func:`_check_test_basenames`), and a source at the path of a generated or runtime header
    (``myops/scale.h`` in package ``myops``: the include search would find the header first).
    Rendering checks the same again."""
    with names.using(catalog.naming):
        _check_paths(catalog)


def _check_paths(catalog: Catalog) -> None:
    tests: dict[str, tuple[str, Module]] = {}
    for t in catalog.targets:
        owner: dict[str, str] = {f"include/{h}": "the runtime's header" for h in RUNTIME_HEADERS}
        owner.update(dict.fromkeys(TARGET_PATHS, "the target's own files"))
        for m in catalog.modules:
            for path in module_paths(m.name, t.name):
                prev = owner.setdefault(path, f"module '{m.name}'")
                if prev != f"module '{m.name}'":
                    raise SpecError(m.loc, "module", f"module '{m.name}' generates {path}, which {prev} also "
                                    "generates", "rename the module")
        for m in catalog.modules:  # the launchers include the sources as <path>: the include folder first
            for s in m.sources:
                if f"include/{s}" in owner:
                    raise SpecError(m.loc, "sources", f"source {s} has the path of generated/{t.name}/include/{s} "
                                    f"({owner[f'include/{s}']}), which comes first on the launchers' include path: "
                                    "they would include it instead of the source", "move or rename the source")
        for m in catalog.modules:
            test = names.contract_test(m.name, t.name)
            prev_test = tests.setdefault(test, (t.name, m))
            if prev_test[0] != t.name:
                raise SpecError(m.loc, "module", f"module '{m.name}' on target {t.name} and module "
                                f"'{prev_test[1].name}' on target {prev_test[0]} both have the contract test "
                                f"file {test.rsplit('/', 1)[1]}, which pytest cannot collect in one run",
                                "rename a module or a target")


def _add(out: dict[str, str], owner: dict[str, str], files: dict[str, str], module: str | None,
         catalog: Catalog) -> None:
    """Adds one producer's files. Two producers of one path (module ``probe``'s C header and
    module ``probe_c``'s C++ header, a module named like a per-target file or a runtime
    header) are a spec error at the module's name."""
    who = f"module '{module}'" if module else "the target's own files"
    for path, text in files.items():
        prev = owner.get(path)
        if prev is not None and prev != who:
            blamed = module or prev.removeprefix("module '").removesuffix("'")
            m = catalog.module(blamed)
            if m is None:
                raise GenerationError(f"{who} and {prev} both produce {path}")
            other = prev if blamed == module else who
            raise SpecError(m.loc, "module", f"module '{m.name}' generates {path}, which {other} also generates",
                            "rename the module")
        owner[path] = who
        out[path] = text


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


@collection_paused
def render_catalog(catalog: Catalog, targets: list[Target] | None = None, templates: Path | None = None
                   ) -> dict[str, str]:
    return Renderer(catalog, templates).render(targets)


__all__ = ["TARGET_PATHS", "Renderer", "check_paths", "library_name", "module_paths", "render_catalog", "stamp"]
