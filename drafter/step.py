"""One DFlash2 draft step on the generated kernels, captured once in a CUDA graph.

Every launch below goes through a generated launcher of kernelgen_ops; buffers are allocated
once in DrafterStep.__init__, and the captured step contains no torch op. Names: H hidden,
Hq / Hkv query / KV heads of 128, I intermediate, V vocab, r selector rank, T target layers,
B = 16 block rows, S = 15 drafted slots.

Context precompute (``append_context``, eager launches, N new context rows at positions
ctx_len .. ctx_len + N - 1):

    slots      = fill_slots(block_table, start=ctx_len, count=N)
    c          = fp8_linear(target_hidden [N, T*H], W_fc)              fc projection
    c          = rms_norm(c, hidden_norm)
    per layer l:
      k, v     = fp8_linear(c, Wk_l), fp8_linear(c, Wv_l)             [N, Hkv*128] each
      k        = rope_qwen3(q: none (num_q_heads = 0), k, k_norm_l, positions)
      reshape_cache_bf16(k, v -> k_cache_l, v_cache_l at slots)

Block step (``run`` eagerly, or ``capture`` once and ``replay``); the block's ids are the anchor
(the last verified token) and 15 mask tokens at positions ctx_len .. ctx_len + 15:

    h          = batched_embed(block_ids)                              residual stream [B, H]
    x          = rms_norm(h, input_norm_0)
    per layer l:
      delta    = fp8_linear(x, W_delta_l)                              [B, 2 * H/16] = [B, 2, H/16]
      x        = dflash2_conv2(x, conv_base_l, delta)                  two-tap grouped conv in the block
      q, k, v  = fp8_gemv_16_x3(x; Wq_l, Wk_l, Wv_l)                   one launch (rt1_16_x3, or rt2_16_x3
                 with fewer weight tiles; three fp8_linear launches where neither applies: more
                 than 16 rows, the rt kill switch)
      q, k     = rope_qwen3(q, k, q_norm_l, k_norm_l, positions)
      reshape_cache_bf16(k, v -> caches_l at the block's slots)
      a        = prefill_attn_dflash_bf16_indirect(q, caches_l, kv_len, q_rope_pos)
                 non-causal over the context and the whole block; a sliding window of
                 cfg.sliding_window keys on cfg.sliding_layers (default layers 0 and 2)
      o        = fp8_linear(a, Wo_l)
      x        = residual_rms_norm(o, h (h += o in place), post_norm_l)
      g        = fp8_linear(x, W_gate_up_l)                            [B, 2I] = [gate | up]
      g        = silu_mul(g)                                           [B, I]
      d        = fp8_linear(g, W_down_l)
      x        = residual_rms_norm(d, h (h += d: layer l's output), input_norm_{l+1} or final_norm)
    logits     = lm_head(x[1:])                                        15 rows (the mask rows)
    cand, u    = dflash2_topk16(logits, multiplier, cap)               [S, 16] ids and unary scores
    hs         = fp8_linear(x[1:], W_selector)                         [S, r]
    drafted    = dflash2_selector_walk(cand, u, hs, P, Q, anchor)      [1, S] drafted ids

Choices where DESIGN.md leaves the wiring open: the convolution is the layer's first token
mixer, between the input norm and the q/k/v projections (its delta is projected from the same
normed input); the context rows go through fc, the hidden norm and each layer's k/v
projections, k_norm and RoPE, without the convolution (its mask is the block boundary); the
lm_head, top-16 and selector read the 15 mask rows, and the walk starts from the anchor.

The lm_head writes BF16 logits, which dflash2_topk16 reads directly (its bf16 instance reads
them as the f32 values they are).

Measured on the H200 and not kept (graph replays, interleaved in one run, at 1024 / 8192
context rows): the next projection's weight asked into the L2 (a bulk-prefetch kernel on a
branch of the graph) while the short kernels and the attention run, 647 -> 680 us at 1024 rows:
a 16-row GEMV over the o weight took 10.7 us with that weight already in the L2 against 10.9 us
cold, so the GEMVs gain nothing from the L2 and the prefetch's traffic slows the kernels beside
it; the gate/up projection with SwiGLU in its epilogue and the selector projection in the
lm_head's launch (six launches fewer), 644.5 -> 646.1 / 691.4 -> 690.0 us: with programmatic
dependent launch each GEMV's weight stream starts while the short kernels before it run, and
removing those kernels did not shorten the step.

Step inputs that change between replays live in device memory, written by ``set_step``
before a replay: the block's positions and ids (anchor first), kv_len, q_offset, q_rope_pos
(one int32 array, copied from pinned host memory in one transfer) and the block's cache slots
(fill_slots, launched before the replay). The attention reads kv_len and q_rope_pos from
device memory, so one captured graph serves every step; its grid and workspace are sized by
the host bound max_kv_len = max_context + 16.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .config import DrafterConfig
from .weights import E4M3, DrafterWeights, Fp8Weight, Nvfp4Weight

# layout of the per-step int32 device array
P_POS = 0  # [0, 16): positions of the block rows
P_IDS = 16  # [16, 32): block ids, the anchor first
P_KV_LEN = 32
P_Q_OFFSET = 33
P_Q_ROPE_POS = 34
P_LEN = 40


def kernels():
    """The generated modules the step uses (imported when first needed)."""
    from kernelgen_ops import (
        attn_dflash,
        batched_embed,
        dflash2,
        fill_slots,
        fp8_gemv_rt,
        fp8_linear,
        reshape_cache_bf16,
        residual_rms_norm,
        rms_norm,
        rope_qwen3,
        silu_mul,
        w4a16_gemm,
    )

    return {"attn_dflash": attn_dflash, "batched_embed": batched_embed, "dflash2": dflash2,
            "fill_slots": fill_slots, "fp8_gemv_rt": fp8_gemv_rt, "fp8_linear": fp8_linear,
            "reshape_cache_bf16": reshape_cache_bf16, "residual_rms_norm": residual_rms_norm,
            "rms_norm": rms_norm, "rope_qwen3": rope_qwen3, "silu_mul": silu_mul, "w4a16_gemm": w4a16_gemm}


def current_stream_handle(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


def check(outcome: object, what: str) -> object:
    if not outcome:
        raise RuntimeError(f"{what}: not launched: {getattr(outcome, 'reason', outcome)}")
    return outcome


class Launch:
    """One launcher call with its arguments bound; ``layer_end`` marks the launch after which
    the residual stream holds layer ``layer_end``'s output."""

    __slots__ = ("fn", "kernel", "kwargs", "layer_end", "name")

    def __init__(self, name: str, fn: Callable, kwargs: dict, layer_end: int | None = None):
        self.name, self.fn, self.kwargs, self.layer_end, self.kernel = name, fn, kwargs, layer_end, None

    def __call__(self, stream: int) -> object:
        out = self.fn(**self.kwargs, stream=stream)
        if not out:
            raise RuntimeError(f"{self.name}: not launched: {out.reason}")
        self.kernel = out.kernel
        return out


def attn_workspace_sizes(cfg: DrafterConfig, q_rows: int, max_kv_len: int) -> tuple[int, int]:
    """(workspace floats, counters) the indirect attention chain needs at the host bound
    max_kv_len: its plan's sizes, computed from the spec's size expressions."""
    plan = kernels()["attn_dflash"].prefill_attn_dflash_bf16_indirect.plan(
        q_rows=q_rows, max_kv_len=max_kv_len, num_q_heads=cfg.num_q_heads, num_kv_heads=cfg.num_kv_heads,
        block_size=cfg.kv_block_size, causal=0, window=0)
    sizes = plan["sizes"]
    if not sizes or "workspace" not in sizes:
        raise RuntimeError(f"attention workspace size unavailable: {plan['reason']}")
    return sizes["workspace"], sizes["counters"]


class DrafterStep:
    """A draft head's buffers, KV caches and launch list for contexts of up to ``max_context``
    rows. ``lm_head`` ("fp8" or "nvfp4") overrides the config's choice."""

    def __init__(self, weights: DrafterWeights, max_context: int, *, lm_head: str | None = None,
                 seed: int = 0, device: torch.device | str | None = None):
        cfg = weights.cfg
        cfg.validate()
        self.cfg, self.w = cfg, weights
        self.device = torch.device(device) if device is not None else weights.embed.device
        self.lm_head_kind = lm_head or cfg.lm_head
        if self.lm_head_kind == "nvfp4" and weights.lm_head_nvfp4 is None:
            raise ValueError("nvfp4 lm_head asked for, but the weights have none (make_weights(nvfp4=True))")
        self.k = kernels()
        dev, B, S, H = self.device, cfg.block, cfg.slots, cfg.hidden
        self.max_context = max_context
        self.max_kv_len = max_context + B
        bs = cfg.kv_block_size
        self.num_blocks = -(-self.max_kv_len // bs)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.block_table_host = torch.randperm(self.num_blocks, generator=gen).to(torch.int32)
        self.block_table = self.block_table_host.to(dev)

        def empty(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
            return torch.empty(*shape, device=dev, dtype=dtype)

        cache_shape = (self.num_blocks, bs, cfg.num_kv_heads, cfg.head_dim)
        self.k_cache = [torch.zeros(cache_shape, device=dev, dtype=torch.bfloat16) for _ in range(cfg.num_layers)]
        self.v_cache = [torch.zeros(cache_shape, device=dev, dtype=torch.bfloat16) for _ in range(cfg.num_layers)]

        # context buffers
        self.ctx_fc = empty(max_context, H)
        self.ctx_n = empty(max_context, H)
        self.ctx_k = empty(max_context, cfg.kv_dim)
        self.ctx_v = empty(max_context, cfg.kv_dim)
        self.ctx_slots = empty(max_context, dtype=torch.int64)
        self.positions_all = torch.arange(self.max_kv_len, device=dev, dtype=torch.int32)
        self.dummy_q = torch.zeros(8, device=dev, dtype=torch.bfloat16)
        self.ctx_len = 0

        # step inputs
        self.params = torch.zeros(P_LEN, device=dev, dtype=torch.int32)
        self.params_host = torch.zeros(P_LEN, dtype=torch.int32, pin_memory=dev.type == "cuda")
        self.params_event = torch.cuda.Event() if dev.type == "cuda" else None
        self.block_slots = empty(B, dtype=torch.int64)

        # block buffers
        self.h = empty(B, H)  # residual stream
        self.x = empty(B, H)  # normed input of the next op
        self.xc = empty(B, H)  # convolution output
        self.delta = empty(B, 2 * cfg.conv_groups)
        self.q = empty(B, cfg.q_dim)
        self.kb = empty(B, cfg.kv_dim)
        self.vb = empty(B, cfg.kv_dim)
        self.attn = empty(B, cfg.q_dim)
        self.o = empty(B, H)
        self.gu = empty(B, 2 * cfg.intermediate)
        self.act = empty(B, cfg.intermediate)
        self.d = empty(B, H)
        self.hf = empty(B, H)  # final-norm output
        ws, cnt = attn_workspace_sizes(cfg, B, self.max_kv_len)
        self.attn_ws = empty(ws, dtype=torch.float32)
        self.attn_counters = torch.zeros(cnt, device=dev, dtype=torch.int32)
        self.logits = empty(S, cfg.vocab)
        self.cand = empty(S, 16, dtype=torch.int32)
        self.u = empty(S, 16, dtype=torch.float32)
        self.hs = empty(S, cfg.selector_rank)
        self.drafted = empty(1, S, dtype=torch.int32)

        self.launches = self._block_launches()
        self.graph: torch.cuda.CUDAGraph | None = None

    # ------------------------------------------------------------------ views of the parameters
    @property
    def positions(self) -> torch.Tensor:
        return self.params[P_POS:P_POS + self.cfg.block]

    @property
    def block_ids(self) -> torch.Tensor:
        return self.params[P_IDS:P_IDS + self.cfg.block]

    @property
    def anchor(self) -> torch.Tensor:
        return self.params[P_IDS:P_IDS + 1]

    # ------------------------------------------------------------------ launch list
    def _linear(self, name: str, x: torch.Tensor, w: Fp8Weight, out: torch.Tensor, rows: int,
                layer_end: int | None = None) -> Launch:
        return Launch(name, self.k["fp8_linear"].fp8_linear,
                      dict(x=x, q=w.q, scale=w.scale, out=out, rows=rows, n=w.n, k=w.k), layer_end)

    def _qkv(self, p: str, lw, rows: int) -> list[Launch]:
        """The q, k and v projections of the convolved input: one three-product launch where the
        fp8_gemv_16_x3 chain applies (fp8_gemv_rt1_16_x3 when the three weights' tiles are enough
        to cover the SMs with whole-K CTAs, else fp8_gemv_rt2_16_x3: the same bits as three
        fp8_gemv_rt1_16 or fp8_gemv_rt2_16 launches), else three fp8_linear chains."""
        n = dict(n0=lw.wq.n, n1=lw.wk.n, n2=lw.wv.n)
        qkv = self.k["fp8_gemv_rt"].fp8_gemv_16_x3
        if qkv.plan(rows=rows, k=lw.wq.k, **n)["launched"]:
            return [Launch(p + "qkv_proj", qkv,
                           dict(x=self.xc, q0=lw.wq.q, scale0=lw.wq.scale, out0=self.q, q1=lw.wk.q,
                                scale1=lw.wk.scale, out1=self.kb, q2=lw.wv.q, scale2=lw.wv.scale,
                                out2=self.vb, rows=rows, k=lw.wq.k, **n))]
        return [self._linear(p + "q_proj", self.xc, lw.wq, self.q, rows),
                self._linear(p + "k_proj", self.xc, lw.wk, self.kb, rows),
                self._linear(p + "v_proj", self.xc, lw.wv, self.vb, rows)]

    def _block_launches(self) -> list[Launch]:
        cfg, w, k = self.cfg, self.w, self.k
        B, S, H = cfg.block, cfg.slots, cfg.hidden
        eps = cfg.rms_eps
        L: list[Launch] = [
            Launch("embed", k["batched_embed"].batched_embed_bf16,
                   dict(ids=self.block_ids, table=w.embed, out=self.h, n=B, hidden=H, vocab=cfg.vocab)),
            Launch("input_norm.0", k["rms_norm"].rms_norm_bf16,
                   dict(x=self.h, weight=w.layers[0].input_norm, out=self.x, rows=B, hidden=H, eps=eps)),
        ]
        attn = k["attn_dflash"].prefill_attn_dflash_bf16_indirect
        for li, lw in enumerate(w.layers):
            p = f"L{li}."
            L.append(self._linear(p + "delta_proj", self.x, lw.delta, self.delta, B))
            L.append(Launch(p + "conv2", k["dflash2"].dflash2_conv2,
                            dict(x=self.x, base=lw.conv_base, delta=self.delta, out=self.xc, rows=B, hidden=H)))
            L += self._qkv(p, lw, B)
            L.append(Launch(p + "rope", k["rope_qwen3"].rope_qwen3,
                            dict(q=self.q, k=self.kb, q_norm=lw.q_norm, k_norm=lw.k_norm, positions=self.positions,
                                 num_tokens=B, num_q_heads=cfg.num_q_heads, num_kv_heads=cfg.num_kv_heads,
                                 eps=eps, theta=cfg.rope_theta, head_dim=cfg.head_dim)))
            L.append(Launch(p + "cache_write", k["reshape_cache_bf16"].reshape_cache_bf16,
                            dict(key=self.kb, value=self.vb, k_cache=self.k_cache[li], v_cache=self.v_cache[li],
                                 slot_mapping=self.block_slots, num_tokens=B, num_kv_heads=cfg.num_kv_heads,
                                 head_dim=cfg.head_dim, block_size=cfg.kv_block_size, num_blocks=self.num_blocks)))
            L.append(Launch(p + "attention", attn,
                            dict(q=self.q, k_cache=self.k_cache[li], v_cache=self.v_cache[li], out=self.attn,
                                 block_table=self.block_table, q_rows=B,
                                 kv_len=self.params[P_KV_LEN:P_KV_LEN + 1],
                                 q_offset=self.params[P_Q_OFFSET:P_Q_OFFSET + 1],
                                 q_rope_pos=self.params[P_Q_ROPE_POS:P_Q_ROPE_POS + 1],
                                 max_kv_len=self.max_kv_len, num_q_heads=cfg.num_q_heads,
                                 num_kv_heads=cfg.num_kv_heads, block_size=cfg.kv_block_size, causal=0,
                                 window=cfg.window(li), scale=1.0 / math.sqrt(cfg.head_dim),
                                 workspace=self.attn_ws, counters=self.attn_counters)))
            L.append(self._linear(p + "o_proj", self.attn, lw.wo, self.o, B))
            L.append(Launch(p + "residual_post_norm", k["residual_rms_norm"].residual_rms_norm_bf16,
                            dict(x=self.o, residual=self.h, weight=lw.post_norm, out=self.x, rows=B, hidden=H,
                                 eps=eps)))
            L.append(self._linear(p + "gate_up_proj", self.x, lw.gate_up, self.gu, B))
            L.append(Launch(p + "silu_mul", k["silu_mul"].silu_mul_bf16,
                            dict(input=self.gu, out=self.act, rows=B, inter=cfg.intermediate)))
            L.append(self._linear(p + "down_proj", self.act, lw.down, self.d, B))
            last = li == cfg.num_layers - 1
            norm_w = w.final_norm if last else w.layers[li + 1].input_norm
            L.append(Launch(p + ("residual_final_norm" if last else "residual_next_input_norm"),
                            k["residual_rms_norm"].residual_rms_norm_bf16,
                            dict(x=self.d, residual=self.h, weight=norm_w, out=self.hf if last else self.x,
                                 rows=B, hidden=H, eps=eps), layer_end=li))
        rows = self.hf[1:]
        if self.lm_head_kind == "fp8":
            L.append(self._linear("lm_head", rows, w.lm_head, self.logits, S))
        else:
            nv: Nvfp4Weight = w.lm_head_nvfp4  # type: ignore[assignment]
            L.append(Launch("lm_head", k["w4a16_gemm"].w4a16_linear,
                            dict(x=rows, wq=nv.wq, wscale=nv.ws.view(E4M3), global_scale=nv.global_scale,
                                 out=self.logits, m=S, n=nv.n, k=nv.k)))
        L.append(Launch("topk16", k["dflash2"].dflash2_topk16,
                        dict(logits=self.logits, ids=self.cand, scores=self.u, rows=S, vocab=cfg.vocab,
                             multiplier=cfg.unary_multiplier, cap=cfg.unary_cap)))
        L.append(self._linear("selector_proj", rows, w.selector, self.hs, S))
        L.append(Launch("selector_walk", k["dflash2"].dflash2_selector_walk,
                        dict(cand=self.cand, u=self.u, h=self.hs, p_codebook=w.p_codebook, q_codebook=w.q_codebook,
                             anchor=self.anchor, out=self.drafted, batch=1, slots=S, rank=cfg.selector_rank,
                             vocab=cfg.vocab)))
        return L

    # ------------------------------------------------------------------ context
    def reset(self) -> None:
        """Forget the context (the cache rows are overwritten as new context arrives)."""
        self.ctx_len = 0

    def append_context(self, target_hidden: torch.Tensor) -> None:
        """Projects N new context rows (the target's fused hidden states [N, T*H], bf16) into every
        layer's KV cache at positions ctx_len .. ctx_len + N - 1 (eager launches on the current
        stream)."""
        cfg, w, k = self.cfg, self.w, self.k
        n = target_hidden.shape[0]
        if n == 0:
            return
        if target_hidden.shape[1] != cfg.target_layers * cfg.hidden:
            raise ValueError(f"target_hidden must be [N, {cfg.target_layers * cfg.hidden}]")
        if self.ctx_len + n > self.max_context:
            raise ValueError(f"context of {self.ctx_len + n} rows exceeds max_context {self.max_context}")
        s = current_stream_handle(self.device)
        start = self.ctx_len
        H, eps = cfg.hidden, cfg.rms_eps
        slots = self.ctx_slots[:n]
        check(k["fill_slots"].fill_slots(block_table=self.block_table, slots=slots, start=start, count=n,
                                         block_size=cfg.kv_block_size, stream=s), "fill_slots")
        fp8 = k["fp8_linear"].fp8_linear
        check(fp8(x=target_hidden, q=w.fc.q, scale=w.fc.scale, out=self.ctx_fc[:n], rows=n, n=H, k=w.fc.k,
                  stream=s), "fc")
        check(k["rms_norm"].rms_norm_bf16(x=self.ctx_fc[:n], weight=w.hidden_norm, out=self.ctx_n[:n], rows=n,
                                          hidden=H, eps=eps, stream=s), "hidden_norm")
        c = self.ctx_n[:n]
        kk, vv = self.ctx_k[:n], self.ctx_v[:n]
        for li, lw in enumerate(w.layers):
            check(fp8(x=c, q=lw.wk.q, scale=lw.wk.scale, out=kk, rows=n, n=cfg.kv_dim, k=H, stream=s), "ctx k_proj")
            check(fp8(x=c, q=lw.wv.q, scale=lw.wv.scale, out=vv, rows=n, n=cfg.kv_dim, k=H, stream=s), "ctx v_proj")
            check(k["rope_qwen3"].rope_qwen3(q=self.dummy_q, k=kk, q_norm=lw.q_norm, k_norm=lw.k_norm,
                                             positions=self.positions_all[start:start + n], num_tokens=n,
                                             num_q_heads=0, num_kv_heads=cfg.num_kv_heads, eps=eps,
                                             theta=cfg.rope_theta, head_dim=cfg.head_dim, stream=s), "ctx rope")
            check(k["reshape_cache_bf16"].reshape_cache_bf16(
                key=kk, value=vv, k_cache=self.k_cache[li], v_cache=self.v_cache[li], slot_mapping=slots,
                num_tokens=n, num_kv_heads=cfg.num_kv_heads, head_dim=cfg.head_dim, block_size=cfg.kv_block_size,
                num_blocks=self.num_blocks, stream=s), "ctx cache write")
        self.ctx_len += n

    # ------------------------------------------------------------------ step
    def set_step(self, anchor: int) -> None:
        """Writes the next block's inputs into device memory (positions ctx_len .. ctx_len + 15,
        ids [anchor, mask x 15], kv_len = ctx_len + 16, q_offset = q_rope_pos = ctx_len) and
        its cache slots (fill_slots), on the current stream."""
        cfg = self.cfg
        ctx, B = self.ctx_len, cfg.block
        if ctx + B > self.max_kv_len:
            raise ValueError("context full")
        if not 0 <= anchor < cfg.vocab:
            raise ValueError("anchor outside the vocabulary")
        if self.params_event is not None:
            self.params_event.synchronize()  # the previous transfer has read the pinned buffer
        vals = [ctx + i for i in range(B)] + [anchor] + [cfg.mask_token_id] * (B - 1)
        vals += [ctx + B, ctx, ctx] + [0] * (P_LEN - 35)
        self.params_host.copy_(torch.tensor(vals, dtype=torch.int32))
        self.params.copy_(self.params_host, non_blocking=True)
        if self.params_event is not None:
            self.params_event.record()
        check(self.k["fill_slots"].fill_slots(block_table=self.block_table, slots=self.block_slots, start=ctx,
                                              count=B, block_size=cfg.kv_block_size,
                                              stream=current_stream_handle(self.device)), "block fill_slots")

    def run(self, after: Callable[[Launch], None] | None = None) -> None:
        """The block step, launched eagerly on the current stream. ``after(launch)`` is called after
        each launch (eager runs only: to look at intermediate buffers, e.g. the residual stream
        ``self.h`` after a launch whose ``layer_end`` is set, or ``self.logits`` after "lm_head")."""
        s = current_stream_handle(self.device)
        for launch in self.launches:
            launch(s)
            if after is not None:
                after(launch)

    def capture(self) -> torch.cuda.CUDAGraph:
        """Captures the block step once (after an eager warm-up run of the same step: set_step must
        have been called). The capture runs on the current stream when it is not the default one,
        else on a private side stream."""
        self.run()
        torch.cuda.current_stream(self.device).synchronize()
        graph = torch.cuda.CUDAGraph()
        cur = torch.cuda.current_stream(self.device)
        side = None if cur == torch.cuda.default_stream(self.device) else cur
        with torch.cuda.graph(graph, stream=side):
            self.run()
        self.graph = graph
        return graph

    def replay(self) -> None:
        if self.graph is None:
            raise RuntimeError("capture() first")
        self.graph.replay()

    # ------------------------------------------------------------------ inspection
    def cache_rows(self, layer: int, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s K and V rows [len(positions), Hkv, 128] at the given positions, read
        through the block table."""
        bs = self.cfg.kv_block_size
        pos = positions.to(self.device).long()
        blk = self.block_table.long()[pos // bs]
        return self.k_cache[layer][blk, pos % bs], self.v_cache[layer][blk, pos % bs]

    def kernel_names(self) -> list[tuple[str, str | None]]:
        """(launch name, kernel that ran last time) for every launch of the block step."""
        return [(launch.name, launch.kernel) for launch in self.launches]

    def bytes_read(self, kv_len: int) -> dict[str, int]:
        """Bytes a block step must read at least: every weight once, the embedding rows and
        codebook rows it gathers, and each layer's visible K/V rows (kv_len, or the window's keys on sliding layers)."""
        cfg, w = self.cfg, self.w
        B, S, r = cfg.block, cfg.slots, cfg.selector_rank
        lm = w.lm_head.nbytes if self.lm_head_kind == "fp8" else w.lm_head_nvfp4.nbytes  # type: ignore[union-attr]
        weights = w.layer_weight_bytes() + 2 * cfg.hidden + lm + w.selector.nbytes  # + final norm
        gathers = 2 * B * cfg.hidden + 2 * r * (S * 16 + 1) + 2 * r * S * 16
        kv = 0
        for li in range(cfg.num_layers):
            keys = kv_len if not cfg.is_sliding(li) else min(kv_len, cfg.sliding_window + B - 1)
            kv += 2 * keys * cfg.kv_dim * 2
        return {"weights": weights, "gathers": gathers, "kv": kv, "total": weights + gathers + kv}
