#!/usr/bin/env bash
# The Python package as a Python user installs it: `pip install .` builds one
# wheel (pyproject.toml: scikit-build-core, pybind11 from the package index),
# which goes into two fresh virtual environments, one with NumPy 2 from the
# package index (and ml_dtypes, whose bfloat16 and float8 arrays the module
# reads) and one that sees Debian's NumPy 1.24 (and python3-pytest);
# the module's pytest suite then runs against each install, from outside the
# source tree. The command of the Release build (build/src/bitexact), when
# there, lets the tests that compare with it run too.
# Repository root:  bash tools/check_pip_install.sh     (needs python3-venv, python3-pip)
# Both environments are Debian's /usr/bin/python3 (the one whose NumPy is 1.24; one
# wheel fits both), not whatever python3 comes first on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/build/pip
rm -rf "$out"
mkdir -p "$out"
if [ -x "$root/build/src/bitexact" ]; then export BITEXACT_CLI=$root/build/src/bitexact; fi
export BITEXACT_TEST_DATA_DIR=$root/tests/data
python=/usr/bin/python3

"$python" -m venv "$out/numpy2"
"$out/numpy2/bin/pip" install -q "numpy>=2" pytest ml_dtypes
"$out/numpy2/bin/pip" wheel -q --no-deps -w "$out/wheel" "$root"
"$python" -m venv --system-site-packages "$out/numpy1"

for env in numpy2 numpy1; do
  "$out/$env/bin/pip" install -q --no-deps "$out"/wheel/*.whl
  echo "== $env: NumPy $("$out/$env/bin/python" -c 'import numpy; print(numpy.__version__)'), bitexact from" \
       "$("$out/$env/bin/python" -c 'import bitexact, os; print(os.path.dirname(bitexact.__file__))')"
  (cd "$out" && "$out/$env/bin/python" -m pytest -q -p no:cacheprovider -rs "$root/python/tests")
done
