"""The drafter catalog's programmatic dependent launches keep the stream's order.

Each consumer below is launched right behind a long producer (tests/gpu/pdl_producer.py: the
catalog's rms_norm_bf16, whose CTAs let their dependants start at once and then run for a few
hundred microseconds), so it starts while the producer still runs:

- read after write: the consumer's input is the tail of the producer's output, NaN until the
  producer writes it last; the consumer's output must equal the one computed after a full
  synchronisation, bit for bit;
- write after read: the consumer writes into the tail of the producer's input, which the
  producer reads until its end; the producer's output must be unchanged;
- the same read-after-write chain captured in a CUDA graph (programmatic edges) and replayed.

tests/gpu/test_launch_modes.py shows, with a fixture kernel that never waits, that a dependant
does start while this producer runs, so these checks are not vacuous.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("programmatic dependent launch needs sm_90 or later", allow_module_level=True)

from kernelgen_ops import dense_linear, fp8_gemv_rt, fp8_linear, residual_rms_norm, rms_norm, silu_mul  # noqa: E402

from tests.gpu.pdl_producer import Producer  # noqa: E402

DEV = "cuda"
K, N = 4096, 4160  # N off the 64-row and 128-row tiles


@pytest.fixture(scope="module")
def producer():
    return Producer(torch, rms_norm)


def fp8_weight(n, k, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = (torch.randn(n, k, device=DEV, generator=g) * 8).to(torch.float8_e4m3fn)
    scale = torch.rand(n, device=DEV, generator=g) * 1e-2 + 1e-3
    return q, scale


def bf16_weight(n, k, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return (torch.randn(n, k, device=DEV, generator=g) * 0.05).to(torch.bfloat16)


class Consumer:
    """`elements` input values; `outs` its outputs; launch(x) launches it on x (no torch op,
    so nothing but the consumer sits behind the producer); reset() poisons the outputs (and
    restores any in-place input) before the producer runs."""

    def __init__(self, elements, outs, launch, inplace=()):
        self.elements, self.outs, self._launch = elements, outs, launch
        self.inplace = [(t, t.clone()) for t in inplace]

    def reset(self):
        for o in self.outs:
            if o.is_floating_point():
                o.fill_(float("nan"))
        for t, v in self.inplace:
            t.copy_(v)

    def launch(self, x, stream=None):
        o = self._launch(x, **({} if stream is None else {"stream": stream}))
        assert o.launched, o.reason


def nan(*shape):
    return torch.full(shape, float("nan"), device=DEV, dtype=torch.bfloat16)


def fp8_product(fn, rows):
    q, scale = fp8_weight(N, K, rows)
    out = nan(rows, N)
    return Consumer(rows * K, [out], lambda x, **kw: fn(x.view(rows, K), q, scale, out, rows, N, K, **kw))


def x3_product():
    rows = 16
    w = [fp8_weight(n, K, 10 + i) for i, n in enumerate((4096, 1024, 1024))]
    outs = [nan(rows, q.shape[0]) for q, _ in w]
    return Consumer(rows * K, outs, lambda x, **kw: fp8_gemv_rt.fp8_gemv_rt2_16_x3(
        x.view(rows, K), w[0][0], w[0][1], outs[0], w[1][0], w[1][1], outs[1], w[2][0], w[2][1], outs[2],
        rows, 4096, 1024, 1024, K, **kw))


def dense_product(rows):
    w = bf16_weight(N, K, 3)
    out = nan(rows, N)
    return Consumer(rows * K, [out], lambda x, **kw: dense_linear.dense_linear_any(x.view(rows, K), w, out, rows, N, K, **kw))


def norm(rows):
    w = (torch.rand(K, device=DEV, generator=torch.Generator(device=DEV).manual_seed(5)) + 0.5).to(torch.bfloat16)
    out = nan(rows, K)
    return Consumer(rows * K, [out], lambda x, **kw: rms_norm.rms_norm_bf16(x.view(rows, K), w, out, rows, K, 1e-6, **kw))


def residual_norm(rows):
    g = torch.Generator(device=DEV).manual_seed(6)
    w = (torch.rand(K, device=DEV, generator=g) + 0.5).to(torch.bfloat16)
    res = torch.randn(rows, K, device=DEV, generator=g).to(torch.bfloat16)
    out = nan(rows, K)
    return Consumer(rows * K, [out, res], lambda x, **kw: residual_rms_norm.residual_rms_norm_bf16(
        x.view(rows, K), res, w, out, rows, K, 1e-6, **kw), inplace=[res])


def silu(rows):
    inter = 2048
    out = nan(rows, inter)
    return Consumer(rows * 2 * inter, [out], lambda x, **kw: silu_mul.silu_mul_bf16(x.view(rows, 2 * inter), out, rows,
                                                                               inter, **kw))


CONSUMERS = {
    "fp8_gemv_rt2": lambda: fp8_product(fp8_gemv_rt.fp8_gemv_rt2, 8),
    "fp8_gemv_rt2_16": lambda: fp8_product(fp8_gemv_rt.fp8_gemv_rt2_16, 16),
    "fp8_gemv_rt2_16_x3": x3_product,
    "dense_gemv_fp8w": lambda: fp8_product(fp8_linear.dense_gemv_fp8w, 8),
    "fp8_gemm_n128_row_scaled_m16": lambda: fp8_product(fp8_linear.fp8_gemm_n128_row_scaled_m16, 16),
    "fp8_gemm_n128_row_scaled": lambda: fp8_product(fp8_linear.fp8_gemm_n128_row_scaled, 64),
    "dense_linear_any_m16": lambda: dense_product(16),
    "dense_linear_any_m256": lambda: dense_product(256),
    "rms_norm_bf16": lambda: norm(16),
    "residual_rms_norm_bf16": lambda: residual_norm(16),
    "silu_mul_bf16": lambda: silu(16),
}


def same(got, want, name):
    for g, w in zip(got, want):
        assert torch.equal(g.view(torch.int16), w.view(torch.int16)), f"{name} read the producer's output early"


def expected(producer, c):
    c.reset()
    producer.launch()
    torch.cuda.synchronize()
    x = producer.tail(c.elements)
    assert not torch.isnan(x).any()
    c.launch(x)
    torch.cuda.synchronize()
    return [o.clone() for o in c.outs]


@pytest.mark.parametrize("name", list(CONSUMERS))
def test_consumer_reads_the_producer_output_after_it_is_written(producer, name):
    c = CONSUMERS[name]()
    want = expected(producer, c)
    for _ in range(3):
        c.reset()
        producer.launch()
        c.launch(producer.tail(c.elements))  # right behind the producer, no synchronisation
        torch.cuda.synchronize()
        same(c.outs, want, name)


@pytest.mark.parametrize("name", list(CONSUMERS))
def test_consumer_in_a_cuda_graph_reads_the_producer_output(producer, name):
    c = CONSUMERS[name]()
    want = expected(producer, c)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        producer.launch(stream=side, poison=False)
        c.launch(producer.tail(c.elements), stream=side)
    torch.cuda.synchronize()
    for _ in range(3):
        c.reset()
        producer.out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        same(c.outs, want, name)


def test_consumer_writes_after_the_producer_read_its_input(producer):
    """rms_norm_bf16 writes into the last rows of the producer's input while the producer still
    reads them: the producer's output must be what it is without the overwrite."""
    producer.launch()
    torch.cuda.synchronize()
    want = producer.out.clone()
    saved = producer.input_tail(16 * K).clone()
    w = torch.ones(K, device=DEV, dtype=torch.bfloat16)
    try:
        for _ in range(3):
            producer.input_tail(16 * K).copy_(saved)
            producer.launch()
            src = torch.zeros(16, K, device=DEV, dtype=torch.bfloat16)
            assert rms_norm.rms_norm_bf16(src, w, producer.input_tail(16 * K).view(16, K), 16, K, 1e-6).launched
            torch.cuda.synchronize()
            assert torch.equal(producer.out.view(torch.int16), want.view(torch.int16)), \
                "the consumer overwrote the producer's input before the producer had read it"
    finally:
        producer.input_tail(16 * K).copy_(saved)
