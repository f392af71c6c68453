"""KERNELGEN_REQUIRE_BUILT, read as every on/off variable of kernelgen's is: unset, empty, 0, false,
no and off (any case) leave a test file that needs a build skipped; anything else fails it."""

from __future__ import annotations

import pytest

from kernelgen import testing


@pytest.mark.parametrize(("value", "fails"), [
    (None, False), ("", False), ("0", False), ("false", False), ("OFF", False), ("no", False),
    ("1", True), ("true", True), ("yes", True),
])
def test_require_built_is_an_on_off_variable(monkeypatch: pytest.MonkeyPatch, value: str | None, fails: bool) -> None:
    if value is None:
        monkeypatch.delenv("KERNELGEN_REQUIRE_BUILT", raising=False)
    else:
        monkeypatch.setenv("KERNELGEN_REQUIRE_BUILT", value)
    with pytest.raises(pytest.fail.Exception if fails else pytest.skip.Exception, match="no_such_pkg is not built"):
        testing.built_module("hopper", "ops", package="no_such_pkg")
