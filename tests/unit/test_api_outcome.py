"""The objects a launcher hands back (the shell's _api.py): outcomes, read-only and shared, copy
as themselves and pickle by value; the errors keep their kernel, code and argument through a
copy or a pickle."""

from __future__ import annotations

import copy
import pickle
import sys

import pytest

from kernelgen import project

sys.path.insert(0, str(project.SHELL_DIR))
try:
    import _api  # the shell's _api.py, importable on its own
finally:
    sys.path.remove(str(project.SHELL_DIR))

OUTCOMES = [_api.Outcome("m", "k", 0, 5, "k: not launched: empty work"), _api.Outcome("m", "k", 1, 0, "")]


@pytest.mark.parametrize("o", OUTCOMES, ids=["not launched", "launched"])
def test_an_outcome_is_its_own_copy(o: _api.Outcome) -> None:
    assert copy.copy(o) is o
    assert copy.deepcopy(o) is o
    assert copy.deepcopy({"first": o, "again": [o]})["again"][0] is o


@pytest.mark.parametrize("o", OUTCOMES, ids=["not launched", "launched"])
def test_an_outcome_pickles_by_value(o: _api.Outcome) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(o, protocol))
        assert type(back) is _api.Outcome
        assert (back.module, back.kernel, back.launched, back.code, back.reason) == (
            o.module, o.kernel, o.launched, o.code, o.reason)
        assert back == o and hash(back) == hash(o) and bool(back) == bool(o)
        with pytest.raises(AttributeError, match="Outcome is read-only"):
            back.code = 1  # type: ignore[misc]


def test_outcomes_with_other_fields_differ() -> None:
    a, b = OUTCOMES
    assert a != b and a != _api.Outcome("m", "k", 0, 6, "k: not launched: empty work")
    assert a != ("m", "k", False, 5, "k: not launched: empty work")


@pytest.mark.parametrize("kind", [_api.ArgumentError, _api.LaunchError, _api.CudaFatalError, _api.NotLaunchedError])
def test_errors_keep_their_attributes_through_copies_and_pickles(kind: type[_api.KernelError]) -> None:
    e = kind("k: argument 'x': bad")
    e.kernel, e.code, e.argument = "k", -7, "x"
    for back in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert type(back) is kind and str(back) == str(e)
        assert (back.kernel, back.code, back.argument) == ("k", -7, "x")
