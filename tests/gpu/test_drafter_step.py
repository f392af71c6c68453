"""GPU tests of drafter/ (one DFlash2 draft step on the generated kernels, drafter/step.py)
against the pure-torch reference of drafter/reference.py on the same weights.

What is checked:

* the residual stream after every layer, the final norm, the logits and the selector's
  projected hidden against the reference, within the tolerances below;
* dflash2_topk16 and the selector walk against their own inputs exactly: the candidates are the
  exact top-16 of the kernel's logits, the unary scores within f32 rounding, and each drafted id
  is the argmax of the walk's scores (f64, from the kernel's own candidates, unary scores and
  projected hidden) wherever that argmax is ahead by more than WALK_TOL;
* drafted ids against the reference's, slot by slot, with the kernel's previous drafted id as
  the predecessor: equal wherever the reference's decisions are clear, i.e. the top-16 boundary
  gap (16th minus 17th largest logit) exceeds twice the largest logit difference between kernel
  and reference on that row, and the walk's best-minus-second score exceeds twice the largest
  score difference between the two sides' inputs plus WALK_TOL. Under those conditions the
  decision cannot flip, so a mismatch there is a bug; the other slots are counted and printed;
* the graph: one capture, replayed for successive steps whose context grows (kv_len, positions,
  slots and ids written on the device only), each replay bit for bit equal to an eager run of
  the same launches, and no memory allocated by the replays;
* the Qwen3-8B shape (5 layers, vocab 151936) once, with a context of 2100 rows (past the
  2048-key window of the sliding layers).

Tolerance of the BF16 activations, derived. Both sides round to BF16 at the same points and
compute in f32 between them; they differ only in f32 details (addition order in the GEMMs and
norms, __expf / sincosf / tanhf against torch's functions, and the attention's probabilities,
which the kernel rounds to BF16 before its PV product). Each of those is far below a BF16 ulp
(2^-8 relative), but it flips the BF16 rounding of some elements by one ulp, and a flipped
element feeds every output of the next projection, where the next rounding turns the f32
difference into more flips. The bound assumes each BF16 store adds at most one BF16 ulp of rms
difference (2^-8 relative), independently of the others, with a gain of at most 1 through the
layers (the norms rescale, the random weights preserve rms): after n stores the normwise
difference ||got - ref|| / ||ref|| is at most 2^-8 sqrt(n). A layer stores 16 activations
(input norm, delta, convolution, q, k, v, RoPE, attention, o, residual, post norm, gate/up,
SiLU-mul, down, residual, and the next norm), so the residual stream after layer l is held to
2^-8 sqrt(16 (l + 1)) (1.6e-2 after the first layer, 3.5e-2 after the fifth); the final norm,
logits and the selector's hidden to 2^-8 sqrt(16 L + 2). Per element: |got - ref| <= 8 times
that bound times max(|ref|, rms of the row) (the largest of ~10^4-10^5 roughly normal errors is
about 4.5 standard deviations; relative error means nothing for elements near zero, hence the
row's rms). A wrong weight, position, mask, cache slot or layer order moves the result by a
large fraction of its norm, past these bounds; the differences seen are printed by each test.
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from drafter import QWEN3_8B, DrafterConfig, DrafterStep, make_weights  # noqa: E402
from drafter.reference import Reference, first_argmax, margin, topk16_ids, unary, walk_scores  # noqa: E402
from tests.gpu.checks import note  # noqa: E402

DEV = "cuda"
ULP = 2.0**-8
STORES_PER_LAYER = 16
ELEM_FACTOR = 8.0
WALK_TOL = 2e-3  # the walk kernel's f32 scores against f64 (as in test_dflash2.py)

SMALL = DrafterConfig(hidden=1024, num_q_heads=8, num_kv_heads=2, intermediate=2816, vocab=4000, num_layers=3,
                      sliding_layers=(1,), sliding_window=64, selector_rank=128, target_layers=3)


# --------------------------------------------------------------------------------------------- helpers
def target_hidden(cfg: DrafterConfig, rows: int, seed: int) -> torch.Tensor:
    gen = torch.Generator(device=DEV).manual_seed(seed)
    return torch.randn(rows, cfg.target_layers * cfg.hidden, device=DEV, generator=gen).to(torch.bfloat16)


def eager_with_intermediates(step: DrafterStep) -> dict:
    """Runs the block step eagerly and keeps the residual stream after each layer and the logits
    before dflash2_topk16 overwrites its picks."""
    layers, logits = [], []

    def after(launch):
        if launch.layer_end is not None:
            layers.append(step.h.clone())
        if launch.name == "lm_head":
            logits.append(step.logits.float())  # bf16 logits, as the exact f32 values

    step.run(after)
    torch.cuda.synchronize()
    return {"layers": layers, "logits": logits[0], **outputs(step)}


def outputs(step: DrafterStep) -> dict:
    return {"hf": step.hf.clone(), "hs": step.hs.clone(), "cand": step.cand.clone(), "u": step.u.clone(),
            "drafted": step.drafted.clone(), "logits_after": step.logits.float()}


def poison(step: DrafterStep) -> None:
    for t in (step.h, step.x, step.hf, step.hs, step.logits, step.u):
        t.fill_(float("nan"))
    for t in (step.cand, step.drafted):
        t.fill_(-7)


def norm_tol(stores: int) -> float:
    """The normwise bound after ``stores`` BF16 stores (module docstring)."""
    return ULP * stores**0.5


def close(got: torch.Tensor, ref: torch.Tensor, what: str, stores: int, problems: list[str]) -> None:
    """Compares against the bounds of the module docstring; a miss is added to ``problems``."""
    norm_tol_ = norm_tol(stores)
    elem_tol = ELEM_FACTOR * norm_tol_
    g, r = got.float(), ref.float()
    err = g - r
    normwise = float(err.norm() / r.norm().clamp_min(1e-30))
    rms = r.pow(2).mean(-1, keepdim=True).sqrt()
    elem = float((err.abs() / torch.maximum(r.abs(), rms).clamp_min(1e-30)).max())
    ok = not torch.isnan(g).any() and normwise <= norm_tol_ and elem <= elem_tol
    note(normwise, norm_tol_, g.numel(), f"{what}: normwise")
    note(elem, elem_tol, g.numel(), f"{what}: per element")
    print(f"  {what}: normwise {normwise:.2e}, per element {elem:.2e} (bounds {norm_tol_:.1e}, {elem_tol:.1e})"
          + ("" if ok else "  <-- OUT OF BOUNDS"))
    if not ok:
        problems.append(f"{what}: normwise {normwise:.3e}, per element {elem:.3e}")


def check_step(step: DrafterStep, got: dict, ref, anchor: int, what: str) -> dict:
    """Every check of the module docstring on one eager run against the reference; returns counts."""
    cfg, w = step.cfg, step.w
    S = cfg.slots
    print(f"{what}:")
    problems: list[str] = []
    n = STORES_PER_LAYER
    for li, h in enumerate(got["layers"]):
        close(h, ref.layer_hidden[li], f"hidden after layer {li}", n * (li + 1), problems)
    tail = n * cfg.num_layers + 2
    close(got["hf"], ref.hf, "final norm", tail, problems)
    logits = got["logits"]
    close(logits, ref.logits, "logits", tail, problems)
    close(got["hs"], ref.hs, "selector hidden", tail, problems)

    # dflash2_topk16 against the kernel's own logits: exact ids, unary scores, the overwrite
    cand, u = got["cand"].long(), got["u"]
    if not torch.equal(cand, topk16_ids(logits)):
        problems.append("candidates are not the top-16 of the kernel's logits")
    want_u = unary(logits.gather(1, cand), cfg.unary_multiplier, cfg.unary_cap)
    if not torch.allclose(u, want_u, rtol=2.0**-21, atol=1e-6):
        problems.append(f"unary scores off by up to {float((u - want_u).abs().max()):.3g}")
    expect = logits.scatter(1, cand, float("-inf"))
    if not torch.equal(got["logits_after"].view(torch.int32), expect.view(torch.int32)):
        problems.append("the logits after dflash2_topk16 are not the logits with -inf at the candidates")

    drafted = [int(t) for t in got["drafted"][0].tolist()]
    counts = {"clear_equal": 0, "topk_boundary": 0, "walk_margin": 0, "self_unclear": 0}
    prev = anchor
    for s in range(S):
        # the walk against its own inputs
        sc = walk_scores(w.p_codebook, w.q_codebook, got["hs"][s], u[s], cand[s], prev)
        if margin(sc) > WALK_TOL:
            if int(cand[s, first_argmax(sc)]) != drafted[s]:
                problems.append(f"slot {s}: the walk's choice is not the argmax of its own scores")
        else:
            counts["self_unclear"] += 1
        # against the reference, the kernel's previous id as the predecessor
        dl = float((logits[s] - ref.logits[s].float()).abs().max())
        rl = torch.sort(ref.logits[s].float(), descending=True).values
        gap = float(rl[15] - rl[16])
        kset, rset = set(cand[s].tolist()), set(ref.cand[s].tolist())
        if kset != rset:
            if gap > 2 * dl:
                problems.append(f"slot {s}: top-16 sets differ with a clear boundary (gap {gap:.3g}, diff {dl:.3g})")
            counts["topk_boundary"] += 1
        else:
            sc_r = walk_scores(w.p_codebook, w.q_codebook, ref.hs[s], ref.u[s], ref.cand[s], prev)
            by_tok = {int(t): float(v) for t, v in zip(cand[s].tolist(), sc.tolist())}
            ds = max(abs(by_tok[int(t)] - float(v)) for t, v in zip(ref.cand[s].tolist(), sc_r.tolist()))
            if margin(sc_r) > 2 * ds + WALK_TOL:
                want = int(ref.cand[s, first_argmax(sc_r)])
                if drafted[s] != want:
                    problems.append(f"slot {s}: drafted {drafted[s]}, reference {want} (clear margin)")
                counts["clear_equal"] += 1
            else:
                counts["walk_margin"] += 1
        prev = drafted[s]
    same = sum(a == b for a, b in zip(drafted, ref.drafted))
    print(f"  drafted ids: {counts['clear_equal']} of {S} slots clear and equal; not clear: "
          f"{counts['topk_boundary']} at the top-16 boundary, {counts['walk_margin']} by the walk's margin; "
          f"{counts['self_unclear']} walk steps within {WALK_TOL} of a tie on the kernel's own inputs; "
          f"open-loop {same} of {S} equal to the reference's walk")
    counts["problems"] = problems
    return counts


def check_cache_rows(step: DrafterStep, ref, ctx_len: int) -> list[str]:
    problems: list[str] = []
    pos = torch.arange(ctx_len, ctx_len + step.cfg.block)
    for li in range(step.cfg.num_layers):
        k, v = step.cache_rows(li, pos)
        stores = STORES_PER_LAYER * (li + 1)  # stored before this layer's K / V, with margin
        close(k, ref.block_k[li], f"block K rows in the cache, layer {li}", stores, problems)
        close(v, ref.block_v[li], f"block V rows in the cache, layer {li}", stores, problems)
    return problems


# --------------------------------------------------------------------------------------------- tests
def test_small_step_matches_reference():
    w = make_weights(SMALL, seed=11)
    step = DrafterStep(w, max_context=400)
    th = target_hidden(SMALL, 300, seed=12)
    step.append_context(th[:200])
    step.append_context(th[200:])  # two chunks: positions continue
    step.set_step(anchor=1234)
    got = eager_with_intermediates(step)
    ref = Reference(w).step(th, 1234)
    counts = check_step(step, got, ref, 1234, "small, context 300")
    problems = counts["problems"] + check_cache_rows(step, ref, 300)
    names = dict(step.kernel_names())
    print("  kernels:", names["L0.attention"], names["L0.qkv_proj"], names["L0.gate_up_proj"], names["lm_head"])
    assert not problems, problems
    assert names["L0.qkv_proj"].endswith("fp8_gemv_rt2_16_x3")  # q, k and v in one launch
    assert names["L0.attention"].endswith("prefill_attn_dflash_bf16_indirect_unsplit")  # max_kv_len 416 < 512
    assert counts["clear_equal"] > 0


def allocation_requests() -> int:
    """How many allocations the caching allocator has made on this device so far."""
    return int(torch.cuda.memory_stats().get("allocation.all.allocated", 0))


def test_graph_replay_equals_eager_over_steps():
    cfg = SMALL
    w = make_weights(cfg, seed=21)
    step = DrafterStep(w, max_context=700)
    th = target_hidden(cfg, 700, seed=22)
    n = 250
    step.append_context(th[:n])
    step.set_step(anchor=5)
    step.capture()
    assert dict(step.kernel_names())["L0.attention"].endswith("_indirect_split")  # max_kv_len 716 >= 512
    ref_model = Reference(w)
    gen = torch.Generator().manual_seed(23)
    clear = total = 0
    problems: list[str] = []
    for i, grow in enumerate([0, 5, 16, 1, 37, 120, 3]):
        if grow:
            step.append_context(th[n:n + grow])
            n += grow
        anchor = int(torch.randint(0, cfg.vocab - 1, (1,), generator=gen))
        step.set_step(anchor)
        torch.cuda.synchronize()
        # the caching allocator's count of allocation requests: garbage of the earlier steps that
        # the cyclic collector frees meanwhile lowers memory_allocated() but not this count
        allocs = allocation_requests()
        step.replay()
        step.run()
        torch.cuda.synchronize()
        if allocation_requests() != allocs:
            problems.append(f"step {i}: a replay or an eager run allocated memory")
        poison(step)
        step.replay()
        torch.cuda.synchronize()
        replayed = outputs(step)
        rows_g = [step.cache_rows(li, torch.arange(n, n + 16)) for li in range(cfg.num_layers)]
        poison(step)
        got = eager_with_intermediates(step)
        rows_e = [step.cache_rows(li, torch.arange(n, n + 16)) for li in range(cfg.num_layers)]
        for key, t in replayed.items():
            if not torch.equal(t.view(torch.uint8), got[key].view(torch.uint8)):
                problems.append(f"step {i}: {key} of the replay differs from the eager run")
        for li, ((kg, vg), (ke, ve)) in enumerate(zip(rows_g, rows_e)):
            if not (torch.equal(kg, ke) and torch.equal(vg, ve)):
                problems.append(f"step {i}: block K/V rows of layer {li} differ between replay and eager run")
        ref = ref_model.step(th[:n], anchor)
        counts = check_step(step, got, ref, anchor, f"step {i}: context {n}, kv_len {n + 16}, anchor {anchor}")
        problems += [f"step {i}: {p}" for p in counts["problems"]]
        clear += counts["clear_equal"]
        total += cfg.slots
    print(f"drafted ids clear and equal over all steps: {clear} of {total}")
    assert not problems, problems


def test_nvfp4_lm_head():
    w = make_weights(SMALL, seed=31, nvfp4=True)
    step = DrafterStep(w, max_context=300, lm_head="nvfp4")
    th = target_hidden(SMALL, 180, seed=32)
    step.append_context(th)
    step.set_step(anchor=99)
    step.capture()
    poison(step)
    step.replay()
    torch.cuda.synchronize()
    replayed = outputs(step)
    got = eager_with_intermediates(step)
    problems = [f"{key} of the replay differs from the eager run" for key, t in replayed.items()
                if not torch.equal(t.view(torch.uint8), got[key].view(torch.uint8))]
    ref = Reference(w, lm_head="nvfp4").step(th, 99)
    problems += check_step(step, got, ref, 99, "small, NVFP4 lm_head")["problems"]
    print("  lm_head kernel:", dict(step.kernel_names())["lm_head"])
    assert not problems, problems
    assert dict(step.kernel_names())["lm_head"].split(".")[-1] in ("w4a16_gemv_rt1_128", "w4a16_gemv_rt1", "w4a16_gemv_rt2")


def test_config_rejects_shapes_the_kernels_do_not_take():
    with pytest.raises(ValueError, match="head_dim"):
        SMALL.with_(head_dim=64).validate()
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        SMALL.with_(num_q_heads=6, num_kv_heads=4).validate()
    with pytest.raises(ValueError, match="selector_rank"):
        SMALL.with_(selector_rank=100).validate()


def test_qwen3_8b_shape():
    t0 = time.perf_counter()
    cfg = QWEN3_8B
    w = make_weights(cfg, seed=41)
    step = DrafterStep(w, max_context=2200)
    ctx = 2100  # past the 2048-key window of the sliding layers
    th = target_hidden(cfg, ctx, seed=42)
    step.append_context(th)
    step.set_step(anchor=4242)
    got = eager_with_intermediates(step)
    step.capture()
    poison(step)
    step.replay()
    torch.cuda.synchronize()
    problems = [f"{key} of the replay differs from the eager run" for key, t in outputs(step).items()
                if not torch.equal(t.view(torch.uint8), got[key].view(torch.uint8))]
    ref = Reference(w).step(th, 4242)
    problems += check_step(step, got, ref, 4242, "Qwen3-8B shape, context 2100")["problems"]
    problems += check_cache_rows(step, ref, ctx)
    print("  kernels:", sorted(set(dict(step.kernel_names()).values())))
    print(f"  test time {time.perf_counter() - t0:.1f} s")
    assert not problems, problems
