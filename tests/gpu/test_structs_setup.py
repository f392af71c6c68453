"""GPU tests of the structs_setup fixture project (tests/fixtures/structs_setup), built for the
current GPU's target:

- `rope_yarn` takes two parameter structs by value (`rope_dims`, `rope_params` with an i64 after
  five 4-byte fields and an `f32[2]` array): the output depends on every field, so changing
  any one of them changes the output, which must match a float64 torch reference each time;
- `act`: `act_kernel<ops::SiluOp, {T}>` instantiated on bf16 and f32, `act_kernel<ops::GeluTanhOp,
  __nv_bfloat16>` and `map_kernel<&square_fn, true>` against torch;
- `reduce_sum.sum_last_block`: a last-block-done reduction whose counter (`zero: true`) the
  launcher zeroes, so consecutive launches and the replays of a captured CUDA graph are right;
- `constant_scale.scale_by_constant`: a `__constant__` factor set from a host argument
  (`to_symbol`), refused while the stream is being captured;
- `hdr_a` and `hdr_b`: two modules whose sources include one header that defines a host
  function and a kernel; both build into one library and both launch;
- `aligned`: structs whose alignment is more than their fields give (float2, an __align__(16)
  struct) arrive intact.
"""

from __future__ import annotations

import dataclasses
import math
import shutil

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if not hasattr(torch, "uint32"):
    pytest.skip("needs torch.uint32 (torch 2.3 or later) for the u32 counter", allow_module_level=True)

from kernelgen_ops import ArgumentError, LaunchError  # noqa: E402

TARGET = guards_build.current_target_or_skip()
FIXTURE = guards_build.REPO / "tests" / "fixtures" / "structs_setup"


def populate(root):
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("generated", "build", "bindings"))


@pytest.fixture(scope="module", name="folder")
def built(tmp_path_factory):
    return guards_build.build(tmp_path_factory, TARGET, populate=populate, name="structs_setup")


def load(folder, name):
    return guards_build.load(folder, name)


# ---------------------------------------------------------------- structs by value

CORR = {"v0": 4.0, "v1": 20.0}
PARAMS = {"n_dims": 64, "freq_base": 10000.0, "freq_scale": 0.25, "ext_factor": 0.5, "attn_factor": 1.25,
          "pos_offset": 7, "bias": [0.25, -0.5]}
# One change per field, each large enough to move the output well past the tolerance.
CHANGES = [
    ("corr", "v0", 9.0),
    ("corr", "v1", 12.0),
    ("params", "n_dims", 48),
    ("params", "freq_base", 500.0),
    ("params", "freq_scale", 0.5),
    ("params", "ext_factor", 0.9),
    ("params", "attn_factor", 1.5),
    ("params", "pos_offset", -3),
    ("params", "bias", [1.0, 2.0]),
]


def rope_reference(x, pos, corr, p):
    """The kernel's arithmetic in float64."""
    ncols = x.shape[1]
    xd = x.double()
    i0 = torch.arange(0, ncols, 2, device=x.device, dtype=torch.float64)
    rot = i0 < p["n_dims"]
    position = (pos.double() + p["pos_offset"])[:, None]
    theta_extrap = position * torch.pow(torch.tensor(p["freq_base"], dtype=torch.float64, device=x.device),
                                        -i0 / p["n_dims"])
    theta_interp = p["freq_scale"] * theta_extrap
    mscale = p["attn_factor"]
    theta = theta_interp
    if p["ext_factor"] != 0.0:
        y = (torch.div(i0, 2, rounding_mode="floor") - corr["v0"]) / max(0.001, corr["v1"] - corr["v0"])
        ramp = 1.0 - torch.clamp(y, 0.0, 1.0)
        mix = ramp * p["ext_factor"]
        theta = theta_interp * (1 - mix) + theta_extrap * mix
        mscale *= 1.0 + 0.1 * math.log(1.0 / p["freq_scale"])
    c, s = torch.cos(theta) * mscale, torch.sin(theta) * mscale
    a, b = xd[:, 0::2], xd[:, 1::2]
    out = torch.empty_like(xd)
    out[:, 0::2] = torch.where(rot, a * c - b * s + p["bias"][0], a)
    out[:, 1::2] = torch.where(rot, a * s + b * c + p["bias"][1], b)
    return out


def run_rope(m, x, pos, corr, params):
    out = torch.full_like(x, float("nan"))
    outcome = m.rope_yarn(x, out, pos, x.shape[0], x.shape[1], corr, params)
    assert outcome.launched, outcome.reason
    torch.cuda.synchronize()
    return out


@pytest.fixture(scope="module", name="rope_inputs")
def rope_inputs():
    g = torch.Generator(device="cuda").manual_seed(17)
    x = torch.randn(6, 128, device="cuda", dtype=torch.float32, generator=g)
    pos = torch.tensor([5, 9, 17, 30, 41, 63], device="cuda", dtype=torch.int32)
    return x, pos


def test_rope_struct_fields_arrive_intact(folder, rope_inputs):
    m = load(folder, "rope_yarn")
    x, pos = rope_inputs
    base = run_rope(m, x, pos, CORR, PARAMS)
    torch.testing.assert_close(base.double(), rope_reference(x, pos, CORR, PARAMS), rtol=1e-4, atol=2e-4)
    for which, field, value in CHANGES:
        corr = dict(CORR)
        params = dict(PARAMS)
        (corr if which == "corr" else params)[field] = value
        out = run_rope(m, x, pos, corr, params)
        assert (out - base).abs().max().item() > 1e-2, f"changing {which}.{field} did not change the output"
        torch.testing.assert_close(out.double(), rope_reference(x, pos, corr, params), rtol=1e-4, atol=2e-4,
                                   msg=lambda text, f=field: f"{which}.{f}: {text}")


def test_rope_takes_dataclasses_and_refuses_bad_fields(folder, rope_inputs):
    m = load(folder, "rope_yarn")
    x, pos = rope_inputs

    @dataclasses.dataclass
    class Corr:
        v0: float
        v1: float

    out = run_rope(m, x, pos, Corr(4.0, 20.0), PARAMS)
    torch.testing.assert_close(out.double(), rope_reference(x, pos, CORR, PARAMS), rtol=1e-4, atol=2e-4)
    with pytest.raises(ArgumentError, match="rope_yarn: argument 'params': field 'pos_offset'"):
        m.rope_yarn(x, torch.empty_like(x), pos, 6, 128, CORR, {**PARAMS, "pos_offset": 2**63})
    with pytest.raises(ArgumentError, match="argument 'corr': field 'v1' of struct rope_dims is missing"):
        m.rope_yarn(x, torch.empty_like(x), pos, 6, 128, {"v0": 1.0}, PARAMS)


# ---------------------------------------------------------------- template-id symbols


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_silu_templated_on_functor_and_dtype(folder, dtype):
    m = load(folder, "act")
    n = 5000
    x = (torch.linspace(-8, 8, n, device="cuda", dtype=torch.float32)).to(dtype)
    out = torch.full_like(x, float("nan"))
    outcome = m.silu(x, out, n)
    assert outcome.launched, outcome.reason
    assert outcome.kernel == ("silu_bf16" if dtype == torch.bfloat16 else "silu_f32")
    torch.cuda.synchronize()
    expected = torch.nn.functional.silu(x.float()).to(dtype)
    tol = 2 ** -7 if dtype == torch.bfloat16 else 1e-6
    torch.testing.assert_close(out.float(), expected.float(), rtol=tol, atol=1e-6 if dtype == torch.float32 else 1e-2)


def test_gelu_and_function_pointer_map(folder):
    m = load(folder, "act")
    n = 3000
    x = torch.linspace(-5, 5, n, device="cuda", dtype=torch.float32)
    xb = x.to(torch.bfloat16)
    gout = torch.full_like(xb, float("nan"))
    assert m.gelu_tanh_bf16(xb, gout, n).launched
    sout = torch.full_like(x, float("nan"))
    assert m.neg_square(x, sout, n).launched
    torch.cuda.synchronize()
    expected = torch.nn.functional.gelu(xb.float(), approximate="tanh").to(torch.bfloat16)
    torch.testing.assert_close(gout.float(), expected.float(), rtol=2 ** -7, atol=1e-2)
    assert torch.equal(sout, -(x * x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_stateless_functor_passed_by_value(folder, dtype):
    """A kernel taking its functor by value (first or last parameter) is called without it: the
    launchers pass a value-initialised one."""
    m = load(folder, "act")
    n = 4099
    x = torch.linspace(-6, 6, n, device="cuda", dtype=torch.float32).to(dtype)
    out = torch.full_like(x, float("nan"))
    outcome = m.apply_silu(x, out, n)
    assert outcome.launched, outcome.reason
    assert outcome.kernel == ("apply_silu_bf16" if dtype == torch.bfloat16 else "apply_silu_f32")
    xf = x.float() if dtype == torch.float32 else torch.linspace(-6, 6, n, device="cuda")
    gout = torch.full_like(xf, float("nan"))
    assert m.scaled_gelu(xf, gout, n, -2.5).launched
    torch.cuda.synchronize()
    expected = torch.nn.functional.silu(x.float()).to(dtype)
    tol = 2 ** -7 if dtype == torch.bfloat16 else 1e-6
    torch.testing.assert_close(out.float(), expected.float(), rtol=tol, atol=1e-2 if dtype == torch.bfloat16 else 1e-6)
    torch.testing.assert_close(gout, -2.5 * torch.nn.functional.gelu(xf, approximate="tanh"), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- zeroed counter


def sum_inputs(n, blocks, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, device="cuda", dtype=torch.float32, generator=g)
    partial = torch.zeros(blocks, device="cuda", dtype=torch.float32)
    done = torch.zeros(1, device="cuda", dtype=torch.int32)  # the u32 counter, read and set through int32
    out = torch.full((1,), float("nan"), device="cuda", dtype=torch.float32)
    return x, partial, done, out


def u32(t):
    return t.view(torch.uint32)


def check_sum(out, x):
    expected = x.double().sum().item()
    bound = 1e-5 * x.double().abs().sum().item()
    assert abs(out.item() - expected) <= bound, (out.item(), expected)


def test_last_block_counter_is_zeroed_before_each_launch(folder):
    m = load(folder, "reduce_sum")
    n, blocks = 100_000, 64
    x, partial, done, out = sum_inputs(n, blocks, 1)
    for launch in range(3):
        out.fill_(float("nan"))
        done.fill_(12345)  # whatever the counter holds, the launcher zeroes it first
        x.mul_(-1.0 if launch else 1.0)
        outcome = m.sum_last_block(x, partial, u32(done), out, n, blocks=blocks)
        assert outcome.launched, outcome.reason
        torch.cuda.synchronize()
        check_sum(out, x)
        assert int(done.item()) == blocks  # every block counted itself once


def test_last_block_counter_in_cuda_graph_replays(folder):
    m = load(folder, "reduce_sum")
    n, blocks = 50_000, 32
    x, partial, done, out = sum_inputs(n, blocks, 2)
    assert m.sum_last_block(x, partial, u32(done), out, n, blocks=blocks).launched  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outcome = m.sum_last_block(x, partial, u32(done), out, n, blocks=blocks, stream=torch.cuda.current_stream())
        assert outcome.launched, outcome.reason
    for seed in (3, 4, 5):
        x.copy_(torch.randn(n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_sum(out, x)
        assert int(done.item()) == blocks


# ---------------------------------------------------------------- __constant__ from a host argument


def test_constant_set_from_host_argument(folder):
    m = load(folder, "constant_scale")
    n = 4097
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    for scale in (2.5, -0.75, 3.0):
        out = torch.full_like(x, float("nan"))
        outcome = m.scale_by_constant(x, out, n, scale=scale)
        assert outcome.launched, outcome.reason
        torch.cuda.synchronize()
        assert torch.equal(out, x * scale), scale


def test_constant_copy_is_refused_while_capturing(folder):
    m = load(folder, "constant_scale")
    n = 256
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    out = torch.zeros_like(x)
    assert m.scale_by_constant(x, out, n, scale=1.0).launched
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(LaunchError, match="capturing"):
        with torch.cuda.graph(graph):
            m.scale_by_constant(x, out, n, scale=2.0, stream=torch.cuda.current_stream())
    out.zero_()
    assert m.scale_by_constant(x, out, n, scale=4.0).launched  # eager launches still work
    torch.cuda.synchronize()
    assert torch.equal(out, x * 4.0)


# ---------------------------------------------------------------- one header, two modules


def test_modules_sharing_a_header_both_launch(folder):
    a = load(folder, "hdr_a")
    b = load(folder, "hdr_b")
    n = 1000
    i = torch.arange(n, device="cuda", dtype=torch.float32)
    outs = {k: torch.full((n,), float("nan"), device="cuda") for k in ("ra", "rb", "fa", "fb")}
    assert a.ramp_a(outs["ra"], n).launched
    assert b.ramp_b(outs["rb"], n).launched
    assert a.fill_a(outs["fa"], n, 3.5).launched
    assert b.fill_b(outs["fb"], n, -1.25).launched
    torch.cuda.synchronize()
    assert torch.equal(outs["ra"], 2 * i)
    assert torch.equal(outs["rb"], i + 7)
    assert torch.equal(outs["fa"], torch.full_like(i, 3.5))
    assert torch.equal(outs["fb"], torch.full_like(i, -1.25))


def test_over_aligned_structs_arrive_intact(folder):
    """`aligned`: CUDA's float2 (align 8) and an __align__(16) struct of 12 bytes of fields, passed
    by value from mappings and dataclasses; every field reaches the kernel."""
    m = load(folder, "aligned")
    n = 1000
    out = torch.stack([torch.arange(n, dtype=torch.float32), -torch.arange(n, dtype=torch.float32)], 1).cuda()
    want = out.clone()
    assert m.shift_pairs(out, {"x": 0.5, "y": -2.25}, n).launched
    torch.cuda.synchronize()
    want[:, 0] += 0.5
    want[:, 1] -= 2.25
    assert torch.equal(out, want)

    @dataclasses.dataclass
    class Span:
        lo: float
        hi: float
        n: int

    x = torch.linspace(-10, 10, n, device="cuda")
    ref = x.clone()
    assert m.clamp_span(x, Span(-2.5, 3.0, 600), n=n).launched
    torch.cuda.synchronize()
    ref[:600] = ref[:600].clamp(-2.5, 3.0)
    assert torch.equal(x, ref)  # the first s.n values clamped, the rest untouched
