"""The target's CMake list: the only place that spells CMake."""

from __future__ import annotations

from kernelgen.emit.base import render, stamp
from kernelgen.model import Build, Catalog, Target


def include_dir(d: str) -> str:
    """A `build.include_dirs` folder as CMake reads it: relative ones from the project root."""
    return d if d.startswith("/") else "${KERNELGEN_ROOT}/" + d


def module_builds(catalog: Catalog, t: Target) -> list[tuple[str, Build]]:
    """Each module's build settings on target ``t`` (project, target, module merged), for the
    modules that have any."""
    out = []
    for m in catalog.modules:
        b = Build.merged(catalog.build, t.build, m.build)
        if b:
            out.append((m.name, b))
    return out


def render_target(t: Target, modules: list[str], lib_name: str, catalog: Catalog | None = None) -> dict[str, str]:
    builds = [
        {
            "module": name,
            "include_dirs": [include_dir(d) for d, _ in b.include_dirs],
            "defines": [n if v is None else f"{n}={v}" for n, v, _ in b.defines],
            "nvcc_flags": list(b.nvcc_flags),
        }
        for name, b in (module_builds(catalog, t) if catalog is not None else [])
    ]
    headers: dict[str, list[str]] = {}
    for m in catalog.modules if catalog is not None else ():
        for st in m.structs:
            if st.header:
                folder, _, _ = st.header.rpartition("/")
                if st.header not in headers.setdefault(folder, []):
                    headers[folder].append(st.header)
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
