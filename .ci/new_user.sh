#!/usr/bin/env bash
# The whole path of a new kernelgen user, in a temporary folder outside the repository, on a
# machine where no CUDA toolkit is visible (KERNELGEN_IGNORE_SYSTEM_CUDA hides the installed
# one, so `kernelgen build` installs the toolkit from PyPI): a fresh venv, a non-editable
# install of kernelgen, `kernelgen init`, the example project's kernels (examples/tinyops), a
# build of its custom target (compile only), `import`, its pytest (plans and contract tests),
# its wheel, that wheel in a second fresh venv without kernelgen, and a C++ program built with
# CMake against the installed wheel (find_package).
# Run by .ci/run; by itself: .ci/new_user.sh [--keep] (--keep leaves the folder for a look).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kernelgen-new-user.XXXXXX")
[ "${1:-}" = "--keep" ] || trap 'rm -rf "$WORK"' EXIT
START=$SECONDS
step() { printf '\n==== new user [%3ds]: %s\n' "$((SECONDS - START))" "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 KERNELGEN_IGNORE_SYSTEM_CUDA=1
unset KERNELGEN_REQUIRE_BUILT VIRTUAL_ENV PYTHONPATH  # the repository's CI settings are not a new user's
cd "$WORK"

step "fresh venv; non-editable install of kernelgen from $REPO"
before=$(git -C "$REPO" status --porcelain --ignored --untracked-files=all | sort)
run python3 -m venv venv1
. venv1/bin/activate
run pip install -q "$REPO" pytest
after=$(git -C "$REPO" status --porcelain --ignored --untracked-files=all | sort)
if [ "$before" != "$after" ]; then
  echo "FAIL: installing kernelgen changed the source tree:"; diff <(echo "$before") <(echo "$after") || true; exit 1
fi
echo "the source tree is as it was: $(pip show kernelgen | grep -E '^(Version|Location)' | tr '\n' ' ')"

step "kernelgen init, then the example's kernels, specs, targets and tests"
run kernelgen init tinyops --package tinyops --target ampere --target hopper
cp -r "$REPO"/examples/tinyops/{specs,kernels,tests} tinyops/
cd tinyops
run kernelgen list

step "kernelgen build --target ampere (no visible CUDA toolkit: it comes from PyPI)"
run kernelgen build --target ampere

step "import tinyops (from another folder, no environment variables)"
cd "$WORK"
run python - <<'PY'
import tinyops
print("tinyops from", tinyops.__path__[0])
print("registry:", tinyops.registry(), "built:", tinyops.available_targets())
try:
    tinyops.target()
except tinyops.TargetError as exc:
    print("auto-selection here:", exc)
import importlib
axpy = importlib.import_module("tinyops.ampere.axpy")
print("axpy.axpy.plan(n=4096):", axpy.axpy.plan(n=4096))
print("axpy.axpy.plan(n=1001):", axpy.axpy.plan(n=1001))
PY
KERNELGEN_TARGET=ampere run python -c "from tinyops import axpy; print('KERNELGEN_TARGET=ampere selects', axpy.__name__)"
cd tinyops

step "pytest (the project's tests and the generated contract tests; hopper is not built here)"
run python -m pytest -q -rs -p no:cacheprovider

step "pip wheel of the project (target ampere)"
run pip install -q scikit-build-core
run pip wheel -q --no-build-isolation --no-deps -w "$WORK/dist" . -Ccmake.define.KERNELGEN_TARGETS=ampere \
  -Ccmake.define.KERNELGEN_LINEINFO=OFF
ls -l "$WORK"/dist
python -m zipfile -l "$WORK"/dist/tinyops-*.whl | awk 'NR > 1 {print "  " $1}'
# without line information the libraries name no folder of the machine that built them
rm -rf "$WORK/unpacked" && python -m zipfile -e "$WORK"/dist/tinyops-*.whl "$WORK/unpacked"
if grep -rla "$WORK" "$WORK/unpacked"; then echo "FAIL: the wheel above names $WORK"; exit 1; fi
echo "the wheel names no path under $WORK"
deactivate

step "the wheel in a second fresh venv (no kernelgen there)"
cd "$WORK"
run python3 -m venv venv2
. venv2/bin/activate
run pip install -q "$WORK"/dist/tinyops-*.whl
if python -c "import kernelgen" 2>/dev/null; then echo "FAIL: kernelgen is installed in venv2"; exit 1; fi
KERNELGEN_TARGET=ampere run python - <<'PY'
import tinyops
from tinyops import axpy
print("tinyops from", tinyops.__path__[0], "| built:", tinyops.available_targets())
plan = axpy.axpy.plan(n=4096)
print("axpy.axpy.plan(n=4096):", plan)
assert plan["kernel"] == "axpy_vec4_f32" and plan["grid"] == (4, 1, 1), plan
PY
echo "a target the wheel does not hold:"
{ KERNELGEN_TARGET=hopper python -c "from tinyops import axpy" 2>&1 || true; } | tail -n 1  # it fails, as it should
SITE=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
deactivate

step "a C++ program against the installed wheel (CMake: find_package(tinyops COMPONENTS ampere))"
CUDA_ROOT=$("$WORK"/venv1/bin/python -c "from kernelgen import toolkit; print(toolkit.find_toolkit().root)")
mkdir -p "$WORK/cpp"
cat > "$WORK/cpp/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.24)
project(engine LANGUAGES CXX)
find_package(tinyops CONFIG REQUIRED COMPONENTS ampere)
add_executable(engine main.cpp)
target_link_libraries(engine PRIVATE tinyops::ampere)
CMAKE
cat > "$WORK/cpp/main.cpp" <<'CPP'
#include <cstdio>
#include "tinyops/axpy.h"
int main() {
  const kg_plan p = tinyops::axpy::plan_axpy_vec4_f32(4096);
  std::printf("tinyops::axpy::plan_axpy_vec4_f32(4096): grid %lld, block %lld\n", (long long)p.grid[0],
              (long long)p.block[0]);
  return p.code == 0 && p.grid[0] == 4 ? 0 : 1;
}
CPP
CMAKE_BIN=$(command -v cmake || echo "$WORK/venv1/bin/cmake")
run "$CMAKE_BIN" -S "$WORK/cpp" -B "$WORK/cpp/build" -DCMAKE_PREFIX_PATH="$SITE" -DCUDAToolkit_ROOT="$CUDA_ROOT" \
  > "$WORK/cpp/configure.log" || { cat "$WORK/cpp/configure.log"; exit 1; }
run "$CMAKE_BIN" --build "$WORK/cpp/build" > "$WORK/cpp/build.log" || { cat "$WORK/cpp/build.log"; exit 1; }
run "$WORK/cpp/build/engine"
step "done: the new user's path works"
