#!/usr/bin/env bash
# Two HTTP/2 senders other teams run, for the tests with real clients against
# `salvo mock --protocol h2` (Tests/SalvoBenchTests/HTTP2ClientTests.swift): aioapns (asyncio
# and h2; its default SSL context offers no ALPN) and pyapns-client (httpx; signs its provider
# token with `iat` = time.time()), in one virtualenv from PyPI (scripts/python-venv.sh).
# `make test` runs it; the tests only look for the result (they never go online).
#
#   scripts/h2-python-clients.sh [DIR]     (default: .build/legacy-clients/h2-python)
set -euo pipefail
cd "$(dirname "$0")/.."
# Pinned, with the HTTP/2 stacks under them: what the tests assert is these versions' view.
exec scripts/python-venv.sh "${1:-.build/legacy-clients/h2-python}" "the aioapns and pyapns-client tests will be skipped" \
    "aioapns pyapns_client" aioapns==4.0 pyapns-client==2.0.6 httpx==0.28.1 h2==4.4.1
