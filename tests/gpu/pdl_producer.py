"""A long producer for the programmatic-dependent-launch tests: the catalog's rms_norm_bf16 over
4 rows of 2^23 values (four CTAs that trigger their dependants at entry and then stream 16 MB
each, twice, for a few hundred microseconds), so that a kernel launched right behind it starts
while it runs. Its output is poisoned (NaN) before it runs, and its last values are written
last: a dependant that read them before waiting would see NaN."""

from __future__ import annotations

ROWS, HIDDEN = 4, 1 << 23
EPS = 1e-6


class Producer:
    def __init__(self, torch, rms_norm_module, device="cuda"):
        self.torch = torch
        self.m = rms_norm_module
        g = torch.Generator(device=device).manual_seed(7)
        self.x = torch.randn(ROWS, HIDDEN, device=device, generator=g).to(torch.bfloat16)
        self.w = (torch.rand(HIDDEN, device=device, generator=g) + 0.5).to(torch.bfloat16)
        self.out = torch.empty_like(self.x)

    def tail(self, elements: int):
        """The last `elements` values of the output, the ones written last."""
        return self.out.view(-1)[-elements:]

    def input_tail(self, elements: int):
        """The last `elements` values of the input, which the producer reads until its end."""
        return self.x.view(-1)[-elements:]

    def launch(self, stream=None, poison: bool = True) -> None:
        if poison:
            self.out.fill_(float("nan"))
        kw = {} if stream is None else {"stream": stream}
        outcome = self.m.rms_norm_bf16(self.x, self.w, self.out, ROWS, HIDDEN, EPS, **kw)
        assert outcome.launched, outcome.reason
