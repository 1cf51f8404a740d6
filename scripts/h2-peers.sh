#!/usr/bin/env bash
# HTTP/2 peers side by side (issue #23): salvo send, h2load, a client on AsyncHTTPClient (the
# transport APNSwift uses; Benchmarks/Peers) and aioapns (PyPI), each POSTing the same APNs
# request (token auth with one JWT or the same key, apns-topic, apns-push-type: alert, path
# /3/device/<64 hex>, the same 84-byte payload) to a fresh `salvo mock --protocol h2`, over
# CONNECTIONS connections × STREAMS concurrent streams where the client lets us say so.
# Also h2load against nghttpd (Debian nghttp2-server, serving an empty file at that path),
# so that the mock's CPU per request stands beside a plain HTTP/2 server's.
#
# Clients alternate within each round (a noisy 2-core machine: compare medians). For each run
# it prints one line: requests, 200s, seconds, rate, the client's CPU per notification
# (getrusage via /usr/bin/time: (user+sys)/requests, process start included) and the server's
# CPU per request (utime+stime from /proc/PID/stat just before it is stopped), then a median
# table in Markdown. Every run is bounded by its count and a timeout.
#
#   scripts/h2-peers.sh [--salvo PATH=.build/release/salvo] [--rounds 3] [--count 1000000]
#                       [--ahc-count 200000] [--py-count 60000] [--connections 4] [--streams 100]
#                       [--only "salvo salvo-defaults h2load h2load-tokens ahc aioapns nghttpd"]
#
# Needs openssl, python3 with venv, h2load (nghttp2-client), nghttpd (nghttp2-server), Swift.
# First run builds Benchmarks/Peers (several minutes) and a virtualenv with aioapns from PyPI
# in .build/peers/venv; a client that cannot be had is skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
salvo=.build/release/salvo rounds=3 count=1000000 ahc_count=200000 py_count=60000
connections=4 streams=100 only="salvo salvo-defaults h2load h2load-tokens ahc aioapns nghttpd"
while [ $# -gt 0 ]; do
  case "$1" in
    --salvo) salvo=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --ahc-count) ahc_count=$2; shift 2 ;;
    --py-count) py_count=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) sed -n '2,22p' "$0" >&2; exit 2 ;;
  esac
done
[ -x "$salvo" ] || { echo "h2-peers.sh: no salvo binary at $salvo" >&2; exit 2; }
salvo=$(realpath "$salvo")
# salvo spreads connections over its shards (event-loop threads): 2 shards × 2 connections.
shards=2
[ $((connections % shards)) -eq 0 ] || { echo "h2-peers.sh: --connections must be a multiple of $shards" >&2; exit 2; }
work=$(mktemp -d /tmp/salvo-h2-peers-XXXXXX)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
log() { echo "$@" >&2; }
drop() { for w in "$@"; do only=$(echo " $only " | sed "s/ $w / /g"); done; }  # skip clients

# --- Clients that have to be built or installed -------------------------------------------
ahc=Benchmarks/Peers/.build/release/ahc-apns
if [[ " $only " == *" ahc "* && ! -x $ahc ]]; then
  log "building Benchmarks/Peers (AsyncHTTPClient; several minutes the first time)..."
  (cd Benchmarks/Peers && swift build -c release > "$work/ahc-build.log" 2>&1) ||
    { log "h2-peers.sh: Benchmarks/Peers did not build, skipping ahc: $(tail -3 "$work/ahc-build.log")"; drop ahc; }
fi
venv=.build/peers/venv
if [[ " $only " == *" aioapns "* ]] && ! "$venv/bin/python" -c 'import aioapns' 2>/dev/null; then
  # Bounded: without PyPI pip gives up within a minute.
  { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --timeout 15 --retries 2 aioapns==4.0; } \
    > "$work/pip.log" 2>&1 || { log "h2-peers.sh: could not install aioapns, skipping it: $(tail -2 "$work/pip.log")"; drop aioapns; }
fi
command -v h2load > /dev/null || { log "h2-peers.sh: no h2load (nghttp2-client), skipping its rows"; drop h2load h2load-tokens nghttpd; }
command -v nghttpd > /dev/null || { log "h2-peers.sh: no nghttpd (nghttp2-server), skipping it"; drop nghttpd; }

# --- Certificates, signing key, JWT, payload, tokens ---------------------------------------
. scripts/h2-fixtures.sh
h2_fixtures "$work"
key_id=PEERSKEY01 team_id=PEERSTEAM1 topic=com.example.peers
auth=(--auth-key "$work/AuthKey.p8" --key-id "$key_id" --team-id "$team_id")
# h2load, AHC and aioapns send to one fixed token (h2load takes one URI); salvo reads a file of
# random ones. None ends in dead or fade, which the mock rejects: every request should be a 200.
token=$(printf '5a17%.0s' $(seq 16))
h2_tokens "$work/tokens.txt" "$count" --accepted-only
# A provider token (ES256 JWT) signed with openssl: header {alg, kid}, claims {iss, iat}.
# Each fresh mock adopts it; it stays valid for the 20 minutes past iat that a round needs
# at most, so it is signed again per run.
jwt() {
  python3 - "$work/AuthKey.p8" "$key_id" "$team_id" <<'PY'
import base64, json, subprocess, sys, time
key, kid, team = sys.argv[1:4]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
signing = (b64(json.dumps({"alg": "ES256", "kid": kid}, separators=(",", ":")).encode()) + "." +
           b64(json.dumps({"iss": team, "iat": int(time.time())}, separators=(",", ":")).encode()))
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing.encode(),
                     capture_output=True, check=True).stdout
# openssl signs in DER, SEQUENCE { INTEGER r, INTEGER s }; JWS wants r || s, 32 bytes each.
i, ints = 2, []
while i < len(der):
    n = der[i + 1]; ints.append(int.from_bytes(der[i + 2:i + 2 + n], "big")); i += 2 + n
print(signing + "." + b64(b"".join(v.to_bytes(32, "big") for v in ints)))
PY
}
# nghttpd answers 404 unless a file sits at the path: an empty one gives 200 with no body.
mkdir -p "$work/htdocs/3/device" && : > "$work/htdocs/3/device/$token"

# --- Servers ---------------------------------------------------------------------------------
tick=$(getconf CLK_TCK)
start_mock() {
  "$salvo" mock --protocol h2 --host 127.0.0.1 --port 0 --cert "$work/server.pem" --key "$work/server.key" \
    "${auth[@]}" > "$work/server.out" 2> "$work/server.err" &
  server_pid=$!
  for _ in $(seq 1 200); do grep -q listening "$work/server.out" 2>/dev/null && break; sleep 0.05; done
  port=$(sed -n 's/.*gateway=\([0-9]*\).*/\1/p' "$work/server.out")
  [ -n "$port" ] || { log "h2-peers.sh: the mock did not start: $(cat "$work/server.err")"; exit 1; }
}
start_nghttpd() {
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Two workers, as the mock has a thread per core; -m: the same stream limit the clients use.
  nghttpd -a 127.0.0.1 -n 2 -m "$streams" -d "$work/htdocs" "$port" "$work/server.key" "$work/server.pem" \
    > "$work/server.out" 2> "$work/server.err" &
  server_pid=$!
  for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.05; done
}
# Stops the server; sets server_cpu (seconds of user+sys over its life).
stop_server() {
  server_cpu=$(awk -v t="$tick" '{print ($14 + $15) / t}' /proc/"$server_pid"/stat)
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
}

# --- Clients ---------------------------------------------------------------------------------
# Each sets n (requests), ok (200s), secs, conns; /usr/bin/time writes $work/time. Counts are
# sized for 3 to 20 s a run here: salvo and h2load send COUNT, the slower AHC and aioapns fewer.
timed() { timeout 300 /usr/bin/time -f "%U %S" -o "$work/time" "$@" > "$work/client.out" 2> "$work/client.err" || true; }
h2load_run() {  # $1: "tokens" to send salvo's distinct tokens instead of one
  n=$count
  local uris=("https://127.0.0.1:$port/3/device/$token")
  if [ "${1:-}" = tokens ]; then
    # -i: every connection walks the list from its start, so COUNT/CONNECTIONS distinct
    # tokens give each connection a new :path per request, as salvo's campaign does (with one
    # fixed URI, HPACK sends the path as a one-byte index after the first request).
    head -n $((n / connections + 1)) "$work/tokens.txt" | sed "s|^|https://127.0.0.1:$port/3/device/|" > "$work/uris.txt"
    uris=(-i "$work/uris.txt")
  fi
  # -t 2: two threads, as salvo's two shards; h2load does not verify the certificate.
  timed h2load -t "$shards" -c "$connections" -m "$streams" -n "$n" -d "$work/payload.json" \
    -H "authorization: bearer $(jwt)" -H "apns-topic: $topic" -H "apns-push-type: alert" "${uris[@]}"
  ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$work/client.out")
  secs=$(sed -n 's/^finished in \([0-9.]*\)\(m*s\),.*/\1 \2/p' "$work/client.out" | awk '{print $2 == "ms" ? $1 / 1000 : $1}')
  conns=$connections
}
salvo_run() {  # $1: extra flags
  n=$count
  timed "$salvo" send --protocol h2 --gateway "127.0.0.1:$port" --ca "$work/ca.pem" --topic "$topic" "${auth[@]}" \
    --tokens "$work/tokens.txt" --payload "$work/payload.json" --report "$work/report.json" $1
  read -r ok secs conns < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["accepted"] if r["submitted"] == r["accepted"] + r["rejected"] + r["failed"] else -1, r["seconds"], r["connections"])' \
    "$work/report.json" 2>/dev/null || echo "0 0 0")
}
ahc_run() {
  n=$ahc_count
  timed "$ahc" --url "https://127.0.0.1:$port/3/device/$token" --jwt "$(jwt)" --topic "$topic" \
    --payload "$work/payload.json" --ca "$work/ca.pem" --count "$n" --connections "$connections" --streams "$streams"
  parse_line; conns=$connections
}
aioapns_run() {
  n=$py_count
  timed "$venv/bin/python" Benchmarks/Peers/aioapns-send.py --port "$port" --ca "$work/ca.pem" --key "$work/AuthKey.p8" \
    --key-id "$key_id" --team-id "$team_id" --topic "$topic" --token "$token" --payload "$work/payload.json" \
    --count "$n" --connections "$connections" --in-flight $((connections * streams))
  parse_line
  conns=$(sed -n 's/.*connections=\([0-9]*\).*/\1/p' "$work/client.out")
}
# The AHC and aioapns clients print: requests=N seconds=S rate=R ... loop_cpu_us=U status200=A ...
parse_line() {
  ok=$(sed -n 's/.*status200=\([0-9]*\).*/\1/p' "$work/client.out")
  secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$work/client.out")
  # Their own getrusage over the sending alone, without process start (interpreter, imports).
  extra=" (sending alone $(sed -n 's/.*loop_cpu_us=\([0-9.]*\).*/\1/p' "$work/client.out") us/notif)"
}

run() {  # $1: name, $2: round
  local name=$1 server=mock
  n=0 ok=0 secs=0 conns="?" extra=""
  case $name in
    salvo) start_mock; salvo_run "--shards $shards --connections $((connections / shards)) --max-connections $((connections / shards)) --max-streams $streams" ;;
    salvo-defaults) start_mock; salvo_run "" ;;
    h2load) start_mock; h2load_run ;;
    h2load-tokens) start_mock; h2load_run tokens ;;
    ahc) start_mock; ahc_run ;;
    aioapns) start_mock; aioapns_run ;;
    nghttpd) server=nghttpd; start_nghttpd; h2load_run ;;
  esac
  stop_server
  ok=${ok:-0} secs=${secs:-0}
  # The mock's own report (JSON after its first line) says how many connections it saw.
  if [ "$server" = mock ]; then
    conns=$(sed 1d "$work/server.out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["connections"])' 2>/dev/null || echo "$conns")
  fi
  python3 - "$name" "$2" "$server" "$n" "$ok" "$secs" "${conns:-?}" "$work/time" "$server_cpu" "$work/client.err" "$extra" <<'PY'
import sys
name, rnd, server, n, ok, secs, conns, timefile, server_cpu, err, extra = sys.argv[1:]
n, ok, secs = int(n), int(ok), float(secs)
try:
    user, system = map(float, open(timefile).read().split()[-2:])
    client_us = f"{(user + system) / n * 1e6:.2f}"
except Exception:
    client_us = "?"
rate = f"{n / secs:.0f}" if secs > 0 else "0"
tail = "" if ok == n else " | " + " ".join(open(err).read().split()[-12:])
print(f"round {rnd} {name}: server {server} connections {conns} requests {n} status200 {ok} seconds {secs:.3f} "
      f"rate {rate}/s client_cpu {client_us} us/notif server_cpu {float(server_cpu) / n * 1e6:.2f} us/req "
      f"{'exact' if ok == n else 'NOT EXACT'}{extra}{tail}", flush=True)
PY
}

echo "# h2-peers $(date -u +%FT%TZ) salvo=$salvo ($(git rev-parse --short HEAD 2>/dev/null)) connections=$connections streams=$streams count=$count ahc=$ahc_count aioapns=$py_count rounds=$rounds"
for round in $(seq 1 "$rounds"); do
  for name in $only; do run "$name" "$round" | tee -a "$work/lines"; done
done

# Medians per client over the rounds, as a Markdown table.
python3 - "$work/lines" "$connections" "$streams" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (\S+): server (\S+) connections (\S+) requests (\d+) status200 (\d+) seconds \S+ "
                 r"rate (\d+)/s client_cpu (\S+) us/notif server_cpu (\S+) us/req (exact|NOT EXACT)", line)
    if m: rows.setdefault(m[1], []).append(m.groups()[1:])
label = {"salvo": "salvo send (matched)", "salvo-defaults": "salvo send (defaults)", "h2load": "h2load (one token)", "h2load-tokens": "h2load (distinct tokens, -i)",
         "ahc": "AsyncHTTPClient (ahc-apns)", "aioapns": "aioapns 4.0", "nghttpd": "h2load → nghttpd"}
print()
print("| client | server | connections × streams | requests | rate /s | client CPU µs/notif | server CPU µs/req | accepted exact |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
def med(xs):
    xs = [float(x) for x in xs if x != "?"]
    return statistics.median(xs) if xs else float("nan")
for name, runs in rows.items():
    server, conns, n = runs[0][0], runs[0][1], runs[0][2]
    exact = sum(r[7] == "exact" for r in runs)
    streams = sys.argv[3] if name not in ("salvo-defaults",) else "≤1000"
    print(f"| {label.get(name, name)} | {server} | {conns} × {streams} | {int(n):,} | {med(r[4] for r in runs):,.0f} | "
          f"{med(r[5] for r in runs):.2f} | {med(r[6] for r in runs):.2f} | {exact}/{len(runs)} |")
PY
