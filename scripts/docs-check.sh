#!/usr/bin/env bash
# Checks that the documentation `make docs` built opens in a browser from a plain static web
# server: serves DOCS_DIR on a loopback port (under BASE_PATH when given, as a site in a
# sub-folder is served), renders the landing page and one module's page in headless
# Chromium, and fails unless the rendered text holds what those pages say. DocC pages are
# drawn by JavaScript, so a page whose routes or base path are wrong renders blank or
# "can't be found": reading the HTML files would not tell.
#
#   scripts/docs-check.sh DOCS_DIR [BASE_PATH]
set -euo pipefail

docs=$(cd "${1:?usage: scripts/docs-check.sh DOCS_DIR [BASE_PATH]}" && pwd)
base=${2:-}
base=${base#/}
base=${base%/}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "docs-check: no Chromium to render the pages with (apt-get install chromium)" >&2
  exit 1
fi

site=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$site"
}
trap cleanup EXIT
# The server's root holds the docs where the base path puts them.
if [ -n "$base" ]; then
  mkdir -p "$site/$(dirname "$base")"
  ln -s "$docs" "$site/$base"
  prefix="/$base"
else
  rmdir "$site"
  ln -s "$docs" "$site"
  prefix=""
fi

# Port 0: the kernel picks a free one, which the server prints.
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$site/" > "$site.log" 2>&1 &
server=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$site.log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
rm -f "$site.log"
[ -n "$port" ] || { echo "docs-check: the web server did not start" >&2; exit 1; }

# The rendered page's text; a time budget lets its scripts fetch and draw.
render() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 \
    --dump-dom "http://127.0.0.1:$port$prefix/$1" 2>/dev/null | sed 's/<[^>]*>/\n/g'
}

# expect PAGE TEXT...: every TEXT is a line of PAGE as the browser drew it.
expect() {
  local page=$1 text
  shift
  local rendered
  rendered=$(render "$page")
  for text in "$@"; do
    if ! grep -qxF -- "$text" <<< "$(sed 's/^ *//; s/ *$//' <<< "$rendered")"; then
      echo "docs-check: http://127.0.0.1:$port$prefix/$page does not show \"$text\" in a browser" >&2
      exit 1
    fi
  done
  echo "docs-check: $prefix/$page shows: $*"
}

expect "" SalvoWire SalvoEngine SalvoCampaignFiles SalvoBlackBerry
expect "documentation/salvoengine/" "Getting started" "Delivery semantics" Sender
expect "documentation/salvoengine/sender" "Sender"
