#!/usr/bin/env bash
# Prints the path of the Python virtual environment NAME, creating it first
# when it is missing or older than its requirements.
#
#   tools/pyenv.sh NAME          # e.g. `"$(tools/pyenv.sh agl0)/bin/python" -m pytest`
#   tools/pyenv.sh --lock NAME   # re-pins tools/python/NAME.lock from a fresh install
#
# NAME.txt in tools/python/ lists what the environment is for and its top-level
# packages; NAME.lock pins every package (installed as pip constraints), so a
# run installs exactly what was tested. A line `# pip-args: ...` in NAME.txt
# adds arguments to pip install. The environments live in
# $LIGHTNING_STORE_PYENV_DIR (default: target/pyenv of the repository), so
# the test suite (`cargo test`) and .ci/run create each one once per checkout
# and share it; concurrent callers wait for the one that creates it.
set -euo pipefail

lock_mode=false
if [ "${1:-}" = "--lock" ]; then
  lock_mode=true
  shift
fi
name=${1:?usage: tools/pyenv.sh [--lock] NAME}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
spec=$root/tools/python/$name.txt
lock=$root/tools/python/$name.lock
[ -f "$spec" ] || { echo "pyenv: no $spec" >&2; exit 2; }
base=${LIGHTNING_STORE_PYENV_DIR:-$root/target/pyenv}
env=$base/$name
python=${PYTHON:-python3}
pip_args=$(sed -n 's/^# pip-args: *//p' "$spec" | tr '\n' ' ')
pip() {
  "$env/bin/python" -m pip --disable-pip-version-check --no-input "$@"
}

mkdir -p "$base"
exec 9>"$base/$name.lock-file"
flock 9

if $lock_mode; then
  rm -rf "$env"
  "$python" -m venv "$env"
  # shellcheck disable=SC2086
  pip install --quiet $pip_args -r "$spec" >&2
  pip freeze --all | grep -v -E '^pip==' >"$lock"
  echo "pyenv: pinned $(wc -l <"$lock") packages in $lock" >&2
  rm -rf "$env"
fi

stamp=$(cat "$spec" "$lock" 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ ! -x "$env/bin/python" ] || [ "$(cat "$env/.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "pyenv: creating $env from tools/python/$name.txt (once per checkout)" >&2
  rm -rf "$env"
  "$python" -m venv "$env"
  constraints=()
  [ -f "$lock" ] && constraints=(-c "$lock")
  # shellcheck disable=SC2086
  pip install --quiet $pip_args "${constraints[@]}" -r "$spec" >&2
  echo "$stamp" >"$env/.stamp"
fi
echo "$env"
