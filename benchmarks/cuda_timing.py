"""CUDA-event timing and the launch check shared by the GPU benchmarks (run as scripts from this
folder, which is then on sys.path)."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence

import torch


def median_ms(fn: Callable[..., object], sets: Sequence[tuple] = ((),), warmup: int = 5, reps: int = 40,
              sleep_cycles: int = 0, warmup_s: float = 0.0) -> float:
    """Median CUDA-event time (ms) of fn(*sets[i % len(sets)]) over ``reps`` runs, after ``warmup``
    runs, and after as many more as take ``warmup_s`` seconds (the GPU's clocks settled after an
    idle spell or a different load). With ``sleep_cycles``, a torch.cuda._sleep of that many
    cycles is queued before each timed run, so that the host's launch cost stays out of the
    measurement."""
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    if warmup_s > 0:
        t0, i = time.perf_counter(), 0
        while time.perf_counter() - t0 < warmup_s:
            fn(*sets[i % len(sets)])
            i += 1
            if i % 8 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
    pairs = []
    for i in range(reps):
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)  # keep the GPU busy while the launch is queued
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*sets[i % len(sets)])
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


def back_to_back_ms(fn: Callable[..., object], sets: Sequence[tuple] = ((),), launches: int = 64,
                    rounds: int = 15, warmup: int = 5, sleep_cycles: int = 20_000_000) -> float:
    """Median over ``rounds`` of the mean CUDA-event time (ms) of ``launches`` back-to-back runs of
    fn(*sets[i % len(sets)]) between two events: each launch's ramp and tail overlap its
    neighbours' as far as the stream lets them. A torch.cuda._sleep of ``sleep_cycles`` (about
    10 ms) is queued before each round's first event, so that the host queues the round's launches
    while the GPU waits and the host's cost per call stays out even where it exceeds the launch's
    device time."""
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times, i = [], 0
    for _ in range(rounds):
        torch.cuda._sleep(sleep_cycles)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn(*sets[i % len(sets)])
            i += 1
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / launches)
    return statistics.median(times)


@contextlib.contextmanager
def without_pdl() -> Iterator[None]:
    """Launchers of programmatic-dependent kernels launch them plainly (KERNELGEN_NO_PDL) inside
    the block; launches queued or graphs captured there keep that."""
    import kernelgen_ops

    os.environ["KERNELGEN_NO_PDL"] = "1"
    kernelgen_ops.refresh()
    try:
        yield
    finally:
        del os.environ["KERNELGEN_NO_PDL"]
        kernelgen_ops.refresh()


def cold_replay_us(graph: torch.cuda.CUDAGraph, flush: torch.Tensor, reps: int) -> float:
    """Median CUDA-event time (us) of one replay of ``graph``, each replay after a write of
    ``flush`` (larger than the L2) so that its weights come cold from memory."""
    pairs = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) * 1e3


def cold_copies(nbytes: int, l2s: int = 4, minimum: int = 1) -> int:
    """Copies of an input of ``nbytes`` to rotate over so that together they exceed ``l2s`` times
    the device's L2 (an H200 reports 60 MB): a timed launch then reads data the L2 no longer
    holds (with less, part of a 50-100 MB weight is still there from the run before)."""
    cold = l2s * torch.cuda.get_device_properties(0).L2_cache_size
    return max(minimum, -(-cold // nbytes))


def copy_gb_s(nbytes: int, rotate: int = 4, sleep_cycles: int = 0) -> float:
    """GB/s of a device-to-device copy moving ``nbytes`` in all (half read, half written; read +
    write counted), over ``rotate`` buffer pairs so that it comes from memory, timed as
    median_ms times (with ``sleep_cycles``, each copy queued behind a GPU sleep like the
    single launches it is compared with)."""
    n = max(nbytes // 2, 16)
    pairs = [(torch.empty(n, dtype=torch.uint8, device="cuda"), torch.empty(n, dtype=torch.uint8, device="cuda"))
             for _ in range(rotate)]
    ms = median_ms(lambda s, d: d.copy_(s), pairs, sleep_cycles=sleep_cycles)
    del pairs
    return 2 * n / ms / 1e6


def launched(outcome: object) -> None:
    """Raises unless a kernelgen launcher's outcome says it launched."""
    if not outcome:
        raise RuntimeError(f"kernel not launched: {outcome.reason}")  # type: ignore[attr-defined]


_READ_SRC = r"""
extern "C" __global__ void __launch_bounds__(256) stream_read(const uint4* p, unsigned long long nvec, unsigned* out) {
    unsigned acc = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * 256;
    unsigned long long i = (unsigned long long)blockIdx.x * 256 + threadIdx.x;
    for (; i + 7 * stride < nvec; i += 8 * stride) {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p + i + u * stride));
#pragma unroll
        for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < nvec; i += stride) { const uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
    if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never taken
}
// One shot: every thread issues its 8 predicated 16-byte loads before any use, one CTA per
// 32 KB, so a buffer of a few MB is requested as fast as the CTAs start.
extern "C" __global__ void __launch_bounds__(256)
stream_read_once(const uint4* p, unsigned long long nvec, unsigned* out) {
    const unsigned long long base = (unsigned long long)blockIdx.x * 2048 + threadIdx.x;
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        v[u] = make_uint4(0, 0, 0, 0);
        if (base + u * 256 < nvec)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p + base + u * 256));
    }
    unsigned acc = 0;
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    if (acc == 0x9e3779b9u) out[0] = acc;
}
"""
_read_kernel = None


def stream_read_ms(buffers: Sequence[torch.Tensor], time_fn: Callable[..., float]) -> float | None:
    """The time one launch of a plain streaming-read kernel takes to read each buffer, rotated
    and timed by ``time_fn(fn, sets)`` as the kernels it is compared with: the faster of a
    grid-stride kernel (16-byte loads, 8 in flight per thread, 8 CTAs of 256 threads per SM) and
    a one-shot kernel (one CTA of 256 threads per 32 KB, each thread's 8 loads issued at once).
    The floor a kernel reading those bytes once in one launch can reach, launch ramp and tail
    included. Compiled with cupy (NVRTC); None, with the reason printed, where that fails."""
    global _read_kernel
    try:
        import cupy

        if _read_kernel is None:
            _read_kernel = (cupy.RawKernel(_READ_SRC, "stream_read"), cupy.RawKernel(_READ_SRC, "stream_read_once"))
    except Exception as e:  # no cupy, or NVRTC failing: no floor
        print(f"read floor unavailable: {type(e).__name__}: {e}")
        return None
    stride_k, once_k = _read_kernel
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")

    def read_stride(buf: torch.Tensor) -> None:
        nvec = buf.numel() * buf.element_size() // 16
        stride_k((sms * 8,), (256,), (buf.data_ptr(), cupy.uint64(nvec), sink.data_ptr()))

    def read_once(buf: torch.Tensor) -> None:
        nvec = buf.numel() * buf.element_size() // 16
        once_k(((nvec + 2047) // 2048,), (256,), (buf.data_ptr(), cupy.uint64(nvec), sink.data_ptr()))

    sets = [(b,) for b in buffers]
    return min(time_fn(read_stride, sets), time_fn(read_once, sets))


@contextlib.contextmanager
def sm_limited(num_sms: int | None) -> Iterator[int]:
    """Run the block on ``num_sms`` SMs of the GPU through a CUDA green context (None or 0: the
    whole GPU, nothing changed). Yields the stream handle to pass to kernelgen launchers as
    ``stream=`` (0 where the green context is made current and its default stream used); torch
    work inside the block runs on the same stream, and kernelgen's plans see ``num_sms`` SMs
    (kernelgen_ops.limit_sms). GB10 has 48 SMs: ``sm_limited(48)`` gives an H200 run GB10's SM
    count, not its memory bandwidth or its instructions."""
    if not num_sms:
        yield 0
        return
    with _plans_limited(num_sms), _green_context(num_sms) as stream:
        yield stream


@contextlib.contextmanager
def _plans_limited(num_sms: int) -> Iterator[None]:
    """kernelgen's plans see ``num_sms`` SMs meanwhile (CUDA's device attributes still report the
    whole GPU inside a green context), so chains and device-sized grids choose as on such a part."""
    import kernelgen_ops

    kernelgen_ops.limit_sms(num_sms)
    try:
        yield
    finally:
        kernelgen_ops.limit_sms(0)


@contextlib.contextmanager
def _green_context(num_sms: int) -> Iterator[int]:
    from torch.cuda.green_contexts import GreenContext

    device = torch.cuda.current_device()
    try:
        ctx = GreenContext.create(num_sms=num_sms, device_id=device)
    except TypeError:  # the first form of the API took positional arguments
        ctx = GreenContext.create(num_sms, device)
    torch.cuda.synchronize()
    if hasattr(ctx, "Stream"):
        stream = ctx.Stream()
        with torch.cuda.stream(stream):
            yield stream.cuda_stream
        torch.cuda.synchronize()
    else:
        ctx.set_context()
        try:
            yield 0
            torch.cuda.synchronize()
        finally:
            ctx.pop_context()


_SMID_SRC = r"""
extern "C" __global__ void smid(unsigned* seen) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    if (threadIdx.x == 0) seen[id] = 1;
}
"""


def sms_used(stream: int = 0, blocks: int = 4096) -> int | None:
    """How many distinct SMs a grid of ``blocks`` one-warp CTAs ran on, launched on ``stream``
    (checks that an SM limit holds); None without cupy."""
    try:
        import cupy
    except ImportError:
        return None
    seen = torch.zeros(1024, dtype=torch.int32, device="cuda")
    kernel = cupy.RawKernel(_SMID_SRC, "smid")
    with cupy.cuda.ExternalStream(stream) if stream else contextlib.nullcontext():
        kernel((blocks,), (32,), (seen.data_ptr(),))
    torch.cuda.synchronize()
    return int(seen.sum().item())
