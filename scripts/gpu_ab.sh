#!/usr/bin/env bash
# A / B / A on the GPU machine: the tree as it is (A) against the tree with a patch applied (B),
# each built for the GPU's target and measured by the same benchmark, then A again, so that the
# machine's drift shows beside the difference. The patch comes as a file (`git diff main...BRANCH
# > x.patch`), since the GPU machine's copy of the tree has no history.
#
#   scripts/gpu_ab.sh PATCH[,PATCH...] BENCH [benchmark arguments...]
#
# BENCH names a script of benchmarks/ (bench_attn_dflash, bench_fp8_linear, ...); its JSON and
# log for each round (BENCH-a1, BENCH-b, BENCH-a2) and the build logs are packed into
# $OUT/gpu-ab.tgz (OUT defaults to ./gpu-results). Several patches, comma-separated, are each
# applied alone in turn between the two A rounds (rounds b-NAME, NAME the patch file's name
# without .patch). A patch is reverted after its round, whatever happens. GPU_AB_TESTS="pytest
# args" also runs those GPU tests on each B (for instance "tests/gpu/test_fp8_linear.py -k tma"),
# keeps their log (tests-NAME.log) and repeats each B's outcome after the times.
# At the end, scripts/ab_table.py prints every time of the rounds side by side (AB_MATCH="regex"
# narrows it to the cases that match). Each round's benchmark, and each B's tests, are stopped
# after AB_TIMEOUT seconds (default 300): a patch that hangs a kernel costs that much of the
# machine's time, not the whole call's, and the rounds after it still run.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,19p' "$0"; exit 2; }
IFS=, read -ra patches <<< "$1"
bench=$2
shift 2
[ ${#patches[@]} -ge 1 ] || { echo "gpu_ab: no patch named"; exit 2; }
for i in "${!patches[@]}"; do
  [ -f "${patches[$i]}" ] || { echo "gpu_ab: no patch file ${patches[$i]}"; exit 2; }
  patches[$i]=$(realpath "${patches[$i]}")
done
[ -f "benchmarks/$bench.py" ] || { echo "gpu_ab: no benchmark benchmarks/$bench.py"; exit 2; }
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
AB_TIMEOUT=${AB_TIMEOUT:-300}  # seconds a round's benchmark, or a B's tests, may take
export PYTHONUNBUFFERED=1 KERNELGEN_REQUIRE_BUILT=1
export PYTHONPATH="$PWD/src:$PWD/bindings:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
apply() {  # apply PATCH [--check | -R]: git apply (which works outside a repository), else patch
  local file=$1
  shift
  if command -v git > /dev/null; then
    git apply "$@" "$file"
  else
    patch -p1 -s -f "${@/--check/--dry-run}" < "$file" > /dev/null
  fi
}
for f in "${patches[@]}"; do
  apply "$f" --check || { echo "gpu_ab: $f does not apply to this tree"; exit 2; }
done
applied=""  # the patch applied now, if any
RES=$(mktemp -d)
trap '[ -z "$applied" ] || apply "$applied" -R; tar czf "$OUT/gpu-ab.tgz" -C "$RES" . && rm -rf "$RES"' EXIT

target=$($PY scripts/gpu_target.py) || exit 2

round() {  # round NAME: build, then the benchmark
  local name=$1 start
  shift
  start=$(date +%s)
  $PY -m kernelgen.cli build --target "$target" -j "$(nproc)" > "$RES/build-$name.log" 2>&1 \
    || { tail -n 20 "$RES/build-$name.log"; return 1; }
  echo "gpu_ab: $name built in $(( $(date +%s) - start )) s"
  timeout "$AB_TIMEOUT" $PY "benchmarks/$bench.py" --out "$RES/$bench-$name.json" "$@" > "$RES/$bench-$name.log" 2>&1
  local rc=$?
  tail -n 15 "$RES/$bench-$name.log"
  [ $rc -eq 124 ] && echo "gpu_ab: $name: $bench stopped after $AB_TIMEOUT s (a hang?)"
  return $rc
}

targs=()  # GPU_AB_TESTS as pytest arguments
[ -z "${GPU_AB_TESTS:-}" ] || read -ra targs <<< "$GPU_AB_TESTS"
status=0
verdicts=()  # each B's test outcome, repeated at the end
echo "== A (the tree as it is)"
round a1 "$@" || status=1
for f in "${patches[@]}"; do
  name=b
  [ ${#patches[@]} -eq 1 ] || name=b-$(basename "$f" .patch)
  apply "$f" && applied=$f
  echo "== $name (with $(basename "$f"))"
  round "$name" "$@" || status=1
  if [ ${#targs[@]} -gt 0 ]; then
    timeout "$AB_TIMEOUT" $PY -m pytest -q -p no:cacheprovider -m gpu "${targs[@]}" > "$RES/tests-$name.log" 2>&1
    rc=$?
    tail -n 5 "$RES/tests-$name.log"
    if [ "$rc" -eq 124 ]; then
      echo "gpu_ab: $name: the tests stopped after $AB_TIMEOUT s (a hang?)"
      verdicts+=("$name: stopped after $AB_TIMEOUT s")
    else
      verdicts+=("$name: $(grep -v '^\s*$' "$RES/tests-$name.log" | tail -n 1) (exit $rc)")
    fi
    [ "$rc" -eq 0 ] || status=1
  fi
  apply "$f" -R && applied=""
done
echo "== A again"
round a2 "$@" || status=1
# Every time in the rounds' JSON side by side, each B over the mean of the two A rounds
# (AB_MATCH="regex" keeps the matching cases).
echo "== times (scripts/ab_table.py)"
$PY scripts/ab_table.py "$RES" ${AB_MATCH:+--match "$AB_MATCH"} || true
if [ ${#verdicts[@]} -gt 0 ]; then
  echo "== tests on each B (their logs: tests-NAME.log)"
  printf '%s\n' "${verdicts[@]}"
fi
exit $status
