#!/usr/bin/env bash
# PyAPNs 2.0.1 (PyPI `apns`), the enhanced-mode sender many teams ran against Apple's binary
# gateway, made importable on Python 3 for the tests with real clients (LegacyClientTests):
# a virtualenv with `apns==2.0.1` installed, then its Python 2 source converted in place with
# lib2to3. `make test` runs it; the tests only look for the result (they never go online).
#
#   scripts/pyapns.sh [DIR]     (default: .build/legacy-clients/pyapns)
#
# Needs python3 with venv and lib2to3 (Debian: python3-venv, python3-lib2to3) and PyPI.
# Cached: once DIR/ready exists a second run does nothing. On failure DIR/failed says why,
# and the tests are skipped with that reason.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.build/legacy-clients/pyapns}
[ -f "$dir/ready" ] && exit 0

rm -rf "$dir"
mkdir -p "$dir"
log="$dir/install.log"
fail() {
    echo "$1 (see $log)" > "$dir/failed"
    echo "scripts/pyapns.sh: $1; the PyAPNs test will be skipped (see $log)" >&2
    exit 1
}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3) || fail "python3 is not installed"
"$python" -m venv "$dir/venv" >> "$log" 2>&1 || fail "cannot make a virtualenv with $python (Debian: apt-get install python3-venv)"
# Bounded: without a network pip gives up within a minute instead of retrying for many.
"$dir/venv/bin/pip" install --quiet --timeout 15 --retries 2 --no-deps apns==2.0.1 >> "$log" 2>&1 ||
    fail "pip could not install apns==2.0.1 from PyPI"
module=$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/apns.py
# lib2to3 warns that it is deprecated (it is gone in Python 3.13); 3.11 still has it.
"$dir/venv/bin/python" -W ignore -m lib2to3 --write --nobackups "$module" >> "$log" 2>&1 ||
    fail "lib2to3 could not convert $module (Debian: apt-get install python3-lib2to3)"
"$dir/venv/bin/python" -W ignore -c 'import apns' >> "$log" 2>&1 || fail "the converted apns module does not import"
touch "$dir/ready"
echo "PyAPNs 2.0.1 ready in $dir/venv"
