#!/usr/bin/env bash
# The one GPU check: build the target of the GPU present, run the contract tests and the
# GPU tests, then (with --bench) the benchmarks and (with --sanitize) compute-sanitizer.
# Results (build log, junit XML, logs, the tests' checks summary, benchmark JSON) are packed into
# $OUT/gpu-results.tgz (OUT defaults to ./gpu-results).
#
#   scripts/gpu_check.sh [--bench[=NAME,...]] [--quick] [--sanitize] [--ncu[=CASE,...]] [--no-tests] [pytest -k expression]
#
# --ncu profiles the cases of benchmarks/profile_cases.py (or those named) with Nsight Compute:
# one launch each: occupancy, issue rate and warp stall samples, in gpu-results.tgz's ncu-CASE.txt;
# then a second launch's per-instruction counters (ncu-CASE-source.csv), summarised by
# scripts/ncu_mix.py into ncu-CASE-mix.txt (instructions by opcode, stall samples by reason).
# Each profile is stopped after NCU_TIMEOUT seconds (default 300), the per-instruction one after
# NCU_SOURCE_TIMEOUT (default 150; on the H200 six cases' profiles took 440 s in all, one of them,
# fp8_tma_qkv_256's per-instruction profile, stopped unfinished at 300).
# --bench=bench_fp8_linear,bench_launch_cost runs only those benchmarks; --quick passes --quick
# to the benchmarks that have it (their tuning subset); --no-tests builds, then goes straight to
# the benchmarks, profiles or sanitizer runs asked for. A kernel that hangs must not take the
# machine's whole lease: the GPU tests get GPU_TESTS_TIMEOUT seconds (default 1800) and each
# benchmark BENCH_TIMEOUT (default 600); past that they are stopped and the check fails.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
RES=$(mktemp -d)
trap 'tar czf "$OUT/gpu-results.tgz" -C "$RES" . && rm -rf "$RES"' EXIT
bench=0; sanitize=0; quick=0; tests=1; only=""; select=(); ncu_cases=""
for a in "$@"; do
  case "$a" in
    --ncu) ncu_cases=all ;;
    --ncu=*) ncu_cases="${a#--ncu=}" ;;
    --bench) bench=1 ;;
    --bench=*) bench=1; only=",${a#--bench=}," ;;
    --quick) quick=1 ;;
    --sanitize) sanitize=1 ;;
    --no-tests) tests=0 ;;
    *) select=(-k "$a") ;;
  esac
done
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KERNELGEN_REQUIRE_BUILT=1

nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.mem --format=csv | tee "$RES/gpu.txt"
if ! $PY -m pip install -q --no-build-isolation --no-deps -e . > "$RES/install.log" 2>&1; then
  # Without the build backend here, use the sources in place (the build installs the targets
  # into bindings/kernelgen_ops, which is then importable from the tree).
  echo "gpu_check: editable install failed (see install.log); using PYTHONPATH=src:bindings"
  export PYTHONPATH="$PWD/src:$PWD/bindings${PYTHONPATH:+:$PYTHONPATH}"
fi
target=$($PY scripts/gpu_target.py) || exit 1
echo "gpu_check: target $target"
start=$(date +%s)
$PY -m kernelgen.cli build --target "$target" -j "$(nproc)" 2>&1 | tee "$RES/build.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
echo "gpu_check: build took $(( $(date +%s) - start )) s"

status=0
if [ "$tests" -eq 1 ]; then
  # The type registry against the array producers installed here (torch's dtypes and DLPack codes).
  $PY -m pytest -q -p no:cacheprovider tests/unit/test_types.py 2>&1 | tail -n 3 | tee "$RES/types.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  $PY -m pytest -q -p no:cacheprovider "generated/$target/tests" --junitxml="$RES/contract.xml" 2>&1 | tail -n 5 | tee "$RES/contract.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  # KERNELGEN_CHECKS: the tests' comparisons against their bounds and for identical bits,
  # summarised per test module (tests/gpu/checks.py) into checks.md and checks.json.
  KERNELGEN_CHECKS="$RES/checks" timeout "${GPU_TESTS_TIMEOUT:-1800}" $PY -m pytest -q -p no:cacheprovider -m gpu tests/gpu "${select[@]}" -rfE \
    --junitxml="$RES/gpu-tests.xml" 2>&1 | tee "$RES/gpu-tests.log" | tail -n 40
  rc=${PIPESTATUS[0]}
  [ -f "$RES/checks.md" ] && cat "$RES/checks.md"
  [ "$rc" -eq 124 ] && echo "gpu_check: the GPU tests were stopped after ${GPU_TESTS_TIMEOUT:-1800} s (a hang?)" | tee -a "$RES/gpu-tests.log"
  [ "$rc" -eq 0 ] || status=1
  # Tests that need two GPUs skip on one: say so, so that a run on a two-GPU machine is not forgotten.
  two=$(grep -o 'message="needs two CUDA devices' "$RES/gpu-tests.xml" 2>/dev/null | wc -l)
  [ "$two" -gt 0 ] && echo "gpu_check: $two test(s) need two GPUs and were skipped here; run this script on a machine with two GPUs to cover them" | tee "$RES/two-gpu.txt"
fi

if [ "$bench" -eq 1 ]; then
  # name[:script:arguments]: the 48-SM runs (GB10's SM count, on a green context) reuse their
  # benchmark's script with --sms 48.
  for entry in bench_memory_bound bench_attn_prefill bench_attn_prefill_sm48:bench_attn_prefill:--sms=48 \
               bench_fp8_linear bench_fp8_gemv_ablation bench_w4a16_gemv_ablation bench_load_pattern bench_dense_linear bench_launch_cost bench_pdl_chains bench_rope_cache bench_attn_dflash bench_attn_dflash_ablation bench_dflash2 bench_topk16_ablation \
               bench_drafter_step bench_drafter_step_sm48:bench_drafter_step:--sms=48; do
    IFS=: read -r name script eargs <<< "$entry"
    b="benchmarks/${script:-$name}.py"
    case "$only" in ""|*",$name,"*) ;; *) continue ;; esac
    [ -f "$b" ] || { echo "gpu_check: $b missing"; continue; }
    extra=()
    [ -n "$eargs" ] && read -ra extra <<< "${eargs//=/ }"
    [ "$quick" -eq 1 ] && grep -q -- '"--quick"' "$b" && extra+=(--quick)
    echo "gpu_check: $name ${extra[*]}"
    timeout "${BENCH_TIMEOUT:-600}" $PY "$b" --out "$RES/$name.json" "${extra[@]}" 2>&1 | tee "$RES/$name.log" | tail -n 30
    if [ "${PIPESTATUS[0]}" -eq 124 ]; then
      echo "gpu_check: $name was stopped after ${BENCH_TIMEOUT:-600} s (a hang?)" | tee -a "$RES/$name.log"
      status=1
    fi
  done
fi
if [ -n "$ncu_cases" ]; then
  if ! command -v ncu > /dev/null; then
    echo "gpu_check: --ncu: ncu (Nsight Compute) is not on the PATH here" | tee "$RES/ncu.txt"
  else
    [ "$ncu_cases" = all ] && ncu_cases=$($PY benchmarks/profile_cases.py --list | paste -sd, -)
    stalls=""
    for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle; do
      stalls+="${stalls:+,}smsp__pcsamp_warps_issue_stalled_$r"
    done
    for c in ${ncu_cases//,/ }; do
      pattern=$($PY benchmarks/profile_cases.py "$c" --kernel) || { status=1; continue; }
      # the clocks left as they are (--clock-control none); the case's last launch is profiled
      timeout "${NCU_TIMEOUT:-300}" ncu --clock-control none --kernel-name "$pattern" --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
        --section WarpStateStats --section ComputeWorkloadAnalysis --metrics "$stalls" \
        $PY benchmarks/profile_cases.py "$c" > "$RES/ncu-$c.txt" 2>&1
      rc=$?
      echo "gpu_check: ncu $c: exit $rc"
      grep -E "^\s+(Duration|Elapsed Cycles|SM Active Cycles|Registers Per Thread|Achieved Active Warps Per SM|Issued Warp Per Scheduler|Eligible Warps Per Scheduler|smsp__pcsamp_warps_issue_stalled_\w+) " \
        "$RES/ncu-$c.txt" | sed 's/^ */  /'
      [ "$rc" -eq 0 ] || status=1
      timeout "${NCU_SOURCE_TIMEOUT:-150}" ncu --clock-control none --kernel-name "$pattern" --launch-skip 2 --launch-count 1 \
        --section SourceCounters --page source --print-source sass --csv \
        $PY benchmarks/profile_cases.py "$c" > "$RES/ncu-$c-source.csv" 2> "$RES/ncu-$c-source.err"
      rc=$?
      echo "gpu_check: ncu $c (source counters): exit $rc"
      [ "$rc" -eq 124 ] && echo "gpu_check: ncu $c (source counters): stopped after ${NCU_SOURCE_TIMEOUT:-150} s"
      $PY scripts/ncu_mix.py "$RES/ncu-$c-source.csv" --top 10 > "$RES/ncu-$c-mix.txt" 2>&1 || rc=1
      sed -n '1,14p' "$RES/ncu-$c-mix.txt" | sed 's/^/  /'
      [ "$rc" -eq 0 ] || status=1
    done
  fi
fi
if [ "$sanitize" -eq 1 ]; then
  # compute-sanitizer over every module's GPU tests, one test file per process so that a
  # tool failure cannot spill into the next module, at the smaller shapes, each run bounded
  # in time. The guard and binding tests provoke faults and huge grids on purpose and stay
  # out. Only the catalog's kernels are checked: the torch kernels that the tests use as
  # references are not ours (racecheck reports hazards inside torch's own reductions).
  san_k=${SANITIZE_K:-"not q4096 and not L4096 and not q1000 and not L1000 and not 8192 and not 40000"}
  ours="kns=dflash_|attn_prefill"
  for tool in memcheck racecheck; do
    for f in tests/gpu/test_*.py; do
      case "$f" in */test_bindings.py|*/test_launch_guards.py) continue ;; esac
      log="$RES/sanitizer-$tool-$(basename "$f" .py).log"
      timeout "${SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --kernel-regex "$ours" --error-exitcode 9 \
        --print-limit 20 $PY -m pytest -q -p no:cacheprovider -m gpu "$f" -k "$san_k" > "$log" 2>&1
      rc=$?
      echo "gpu_check: $tool $(basename "$f"): exit $rc: $(grep -E 'ERROR SUMMARY|Internal Sanitizer Error|passed|failed' "$log" | tail -n 3 | tr '\n' ' ')"
      [ "$rc" -eq 0 ] || status=1
    done
  done
fi

exit $status
