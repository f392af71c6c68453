"""Random drafter weights made on the device, quantized to FP8 by the catalog's
``fp8_linear.quantize_bf16_to_fp8`` (and the lm_head optionally to NVFP4 here, in torch).

Scales are chosen so that activations stay O(1) through the layers: a linear layer's weight
is N(0, 1 / K) (K its input width), norm weights 1 + N(0, 0.1^2), the convolution's base
taps around 0.8 and 0.3 with a delta projection of N(0, 0.2^2 / hidden) (so delta ~ 0.2),
logits N(0, 4^2) (lm_head rows N(0, 16 / hidden)), the selector's projected hidden N(0, 1)
and codebooks N(0, 0.25^2) (bilinear scores of standard deviation ~1 at rank 256).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .config import DrafterConfig

E4M3 = torch.float8_e4m3fn
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
LOGIT_STD = 4.0
CODEBOOK_STD = 0.25


@dataclass
class Fp8Weight:
    """E4M3 rows q [n, k] with one f32 scale per row: W[n, k] ~ scale[n] * q[n, k]."""

    q: torch.Tensor
    scale: torch.Tensor
    bf16: torch.Tensor | None = None  # the weight before quantization (torch baselines)

    @property
    def n(self) -> int:
        return self.q.shape[0]

    @property
    def k(self) -> int:
        return self.q.shape[1]

    def dequantize(self) -> torch.Tensor:
        """f32 [n, k]: q.float() * scale[:, None]."""
        return self.q.float() * self.scale[:, None]

    @property
    def nbytes(self) -> int:
        return self.q.numel() + 4 * self.scale.numel()


@dataclass
class Nvfp4Weight:
    """NVFP4: E2M1 codes two a byte along k (the even k in the low nibble) [n, k / 2], one E4M3
    scale byte per 16 k [n, k / 16], one f32 global scale."""

    wq: torch.Tensor  # uint8 [n, k / 2]
    ws: torch.Tensor  # uint8 [n, k / 16] (E4M3 bits)
    global_scale: float
    k: int

    @property
    def n(self) -> int:
        return self.wq.shape[0]

    def dequantize(self) -> torch.Tensor:
        """f32 [n, k]: e2m1(code) * e4m3(scale byte) * global_scale."""
        table = torch.tensor(E2M1_MAGNITUDES, device=self.wq.device, dtype=torch.float32)
        table = torch.cat([table, -table])
        out = torch.empty(self.n, self.k, device=self.wq.device, dtype=torch.float32)
        out[:, 0::2] = table[(self.wq & 0xF).long()]
        out[:, 1::2] = table[(self.wq >> 4).long()]
        scale = self.ws.view(E4M3).float().repeat_interleave(16, dim=1)
        return out * scale * self.global_scale

    @property
    def nbytes(self) -> int:
        return self.wq.numel() + self.ws.numel()


@dataclass
class LayerWeights:
    input_norm: torch.Tensor  # [hidden] bf16
    post_norm: torch.Tensor  # [hidden] bf16
    q_norm: torch.Tensor  # [128] bf16
    k_norm: torch.Tensor  # [128] bf16
    conv_base: torch.Tensor  # [2, hidden] bf16
    delta: Fp8Weight  # [2 * hidden / 16, hidden]
    wq: Fp8Weight  # [q_dim, hidden]
    wk: Fp8Weight  # [kv_dim, hidden]
    wv: Fp8Weight  # [kv_dim, hidden]
    wo: Fp8Weight  # [hidden, q_dim]
    gate_up: Fp8Weight  # [2 * intermediate, hidden]: gate rows, then up rows
    down: Fp8Weight  # [hidden, intermediate]

    def linears(self) -> dict[str, Fp8Weight]:
        return {"delta": self.delta, "q": self.wq, "k": self.wk, "v": self.wv, "o": self.wo,
                "gate_up": self.gate_up, "down": self.down}


@dataclass
class DrafterWeights:
    cfg: DrafterConfig
    fc: Fp8Weight  # [hidden, target_layers * hidden]
    hidden_norm: torch.Tensor  # [hidden]
    layers: list[LayerWeights]
    final_norm: torch.Tensor  # [hidden]
    embed: torch.Tensor  # [vocab, hidden] bf16
    lm_head: Fp8Weight  # [vocab, hidden]
    selector: Fp8Weight  # [rank, hidden]
    p_codebook: torch.Tensor  # [vocab, rank] bf16
    q_codebook: torch.Tensor  # [vocab, rank] bf16
    lm_head_nvfp4: Nvfp4Weight | None = None
    extra: dict = field(default_factory=dict)

    def layer_weight_bytes(self) -> int:
        """Bytes of every layer's weights (FP8 bytes and scales, norms and conv bases)."""
        total = 0
        for lw in self.layers:
            total += sum(w.nbytes for w in lw.linears().values())
            total += 2 * (lw.input_norm.numel() + lw.post_norm.numel() + lw.q_norm.numel()
                          + lw.k_norm.numel() + lw.conv_base.numel())
        return total


def _stream_arg(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


def quantize_fp8(w: torch.Tensor, keep_bf16: bool = False) -> Fp8Weight:
    """Row-wise E4M3 quantization through the catalog's quantize_bf16_to_fp8."""
    from kernelgen_ops import fp8_linear

    n, k = w.shape
    q = torch.empty(n, k, device=w.device, dtype=torch.uint8).view(E4M3)
    scale = torch.empty(n, device=w.device, dtype=torch.float32)
    out = fp8_linear.quantize_bf16_to_fp8(w=w, q=q, scale=scale, n=n, k=k, stream=_stream_arg(w.device))
    if not out:
        raise RuntimeError(f"quantize_bf16_to_fp8 not launched: {out.reason}")
    return Fp8Weight(q=q, scale=scale, bf16=w if keep_bf16 else None)


def quantize_nvfp4(w: torch.Tensor, chunk_rows: int = 8192) -> Nvfp4Weight:
    """NVFP4 of a bf16 [n, k] weight (k % 16 == 0): global = max|W| / (448 * 6); per 16 values
    the E4M3 scale of amax / (6 * global); codes the nearest E2M1 of W / (scale * global)
    (ties to the smaller magnitude). Torch ops, made once."""
    n, k = w.shape
    assert k % 16 == 0
    gmax = float(w.float().abs().amax())
    global_scale = gmax / (448.0 * 6.0) if gmax > 0 else 1.0
    mags = torch.tensor(E2M1_MAGNITUDES, device=w.device)
    bounds = (mags[1:] + mags[:-1]) / 2
    wq = torch.empty(n, k // 2, device=w.device, dtype=torch.uint8)
    ws = torch.empty(n, k // 16, device=w.device, dtype=torch.uint8)
    for r0 in range(0, n, chunk_rows):
        r1 = min(n, r0 + chunk_rows)
        g = w[r0:r1].float().view(r1 - r0, k // 16, 16)
        amax = g.abs().amax(-1)
        s8 = (amax / (6.0 * global_scale)).clamp(max=448.0).to(E4M3)
        sf = s8.float() * global_scale
        r = torch.where(sf[..., None] > 0, g / sf[..., None].clamp_min(1e-30), torch.zeros_like(g))
        code = torch.bucketize(r.abs().clamp(max=6.0), bounds, right=False).to(torch.uint8)
        code = torch.where((r < 0) & (code > 0), code | 8, code).view(r1 - r0, k)
        wq[r0:r1] = code[:, 0::2] | (code[:, 1::2] << 4)
        ws[r0:r1] = s8.view(torch.uint8)
    return Nvfp4Weight(wq=wq, ws=ws, global_scale=global_scale, k=k)


def make_weights(cfg: DrafterConfig, seed: int = 0, device: str | torch.device = "cuda",
                 keep_bf16: bool = False, nvfp4: bool | None = None) -> DrafterWeights:
    """Random weights on ``device`` (a seeded generator there), FP8-quantized by the catalog.
    ``keep_bf16`` keeps each linear layer's BF16 weight (the torch BF16 baseline uses them);
    ``nvfp4`` (default: cfg.lm_head == "nvfp4") also makes the NVFP4 lm_head."""
    cfg.validate()
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    H = cfg.hidden

    def randn(*shape: int, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
        t = torch.randn(*shape, device=device, dtype=torch.float32, generator=gen)
        return (t * std + mean).to(torch.bfloat16)

    def linear(n: int, k: int, std: float | None = None) -> Fp8Weight:
        w = randn(n, k, std=(1.0 / math.sqrt(k)) if std is None else std)
        return quantize_fp8(w, keep_bf16=keep_bf16)

    def norm(n: int) -> torch.Tensor:
        return randn(n, std=0.1, mean=1.0)

    fc = linear(H, cfg.target_layers * H)
    hidden_norm = norm(H)
    layers = []
    for _ in range(cfg.num_layers):
        base = torch.stack([randn(H, std=0.1, mean=0.8), randn(H, std=0.1, mean=0.3)])
        layers.append(LayerWeights(
            input_norm=norm(H), post_norm=norm(H), q_norm=norm(cfg.head_dim), k_norm=norm(cfg.head_dim),
            conv_base=base.contiguous(), delta=linear(2 * cfg.conv_groups, H, std=0.2 / math.sqrt(H)),
            wq=linear(cfg.q_dim, H), wk=linear(cfg.kv_dim, H), wv=linear(cfg.kv_dim, H),
            wo=linear(H, cfg.q_dim), gate_up=linear(2 * cfg.intermediate, H), down=linear(H, cfg.intermediate)))
    final_norm = norm(H)
    embed = randn(cfg.vocab, H)
    lm_bf16 = randn(cfg.vocab, H, std=LOGIT_STD / math.sqrt(H))
    lm_head = quantize_fp8(lm_bf16, keep_bf16=keep_bf16)
    selector = linear(cfg.selector_rank, H)
    p_codebook = randn(cfg.vocab, cfg.selector_rank, std=CODEBOOK_STD)
    q_codebook = randn(cfg.vocab, cfg.selector_rank, std=CODEBOOK_STD)
    weights = DrafterWeights(cfg=cfg, fc=fc, hidden_norm=hidden_norm, layers=layers, final_norm=final_norm,
                             embed=embed, lm_head=lm_head,
                             selector=selector, p_codebook=p_codebook, q_codebook=q_codebook)
    if nvfp4 is None:
        nvfp4 = cfg.lm_head == "nvfp4"
    if nvfp4:
        weights.lm_head_nvfp4 = quantize_nvfp4(lm_bf16)
    del lm_bf16
    return weights
