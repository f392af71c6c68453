"""Helpers the GPU tests share: random bf16 inputs without zeros, bf16 comparisons in units in
the last place, and capturing one launch into a CUDA graph."""

from __future__ import annotations

import re

import torch

DEV = "cuda"


def nonzero_randn(*shape: int, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
    """Normal random bf16 values on the GPU, with exact zeros replaced (zeros hide bugs)."""
    t = torch.randn(*shape, device=DEV, dtype=torch.float32) * scale + offset
    t[t == 0] = 0.5
    return t.to(torch.bfloat16)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw 16-bit patterns of a bf16 tensor, for bit-exact comparisons."""
    return t.contiguous().view(torch.int16)


def assert_same_bits(out: torch.Tensor, other: torch.Tensor, what: str) -> None:
    """`out` is fully written (no NaN left from the poison) and has the bits of `other`."""
    assert not torch.isnan(out).any(), f"{what}: some output element was not written"
    differ = int((bits(out) != bits(other)).sum())
    assert differ == 0, f"{what}: {differ} outputs differ"


def ordered_bf16(t: torch.Tensor) -> torch.Tensor:
    """bf16 bit patterns mapped to integers that are monotonic in the value (-0 == +0)."""
    i = bits(t).to(torch.int32)
    return torch.where(i < 0, -32768 - i, i)


def max_ulp_diff(a: torch.Tensor, b: torch.Tensor) -> int:
    """The largest distance between two bf16 tensors, in bf16 units in the last place."""
    return int((ordered_bf16(a) - ordered_bf16(b)).abs().max().item())


def clause_in(reason: str | None, clause: str) -> bool:
    """Whether `reason` quotes `clause`, ignoring spacing and the parentheses the
    generator adds when it prints a clause back."""

    def norm(s: object) -> str:
        return re.sub(r"[\s()]+", "", str(s))

    return norm(clause) in norm(reason)


def capture_graph(launch):
    """A CUDA graph of `launch(stream)` (a launcher call on that stream, returning its outcome),
    captured on a side stream after one eager warm-up launch; returns (graph, captured outcome)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        warm = launch(s)
        assert warm.launched, warm.reason
        with torch.cuda.graph(g, stream=s):
            outcome = launch(s)
    torch.cuda.current_stream().wait_stream(s)
    return g, outcome
