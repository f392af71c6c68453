"""The same draft block step in plain torch ops, as the benchmark's baselines.

Static shapes throughout, so the step can also be captured in a CUDA graph: the KV cache is a
contiguous [Hkv, max_kv_len, 128] buffer per layer, attention reads all of it under a mask
built on the device from kv_len and the positions (device tensors written before a run), and
the selector's greedy walk is 15 steps of device-side argmax and gathers.

Linear layers: ``mode="bf16"`` uses the BF16 weights (F.linear); ``mode="fp8"`` the same E4M3
weights and row scales as the generated kernels through torch._scaled_mm, with the activation
quantized per row to E4M3 on the fly (scale = amax / 448), W8A8 with row-wise scales on both
sides. The lm_head is the real [V, H] one in both modes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .reference import inv_freq
from .weights import E4M3, DrafterWeights, Fp8Weight

BF16 = torch.bfloat16


class TorchStep:
    def __init__(self, weights: DrafterWeights, max_context: int, mode: str = "bf16"):
        if mode not in ("bf16", "fp8"):
            raise ValueError("mode is 'bf16' or 'fp8'")
        cfg = weights.cfg
        self.cfg, self.w, self.mode = cfg, weights, mode
        dev = self.device = weights.embed.device
        if mode == "bf16" and weights.fc.bf16 is None:
            raise ValueError("the BF16 baseline needs make_weights(keep_bf16=True)")
        self.max_kv_len = max_context + cfg.block
        shape = (cfg.num_kv_heads, self.max_kv_len, cfg.head_dim)
        gen = torch.Generator(device=dev).manual_seed(1)
        self.k_cache = [torch.randn(shape, device=dev, generator=gen).to(BF16) for _ in range(cfg.num_layers)]
        self.v_cache = [torch.randn(shape, device=dev, generator=gen).to(BF16) for _ in range(cfg.num_layers)]
        ang = torch.arange(self.max_kv_len, device=dev).float()[:, None] * inv_freq(cfg.rope_theta, dev)[None, :]
        self.cos, self.sin = torch.cos(ang), torch.sin(ang)
        self.ids = torch.zeros(cfg.block, device=dev, dtype=torch.int64)
        self.positions = torch.zeros(cfg.block, device=dev, dtype=torch.int64)
        self.kv_len = torch.zeros(1, device=dev, dtype=torch.int64)
        self.key_index = torch.arange(self.max_kv_len, device=dev)
        self._scale_rows = {}
        self.drafted: torch.Tensor | None = None
        self.graph: torch.cuda.CUDAGraph | None = None

    def set_step(self, ctx_len: int, anchor: int) -> None:
        cfg = self.cfg
        ids = torch.tensor([anchor] + [cfg.mask_token_id] * (cfg.block - 1), dtype=torch.int64)
        self.ids.copy_(ids)
        self.positions.copy_(torch.arange(ctx_len, ctx_len + cfg.block))
        self.kv_len.fill_(ctx_len + cfg.block)

    # ------------------------------------------------------------------ pieces
    def lin(self, x: torch.Tensor, w: Fp8Weight) -> torch.Tensor:
        if self.mode == "bf16":
            return F.linear(x, w.bf16)
        key = id(w)
        if key not in self._scale_rows:
            self._scale_rows[key] = w.scale[None, :].contiguous()
        xf = x.float()
        sa = xf.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 448.0
        xq = (xf / sa).to(E4M3)
        return torch._scaled_mm(xq, w.q.t(), scale_a=sa, scale_b=self._scale_rows[key], out_dtype=BF16)

    def rope(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        n = F.rms_norm(x.float(), (cfg.head_dim,), w.float(), cfg.rms_eps)
        c, s = self.cos[self.positions][:, None, :], self.sin[self.positions][:, None, :]
        n1, n2 = n[..., :64], n[..., 64:]
        return torch.cat([n1 * c - n2 * s, n2 * c + n1 * s], dim=-1).to(BF16)

    def conv(self, x: torch.Tensor, base: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        prev = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
        d = delta.view(cfg.block, 2, cfg.conv_groups).repeat_interleave(16, dim=-1)
        return (base[0] + d[:, 0]) * x + (base[1] + d[:, 1]) * prev

    def attention(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        B, hkv, D = cfg.block, cfg.num_kv_heads, cfg.head_dim
        g = cfg.num_q_heads // hkv
        kc, vc = self.k_cache[layer], self.v_cache[layer]
        kc.index_copy_(1, self.positions, k.transpose(0, 1))
        vc.index_copy_(1, self.positions, v.transpose(0, 1))
        qg = q.view(B, hkv, g, D).permute(1, 2, 0, 3).reshape(hkv, g * B, D)
        s = torch.bmm(qg, kc.transpose(1, 2)).float() * (1.0 / math.sqrt(D))
        vis = self.key_index[None, :] < self.kv_len
        window = cfg.window(layer)
        if window:
            vis = vis & (self.key_index[None, :] > self.positions[:, None] - window)
        vis = vis.expand(B, self.max_kv_len).repeat(g, 1)
        p = torch.softmax(s.masked_fill(~vis, float("-inf")), dim=-1).to(BF16)
        o = torch.bmm(p, vc)
        return o.view(hkv, g, B, D).permute(2, 0, 1, 3).reshape(B, cfg.num_q_heads * D)

    # ------------------------------------------------------------------ step
    def run(self) -> torch.Tensor:
        cfg, w = self.cfg, self.w
        B, H, eps = cfg.block, cfg.hidden, cfg.rms_eps
        h = F.embedding(self.ids, w.embed)
        x = F.rms_norm(h, (H,), w.layers[0].input_norm, eps)
        for li, lw in enumerate(w.layers):
            xc = self.conv(x, lw.conv_base, self.lin(x, lw.delta))
            q = self.rope(self.lin(xc, lw.wq).view(B, cfg.num_q_heads, cfg.head_dim), lw.q_norm)
            k = self.rope(self.lin(xc, lw.wk).view(B, cfg.num_kv_heads, cfg.head_dim), lw.k_norm)
            v = self.lin(xc, lw.wv).view(B, cfg.num_kv_heads, cfg.head_dim)
            a = self.attention(li, q, k, v)
            h = h + self.lin(a, lw.wo)
            x = F.rms_norm(h, (H,), lw.post_norm, eps)
            gu = self.lin(x, lw.gate_up)
            act = F.silu(gu[:, :cfg.intermediate]) * gu[:, cfg.intermediate:]
            h = h + self.lin(act, lw.down)
            norm_w = w.final_norm if li == cfg.num_layers - 1 else w.layers[li + 1].input_norm
            x = F.rms_norm(h, (H,), norm_w, eps)
        logits = self.lin(x, w.lm_head)[1:].float()
        vals, cand = torch.topk(logits, 16, dim=-1)
        u = cfg.unary_cap * torch.tanh(cfg.unary_multiplier * vals / cfg.unary_cap)
        hs = self.lin(x, w.selector)[1:].float()
        prev = self.ids[:1]
        out = []
        for s in range(cfg.slots):
            pp = w.p_codebook[prev].float() * hs[s]
            sc = u[s] + (w.q_codebook[cand[s]].float() @ pp.t()).squeeze(-1)
            prev = cand[s].gather(0, sc.argmax().view(1))  # a [1] index: no host sync (capturable)
            out.append(prev)
        self.drafted = torch.cat(out)
        return self.drafted

    def capture(self) -> torch.cuda.CUDAGraph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.run()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        cur = torch.cuda.current_stream()
        with torch.cuda.graph(graph, stream=None if cur == torch.cuda.default_stream() else cur):
            self.run()
        self.graph = graph
        return graph

    def replay(self) -> None:
        self.graph.replay()
