"""The drafted project (tests/drafted.py: sources as their authors' projects have them, specs by
`kernelgen draft`, unedited) built for this GPU's target and launched through its launchers.

- fwd.cu (FlashAttention-style: traits class templates size the launches): each block writes
  blockDim.x * 1000 + gridDim.x after writing all of the dynamic shared memory its traits give
  it, so the outputs show the grid, block and shared memory the drafted plans launch with are
  the source's own launches' (65536 bytes: past the 48 KB a block gets without opting in).
- act.cu (a PyTorch extension's source, its torch wrapper kept out of the build): SiLU for each
  dtype the wrapper's dispatch macro gives the kernel, against torch's in f32, within one
  rounding of the output type (f32, f64: 4 ulps of f32).
"""

from __future__ import annotations

import importlib
import sys

import pytest

from tests import drafted
from tests.gpu import checks, guards_build

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - depends on the machine
    pytest.skip("no CUDA GPU", allow_module_level=True)

TARGET = guards_build.current_target_or_skip()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """The project's package for this target (imported as a package: its modules use its runtime)."""
    target_dir = guards_build.build(tmp_path_factory, TARGET, populate=drafted.populate, name="drafted")
    sys.path.insert(0, str(target_dir.parent.parent))
    return importlib.import_module(f"{drafted.PACKAGE}.{TARGET}")


def test_traits_sized_launches_run_as_the_source_launches_them(built) -> None:
    fwd = importlib.import_module(f"{built.__name__}.fwd")
    out = torch.zeros(2 * 8 * 8, device="cuda")
    launcher = getattr(fwd, drafted.FWD_128)
    assert launcher({"o": out.data_ptr(), "b": 2, "h": 8, "seqlen_q": 1000})
    torch.cuda.synchronize()
    plan = launcher.plan(params_b=2, params_h=8, params_seqlen_q=1000)
    assert (plan["grid"], plan["block"], plan["shared_mem"]) == ((8, 2, 8), (128, 1, 1), 65536), plan
    expected = torch.full_like(out, 128 * 1000 + 8)
    checks.same_bits(out, expected, "fwd head dim 128: blockDim.x * 1000 + gridDim.x, every block")
    out = torch.zeros(16, device="cuda")
    launcher = getattr(fwd, drafted.FWD_64)
    assert launcher({"o": out.data_ptr(), "b": 16, "h": 1, "seqlen_q": 64})
    torch.cuda.synchronize()
    assert launcher.plan(params_b=16)["block"] == (256, 1, 1)
    checks.same_bits(out, torch.full_like(out, 256 * 1000 + 16), "fwd through a local alias: every block")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_dispatched_dtypes_match_torch(built, dtype: str) -> None:
    act = importlib.import_module(f"{built.__name__}.act")
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.randn(4, 1000, device="cuda", generator=gen) * 4).to(dt)
    out = torch.empty_like(x)
    assert act.act(out, x, 1000, num_tokens=4)
    torch.cuda.synchronize()
    ref = torch.nn.functional.silu(x.float())
    # one rounding of the f32 result to the output type (f32 and f64: 4 ulps of f32, the kernel
    # computing in f32 with its own expf)
    eps = {"float32": 2.0**-21, "float64": 2.0**-21, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    checks.bound((out.float() - ref).abs(), ref.abs() * eps + 1e-6, f"silu {dtype}: within one rounding")
