"""Pure-torch reference of the draft step in drafter/step.py, on the same weights.

Arithmetic in f32 (TF32 off) on the same quantized values: an FP8 weight is
q.float() * scale[:, None], an NVFP4 one e2m1(code) * e4m3(scale) * global; every activation
the kernels store in BF16 is rounded to BF16 at the same point here (projections, norms,
convolution, RoPE, attention output, residual stream, SiLU-mul, logits, the selector's
projected hidden). What the kernels keep in f32 (sums, softmax, the unary scores) is f32 here
and never rounded to BF16; the selector's scores are f64. The context's K/V rows are kept
logically ([kv_len, Hkv, 128] per layer), not paged.

Known differences from the kernels, all below a BF16 ulp of the stored values: the order of
f32 additions (GEMM accumulation, norms' sums of squares), __expf / sincosf / tanhf against
torch's functions, and the attention's probabilities, which the kernel rounds to BF16 before
its PV product while the reference does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .weights import DrafterWeights, Fp8Weight, Nvfp4Weight

BF16, F32, F64 = torch.bfloat16, torch.float32, torch.float64
TOP = 16


def bf(t: torch.Tensor) -> torch.Tensor:
    return t.to(BF16)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return bf(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float())


def residual_rms_norm(x: torch.Tensor, res: torch.Tensor, w: torch.Tensor, eps: float):
    """(new residual bf16(x + res), its RMS norm)."""
    s = bf(x.float() + res.float())
    return s, rms_norm(s, w, eps)


def inv_freq(theta: float, device: torch.device) -> torch.Tensor:
    """theta^(-2i/128) correctly rounded to f32 (what rope_qwen3 computes)."""
    return (theta ** (-torch.arange(64, dtype=F64) / 64)).float().to(device)


def rope(x: torch.Tensor, w: torch.Tensor, pos: torch.Tensor, eps: float, theta: float) -> torch.Tensor:
    """Qwen3 per-head RMS norm then rotate-half RoPE; x [T, heads, 128] bf16 -> bf16."""
    xf = x.float()
    n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    ang = pos.to(x.device).float()[:, None] * inv_freq(theta, x.device)[None, :]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    n1, n2 = n[..., :64], n[..., 64:]
    return bf(torch.cat([n1 * c - n2 * s, n2 * c + n1 * s], dim=-1))


def conv2(x: torch.Tensor, base: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """dflash2_conv2 over blocks of 16 rows: (base0 + delta0) * x[t] + (base1 + delta1) * x[t - 1]."""
    rows, hidden = x.shape
    nb = rows // 16
    xf = x.float().view(nb, 16, hidden)
    prev = torch.zeros_like(xf)
    prev[:, 1:] = xf[:, :-1]
    d = delta.float().view(nb, 16, 2, hidden // 16)
    w0 = base.float()[0] + d[:, :, 0].repeat_interleave(16, dim=-1)
    w1 = base.float()[1] + d[:, :, 1].repeat_interleave(16, dim=-1)
    return bf((w0 * xf + w1 * prev).view(rows, hidden))


def attention(q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, pos0: int, window: int,
              scale: float) -> torch.Tensor:
    """Non-causal f32 attention of q [B, Hq, 128] over K, V [kv_len, Hkv, 128]; query row i at
    position pos0 + i sees key k when window == 0 or k > pos - window. Output bf16 [B, Hq*128]."""
    rows, hq, d = q.shape
    kv_len, hkv, _ = K.shape
    group = hq // hkv
    pos = pos0 + torch.arange(rows, device=q.device)[:, None]
    key = torch.arange(kv_len, device=q.device)[None, :]
    vis = torch.ones(rows, kv_len, dtype=torch.bool, device=q.device)
    if window:
        vis &= key > pos - window
    out = torch.zeros(rows, hq, d, dtype=F32, device=q.device)
    Kf, Vf = K.float(), V.float()
    for kh in range(hkv):
        qh = q[:, kh * group:(kh + 1) * group].float()
        s = torch.einsum("qgd,kd->gqk", qh, Kf[:, kh]) * scale
        s = s.masked_fill(~vis, float("-inf"))
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        ssum = p.sum(-1, keepdim=True)
        o = torch.einsum("gqk,kd->gqd", p, Vf[:, kh])
        o = torch.where(ssum > 0, o / ssum.clamp_min(1e-30), torch.zeros_like(o))
        out[:, kh * group:(kh + 1) * group] = o.permute(1, 0, 2)
    return bf(out.reshape(rows, hq * d))


def silu_mul(gu: torch.Tensor, inter: int) -> torch.Tensor:
    g, u = gu[:, :inter].float(), gu[:, inter:].float()
    return bf(g / (1.0 + torch.exp(-g)) * u)


def topk16_ids(logits: torch.Tensor) -> torch.Tensor:
    """Indices [rows, 16] of the 16 largest f32 logits per row, descending, ties to the smaller
    index (no NaN here). Exact: a topk over distinct int64 keys built from the value bits."""
    vocab = logits.shape[1]
    shift = max(18, int(vocab - 1).bit_length())
    b = logits.contiguous().view(torch.int32).to(torch.int64)
    mag = b & 0x7FFFFFFF
    okey = torch.where(b < 0, -mag, mag)
    idx = torch.arange(vocab, device=logits.device, dtype=torch.int64)
    comp = okey * (1 << shift) + ((1 << shift) - 1 - idx)
    return torch.topk(comp, TOP, dim=-1).indices


def unary(vals: torch.Tensor, multiplier: float, cap: float) -> torch.Tensor:
    z = vals * torch.tensor(multiplier, device=vals.device, dtype=F32)
    if cap == 0.0:
        return z
    c = torch.tensor(cap, device=vals.device, dtype=F32)
    return c * torch.tanh(z / c)


def walk_scores(p_codebook: torch.Tensor, q_codebook: torch.Tensor, h_row: torch.Tensor, u_row: torch.Tensor,
                cand_row: torch.Tensor, prev_token: int) -> torch.Tensor:
    """f64 scores [16] of one slot's candidates after predecessor token prev_token:
    u[c] + sum_j P[prev, j] * h[j] * Q[cand[c], j]."""
    p = p_codebook[prev_token].double() * h_row.double()
    qc = q_codebook[cand_row.long()].double()
    return u_row.double() + qc @ p


def first_argmax(scores: torch.Tensor) -> int:
    """argmax with ties to the smaller index."""
    best = scores.max()
    return int((scores == best).nonzero()[0, 0])


def margin(scores: torch.Tensor) -> float:
    top2 = torch.topk(scores, 2).values
    return float(top2[0] - top2[1])


@dataclass
class ReferenceResult:
    layer_hidden: list[torch.Tensor]  # the residual stream after each layer, bf16 [B, H]
    hf: torch.Tensor  # final norm, bf16 [B, H]
    logits: torch.Tensor  # bf16 [S, V]
    cand: torch.Tensor  # i64 [S, 16]
    u: torch.Tensor  # f32 [S, 16]
    hs: torch.Tensor  # bf16 [S, r]
    drafted: list[int]  # S ids
    walk_margins: list[float]  # best minus second-best score at each step of the reference's walk
    block_k: list[torch.Tensor] = field(default_factory=list)  # per layer, bf16 [B, Hkv, 128] after RoPE
    block_v: list[torch.Tensor] = field(default_factory=list)


class Reference:
    """The reference over one DrafterWeights; dequantized weights are kept (f32) once made."""

    def __init__(self, weights: DrafterWeights, lm_head: str | None = None):
        self.w, self.cfg = weights, weights.cfg
        self.lm_head_kind = lm_head or self.cfg.lm_head
        self._deq: dict[int, torch.Tensor] = {}
        torch.backends.cuda.matmul.allow_tf32 = False

    def deq(self, w: Fp8Weight | Nvfp4Weight) -> torch.Tensor:
        key = id(w)
        if key not in self._deq:
            self._deq[key] = w.dequantize()
        return self._deq[key]

    def linear(self, x: torch.Tensor, w: Fp8Weight | Nvfp4Weight) -> torch.Tensor:
        return bf(x.float() @ self.deq(w).t())

    # ------------------------------------------------------------------ context
    def context_kv(self, target_hidden: torch.Tensor, start: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (K, V) bf16 [N, Hkv, 128] of context rows at positions start .. start + N - 1."""
        cfg, w = self.cfg, self.w
        n = target_hidden.shape[0]
        c = rms_norm(self.linear(target_hidden, w.fc), w.hidden_norm, cfg.rms_eps)
        pos = torch.arange(start, start + n, device=target_hidden.device)
        out = []
        for lw in w.layers:
            k = self.linear(c, lw.wk).view(n, cfg.num_kv_heads, cfg.head_dim)
            v = self.linear(c, lw.wv).view(n, cfg.num_kv_heads, cfg.head_dim)
            out.append((rope(k, lw.k_norm, pos, cfg.rms_eps, cfg.rope_theta), v))
        return out

    # ------------------------------------------------------------------ block
    def block(self, ctx_kv: list[tuple[torch.Tensor, torch.Tensor]], ctx_len: int, anchor: int) -> ReferenceResult:
        cfg, w = self.cfg, self.w
        B, S, eps = cfg.block, cfg.slots, cfg.rms_eps
        dev = w.embed.device
        ids = torch.tensor([anchor] + [cfg.mask_token_id] * (B - 1), device=dev)
        pos = torch.arange(ctx_len, ctx_len + B, device=dev)
        h = w.embed[ids]
        x = rms_norm(h, w.layers[0].input_norm, eps)
        layer_hidden, block_k, block_v = [], [], []
        for li, lw in enumerate(w.layers):
            delta = self.linear(x, lw.delta)
            xc = conv2(x, lw.conv_base, delta)
            q = self.linear(xc, lw.wq).view(B, cfg.num_q_heads, cfg.head_dim)
            k = self.linear(xc, lw.wk).view(B, cfg.num_kv_heads, cfg.head_dim)
            v = self.linear(xc, lw.wv).view(B, cfg.num_kv_heads, cfg.head_dim)
            q = rope(q, lw.q_norm, pos, eps, cfg.rope_theta)
            k = rope(k, lw.k_norm, pos, eps, cfg.rope_theta)
            block_k.append(k)
            block_v.append(v)
            K = torch.cat([ctx_kv[li][0][:ctx_len], k])
            V = torch.cat([ctx_kv[li][1][:ctx_len], v])
            a = attention(q, K, V, ctx_len, cfg.window(li), 1.0 / math.sqrt(cfg.head_dim))
            o = self.linear(a, lw.wo)
            h, x = residual_rms_norm(o, h, lw.post_norm, eps)
            act = silu_mul(self.linear(x, lw.gate_up), cfg.intermediate)
            d = self.linear(act, lw.down)
            last = li == cfg.num_layers - 1
            h, x = residual_rms_norm(d, h, w.final_norm if last else w.layers[li + 1].input_norm, eps)
            layer_hidden.append(h)
        hf = x
        lm = w.lm_head if self.lm_head_kind == "fp8" else w.lm_head_nvfp4
        logits = self.linear(hf[1:], lm)
        lf = logits.float()
        cand = topk16_ids(lf)
        u = unary(lf.gather(1, cand), cfg.unary_multiplier, cfg.unary_cap)
        hs = self.linear(hf[1:], w.selector)
        drafted, margins = [], []
        prev = anchor
        for s in range(S):
            sc = walk_scores(w.p_codebook, w.q_codebook, hs[s], u[s], cand[s], prev)
            c = first_argmax(sc)
            margins.append(margin(sc))
            prev = int(cand[s, c])
            drafted.append(prev)
        return ReferenceResult(layer_hidden=layer_hidden, hf=hf, logits=logits, cand=cand, u=u, hs=hs,
                               drafted=drafted, walk_margins=margins, block_k=block_k, block_v=block_v)

    def step(self, target_hidden: torch.Tensor, anchor: int) -> ReferenceResult:
        """The whole step over a context of target_hidden's rows at positions 0 .. N - 1."""
        return self.block(self.context_kv(target_hidden), target_hidden.shape[0], anchor)
