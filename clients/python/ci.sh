#!/usr/bin/env bash
# CI of the Python distribution (called by .ci/run after `cargo build`):
#   clients/python/ci.sh WORKDIR
# 1. the checked-in stubs match proto/; ruff and mypy --strict (package,
#    tests, scripts, examples); the release workflow against GitHub's schema;
# 2. the sdist (maturin): what it holds;
# 3. the Linux x86_64 wheel (maturin, the debug build CI already made, stripped)
#    and the client-only wheel derived from it; pip picks the right one;
# 4. fresh venvs, each with nothing but a wheel and the test tools:
#    WORKDIR/bare: the platform wheel. `lightning-store serve` from its PATH as
#      a user runs it (SQLite, the default backend), then the package's tests,
#      whose pytest plugin starts that same binary for every test;
#    WORKDIR/client: the client-only wheel: its `lightning-store` explains how
#      to get the server, and the client's tests pass against the server of
#      WORKDIR/bare ($LIGHTNING_STORE_BIN);
#    WORKDIR/agl: the platform wheel over the shared agl0 environment
#      (agent-lightning 0.3.0, OpenTelemetry), reached through a .pth file
#      instead of another 800 MB install: the LightningStore contract and the
#      examples.
# 5. pip builds a wheel with the server from the sdist (cargo, dev profile).
# WORKDIR/agl/bin/python is left for the other example checks of .ci/run.
set -euo pipefail

work=$(mkdir -p "${1:?usage: ci.sh WORKDIR}" && cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
agl0=$("$root/tools/pyenv.sh" agl0)
tools=$("$root/tools/pyenv.sh" packaging)
python=$agl0/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP=True
unset LIGHTNING_STORE_BIN # the tests run the binary the wheel installed
cd "$here"

timed() {
  local started=$SECONDS
  "$@"
  echo "($((SECONDS - started)) s)"
}

install() { # VENV PACKAGE...: the package's dependencies at the versions agl0 pins
  local venv=$1
  shift
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$root/tools/python/agl0.lock" "$@"
}

echo "--- stubs, ruff, mypy --strict, the release workflow's schema"
"$python" generate.py --check
scripts=(../../examples/python/train.py ../../examples/python/session_runner.py)
"$agl0/bin/ruff" check . "${scripts[@]}"
"$agl0/bin/ruff" format --check . "${scripts[@]}"
"$agl0/bin/mypy"
"$tools/bin/check-jsonschema" --builtin-schema vendor.github-workflows "$root/.github/workflows/release.yml"

echo "--- the package's LICENSE is the repository's; README's links work outside the repository"
cmp LICENSE "$root/LICENSE" || { echo "clients/python/LICENSE differs from the repository's LICENSE" >&2; exit 1; }
# PyPI and other indexes show README.md without the repository around it: no
# relative link but anchors, and each link into the repository names a file
# or directory that exists.
"$python" - "$root" README.md <<'PY'
import os
import re
import sys

root, readme = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
bad = []
for target in re.findall(r"\]\(([^)\s]+)\)", text):
    if target.startswith("#"):
        continue
    if not re.match(r"https?://", target):
        bad.append(f"relative link {target}")
        continue
    m = re.match(r"https://github\.com/lightning-store/lightning-store/(?:blob|tree)/main/([^#?]+)", target)
    if m and not os.path.exists(os.path.join(root, m.group(1))):
        bad.append(f"link to a missing file {target}")
if bad:
    sys.exit("README.md: " + "; ".join(bad))
PY

echo "--- sdist (maturin sdist): what it holds"
rm -rf "$work/dist" "$work/from-sdist"
"$tools/bin/maturin" sdist --out "$work/dist" >"$work/sdist.log" 2>&1 || { cat "$work/sdist.log"; exit 1; }
sdist=$(ls "$work"/dist/lightning_store-*.tar.gz)
tar tzf "$sdist" | sed 's|^[^/]*/||' | sort >"$work/sdist.files"
for needed in Cargo.toml Cargo.lock crates/proto/build.rs src/main.rs proto/lightningstore/v1/store.proto \
  crates/backends/migrations/sqlite/0001_init.sql pyproject.toml README.md src/lightning_store/__init__.py; do
  grep -qx "$needed" "$work/sdist.files" || { echo "the sdist lacks $needed" >&2; exit 1; }
done
if grep -E '^(tests|docs|helm|examples|clients)/' "$work/sdist.files"; then
  echo "the sdist holds files the build does not need (Cargo.toml's include)" >&2
  exit 1
fi
grep -q '^# lightning-store for Python' <(tar xzf "$sdist" -O --wildcards '*/README.md')
grep -qx 'LICENSE' "$work/sdist.files" || { echo "the sdist lacks LICENSE" >&2; exit 1; }
grep -q '^License-File: LICENSE' <(tar xzf "$sdist" -O --wildcards '*/PKG-INFO') \
  || { echo "the sdist's PKG-INFO names no License-File" >&2; exit 1; }
echo "$(wc -l <"$work/sdist.files") files, $(du -k "$sdist" | cut -f1) KiB"

echo "--- the Linux x86_64 wheel (maturin build --profile dev --strip) and the client-only wheel"
started=$SECONDS
"$tools/bin/maturin" build --profile dev --strip --out "$work/dist" >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; exit 1; }
echo "($((SECONDS - started)) s)"
wheel=$(ls "$work"/dist/lightning_store-*-manylinux_*.whl)
"$python" client_only_wheel.py "$wheel" --out "$work/dist"
client_wheel=$(ls "$work"/dist/lightning_store-*-py3-none-any.whl)
ls -l "$work/dist"
for w in "$wheel" "$client_wheel"; do # each carries the LICENSE (PEP 639: .dist-info/licenses/)
  "$python" - "$w" "$root/LICENSE" <<'PY'
import sys
import zipfile

wheel, license_file = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    if not names or z.read(names[0]) != open(license_file, "rb").read():
        sys.exit(f"{wheel} does not carry the LICENSE in .dist-info/licenses/")
    metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    if b"License-File: LICENSE" not in z.read(metadata):
        sys.exit(f"{wheel}: METADATA names no License-File")
print(f"{wheel.rsplit('/', 1)[-1]}: {names[0]}")
PY
done
chosen() { # the file pip installs from the directory $1
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --no-index --find-links "$1" \
    --dest "$work/chosen" lightning-store
  ls "$work/chosen" && rm -rf "$work/chosen"
}
[ "$(chosen "$work/dist")" = "$(basename "$wheel")" ] # the platform wheel where it fits
mkdir -p "$work/elsewhere" && cp "$sdist" "$client_wheel" "$work/elsewhere"
[ "$(chosen "$work/elsewhere")" = "$(basename "$client_wheel")" ] # the client-only wheel before the sdist
echo "pip takes the platform wheel where it fits, else the client-only wheel before the sdist"

echo "--- bare venv: the platform wheel and the test tools"
rm -rf "$work/bare"
python3 -m venv "$work/bare"
timed install "$work/bare" "$wheel" -r tests/requirements.txt
(
  # As a user runs it: the command on PATH, its default backend (SQLite, in ./lightning-store.db).
  export PATH="$work/bare/bin:$PATH"
  mkdir -p "$work/user" && cd "$work/user"
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  lightning-store --version
  lightning-store serve --listen "127.0.0.1:$port" >serve.log 2>&1 &
  server=$!
  trap 'kill -KILL $server 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do # the CLI's own client until it answers, 30 s at most
    lightning-store stats --server "127.0.0.1:$port" >/dev/null 2>&1 && break
    sleep 0.1
  done
  rollout=$(lightning-store enqueue --server "127.0.0.1:$port" --input '{"question": "2+2"}' | awk '$1 == "rollout" { print $2 }')
  lightning-store rollouts --server "127.0.0.1:$port" | grep -q "^$rollout  *queuing" || { cat serve.log; exit 1; }
  kill -TERM "$server"
  wait "$server" || { echo "lightning-store serve exited with $? after SIGTERM" >&2; cat serve.log; exit 1; }
  [ -s lightning-store.db ]
  echo "lightning-store serve from the venv: served, stored in ./lightning-store.db, exited 0 on SIGTERM"
)
timed "$work/bare/bin/python" -m pytest -p no:cacheprovider -q tests --ignore=tests/agentlightning

echo "--- client venv: the client-only wheel"
rm -rf "$work/client"
python3 -m venv "$work/client"
install "$work/client" "$client_wheel" -r tests/requirements.txt
if "$work/client/bin/lightning-store" serve 2>"$work/client/message"; then
  echo "the client-only wheel's lightning-store ran instead of explaining" >&2
  exit 1
fi
grep -F -- "--no-binary lightning-store" "$work/client/message"
timed env LIGHTNING_STORE_BIN="$work/bare/bin/lightning-store" \
  "$work/client/bin/python" -m pytest -p no:cacheprovider -q tests/test_client.py

echo "--- agl venv: the platform wheel over agl0 (agent-lightning 0.3.0)"
rm -rf "$work/agl"
python3 -m venv --without-pip "$work/agl"
site=$("$work/agl/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
agl0_site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$agl0_site')" >"$site/agl0.pth"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" "$wheel" \
  "$(grep '^pytest-asyncio==' tests/requirements.txt)"
timed "$work/agl/bin/python" -m pytest -p no:cacheprovider -q tests/agentlightning

echo "--- a wheel pip builds from the sdist with cargo, as where no wheel fits"
# In the dev profile and CI's target directory, whose dependencies are built
# already: only the crate compiles (its artifacts in target/debug are then
# those of the sdist's sources, the same files). The build backend is the
# pinned maturin of the packaging environment (no build isolation; its
# command on PATH).
rm -rf "$work/from-sdist"
timed env CARGO_TARGET_DIR="$root/target" MATURIN_PEP517_ARGS="--profile dev" PATH="$tools/bin:$PATH" \
  "$tools/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --wheel-dir "$work/from-sdist" "$sdist"
built=$(ls "$work"/from-sdist/lightning_store-*.whl)
"$python" -m zipfile -l "$built" | grep -q '\.data/scripts/lightning-store ' || {
  echo "the wheel built from the sdist holds no server binary" >&2
  exit 1
}
echo "$(basename "$built"): the package and the server, built from the sdist"
