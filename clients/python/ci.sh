#!/usr/bin/env bash
# CI of the Python package (called by .ci/run):
#   clients/python/ci.sh SERVER_BINARY WORKDIR
# 1. the checked-in stubs match proto/, the version matches Cargo.toml;
# 2. ruff and mypy --strict (package, tests, examples);
# 3. the sdist and the wheel build with the ordinary tools (`python -m build`);
# 4. the wheel goes into two fresh venvs and the tests run against real servers:
#    WORKDIR/bare: the wheel and its declared dependencies only (grpcio,
#      protobuf) plus pytest: the client's tests prove the wheel is complete;
#    WORKDIR/agl: the wheel over the shared agl0 environment (agent-lightning
#      0.3.0, OpenTelemetry), reached through a .pth file instead of another
#      800 MB install: the LightningStore contract and the examples.
# WORKDIR/agl/bin/python is left for the other example checks of .ci/run.
set -euo pipefail

binary=$(realpath "${1:?usage: ci.sh SERVER_BINARY WORKDIR}")
work=${2:?usage: ci.sh SERVER_BINARY WORKDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
agl0=$("$root/tools/pyenv.sh" agl0)
python=$agl0/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP=True LIGHTNING_STORE_BIN=$binary
mkdir -p "$work"
cd "$here"

echo "--- stubs and version"
"$python" generate.py --check
package_version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
server_version=$("$python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["package"]["version"])' "$root/Cargo.toml")
if [ "$package_version" != "$server_version" ]; then
  echo "the package's version $package_version differs from the server's $server_version (Cargo.toml)" >&2
  exit 1
fi
echo "version $package_version, as the server's"

echo "--- ruff, mypy --strict"
"$agl0/bin/ruff" check . ../../examples/python/train.py ../../examples/python/session_runner.py
"$agl0/bin/ruff" format --check . ../../examples/python/train.py ../../examples/python/session_runner.py
"$agl0/bin/mypy"

echo "--- sdist and wheel (python -m build)"
rm -rf "$work/dist"
"$python" -m build --no-isolation --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
ls "$work/dist"
wheel=$(ls "$work"/dist/lightning_store-*.whl)

echo "--- bare venv: the wheel, grpcio, protobuf, pytest"
rm -rf "$work/bare"
python3 -m venv "$work/bare"
"$work/bare/bin/python" -m pip install --quiet --disable-pip-version-check -c "$root/tools/python/agl0.lock" "$wheel" pytest
"$work/bare/bin/python" -c 'import lightning_store, sys; print("lightning_store", lightning_store.__version__, "from", lightning_store.__file__)'
"$work/bare/bin/python" -m pytest -p no:cacheprovider -q tests --ignore=tests/agentlightning

echo "--- agl venv: the wheel over agl0 (agent-lightning 0.3.0)"
rm -rf "$work/agl"
python3 -m venv --without-pip "$work/agl"
site=$("$work/agl/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
agl0_site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$agl0_site')" >"$site/agl0.pth"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" "$wheel"
"$work/agl/bin/python" -m pytest -p no:cacheprovider -q tests/agentlightning
