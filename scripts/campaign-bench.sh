#!/usr/bin/env bash
# A campaign of N notifications from a file through `salvo send` to `salvo mock` running
# as a separate process on loopback, at the sender's default settings unless flags are
# given. Prints the send rate (submitted / time until the last write), the whole run's
# time (the final error wait included), the sender's CPU time, its peak RSS, its heap
# allocations (jemalloc's request counter) and the mock's accepted count.
# Needs /usr/bin/time (Debian's `time` package) and python3.
#
#   scripts/campaign-bench.sh [--rtt-ms MS] [--jsonl] [N=10000000] [extra salvo send flags...]
#
# MOCK_FLAGS: extra flags for the mock, e.g. MOCK_FLAGS="--reject-every 10000" (a failure plan).
#
# --rtt-ms MS: the mock runs MS milliseconds away, behind `salvo delay-line` (needs root),
# and one bulk TCP stream through the same path is measured first: the rate a sender could
# reach, printed next to the campaign's as "% of path".
# --jsonl: a JSONL campaign with a different payload on every line (otherwise a token list
# plus one payload). Files are made once per N and format and kept in $CAMPAIGN_CACHE
# (default /tmp/salvo-campaigns): a 10 M-line token list is 650 MB, the JSONL 1.4 GB.
#
# Allocations per notification in steady state: run it for two sizes and divide the
# difference of the "allocations" lines by the difference of N.
set -euo pipefail
rtt=""
if [ "${1:-}" = "--rtt-ms" ]; then rtt=$2; shift 2; fi
format=tokens
if [ "${1:-}" = "--jsonl" ]; then format=jsonl; shift; fi
count=${1:-10000000}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
salvo="$root/.build/release/salvo"
[ -x "$salvo" ] || (cd "$root" && swift build -c release >&2)
cache=${CAMPAIGN_CACHE:-/tmp/salvo-campaigns}
mkdir -p "$cache"
work=$(mktemp -d)
mock="" delay_line=""
trap 'kill $mock $delay_line 2>/dev/null || true; wait $delay_line 2>/dev/null || true; rm -rf "$work"' EXIT

"$root/scripts/certs.sh" "$work/certs" >/dev/null
payload='{"aps":{"alert":{"title":"Salvo","body":"Your weekly summary is ready."},"badge":1,"sound":"default"}}'
campaign="$cache/$format-$count"
if [ ! -s "$campaign" ]; then
  python3 - "$count" "$campaign.tmp" "$format" <<'PY'
import sys
count, path, form = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with open(path, "w") as out:
    for n in range(1, count + 1):
        token = "5a" * 24 + format(n, "016x")
        if form == "tokens":
            out.write(token + "\n")
        else:
            out.write('{"token":"%s","payload":{"aps":{"alert":{"title":"Salvo","body":"Your summary %d is ready."},"badge":%d}},"id":%d}\n'
                      % (token, n, n % 100, n))
PY
  mv "$campaign.tmp" "$campaign"
fi
if [ "$format" = tokens ]; then
  printf '%s' "$payload" > "$work/payload.json"
  input=(--tokens "$campaign" --payload "$work/payload.json")
else
  input=(--input "$campaign")
fi

host=127.0.0.1 inside=() path_bytes_per_s=""
if [ -n "$rtt" ]; then
  exec {line_out}< <(exec "$salvo" delay-line --delay-ms $((rtt / 2)) --bulk-probe-seconds 5)
  delay_line=$!
  read -r -t 60 probe <&"$line_out"
  read -r -t 60 ready <&"$line_out"
  path_bytes_per_s=$(sed -n 's/^path bulk_tcp_bytes_per_s=//p' <<<"$probe")
  namespace=$(sed -n 's/^ready namespace=\([^ ]*\).*/\1/p' <<<"$ready")
  [ -n "$path_bytes_per_s" ] && [ -n "$namespace" ] || { echo "salvo delay-line said: $probe $ready" >&2; exit 1; }
  host=10.78.0.2
  inside=(ip netns exec "$namespace")
  mock_path=(--host "$host" --receive-buffer-kib 0)
fi

coproc MOCK { exec "${inside[@]}" "$salvo" mock ${mock_path[@]+"${mock_path[@]}"} --port 0 --feedback-port 0 --loops 1 --cert "$work/certs/server.pem" \
  --key "$work/certs/server.key" --ca "$work/certs/ca.pem" --require-client-cert --report "$work/mock.json" ${MOCK_FLAGS:-}; }
mock=$MOCK_PID
read -r line <&"${MOCK[0]}"
port=$(sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' <<<"$line")

MALLOC_CONF=stats_print:true /usr/bin/time -v "$salvo" send --gateway "$host:$port" \
  --cert "$work/certs/client.pem" --key "$work/certs/client.key" --ca "$work/certs/ca.pem" \
  "${input[@]}" --report "$work/report.json" "$@" >"$work/send.out" 2>"$work/send.err"
kill -INT "$mock"; wait "$mock" || true
[ -z "$delay_line" ] || { kill "$delay_line"; wait "$delay_line" || true; delay_line=""; }

# Everything about the run from the JSON reports (the summary's wording is for people).
python3 - "$work/report.json" "$count" <<'PY'
import json, sys
r, count = json.load(open(sys.argv[1])), int(sys.argv[2])
settled = r["accepted"] + r["rejected"] + r["failed"]
print("sent %d notifications in %.2f s (%d /s); all final %.2f s later" % (
    r["submitted"], r["sending_seconds"], round(r["send_rate_per_s"]), max(0, r["seconds"] - r["sending_seconds"])))
print("accounting: " + ("complete (submitted = accepted + rejected + failed)" if settled == r["submitted"]
                        else "INCOMPLETE: %d unsettled" % (r["submitted"] - settled)))
PY
awk '/Maximum resident set size/ {printf "peak RSS: %.1f MiB\n", $6/1024}' "$work/send.err"
awk -v n="$count" '/User time \(seconds\)/ {u=$4} /System time \(seconds\)/ {s=$4} END {printf "sender CPU: %.2f s user + %.2f s system = %.0f ns per notification (reading and parsing the file included)\n", u, s, (u+s)*1e9/n}' "$work/send.err"
awk '/^Merged arenas stats/{m=1} m && /^total:/{print "allocations:", $7; exit}' "$work/send.err"
python3 -c "import json;r=json.load(open('$work/report.json'));m=json.load(open('$work/mock.json'));print('send_rate_per_s', round(r['send_rate_per_s']), '| seconds', round(r['seconds'], 2), '| error_wait_ms', r['error_wait_ms'], '| connections', r['connections'], '| sender accepted', r['accepted'], 'rejected', r['rejected'], '| mock accepted', m['accepted'], 'rejected', m.get('rejected'))"
if [ -n "$path_bytes_per_s" ] && [ "$format" = tokens ]; then
  # A command-2 frame of this campaign: 61 bytes of header and items plus the payload.
  python3 -c "import json;r=json.load(open('$work/report.json'));frames=$path_bytes_per_s/(61+$(wc -c <"$work/payload.json"));print('path: %d ms round trip, bulk TCP %.1f MB/s = %d frames/s; the campaign reached %.0f%% of it' % ($rtt, $path_bytes_per_s/1e6, frames, 100*r['send_rate_per_s']/frames))"
fi
