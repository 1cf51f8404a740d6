#!/usr/bin/env bash
# One provider token per team across runs: `salvo send --protocol h2` with a .p8 key, three
# times in a row against one `salvo mock --protocol h2` (which, as APNs does, refuses a
# second token of a team signed within 20 minutes: 429 TooManyProviderTokenUpdates).
#   1, 2: the token cache (a fresh $XDG_STATE_HOME): the second run reuses the first's token;
#   3:    --no-token-cache: a token of its own, refused; the run stops at once, saying why.
# Each line: the run, its exit status, how long it took, what its summary says. Then how many
# tokens the mock took.
#
#   scripts/provider-tokens.sh [--count 20000] [--salvo BIN] [--out FILE]
set -euo pipefail
count=20000 out="" salvo=$(pwd)/.build/release/salvo
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --salvo) salvo=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
[ -x "$salvo" ] || { echo "provider-tokens.sh: build first: swift build -c release" >&2; exit 2; }
work=$(mktemp -d /tmp/salvo-provider-tokens-XXXXXX)
mock=""
cleanup() { [ -n "$mock" ] && kill "$mock" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work"
h2_tokens "$work/tokens.txt" "$count" --accepted-only
auth=(--auth-key "$work/AuthKey.p8" --key-id TOKENKEY01 --team-id TOKENTEAM1)
mkdir -m 700 "$work/state"

"$salvo" mock --protocol h2 --host 127.0.0.1 --port 0 --cert "$work/server.pem" --key "$work/server.key" \
  "${auth[@]}" --report "$work/mock.json" > "$work/mock.out" 2> "$work/mock.err" &
mock=$!
for _ in $(seq 1 200); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
[ -n "$port" ] || { echo "provider-tokens.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }

{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?'): $count notifications per run"
  for run in 1 2 3; do
    flags=()
    # The mock, as APNs, takes a token of the same iat second as the one it holds: run 3
    # signs in a later second, as any later run would.
    if [ "$run" = 3 ]; then flags=(--no-token-cache); sleep 1.1; fi
    start=$(date +%s.%N)
    status=0
    XDG_STATE_HOME="$work/state" "$salvo" send --protocol h2 --gateway "127.0.0.1:$port" --ca "$work/ca.pem" \
      --topic com.example.tokens "${auth[@]}" --tokens "$work/tokens.txt" --payload "$work/payload.json" \
      "${flags[@]}" > "$work/send.out" 2> "$work/send.err" || status=$?
    seconds=$(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')")
    summary=$(grep -m1 -E "handed|accepted" "$work/send.out" | sed 's/^ *//' || true)
    why=$(grep -m1 -E "TooManyProviderTokenUpdates|provider token" "$work/send.err" | cut -c1-200 || true)
    echo "run $run${flags:+ (${flags[*]})}: exit $status after $seconds s; $summary${why:+; stderr: $why}"
  done
  kill -TERM "$mock"; wait "$mock" 2>/dev/null || true; mock=""
  python3 -c "
import json; s = json.load(open('$work/mock.json'))
print('the mock took', s.get('provider_tokens_taken', s.get('providerTokensTaken')), 'provider token(s) of team TOKENTEAM1')"
} | tee ${out:+"$out"}
