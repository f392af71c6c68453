"""The target's CMake list and the package's CMake config: the only place that spells CMake."""

from __future__ import annotations

from kernelgen.emit.base import render, stamp
from kernelgen.model import Catalog, Target


def include_dir(d: str) -> str:
    """A `build.include_dirs` folder as CMake reads it: relative ones from the project root."""
    return d if d.startswith("/") else "${KERNELGEN_ROOT}/" + d


def render_target(t: Target, modules: list[str], lib_name: str, catalog: Catalog) -> dict[str, str]:
    builds = [
        {
            "module": m.name,
            "include_dirs": [include_dir(d) for d, _ in b.include_dirs],
            "defines": b.define_texts,
            "nvcc_flags": list(b.nvcc_flags),
        }
        for m in catalog.modules
        if (b := catalog.module_build(m, t))
    ]
    # Each struct's header and the project's headers it includes, at their paths under include/
    # (kernelgen.loader.header_files), so that C++ callers compile the API header as the build did.
    installs: dict[str, str] = {}
    for m in catalog.modules:
        for st in m.structs:
            for src, dest in st.files or ([(st.header, st.header)] if st.header else []):
                installs.setdefault(dest, src)
    headers: dict[str, list[str]] = {}
    for dest, src in sorted(installs.items()):
        headers.setdefault(dest.rpartition("/")[0], []).append(src)
    ctx = {
        "t": t,
        "modules": modules,
        "builds": builds,
        "struct_headers": sorted(headers.items()),
        "lib_name": lib_name,
        "stamp": stamp("specs/targets.yaml and the module specs"),
        "cc_number": t.compute_capability[0] * 10 + t.compute_capability[1],
    }
    return {"CMakeLists.txt": render("CMakeLists.txt.j2", ctx),
            "package_target.cmake": render("package_target.cmake.j2", ctx)}


def package_config(catalog: Catalog) -> str:
    """The package's ``<package>-config.cmake`` (installed with the package's shell, see
    kernelgen.project): find_package(<package> CONFIG COMPONENTS <target>...) for C++ programs, one
    imported library per built target (each target's ``package_target.cmake``)."""
    return render("package_config.cmake.j2", {
        "stamp": stamp("specs/targets.yaml and specs/project.yaml"),
        "pkg": catalog.naming.package,
        "namespace": catalog.naming.namespace,
        "targets": " ".join(t.name for t in catalog.targets),
        "project": catalog.naming,
    })

