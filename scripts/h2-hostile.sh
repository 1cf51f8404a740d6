#!/usr/bin/env bash
# A broken or hostile HTTP/2 gateway against `salvo send --protocol h2` at its defaults
# (token authentication, default timeouts): `salvo mock --protocol h2 --misbehave MODE`, one
# mode per run, COUNT notifications. Each line: the mode, how long the run took, its exit
# status, the sender's peak RSS, whether the accounting is complete, and the report's
# failure_cause. Then the graceful stop: SIGTERM during an endless answer (the drain
# timeout, 30 s, bounds it), and two signals (the second ends it at once).
#
#   scripts/h2-hostile.sh [--count 200] [--modes zero-streams,...] [--salvo BIN] [--out FILE]
set -euo pipefail
count=200 out="" salvo=$(pwd)/.build/release/salvo
modes=zero-streams,endless-answer,garbage,huge-frame,no-settings,continuation-flood,ping-flood
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --salvo) salvo=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
[ -x "$salvo" ] || { echo "h2-hostile.sh: build first: swift build -c release" >&2; exit 2; }
work=$(mktemp -d /tmp/salvo-h2-hostile-XXXXXX)
mock=""
cleanup() { [ -n "$mock" ] && kill "$mock" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

. "$(dirname "$0")/h2-fixtures.sh"
h2_fixtures "$work"
h2_tokens "$work/tokens.txt" "$count" --accepted-only
auth=(--auth-key "$work/AuthKey.p8" --key-id HOSTILEKEY --team-id HOSTILETEA)

start_mock() {
  "$salvo" mock --protocol h2 --port 0 --cert "$work/server.pem" --key "$work/server.key" "${auth[@]}" \
    --misbehave "$1" > "$work/mock.out" 2> "$work/mock.err" &
  mock=$!
  for _ in $(seq 1 200); do grep -q listening "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
  port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
  [ -n "$port" ] || { echo "h2-hostile.sh: the mock did not start: $(cat "$work/mock.err")" >&2; exit 1; }
}

stop_mock() { kill "$mock"; wait "$mock" 2>/dev/null || true; mock=""; }

# Runs salvo send in the background; sets $send.
start_send() {
  rm -f "$work/report.json"
  /usr/bin/time -f "%e %M" -o "$work/time" "$salvo" send --protocol h2 --gateway "127.0.0.1:$port" --ca "$work/ca.pem" \
    --topic com.example.hostile "${auth[@]}" --no-token-cache --tokens "$work/tokens.txt" --payload "$work/payload.json" \
    --report "$work/report.json" > "$work/send.out" 2> "$work/send.err" &
  send=$!
}

describe() {
  local name=$1 status=$2
  python3 - "$name" "$status" "$work/time" "$work/report.json" <<'PY'
import json, os, sys
name, status = sys.argv[1], sys.argv[2]
seconds, rss_kib = open(sys.argv[3]).read().split()[-2:]
r = json.load(open(sys.argv[4])) if os.path.exists(sys.argv[4]) else {}
complete = r and r["submitted"] == r["accepted"] + r["rejected"] + r["failed"]
print(f'{name:>26}: {float(seconds):5.1f} s, exit {status}, peak RSS {int(rss_kib) / 1024:.0f} MiB, '
      f'accounting {"complete" if complete else "INCOMPLETE"} (accepted {r.get("accepted")}, failed {r.get("failed")}), '
      f'cause: {r.get("failure_cause", "-")}')
PY
}

{
  echo "# $(date -u +%F) $("$salvo" --version 2>/dev/null || echo salvo), $count notifications, defaults"
  for mode in ${modes//,/ }; do
    start_mock "$mode"
    start_send
    status=0; wait "$send" || status=$?
    stop_mock
    describe "$mode" "$status"
  done
  # The graceful stop, bounded by the drain timeout whatever the gateway does.
  for signals in 1 2; do
    start_mock endless-answer
    start_send
    sleep 2
    # The signal goes to salvo, the child of /usr/bin/time.
    pkill -TERM -P "$send"
    if [ "$signals" = 2 ]; then sleep 1; pkill -TERM -P "$send"; fi
    status=0; wait "$send" || status=$?
    stop_mock
    describe "SIGTERM x$signals, endless" "$status"
  done
} | tee ${out:+"$out"}
