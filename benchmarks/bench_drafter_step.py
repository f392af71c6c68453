#!/usr/bin/env python3
"""One DFlash2 draft step (drafter/step.py) at the Qwen3-8B shape (5 layers, vocab 151936, FP8
weights), for contexts of N = 1024 and 8192 rows (kv_len = N + 16).

- kernelgen: the block step captured once in a CUDA graph and replayed; also launched eagerly
  (the Python launcher calls one by one) and, as a variant, with the NVFP4 lm_head;
- torch: the same step in torch ops (drafter/torch_step.py), eager and captured in a CUDA
  graph, with BF16 weights (F.linear) and with the same FP8 weights through torch._scaled_mm
  (row-wise scales; activations quantized per row on the fly);
- a per-kernel breakdown: every launch of the step timed alone with CUDA events, the launches
  queued behind a GPU sleep so that host time stays out (the events add a little between
  launches, so the sum exceeds the graph's time somewhat);
- the floor: bytes the step must read (every weight once, the gathered embedding and codebook
  rows, each layer's visible K/V rows: kv_len keys, or the window's keys on sliding layers)
  over the device-to-device copy bandwidth measured in the same run (read + write bytes over
  time); step latency / floor.
- the context precompute (fc, hidden norm, k/v projections, RoPE, cache writes of N rows;
  eager launches) is timed once per N beside the step.

The torch baseline's selector walk indexes with [1]-shaped device tensors so that the step
captures without a host synchronisation.

Every weight is read once per step and the weights (about 1.6 GB) are far larger than the
50 MB L2, so consecutive steps find them cold. Times are medians of CUDA-event times, each after
half a second of the same runs (WARM_S).

With --sms 48 everything runs on a stream of a 48-SM green context (torch.cuda.green_contexts),
emulating GB10's SM count; kernelgen's plans see those SMs too (kernelgen_ops.limit_sms).

Usage: python3 benchmarks/bench_drafter_step.py --out results.json [--sms 48] [--contexts 1024 8192]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
from pathlib import Path

import torch
from cuda_timing import cold_replay_us, copy_gb_s, median_ms, sm_limited, sms_used, without_pdl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drafter import QWEN3_8B, DrafterStep, make_weights
from drafter.step import current_stream_handle
from drafter.torch_step import TorchStep

DEV = "cuda"
ROTATE = 4
SLEEP = 4_000_000  # GPU cycles queued before a breakdown pass (~2 ms): the host queues the whole step meanwhile
ANCHOR = 4242
# Seconds each headline time is preceded by runs of the same step: the first context's times came
# out above the second's without it (on the H200, the graph at 1024 context rows 643 us against
# 592 us in the interleaved PDL rounds after it, and eager faster than the graph).
WARM_S = 0.5


def matmul_tflops() -> float:
    """A compute-bound check of the SMs at hand: a 4096^3 bf16 matrix product."""
    a = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)
    ms = median_ms(lambda: a @ b, warmup=5, reps=20)
    return 2 * 4096**3 / ms / 1e9


def per_launch(step: DrafterStep, reps: int = 20) -> list[dict]:
    s = current_stream_handle(step.device)
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in step.launches] for _ in range(reps)]
    for r in range(reps):
        torch.cuda._sleep(SLEEP)
        for launch, (e0, e1) in zip(step.launches, events[r]):
            e0.record()
            launch(s)
            e1.record()
    torch.cuda.synchronize()
    rows = []
    for i, launch in enumerate(step.launches):
        us = statistics.median(events[r][i][0].elapsed_time(events[r][i][1]) for r in range(reps)) * 1e3
        rows.append({"launch": launch.name, "kernel": (launch.kernel or "").split(".")[-1], "us": us})
    return rows


def op_of(launch: str) -> str:
    """A launch's operation across the layers (L0.q_proj, L1.q_proj, ... -> q_proj)."""
    return launch.split(".", 1)[1] if launch.startswith("L") and "." in launch else launch


def sum_by_op(rows: list[dict], fields: tuple[str, ...], kernels: bool = False) -> list[dict]:
    """Per-launch rows summed over the layers by operation: the launch count and each of
    ``fields``, and with ``kernels`` the kernels that ran it."""
    groups: dict[str, dict] = {}
    for r in rows:
        op = op_of(r["launch"])
        g = groups.setdefault(op, {"op": op, "count": 0, **{f: 0.0 for f in fields}, "kernels": set()})
        g["count"] += 1
        for f in fields:
            g[f] += r[f]
        g["kernels"].add(r["kernel"])
    return [{k: (sorted(v) if k == "kernels" else v) for k, v in g.items() if kernels or k != "kernels"}
            for g in groups.values()]


def group_breakdown(rows: list[dict]) -> list[dict]:
    """Per-launch times summed over the layers by operation."""
    return sum_by_op(rows, ("us",), kernels=True)


def pdl_comparison(step: DrafterStep, rounds: int = 5) -> dict:
    """The captured step with programmatic dependent launch (each kernel's CTAs start while the
    one before finishes; the GEMVs' first weight chunks load meanwhile) beside the same step
    captured with plain launches: medians over interleaved rounds of replays, and whether the two
    graphs' drafted ids and logits are the same bits."""
    with_pdl = step.graph
    with without_pdl():
        step.capture()
    plain = step.graph
    step.graph = with_pdl
    t_pdl, t_plain = [], []
    for _ in range(rounds):
        t_pdl.append(median_ms(with_pdl.replay, warmup=2, reps=20) * 1e3)
        t_plain.append(median_ms(plain.replay, warmup=2, reps=20) * 1e3)
    with_pdl.replay()
    ids, logits = step.drafted.clone(), step.logits.clone()
    plain.replay()
    same = bool(torch.equal(ids, step.drafted)) and bool(torch.equal(logits, step.logits))
    res = {"graph_pdl_us": statistics.median(t_pdl), "graph_no_pdl_us": statistics.median(t_plain),
           "pdl_same_bits": same}
    print(f"  graph with PDL {res['graph_pdl_us']:.1f} us, without {res['graph_no_pdl_us']:.1f} us, "
          f"same bits: {same}", flush=True)
    return res


def in_graph_marginals(step: DrafterStep, reps: int = 15) -> list[float]:
    """Each launch's cost inside the captured step: the step's first k launches captured alone
    for every k, each prefix graph's replay timed after a 256 MB write that leaves the L2 cold
    (the median of ``reps``); launch k costs t(k) - t(k - 1). Unlike the per-launch breakdown,
    this keeps what a graph gives (no host gaps, and with programmatic dependent launch each
    kernel's start overlapping the one before)."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
    side = torch.cuda.Stream(step.device)
    times = [0.0]
    for k in range(1, len(step.launches) + 1):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            h = current_stream_handle(step.device)
            for launch in step.launches[:k]:
                launch(h)
        times.append(cold_replay_us(graph, flush, reps))
        del graph
    return [times[i + 1] - times[i] for i in range(len(step.launches))]


def marginal_breakdown(step: DrafterStep) -> dict:
    """in_graph_marginals with and without programmatic dependent launch, summed by operation."""
    pdl = in_graph_marginals(step)
    with without_pdl():
        plain = in_graph_marginals(step)
    rows = [{"launch": launch.name, "kernel": (launch.kernel or "").split(".")[-1], "pdl_us": a, "plain_us": b}
            for launch, a, b in zip(step.launches, pdl, plain)]
    return {"marginals": rows, "marginals_by_op": sum_by_op(rows, ("pdl_us", "plain_us"))}


def bench_context(weights, n_ctx: int, copy_gbs: float) -> dict:
    cfg = weights.cfg
    res: dict = {"context_rows": n_ctx, "kv_len": n_ctx + cfg.block}
    gen = torch.Generator(device=DEV).manual_seed(n_ctx)
    th = torch.randn(n_ctx, cfg.target_layers * cfg.hidden, device=DEV, generator=gen).to(torch.bfloat16)

    step = DrafterStep(weights, max_context=n_ctx)

    def context():
        step.reset()
        step.append_context(th)

    res["context_precompute_us"] = median_ms(context, warmup=1, reps=5) * 1e3
    step.reset()
    step.append_context(th)
    step.set_step(ANCHOR)
    step.capture()
    res["kernelgen_graph_us"] = median_ms(step.replay, warmup=3, reps=50, warmup_s=WARM_S) * 1e3
    res["kernelgen_eager_us"] = median_ms(step.run, warmup=3, reps=20, warmup_s=WARM_S) * 1e3
    try:
        res.update(pdl_comparison(step))
        res.update(marginal_breakdown(step))
        for g in sorted(res["marginals_by_op"], key=lambda g: -g["plain_us"]):
            print(f"  in graph: {g['op']:<26} x{g['count']}  plain {g['plain_us']:7.1f} us  "
                  f"pdl {g['pdl_us']:7.1f} us", flush=True)
    except Exception as e:  # reported; the other measurements go on
        res["pdl_error"] = f"{type(e).__name__}: {e}"[:300]
    b = step.bytes_read(n_ctx + cfg.block)
    res["bytes"] = b
    res["floor_us"] = b["total"] / copy_gbs / 1e3
    res["graph_over_floor"] = res["kernelgen_graph_us"] / res["floor_us"]
    print(f"N={n_ctx}: kernelgen graph {res['kernelgen_graph_us']:.1f} us, eager {res['kernelgen_eager_us']:.1f} us, "
          f"floor {res['floor_us']:.1f} us", flush=True)
    try:
        rows = per_launch(step)
        res["breakdown"] = rows
        res["breakdown_sum_us"] = sum(r["us"] for r in rows)
        res["breakdown_by_op"] = group_breakdown(rows)
    except Exception as e:  # reported; the other measurements go on
        res["breakdown_error"] = f"{type(e).__name__}: {e}"[:300]
    step = None
    gc.collect()
    torch.cuda.empty_cache()

    if weights.lm_head_nvfp4 is not None:
        try:
            step4 = DrafterStep(weights, max_context=n_ctx, lm_head="nvfp4")
            step4.append_context(th)
            step4.set_step(ANCHOR)
            step4.capture()
            res["kernelgen_nvfp4_graph_us"] = median_ms(step4.replay, warmup=3, reps=50, warmup_s=WARM_S) * 1e3
            b4 = step4.bytes_read(n_ctx + cfg.block)
            res["nvfp4_floor_us"] = b4["total"] / copy_gbs / 1e3
            lm = next(r for r in per_launch(step4, reps=10) if r["launch"] == "lm_head")
            res["nvfp4_lm_head_us"] = lm["us"]
            step4 = None
        except Exception as e:  # reported; the other measurements go on
            res["nvfp4_error"] = f"{type(e).__name__}: {e}"[:300]
        gc.collect()
        torch.cuda.empty_cache()

    for mode in ("bf16", "fp8"):
        try:
            ts = TorchStep(weights, n_ctx, mode=mode)
            ts.set_step(n_ctx, ANCHOR)
            res[f"torch_{mode}_eager_us"] = median_ms(ts.run, warmup=3, reps=20, warmup_s=WARM_S) * 1e3
            ts.capture()
            res[f"torch_{mode}_graph_us"] = median_ms(ts.replay, warmup=3, reps=50, warmup_s=WARM_S) * 1e3
            ts = None
            print(f"N={n_ctx}: torch {mode} eager {res[f'torch_{mode}_eager_us']:.1f} us, "
                  f"graph {res[f'torch_{mode}_graph_us']:.1f} us", flush=True)
        except Exception as e:  # reported; the other measurements go on
            res[f"torch_{mode}_error"] = f"{type(e).__name__}: {e}"[:300]
        gc.collect()
        torch.cuda.empty_cache()
    return res


def run(args) -> dict:
    torch.manual_seed(0)
    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "sm_count": torch.cuda.get_device_properties(0).multi_processor_count, "sms": args.sms}
    out["copy_gb_s"] = copy_gb_s(2 << 30, ROTATE)
    out["matmul_4096_tflops"] = matmul_tflops()
    weights = make_weights(QWEN3_8B, seed=0, keep_bf16=True, nvfp4=True)
    torch.cuda.synchronize()
    out["layer_weight_bytes"] = weights.layer_weight_bytes()
    print(f"copy {out['copy_gb_s']:.0f} GB/s, matmul {out['matmul_4096_tflops']:.0f} TFLOP/s", flush=True)
    out["contexts"] = []
    for n in args.contexts:
        out["contexts"].append(bench_context(weights, n, out["copy_gb_s"]))
        with open(args.out, "w") as f:  # what is done so far
            json.dump(out, f, indent=2)
    return out


def fmt_us(v) -> str:
    return f"{v:9.1f}" if isinstance(v, (int, float)) else f"{'-':>9}"


def report(out: dict) -> None:
    where = "whole GPU"
    if out["sms"]:
        where = f"{out['sms']}-SM green context (a probe grid reached {out.get('probe_sms')} SMs)"
    print(f"{out['device']}, {out['sm_count']} SMs; measured on: {where}")
    print(f"device-to-device copy {out['copy_gb_s']:.0f} GB/s (read + write); bf16 4096^3 matmul "
          f"{out['matmul_4096_tflops']:.0f} TFLOP/s")
    print()
    print("| context N | kv_len | kernelgen graph | kernelgen eager | kernelgen graph, NVFP4 lm_head "
          "| torch BF16 eager | torch BF16 graph | torch FP8 eager | torch FP8 graph | floor | graph / floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in out["contexts"]:
        cols = [c.get(k) for k in ("kernelgen_graph_us", "kernelgen_eager_us", "kernelgen_nvfp4_graph_us",
                                   "torch_bf16_eager_us", "torch_bf16_graph_us", "torch_fp8_eager_us",
                                   "torch_fp8_graph_us", "floor_us")]
        print(f"| {c['context_rows']} | {c['kv_len']} | " + " | ".join(fmt_us(v) + " us" for v in cols)
              + f" | {c['graph_over_floor']:.2f} |")
    for c in out["contexts"]:
        for k in ("torch_bf16_error", "torch_fp8_error", "nvfp4_error", "breakdown_error"):
            if k in c:
                print(f"N={c['context_rows']}: {k}: {c[k]}")
    for c in out["contexts"]:
        b = c["bytes"]
        print()
        print(f"N = {c['context_rows']}: bytes {b['total'] / 1e6:.1f} MB (weights {b['weights'] / 1e6:.1f}, "
              f"KV {b['kv'] / 1e6:.1f}, gathers {b['gathers'] / 1e6:.2f}); "
              f"context precompute of {c['context_rows']} rows {c['context_precompute_us']:.1f} us")
        if "nvfp4_lm_head_us" in c:
            print(f"  NVFP4 lm_head launch {c['nvfp4_lm_head_us']:.1f} us; "
                  f"NVFP4 step floor {c['nvfp4_floor_us']:.1f} us")
        if "breakdown_by_op" not in c:
            continue
        print(f"  per-kernel breakdown (sum {c['breakdown_sum_us']:.1f} us vs graph {c['kernelgen_graph_us']:.1f} us):")
        print("  | op | launches | total us | kernel |")
        print("  |---|---|---|---|")
        for g in sorted(c["breakdown_by_op"], key=lambda g: -g["us"]):
            print(f"  | {g['op']} | {g['count']} | {g['us']:.1f} | {', '.join(g['kernels'])} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", type=int, default=None, help="run inside a green context of this many SMs")
    ap.add_argument("--contexts", type=int, nargs="+", default=[1024, 8192])
    args = ap.parse_args()
    if args.sms:
        with sm_limited(args.sms) as stream:
            probe = sms_used(stream)
            out = run(args)
        out["sm_limit"], out["probe_sms"], out["plans_sm_count"] = args.sms, probe, args.sms
    else:
        out = run(args)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    report(out)


if __name__ == "__main__":
    main()
