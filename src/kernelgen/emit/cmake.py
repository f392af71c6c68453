"""The target's CMake list: the only place that spells CMake."""

from __future__ import annotations

from kernelgen.emit.base import render, stamp
from kernelgen.model import Target


def render_target(t: Target, modules: list[str], lib_name: str) -> dict[str, str]:
    ctx = {
        "t": t,
        "modules": modules,
        "lib_name": lib_name,
        "stamp": stamp("specs/targets.yaml and the module specs"),
        "cc_number": t.compute_capability[0] * 10 + t.compute_capability[1],
    }
    return {"CMakeLists.txt": render("CMakeLists.txt.j2", ctx)}
