"""tinyops' own tests of its axpy chain: which kernel the chain picks (no GPU needed), and the
result on a GPU where one is present."""

import importlib
import importlib.util

import pytest

import tinyops


def _axpy():
    built = tinyops.available_targets()
    if not built:
        pytest.skip("tinyops has no built target; run: kernelgen build")
    return importlib.import_module(f"tinyops.{built[0]}.axpy")


def test_chain_picks_the_vector_kernel_when_n_is_a_multiple_of_4():
    axpy = _axpy()
    plan = axpy.axpy.plan(n=4096)
    assert plan["launched"] and plan["kernel"] == "axpy_vec4_f32"
    assert plan["grid"] == (4, 1, 1) and plan["block"] == (256, 1, 1)


def test_chain_falls_back_to_the_scalar_kernel():
    axpy = _axpy()
    plan = axpy.axpy.plan(n=1001)
    assert plan["launched"] and plan["kernel"] == "axpy_f32"
    assert plan["grid"] == (4, 1, 1)
    assert "empty work" in axpy.axpy.plan(n=0)["reason"]


def test_every_target_of_the_registry_is_known_to_the_package():
    assert tinyops.registry() == {"ampere": (8, 0), "hopper": (9, 0)}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the launch test uses torch")
@pytest.mark.parametrize("n", [4096, 1001])
def test_axpy_on_gpu(n):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tinyops import axpy

    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    want = 3.0 * x + y
    outcome = axpy.axpy(x, y, 3.0, n)
    assert outcome and outcome.kernel == ("axpy_vec4_f32" if n % 4 == 0 else "axpy_f32")
    torch.testing.assert_close(y, want)
