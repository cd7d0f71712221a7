#!/usr/bin/env bash
# The supported torch range, for real (nox -s abi): the CPU-only abi3 library built against the
# oldest supported torch and the newest on PyPI, with each C++ compiler, and every build's tests
# run under each of those torch versions. Warnings are errors (-Wall -Wextra) in every build.
#
#     tools/abi/torch_range.sh                       # torch 2.11.0 and 2.15.0, g++ and clang++
#     TORCH_VERSIONS="2.11.0 2.13.0" COMPILERS=g++ tools/abi/torch_range.sh
#
# Each torch gets a venv in .envs/abi/ (reused), with the test tools pinned as in
# requirements/venv-lock.txt (setuptools >= 77, as each torch allows). PIP_CONSTRAINT is
# cleared: a machine-wide pip cap on torch must not decide which torch is tested.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
versions=${TORCH_VERSIONS:-"2.11.0 2.15.0"}
compilers=${COMPILERS:-"g++ clang++"}
work="$repo/.envs/abi"
pins=$(grep -o -E '^(pytest|hypothesis|expecttest|numpy|ninja|wheel)==[^ ]+' "$repo/requirements/venv-lock.txt")
pip_quiet=(-q --disable-pip-version-check)
export CUSTOM_OP_CUDA=0  # CPU builds, the JIT test's too

# A copy of what a wheel is built from: the checkout's own build/ and in-place library stay untouched.
src="$work/src"
rm -rf "$src" && mkdir -p "$src"
cp -r "$repo"/{setup.py,pyproject.toml,README.md,LICENSE,custom_op} "$src"
find "$src" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +

for version in $versions; do
  venv="$work/torch-$version"
  if ! "$venv/bin/python" -c "import torch, pytest, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086  # one pin per word
    PIP_CONSTRAINT=/dev/null "$venv/bin/pip" install "${pip_quiet[@]}" "torch==$version" "setuptools>=77" $pins
  fi
  for cxx in $compilers; do
    echo "== build: torch $version, $cxx"
    rm -rf "$src/build" "$work/dist/torch-$version-$cxx"
    (cd "$src" && CXX=$cxx CUSTOM_OP_WERROR=1 "$venv/bin/python" -m pip wheel "${pip_quiet[@]}" \
      --no-build-isolation --no-deps . -w "$work/dist/torch-$version-$cxx")
  done
done

failed=()
for version in $versions; do
  for cxx in $compilers; do
    wheel=$(ls "$work/dist/torch-$version-$cxx"/custom_op-*-abi3-*.whl)
    for runtime in $versions; do
      run="torch $version with $cxx, under torch $runtime"
      target="$work/run/$version-$cxx-on-$runtime"
      rm -rf "$target"
      "$work/torch-$runtime/bin/pip" install "${pip_quiet[@]}" --no-deps --target "$target" "$wheel"
      echo "== tests: built against $run"
      # The installed library is tested, not the checkout's: the wheel comes first on the path,
      # and the pytest script (unlike python -m) does not put the checkout there.
      (cd "$work" && PYTHONPATH="$target" "$work/torch-$runtime/bin/python" -c \
        "import custom_op, sys; assert custom_op.LIBRARY_PATH.startswith(sys.argv[1]), custom_op.LIBRARY_PATH" "$target")
      if ! (cd "$repo" && PYTHONPATH="$target" "$work/torch-$runtime/bin/pytest" tests/ops -q -p no:cacheprovider); then
        failed+=("$run")
      fi
    done
  done
done
if ((${#failed[@]})); then
  printf 'failed: built against %s\n' "${failed[@]}"
  exit 1
fi
echo "every build passed under every torch: $versions; compilers: $compilers"
