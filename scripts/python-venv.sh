#!/usr/bin/env bash
# A virtualenv from PyPI with pinned packages, for tests that run Python tools: what
# scripts/h2-python-clients.sh and scripts/openapi-python.sh share. Cached: once DIR/ready
# exists a second run does nothing. On failure DIR/failed says why, and the tests that need
# it are skipped with that reason (they never go online themselves).
#
#   scripts/python-venv.sh DIR SKIPPED MODULES PACKAGE...
#     DIR       where the virtualenv goes (DIR/venv)
#     SKIPPED   what a failure means, for the message ("the X tests will be skipped")
#     MODULES   the modules that must import afterwards, space-separated
#
# Needs python3 with venv (Debian: python3-venv) and PyPI.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
dir=$1 skipped=$2 modules=$3; shift 3
[ -f "$dir/ready" ] && exit 0

rm -rf "$dir"
mkdir -p "$dir"
log="$dir/install.log"
fail() {
    echo "$1 (see $log)" > "$dir/failed"
    echo "$(basename "$0"): $1; $skipped (see $log)" >&2
    exit 1
}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3) || fail "python3 is not installed"
"$python" -m venv "$dir/venv" >> "$log" 2>&1 || fail "cannot make a virtualenv with $python (Debian: apt-get install python3-venv)"
# Bounded: without a network pip gives up within a minute instead of retrying for many.
"$dir/venv/bin/pip" install --quiet --timeout 15 --retries 2 "$@" >> "$log" 2>&1 ||
    fail "pip could not install $* from PyPI"
"$dir/venv/bin/python" -c "import ${modules// /, }" >> "$log" 2>&1 || fail "$modules: not every one imports"
touch "$dir/ready"
echo "$* ready in $dir/venv"
