#!/usr/bin/env bash
# What retiring connections costs: `salvo send --protocol h2` (token authentication, its
# defaults) against `salvo mock --protocol h2` holding every answer 5-25 ms and answering
# nothing on a connection once the client has sent GOAWAY (--silent-after-client-goaway, as
# servers built on python's h2 do), without 503s and with one 503 every N requests, the two
# cases interleaved, ROUNDS times each. Each line: rate, sender CPU per notification,
# resent, possible duplicates, and whether the accounting is exact (every notification
# accepted but the mock's 410 token rules).
#
#   scripts/h2-retirement.sh [--count N=1000000] [--every 2000] [--rounds 3]
#                            [--salvo BIN] [--sender BIN] [--out FILE]
#
# --sender: the binary that sends (default: --salvo); --salvo: the one that mocks. Giving
# an older build as --sender measures it against the same mock.
set -euo pipefail
count=1000000 every=2000 rounds=3 out=""
salvo=$(pwd)/.build/release/salvo
sender=""
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --salvo) salvo=$(realpath "$2"); shift 2 ;;
    --sender) sender=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '2,15p' "$0" >&2; exit 2 ;;
  esac
done
sender=${sender:-$salvo}
[ -x "$salvo" ] && [ -x "$sender" ] || { echo "h2-retirement.sh: build first: swift build -c release" >&2; exit 2; }
work=$(mktemp -d /tmp/salvo-h2-retirement-XXXXXX)
mock=""
cleanup() { [ -n "$mock" ] && kill "$mock" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work"
h2_tokens "$work/tokens.txt" "$count"
auth=(--auth-key "$work/AuthKey.p8" --key-id RETIREKEY1 --team-id RETIRETEAM)
# Each run's mock is new: a token cached by the last run would be a stranger to it.
no_cache=()
"$sender" send --help 2>&1 | grep -q -- --no-token-cache && no_cache=(--no-token-cache)

# One fresh mock per run: it takes one provider token per team, as APNs does.
run() {
  local name=$1 round=$2; shift 2
  "$salvo" mock --protocol h2 --port 0 --cert "$work/server.pem" --key "$work/server.key" "${auth[@]}" \
    --response-delay-ms 5:20 --silent-after-client-goaway "$@" > "$work/mock.out" 2> "$work/mock.err" &
  mock=$!
  for _ in $(seq 1 200); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
  local port; port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
  [ -n "$port" ] || { echo "h2-retirement.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }
  /usr/bin/time -f "%U %S" -o "$work/time" "$sender" send --protocol h2 --gateway "127.0.0.1:$port" --ca "$work/ca.pem" \
    --topic com.example.retire "${auth[@]}" "${no_cache[@]}" --tokens "$work/tokens.txt" --payload "$work/payload.json" \
    --report "$work/report.json" > "$work/send.out" 2> "$work/send.err" || true
  kill "$mock"; wait "$mock" 2>/dev/null || true; mock=""
  python3 - "$work/report.json" "$count" "$name" "$round" "$work/time" "$work/tokens.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); count = int(sys.argv[2])
user, system = map(float, open(sys.argv[5]).read().split())
tokens = [line.strip() for line in open(sys.argv[6])]
rejected = sum(t.endswith(("dead", "fade")) for t in tokens)
exact = r["submitted"] == count and r["accepted"] == count - rejected and r["rejected"] == rejected and r["failed"] == 0
print(f'{sys.argv[3]:>12} round {sys.argv[4]}: {r["rate_per_s"]:>9,.0f} /s, sender CPU {(user + system) / count * 1e6:.2f} us/notif, '
      f'resent {r["resent"]}, possible duplicates {r["possible_duplicates"]}, connections {r["connections"]}, '
      f'accounting {"exact" if exact else "NOT EXACT"} (accepted {r["accepted"]}, rejected {r["rejected"]}, failed {r["failed"]})')
PY
}

{
  echo "# $(date -u +%F) sender $("$sender" --version 2>/dev/null || echo "$sender"), $count notifications, answers held 5-25 ms, silent after the client's GOAWAY"
  for round in $(seq 1 "$rounds"); do
    run "no 503" "$round"
    run "503 / $every" "$round" --unavailable-every "$every"
  done
} | tee ${out:+"$out"}
