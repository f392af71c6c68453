"""CUDA-event timing and the launch check shared by the GPU benchmarks (run as scripts from this
folder, which is then on sys.path)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import torch


def median_ms(fn: Callable[..., object], sets: Sequence[tuple] = ((),), warmup: int = 5, reps: int = 40,
              sleep_cycles: int = 0) -> float:
    """Median CUDA-event time (ms) of fn(*sets[i % len(sets)]) over ``reps`` runs, after ``warmup``
    runs. With ``sleep_cycles``, a torch.cuda._sleep of that many cycles is queued before each
    timed run, so that the host's launch cost stays out of the measurement."""
    for i in range(warmup):
        fn(*sets[i % len(sets)])
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
"""
_read_kernel = None


def stream_read_ms(buffers: Sequence[torch.Tensor], time_fn: Callable[..., float]) -> float | None:
    """The time one launch of a plain streaming-read kernel (16-byte loads, 8 in flight per
    thread, 8 CTAs of 256 threads per SM) takes to read each buffer, rotated and timed by
    ``time_fn(fn, sets)`` as the kernels it is compared with: the floor a kernel reading those
    bytes once in one launch can reach, launch ramp and tail included. None without cupy."""
    global _read_kernel
    try:
        import cupy
    except ImportError:
        return None
    if _read_kernel is None:
        _read_kernel = cupy.RawKernel(_READ_SRC, "stream_read")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")

    def read(buf: torch.Tensor) -> None:
        nvec = buf.numel() * buf.element_size() // 16
        _read_kernel((sms * 8,), (256,), (buf.data_ptr(), cupy.uint64(nvec), sink.data_ptr()))

    return time_fn(read, [(b,) for b in buffers])
