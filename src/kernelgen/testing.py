"""Helpers for the generated contract tests (and the project's own tests).

The generated tests import a target's built module with :func:`built_module`. When the
module has not been built, they are skipped with the command that builds it, unless
``KERNELGEN_REQUIRE_BUILT`` is set (CI sets it), in which case that is a failure.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

from kernelgen.lower import geometry_code_for

__all__ = ["built_module", "expr_error_code", "fake_pointer", "geometry_code_for"]


def built_module(target: str, module: str) -> ModuleType:
    name = f"kernelgen_ops.{target}.{module}"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        msg = f"{name} is not built ({exc}); run: kernelgen build --target {target}"
        if os.environ.get("KERNELGEN_REQUIRE_BUILT"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg, allow_module_level=True)
        raise  # unreachable: skip raises


def expr_error_code(status: object) -> int:
    """The outcome code of a failed expression evaluation (a kernelgen.pyexpr.Status)."""
    from kernelgen.lower import E_EXPR, code

    return code(E_EXPR, status.code, True)  # type: ignore[attr-defined]


def fake_pointer(index: int) -> int:
    """A non-null, aligned address for launches that must not reach the GPU."""
    return 0x10000 * (index + 1)
