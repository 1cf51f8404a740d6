#!/usr/bin/env bash
# Two HTTP/2 senders other teams run, for the tests with real clients against
# `salvo mock --protocol h2` (Tests/SalvoBenchTests/HTTP2ClientTests.swift): aioapns (asyncio
# and h2; its default SSL context offers no ALPN) and pyapns-client (httpx; signs its provider
# token with `iat` = time.time()), in one virtualenv from PyPI. `make test` runs it; the tests
# only look for the result (they never go online).
#
#   scripts/h2-python-clients.sh [DIR]     (default: .build/legacy-clients/h2-python)
#
# Needs python3 with venv (Debian: python3-venv) and PyPI. Cached: once DIR/ready exists a
# second run does nothing. On failure DIR/failed says why, and the tests are skipped with
# that reason.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.build/legacy-clients/h2-python}
[ -f "$dir/ready" ] && exit 0

# Pinned, with the HTTP/2 stacks under them: what the tests assert is these versions' view.
packages=(aioapns==4.0 pyapns-client==2.0.6 httpx==0.28.1 h2==4.4.1)

rm -rf "$dir"
mkdir -p "$dir"
log="$dir/install.log"
fail() {
    echo "$1 (see $log)" > "$dir/failed"
    echo "scripts/h2-python-clients.sh: $1; the aioapns and pyapns-client tests will be skipped (see $log)" >&2
    exit 1
}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3) || fail "python3 is not installed"
"$python" -m venv "$dir/venv" >> "$log" 2>&1 || fail "cannot make a virtualenv with $python (Debian: apt-get install python3-venv)"
# Bounded: without a network pip gives up within a minute instead of retrying for many.
"$dir/venv/bin/pip" install --quiet --timeout 15 --retries 2 "${packages[@]}" >> "$log" 2>&1 ||
    fail "pip could not install ${packages[*]} from PyPI"
"$dir/venv/bin/python" -c 'import aioapns, pyapns_client' >> "$log" 2>&1 || fail "aioapns or pyapns_client does not import"
touch "$dir/ready"
echo "aioapns and pyapns-client ready in $dir/venv"
