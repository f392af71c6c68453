"""GPU tests of launch modes and device-derived geometry, on the fixture project
tests/fixtures/launch_modes built for the current GPU's target:

- a cooperative grid-wide reduction (grid.sync()) sized `device.sm_count * kernel.blocks_per_sm`
  sums right, also replayed from a CUDA graph; a cooperative grid over the co-residency limit is
  refused with a LaunchError naming the kernel, and a chain falls through to its next member;
- a programmatic dependent that never waits (wrong on purpose) reads the NaN-poisoned output
  of a long producer before it is written, so dependants do start early; with KERNELGEN_NO_PDL
  set (and refresh) the same launch waits for the producer;
- an RMS norm instantiated on dtype and vector width, launched with programmatic dependent
  launch right after the kernel producing its input, matches torch, also under CUDA graph
  capture and replay;
- a launch-time cluster arrives as declared, and a grid that is not whole clusters is refused;
- a block over the kernel's __launch_bounds__(256, 2) is refused;
- a chain whose first member needs more shared memory than the device has runs the second;
- the device values plans read equal torch.cuda.get_device_properties; limit_sms caps the SM
  count plans see, and sizes a cooperative grid that runs in a 48-SM green context.
"""

from __future__ import annotations

import shutil

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import LaunchError  # noqa: E402

TARGET = guards_build.current_target_or_skip()
FIXTURE = guards_build.REPO / "tests" / "fixtures" / "launch_modes"
EPS = 1e-6


def populate(root):
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("generated", "build", "bindings"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return guards_build.build(tmp_path_factory, TARGET, populate=populate, name="launch_modes")


@pytest.fixture(scope="module")
def m(folder):
    return guards_build.load(folder, "launch_modes")


@pytest.fixture(scope="module")
def rt(folder):
    return guards_build.load(folder, "_runtime")


@pytest.fixture(scope="module")
def props():
    return torch.cuda.get_device_properties(torch.cuda.current_device())


def stream():
    return torch.cuda.current_stream()


def int_valued(n):
    """Floats whose sums are exact in f32 (integers, total below 2**24)."""
    return (torch.arange(n, device="cuda", dtype=torch.int64) % 7).to(torch.float32)


# ---------------------------------------------------------------- device values


def test_device_values_equal_torch_properties(rt, props):
    v = rt.device_values()
    assert v["device"] == torch.cuda.current_device()
    assert v["sm_count"] == props.multi_processor_count
    assert v["max_threads_per_sm"] == props.max_threads_per_multi_processor
    assert v["max_shared_mem_optin"] == props.shared_memory_per_block_optin
    assert v["max_shared_mem_per_sm"] == props.shared_memory_per_multiprocessor
    assert v["max_threads_per_block"] == 1024


def test_target_table_can_be_forced_and_released(rt, m):
    table = rt.target_table()
    rt.use_target_table(True)
    try:
        assert rt.device_values() == table and table["device"] == -1
        assert m.coop_sum.plan(n=1000)["grid"][0] == table["sm_count"] * (table["max_threads_per_sm"] // 256)
    finally:
        rt.use_target_table(False)
    assert rt.device_values()["device"] == torch.cuda.current_device()


def test_limit_sms_caps_what_plans_see_on_the_device(rt, m, props):
    full = rt.device_values()["sm_count"]
    per_sm = m.coop_sum.plan(n=1000)["grid"][0] // full
    rt.limit_sms(48)
    try:
        assert rt.device_values()["sm_count"] == 48 and rt.device_values()["device"] == torch.cuda.current_device()
        assert m.coop_sum.plan(n=1000)["grid"][0] == 48 * per_sm
    finally:
        rt.limit_sms(0)
    assert rt.device_values()["sm_count"] == props.multi_processor_count


def test_a_cooperative_grid_fits_a_48_sm_green_context_under_limit_sms(rt, m):
    """In a green context of 48 SMs CUDA still reports every SM, so a cooperative grid sized from
    the device would not be co-resident there; with limit_sms(48) the plan sizes it for 48 SMs and
    the grid-wide reduction runs and sums right on the green context's stream."""
    green = pytest.importorskip("torch.cuda.green_contexts")
    device = torch.cuda.current_device()
    try:
        ctx = green.GreenContext.create(num_sms=48, device_id=device)
    except TypeError:  # the first form of the API took positional arguments
        ctx = green.GreenContext.create(48, device)
    n = 1 << 20
    x = int_valued(n)
    torch.cuda.synchronize()
    rt.limit_sms(48)
    try:
        blocks = m.coop_sum.plan(n=n)["grid"][0]
        partials = torch.full((blocks,), float("nan"), device="cuda")
        out = torch.full((1,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        if hasattr(ctx, "Stream"):  # a stream of the green context
            gstream = ctx.Stream()
            outcome = m.coop_sum(x, partials, out, n, stream=gstream.cuda_stream)
            gstream.synchronize()
        else:  # the green context made current, its default stream
            ctx.set_context()
            try:
                outcome = m.coop_sum(x, partials, out, n, stream=0)
                torch.cuda.synchronize()
            finally:
                ctx.pop_context()
        assert outcome.launched, outcome.reason
    finally:
        rt.limit_sms(0)
    assert out.item() == x.double().sum().item()
    assert torch.isfinite(partials).all()


# ---------------------------------------------------------------- cooperative launch


def test_cooperative_reduction_sums_right_with_a_grid_from_the_device(m, props):
    n = 1 << 22
    x = int_valued(n)
    plan = m.coop_sum.plan(n=n)
    blocks = plan["grid"][0]
    assert plan["launched"] and blocks >= props.multi_processor_count
    assert blocks % props.multi_processor_count == 0  # sm_count * blocks_per_sm
    partials = torch.full((blocks,), float("nan"), device="cuda")
    out = torch.full((1,), float("nan"), device="cuda")
    outcome = m.coop_sum(x, partials, out, n, stream=stream())
    assert outcome.launched, outcome.reason
    torch.cuda.synchronize()
    assert out.item() == x.double().sum().item()
    assert torch.isfinite(partials).all()  # every block wrote its partial before the grid sync


def test_cooperative_grid_over_the_co_residency_limit_is_refused(m):
    n = 1 << 20
    x = int_valued(n)
    limit = m.coop_sum.plan(n=n)["grid"][0]
    partials = torch.zeros(limit + 1, device="cuda")
    out = torch.full((1,), float("nan"), device="cuda")
    assert m.coop_sum_blocks(x, partials, out, n, blocks=limit, stream=stream()).launched
    torch.cuda.synchronize()
    assert out.item() == x.double().sum().item()
    plan = m.coop_sum_blocks.plan(n=n, blocks=limit + 1)
    assert not plan["launched"] and "co-resident" in plan["reason"]
    with pytest.raises(LaunchError, match="coop_sum_blocks") as info:
        m.coop_sum_blocks(x, partials, out, n, blocks=limit + 1, stream=stream())
    assert "co-resident" in str(info.value) and info.value.kernel == "coop_sum_blocks"


def test_chain_falls_through_from_an_over_resident_cooperative_grid(m):
    n = 1 << 20
    x = int_valued(n)
    limit = m.coop_sum.plan(n=n)["grid"][0]
    partials = torch.zeros(limit + 1, device="cuda")
    out = torch.zeros(1, device="cuda")
    outcome = m.sum_coop_or_atomic(x, partials, out, n, blocks=limit + 1, stream=stream())
    assert outcome.launched and outcome.kernel == "atomic_sum"
    torch.cuda.synchronize()
    assert out.item() == x.double().sum().item()
    out.zero_()
    outcome = m.sum_coop_or_atomic(x, partials, out, n, blocks=limit, stream=stream())
    assert outcome.launched and outcome.kernel == "coop_sum_blocks"
    torch.cuda.synchronize()
    assert out.item() == x.double().sum().item()


def test_cooperative_launch_in_a_cuda_graph(m):
    n = 1 << 20
    x = int_valued(n)
    blocks = m.coop_sum.plan(n=n)["grid"][0]
    partials = torch.zeros(blocks, device="cuda")
    out = torch.zeros(1, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture
        assert m.coop_sum(x, partials, out, n, stream=side).launched
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        assert m.coop_sum(x, partials, out, n, stream=torch.cuda.current_stream()).launched
    for shift in (1, 3):
        x.copy_(int_valued(n).roll(shift) * 2)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert out.item() == x.double().sum().item()


# ---------------------------------------------------------------- programmatic dependent launch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
TOL = {"f32": {"atol": 1e-5, "rtol": 1e-5}, "bf16": {"atol": 2e-2, "rtol": 2e-2}}


def rms_reference(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


@pytest.mark.parametrize("cols", [4096, 1001])
@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_pdl_rms_norm_matches_torch_right_after_its_producer(m, t, cols):
    rows = 64
    dt = DTYPES[t]
    torch.manual_seed(cols)
    w = torch.randn(cols, device="cuda", dtype=dt)
    x = torch.empty(rows, cols, device="cuda", dtype=dt)
    y = torch.empty_like(x)
    vec = 4 if cols % 4 == 0 else 1
    for scale in (1.0, -3.0, 0.5):
        src = torch.randn(rows, cols, device="cuda", dtype=dt)
        torch.mul(src, scale, out=x)  # the producer: the PDL kernel must see its writes
        outcome = m.rms_norm_pdl(x, w, y, rows, cols, EPS, stream=stream())
        assert outcome.launched and outcome.kernel == f"rms_norm_pdl_{t}_v{vec}"
        torch.cuda.synchronize()
        torch.testing.assert_close(y, rms_reference(x, w), **TOL[t])


def copies_before_the_producer_writes(m, rt, no_pdl: bool) -> int:
    """Of 3 runs, how many in which copy_no_wait (a programmatic dependent that never waits), launched
    right behind rms_norm_pdl over 4 rows of 2^23 values (which lets its dependants start once it
    has read its rows, then writes them), copied the last outputs before they were written: NaN,
    what they were poisoned with. With KERNELGEN_NO_PDL set the copy launches as a plain kernel."""
    import os

    rows, cols, n = 4, 1 << 23, 1 << 16
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(rows, cols, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.ones(cols, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    y = torch.zeros(n, device="cuda", dtype=torch.bfloat16)
    tail = out.view(-1)[-n:]
    if no_pdl:
        os.environ["KERNELGEN_NO_PDL"] = "1"
    rt.refresh()
    try:
        early = 0
        for i in range(4):
            out.fill_(float("nan"))
            assert m.rms_norm_pdl(x, w, out, rows, cols, EPS, stream=stream()).launched
            assert m.copy_no_wait(tail, y, n, stream=stream()).launched
            torch.cuda.synchronize()
            if i > 0:  # the first run also loads both kernels' code
                early += int(torch.isnan(y).all().item())
                if not torch.isnan(y).all():
                    assert torch.equal(y, tail), "copy_no_wait read a partly written output"
        return early
    finally:
        os.environ.pop("KERNELGEN_NO_PDL", None)
        rt.refresh()


def test_a_dependant_starts_while_the_kernel_before_it_runs(m, rt):
    """Programmatic dependent launch is live: a dependant that does not wait reads its producer's
    output before it is written (which is why every such kernel must wait before it does)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90 or later")
    early = copies_before_the_producer_writes(m, rt, no_pdl=False)
    assert early == 3, f"copy_no_wait read the finished output in {3 - early} of 3 runs: the launch did not overlap"


def test_kernelgen_no_pdl_launches_dependants_as_plain_kernels(m, rt):
    """KERNELGEN_NO_PDL (read again after refresh): the same launches no longer overlap."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90 or later")
    assert copies_before_the_producer_writes(m, rt, no_pdl=True) == 0


@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_pdl_rms_norm_under_cuda_graph_capture_and_replay(m, t):
    rows, cols = 32, 2048
    dt = DTYPES[t]
    w = torch.randn(cols, device="cuda", dtype=dt)
    src = torch.randn(rows, cols, device="cuda", dtype=dt)
    x = torch.empty_like(src)
    y = torch.empty_like(src)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.mul(src, 2.0, out=x)
        assert m.rms_norm_pdl(x, w, y, rows, cols, EPS, stream=side).launched
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.mul(src, 2.0, out=x)
        assert m.rms_norm_pdl(x, w, y, rows, cols, EPS, stream=torch.cuda.current_stream()).launched
        torch.mul(y, 1.0, out=y)  # a consumer after the PDL kernel in the graph
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        src.copy_(torch.randn(rows, cols, device="cuda", dtype=dt))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, rms_reference((src.float() * 2.0).to(dt), w), **TOL[t])


# ---------------------------------------------------------------- launch-time cluster


@pytest.mark.parametrize("cluster_x", [1, 2, 4, 8])
def test_launch_time_cluster_arrives_as_declared(m, cluster_x):
    blocks = 64
    out = torch.full((blocks,), -1, device="cuda", dtype=torch.int32)
    outcome = m.cluster_rank(out, blocks, cluster_x, stream=stream())
    assert outcome.launched, outcome.reason
    torch.cuda.synchronize()
    want = [b % cluster_x + 1000 * cluster_x for b in range(blocks)]
    assert out.tolist() == want


def test_grid_that_is_not_whole_clusters_is_refused(m):
    out = torch.full((128,), -1, device="cuda", dtype=torch.int32)
    with pytest.raises(LaunchError, match="cluster_rank") as info:
        m.cluster_rank(out, 66, 4, stream=stream())
    assert "not a whole number of clusters" in str(info.value)
    with pytest.raises(LaunchError, match="cluster has more blocks"):
        m.cluster_rank(out, 64, 16, stream=stream())
    torch.cuda.synchronize()
    assert (out == -1).all()  # nothing launched


# ---------------------------------------------------------------- __launch_bounds__


def test_block_over_launch_bounds_is_refused(m):
    n = 10000
    x = torch.randn(n, device="cuda")
    out = torch.zeros_like(x)
    for threads in (256, 128, 32):
        out.zero_()
        assert m.bounded_scale(x, out, n, 2.0, threads=threads, stream=stream()).launched
        torch.cuda.synchronize()
        assert torch.equal(out, x * 2)
    out.zero_()
    with pytest.raises(LaunchError, match="bounded_scale") as info:
        m.bounded_scale(x, out, n, 2.0, threads=512, stream=stream())
    assert "__launch_bounds__" in str(info.value)
    torch.cuda.synchronize()
    assert not out.any()


# ---------------------------------------------------------------- chains on device limits


def test_chain_falls_through_when_shared_memory_does_not_fit(m, props):
    rows = 4
    cols = props.shared_memory_per_block_optin // 4 + 1  # one float more than a block can hold
    x = int_valued(rows * cols).reshape(rows, cols)
    out = torch.full((rows,), float("nan"), device="cuda")
    with pytest.raises(LaunchError, match="smem_row_sum"):
        m.smem_row_sum(x, out, rows, cols, stream=stream())
    outcome = m.row_sum(x, out, rows, cols, stream=stream())
    assert outcome.launched and outcome.kernel == "plain_row_sum"
    torch.cuda.synchronize()
    assert out.tolist() == x.double().sum(1).tolist()
    small = x[:, :1000].contiguous()
    outcome = m.row_sum(small, out, rows, 1000, stream=stream())
    assert outcome.launched and outcome.kernel == "smem_row_sum"
    torch.cuda.synchronize()
    assert out.tolist() == small.double().sum(1).tolist()
