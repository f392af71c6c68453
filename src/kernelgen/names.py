"""The names of generated symbols, in one place: every emitter asks here.

C ABI functions are ``kg_<module>__<launcher>`` with a ``__<part>`` suffix for the plan,
sizes and info entry points; the C++ API lives in ``kernelgen::<module>``, where a launcher's
plan function is ``plan_<launcher>``.
"""

from __future__ import annotations

C_PREFIX = "kg"
CPP_NAMESPACE = "kernelgen"


def c_function(module: str, launcher: str, part: str = "") -> str:
    """A C ABI entry point: the launcher itself, or its ``plan``, ``sizes`` or ``info``."""
    assert part in ("", "plan", "sizes", "info"), part
    return f"{C_PREFIX}_{module}__{launcher}" + (f"__{part}" if part else "")


def cpp_namespace(module: str) -> str:
    return f"{CPP_NAMESPACE}::{module}"


def cpp_launcher(module: str, launcher: str) -> str:
    return f"{cpp_namespace(module)}::{launcher}"


def cpp_plan(module: str, launcher: str, qualified: bool = True) -> str:
    name = f"plan_{launcher}"
    return f"{cpp_namespace(module)}::{name}" if qualified else name


def c_struct(module: str, struct: str) -> str:
    """The C ABI's layout-identical C struct of a module's struct type."""
    return f"{C_PREFIX}_{module}__{struct}__t"
