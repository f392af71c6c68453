"""Fixtures of the compile tests."""

from __future__ import annotations

import pytest

from tests.compile.sass import Tool, cuobjdump_tool


@pytest.fixture(scope="module")
def cuobjdump() -> Tool:
    """cuobjdump (with nvdisasm) for reading SASS; the test skips without them."""
    tool = cuobjdump_tool()
    if tool is None:
        pytest.skip("needs cuobjdump and nvdisasm (the `test` extra installs them on x86-64 Linux)")
    return tool
