#!/usr/bin/env bash
# The HTTP/2 mock against Debian's nghttpd under the same h2load load, and the mock's own
# ceiling on one core. Prints every run and the medians; results/mock-h2.md holds a run.
#
#   scripts/mock-h2-bench.sh [ROUNDS] [REQUESTS]       (defaults: 5 rounds, 200000 requests)
#
# Needs a release build (swift build -c release), nghttp2-client (h2load) and
# nghttp2-server (nghttpd). Both servers run one thread pinned to the last core; h2load runs
# pinned to core 0, -c 4 -m 100, POST with the same headers and a 256-byte body to
# /3/device/<token> (an empty file for nghttpd, which answers a POST with it). Runs
# alternate mock, nghttpd, mock, nghttpd… so that the load from other work on the machine
# hits both. Server CPU is utime + stime of the server process over the run.
set -euo pipefail
rounds=${1:-5}
requests=${2:-200000}
cd "$(dirname "$0")/.."
salvo=.build/release/salvo
server_core=$(( $(nproc) - 1 ))
work=$(mktemp -d)
trap 'kill $mock_pid $nghttpd_pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
token=$(printf 'ab%.0s' $(seq 32))
mkdir -p "$work/htdocs/3/device" && : > "$work/htdocs/3/device/$token"
head -c 256 /dev/zero | tr '\0' 'x' > "$work/body"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
    -days 1 -subj /CN=localhost 2>/dev/null

taskset -c "$server_core" "$salvo" mock --protocol h2 --port 0 --loops 1 --cert "$work/cert.pem" --key "$work/key.pem" \
    --report "$work/mock.json" > "$work/mock.out" 2> "$work/mock.err" &
mock_pid=$!
taskset -c "$server_core" nghttpd -n 1 -d "$work/htdocs" 0 "$work/key.pem" "$work/cert.pem" > "$work/nghttpd.out" 2>&1 &
nghttpd_pid=$!
for _ in $(seq 100); do
    mock_port=$(sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' "$work/mock.out")
    nghttpd_port=$(ss -ltnpH 2>/dev/null | grep "pid=$nghttpd_pid," | grep -o '0.0.0.0:[0-9]*' | cut -d: -f2 || true)
    [ -n "$mock_port" ] && [ -n "$nghttpd_port" ] && break
    sleep 0.1
done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME PID PORT: one h2load run; prints "NAME rate cpu_us_per_request".
run() {
    local before after output rate
    before=$(ticks "$2")
    output=$(taskset -c 0 h2load -n "$requests" -c 4 -m 100 -t 1 -d "$work/body" \
        -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' "https://127.0.0.1:$3/3/device/$token")
    after=$(ticks "$2")
    grep -q "status codes: $requests 2xx" <<< "$output" || { echo "$1: not every request got a 2xx" >&2; exit 1; }
    rate=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<< "$output")
    echo "$1 $rate $(awk -v t=$((after - before)) -v n="$requests" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')"
}

results="$work/results"
for round in $(seq "$rounds"); do
    run mock "$mock_pid" "$mock_port" | tee -a "$results"
    run nghttpd "$nghttpd_pid" "$nghttpd_port" | tee -a "$results"
done

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for name in mock nghttpd; do
    printf '%s: median %s req/s, %s us server CPU per request\n' "$name" \
        "$(awk -v n=$name '$1 == n { print $2 }' "$results" | median)" "$(awk -v n=$name '$1 == n { print $3 }' "$results" | median)"
done
# Ratios per round (mock / nghttpd), then their median.
paste <(awk '$1 == "mock"' "$results") <(awk '$1 == "nghttpd"' "$results") \
    | awk '{ printf "%.3f %.3f\n", $2 / $5, $3 / $6 }' > "$work/ratios"
printf 'ratio mock/nghttpd: rate %s, CPU per request %s (medians of the per-round ratios)\n' \
    "$(cut -d' ' -f1 "$work/ratios" | median)" "$(cut -d' ' -f2 "$work/ratios" | median)"

# The mock's ceiling on one core: requests per second of the mock's own CPU, under a load
# that keeps its core as busy as h2load (on the other core) can.
before=$(ticks "$mock_pid"); start=$(date +%s.%N)
output=$(taskset -c 0 h2load -n "$((2 * requests))" -c 8 -m 200 -t 1 -d "$work/body" \
    -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' "https://127.0.0.1:$mock_port/3/device/$token")
after=$(ticks "$mock_pid"); end=$(date +%s.%N)
awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n=$((2 * requests)) -v s="$start" -v e="$end" 'BEGIN {
    cpu = t / hz; wall = e - s
    printf "ceiling: %d requests in %.2f s with the mock core %.0f%% busy: %.0f requests per mock CPU-second\n", n, wall, 100 * cpu / wall, n / cpu }'
