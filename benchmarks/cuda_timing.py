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
