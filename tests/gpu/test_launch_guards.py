"""GPU tests of the launch guards (check_geometry and KernelSlot in
src/kernelgen/runtime/include/kernelgen/runtime.h, raise_for in py_launcher.cpp), through
the kernels of the guards fixture project (tests/fixtures/guards):

- touch: grid, block and dynamic shared memory all come from its arguments; the last thread
  of each block writes (linear block index + tag [+ 1 when it has shared memory]) to
  out[linear] for linear < n_out, and the grid's last block also to out[n_out];
- bounded: declared __launch_bounds__(64), so CUDA itself refuses bigger blocks;
- static_smem: 4 KiB of static shared memory beside its dynamic shared memory;
- fault: stores to any address (a sticky illegal-address error, run in a subprocess).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernelgen.loader import load_targets
from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import kernelgen_ops  # noqa: E402
from kernelgen_ops import LaunchError, NotLaunchedError  # noqa: E402

TARGET = guards_build.current_target_or_skip()

TAG = 1000
SENTINEL = 0xFFFFFFFF
KIB48 = 48 * 1024
# The device's opt-in dynamic shared memory limit (fallback: the target's, specs/targets.yaml).
OPTIN = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", None) or next(
    t.max_shared_mem_per_block_optin
    for t in load_targets(guards_build.FIXTURE / "specs" / "targets.yaml", guards_build.FIXTURE)
    if t.name == TARGET
)


@pytest.fixture(scope="module")
def g(tmp_path_factory):
    return guards_build.build_and_load(tmp_path_factory, TARGET)


def out_buffer(n: int):
    """n u32 elements, every one SENTINEL."""
    return torch.full((n,), -1, device="cuda", dtype=torch.int32).view(torch.uint32)


def as_u32(out):
    """The u32 buffer's values as int64 (torch has few uint32 operations)."""
    return out.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def geometry(gx=1, gy=1, gz=1, bx=1, by=1, bz=1, smem=0) -> dict:
    return {"gx": gx, "gy": gy, "gz": gz, "bx": bx, "by": by, "bz": bz, "smem": smem}


def touch(g, out, n_out: int, geo: dict):
    return g.touch(out, n_out, TAG, **geo)


def plan(g, n_out: int, geo: dict) -> dict:
    return g.touch.plan(n_out=n_out, tag=TAG, **geo)


def expected_value(linear: int, smem: int) -> int:
    return (linear + TAG + (1 if smem > 0 else 0)) & 0xFFFFFFFF


# ---------------------------------------------------------------- geometry that launches

# (id, geometry, n_out): n_out blocks are checked one by one, and the grid's last block.
_LAUNCHES = [
    ("grid_y_65535", geometry(gy=65535), 65535),
    ("grid_z_65535", geometry(gz=65535), 65535),
    ("grid_x2_y65535_z2", geometry(gx=2, gy=65535, gz=2), 2 * 65535 * 2),
    ("grid_x_2**31-1", geometry(gx=2**31 - 1), 4),
    ("grid_x_65536_y_2", geometry(gx=65536, gy=2), 2 * 65536),
    ("block_x_1024", geometry(gx=3, bx=1024), 3),
    ("block_y_1024", geometry(gx=3, by=1024), 3),
    ("block_32x32x1", geometry(gx=3, bx=32, by=32), 3),
    ("block_z_64", geometry(gx=3, bz=64), 3),
    ("block_2x8x64", geometry(gx=3, bx=2, by=8, bz=64), 3),
    ("smem_1_byte", geometry(gx=5, bx=32, smem=1), 5),
    ("smem_48KiB", geometry(gx=5, bx=32, smem=KIB48), 5),
    ("smem_48KiB+1", geometry(gx=5, bx=32, smem=KIB48 + 1), 5),
    ("smem_optin_limit", geometry(gx=5, bx=32, smem=OPTIN), 5),
    ("smem_optin_limit_block_1024", geometry(gx=2, gy=2, bx=1024, smem=OPTIN), 4),
    ("smem_48KiB_again", geometry(gx=5, bx=32, smem=KIB48), 5),
]


@pytest.mark.parametrize(("geo", "n_out"), [c[1:] for c in _LAUNCHES], ids=[c[0] for c in _LAUNCHES])
def test_launches(g, geo, n_out):
    p = plan(g, n_out, geo)
    assert p["launched"] and p["code"] == 0, p["reason"]
    assert p["grid"] == (geo["gx"], geo["gy"], geo["gz"])
    assert p["block"] == (geo["bx"], geo["by"], geo["bz"])
    assert p["shared_mem"] == geo["smem"]
    out = out_buffer(n_out + 1)
    outcome = touch(g, out, n_out, geo)
    assert outcome.launched and outcome.kernel == "touch", outcome.reason
    torch.cuda.synchronize()
    got = as_u32(out)
    want = (torch.arange(n_out + 1, device="cuda", dtype=torch.int64) + TAG + (1 if geo["smem"] else 0)) & 0xFFFFFFFF
    total = geo["gx"] * geo["gy"] * geo["gz"]
    want[n_out] = expected_value(total - 1, geo["smem"])
    assert torch.equal(got, want), (got[:8].tolist(), got[-8:].tolist(), want[-8:].tolist())


# Valid on every axis but far too many blocks to run here: the plan says it would launch.
_PLAN_ONLY = [
    ("x_2**22_y_1024", geometry(gx=2**22, gy=1024)),
    ("x_y_z_65535", geometry(gx=65535, gy=65535, gz=65535)),
    ("x_2**31-1_y_z_65535", geometry(gx=2**31 - 1, gy=65535, gz=65535, bx=1024)),
]


@pytest.mark.parametrize("geo", [c[1] for c in _PLAN_ONLY], ids=[c[0] for c in _PLAN_ONLY])
def test_huge_valid_grids_plan_to_launch(g, geo):
    p = plan(g, 1, geo)
    assert p["code"] == 0 and p["launched"] and p["reason"] == "", p
    assert p["grid"] == (geo["gx"], geo["gy"], geo["gz"])


# ---------------------------------------------------------------- geometry that is refused

_REFUSED = [
    ("grid_y_65536", geometry(gy=65536), "touch: grid y exceeds the CUDA limit (65535)"),
    ("grid_z_65536", geometry(gz=65536), "touch: grid z exceeds the CUDA limit (65535)"),
    ("grid_x_2**31", geometry(gx=2**31), "touch: grid x exceeds the CUDA limit (2147483647)"),
    ("grid_x_2**32-1", geometry(gx=2**32 - 1), "touch: grid x exceeds the CUDA limit (2147483647)"),
    ("grid_65536x65536x1", geometry(gx=65536, gy=65536), "touch: grid y exceeds the CUDA limit (65535)"),
    ("grid_1x65536x65536", geometry(gy=65536, gz=65536), "touch: grid y exceeds the CUDA limit (65535)"),
    ("block_x_1025", geometry(bx=1025), "touch: block x is outside the target's limits"),
    ("block_y_1025", geometry(by=1025), "touch: block y is outside the target's limits"),
    ("block_z_65", geometry(bz=65), "touch: block z is outside the target's limits"),
    ("block_x_0", geometry(bx=0), "touch: block x is 0"),
    ("block_z_0", geometry(bz=0), "touch: block z is 0"),
    ("block_32x32x2", geometry(bx=32, by=32, bz=2), "touch: block x*y*z is outside the target's limits"),
    ("block_1024x2x1", geometry(bx=1024, by=2), "touch: block x*y*z is outside the target's limits"),
    ("smem_optin+1", geometry(smem=OPTIN + 1), "touch: dynamic shared memory exceeds the device's opt-in limit"),
    ("smem_2**32-1", geometry(smem=2**32 - 1), "touch: dynamic shared memory exceeds the device's opt-in limit"),
]


@pytest.mark.parametrize(("geo", "message"), [c[1:] for c in _REFUSED], ids=[c[0] for c in _REFUSED])
def test_refused(g, geo, message):
    out = out_buffer(2)
    with pytest.raises(LaunchError) as info:
        touch(g, out, 1, geo)
    exc = info.value
    assert type(exc) is LaunchError  # not CudaFatalError: nothing reached CUDA
    assert str(exc) == message
    assert exc.kernel == "touch" and exc.code < 0
    p = plan(g, 1, geo)
    if not (geo["smem"] == OPTIN + 1 and p["launched"]):  # plans know the target's limit, not the device's
        assert not p["launched"] and p["code"] == exc.code and p["reason"] == message
    torch.cuda.synchronize()
    assert as_u32(out).tolist() == [SENTINEL, SENTINEL]


# ---------------------------------------------------------------- static + dynamic shared memory

STATIC_SMEM = 4096


@pytest.mark.parametrize(
    "smem",
    [0, 1, KIB48 - STATIC_SMEM, KIB48 - STATIC_SMEM + 1, KIB48 + 1, OPTIN - STATIC_SMEM],
    ids=["none", "1", "48KiB-static", "48KiB-static+1", "48KiB+1", "optin-static"],
)
def test_static_and_dynamic_shared_memory_launch(g, smem):
    """Both per-block limits cover static shared memory too: a kernel with both needs the opt-in
    once static + dynamic exceeds 48 KiB, and launches with up to optin - static bytes of
    dynamic shared memory (the runtime raises its limit to that)."""
    out = out_buffer(1)
    assert g.static_smem(out, smem).launched
    torch.cuda.synchronize()
    assert as_u32(out).tolist() == [2 + (3 if smem else 0)]


def test_dynamic_shared_memory_beyond_what_static_leaves_is_refused(g):
    """Refused before CUDA, whether or not a launch has raised the kernel's limit yet (the first
    call takes that path when this test runs alone)."""
    too_much = OPTIN - STATIC_SMEM + 1
    for raise_first in (False, True):
        if raise_first:
            assert g.static_smem(out_buffer(1), KIB48 + 1).launched
        out = out_buffer(1)
        with pytest.raises(LaunchError) as info:
            g.static_smem(out, too_much)
        assert type(info.value) is LaunchError  # not a CUDA error
        assert str(info.value) == "static_smem: dynamic shared memory exceeds the device's opt-in limit"
        torch.cuda.synchronize()
        assert as_u32(out).tolist() == [SENTINEL]


# ---------------------------------------------------------------- zero-sized grids

_EMPTY = [
    ("x", geometry(gx=0), "x"),
    ("y", geometry(gy=0), "y"),
    ("z", geometry(gz=0), "z"),
    ("all", geometry(gx=0, gy=0, gz=0), "x"),
    ("x_with_big_block_and_smem", geometry(gx=0, bx=1024, smem=OPTIN), "x"),
    ("z_with_y_over_the_limit", geometry(gy=65536, gz=0), "z"),  # empty work wins over the limit check
]


@pytest.mark.parametrize(("geo", "axis"), [c[1:] for c in _EMPTY], ids=[c[0] for c in _EMPTY])
def test_zero_sized_grid_is_not_launched(g, geo, axis):
    torch.cuda.synchronize()
    out = out_buffer(2)
    outcome = touch(g, out, 1, geo)
    assert not outcome.launched and not bool(outcome) and outcome.code > 0
    assert outcome.kernel == "touch"
    assert outcome.reason == f"touch: not launched: grid {axis} is 0"
    p = plan(g, 1, geo)
    assert not p["launched"] and p["code"] == outcome.code and "is 0" in p["reason"]
    torch.cuda.synchronize()  # no CUDA error is pending
    assert as_u32(out).tolist() == [SENTINEL, SENTINEL]
    assert touch(g, out, 1, geometry()).launched  # and the next launch is fine
    torch.cuda.synchronize()
    assert as_u32(out).tolist() == [TAG, TAG]


# ---------------------------------------------------------------- strict mode


def test_strict_mode_raises_not_launched(g):
    out = out_buffer(2)
    kernelgen_ops.set_strict(True)
    try:
        assert kernelgen_ops.strict()
        with pytest.raises(NotLaunchedError) as info:
            touch(g, out, 1, geometry(gy=0))
        assert type(info.value) is NotLaunchedError
        assert str(info.value) == "touch: not launched: grid y is 0"
        assert info.value.kernel == "touch" and info.value.code > 0
        assert touch(g, out, 1, geometry()).launched  # launches are unaffected
        with pytest.raises(LaunchError, match="grid y exceeds the CUDA limit"):  # and so are errors
            touch(g, out, 1, geometry(gy=65536))
    finally:
        kernelgen_ops.set_strict(False)
    assert not kernelgen_ops.strict()
    assert not touch(g, out, 1, geometry(gy=0)).launched
    torch.cuda.synchronize()
    assert as_u32(out).tolist() == [TAG, TAG]


# ---------------------------------------------------------------- CUDA errors


@pytest.mark.parametrize("bx", [65, 1024])
def test_cuda_refusing_a_launch_raises_launch_error(g, bx):
    out = out_buffer(1)
    torch.cuda.synchronize()
    with pytest.raises(LaunchError) as info:
        g.bounded(out, bx)
    exc = info.value
    assert type(exc) is LaunchError, repr(exc)  # not sticky: the context lives on
    assert str(exc).startswith("bounded: CUDA error "), str(exc)
    assert exc.kernel == "bounded" and exc.code < 0
    assert g.bounded.plan(bx=bx)["launched"]  # only CUDA knows the kernel's launch bounds
    torch.cuda.synchronize()  # the error was not left pending
    assert as_u32(out).tolist() == [SENTINEL]
    assert g.bounded(out, 64).launched
    torch.cuda.synchronize()
    assert as_u32(out).tolist() == [64]


_STICKY_SCRIPT = textwrap.dedent(
    """
    import importlib.util, os, sys
    import torch
    import kernelgen_ops

    spec = importlib.util.spec_from_file_location("guards", sys.argv[1])
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)
    out = torch.zeros(4, device="cuda", dtype=torch.int32).view(torch.uint32)

    def report(label, fn):
        try:
            outcome = fn()
            print(label, "RETURNED", bool(outcome), flush=True)
        except kernelgen_ops.CudaFatalError as exc:
            print(label, "RAISED", type(exc).__name__, exc.kernel, exc.code, "|", exc, flush=True)
        except Exception as exc:
            print(label, "OTHER", type(exc).__name__, exc, flush=True)

    report("warm", lambda: g.touch(out, 1, 5, 1, 1, 1, 1, 1, 1, 0))
    torch.cuda.synchronize()
    report("fault", lambda: g.fault(8, 1))
    try:
        torch.cuda.synchronize()
        print("sync CLEAN", flush=True)
    except Exception as exc:
        print("sync RAISED", type(exc).__name__, flush=True)
    report("after", lambda: g.touch(out, 1, 5, 1, 1, 1, 1, 1, 1, 0))
    os._exit(0)
    """
)


def test_sticky_error_is_cuda_fatal_error(g):
    res = subprocess.run(
        [sys.executable, "-c", _STICKY_SCRIPT, g.__file__],
        capture_output=True, text=True, timeout=300,
    )
    lines = res.stdout.splitlines()
    assert "warm RETURNED True" in lines, res.stdout + res.stderr[-3000:]
    assert "sync CLEAN" not in lines, res.stdout
    after = [ln for ln in lines if ln.startswith("after ")]
    assert after and after[0].startswith("after RAISED CudaFatalError touch "), res.stdout + res.stderr[-3000:]
    assert "touch: CUDA error 700 (cudaErrorIllegalAddress)" in after[0], after[0]
    assert "sticky error: the CUDA context is unusable" in after[0], after[0]
    fault = [ln for ln in lines if ln.startswith("fault ")]
    # The fault shows at the next synchronising call; if the launch itself already saw it,
    # it must have been reported the same way.
    assert fault == ["fault RETURNED True"] or fault[0].startswith("fault RAISED CudaFatalError fault "), res.stdout
