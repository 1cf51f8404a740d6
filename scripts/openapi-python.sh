#!/usr/bin/env bash
# openapi-spec-validator (and the jsonschema and PyYAML it brings), for the test that
# validates `salvo serve`'s OpenAPI document (Tests/SalvoServeTests/OpenAPITests.swift), in
# a virtualenv from PyPI. The test only looks for the result (it never goes online); without
# it, that test is skipped with the reason, and the one that checks real answers against
# the document uses the system's python3 when it has jsonschema and PyYAML.
#
#   scripts/openapi-python.sh [DIR]     (default: .build/openapi-python)
#
# Needs python3 with venv (Debian: python3-venv) and PyPI. Cached: once DIR/ready exists a
# second run does nothing. On failure DIR/failed says why.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.build/openapi-python}
[ -f "$dir/ready" ] && exit 0

# Pinned: what the test asserts is this version's reading of OpenAPI 3.1.
packages=(openapi-spec-validator==0.9.0)

rm -rf "$dir"
mkdir -p "$dir"
log="$dir/install.log"
fail() {
    echo "$1 (see $log)" > "$dir/failed"
    echo "scripts/openapi-python.sh: $1; the OpenAPI document's validation will be skipped (see $log)" >&2
    exit 1
}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3) || fail "python3 is not installed"
"$python" -m venv "$dir/venv" >> "$log" 2>&1 || fail "cannot make a virtualenv with $python (Debian: apt-get install python3-venv)"
# Bounded: without a network pip gives up within a minute instead of retrying for many.
"$dir/venv/bin/pip" install --quiet --timeout 15 --retries 2 "${packages[@]}" >> "$log" 2>&1 ||
    fail "pip could not install ${packages[*]} from PyPI"
"$dir/venv/bin/python" -c 'import openapi_spec_validator, jsonschema, referencing, yaml' >> "$log" 2>&1 ||
    fail "openapi_spec_validator, jsonschema, referencing or yaml does not import"
touch "$dir/ready"
echo "openapi-spec-validator ready in $dir/venv"
