#!/usr/bin/env bash
# Campaigns from PostgreSQL (results/campaigns-*.md): the same N-token campaign
#   1. from the file with `salvo send`, and from the database with one `salvo campaign run`
#      worker (same run, same mock): the database's cost, in wall time and in the CPU of
#      each salvo process (the database server's own is not in it);
#   2. with two workers at once: how they scale;
#   3. the database's write load: rows inserted, updated or deleted per 1,000 accepted
#      notifications while workers send (pg_stat_user_tables; the campaign's items, loaded
#      once by COPY at create, left out);
#   4. three workers, one killed with SIGKILL at a fifth of the campaign: how long until
#      another worker takes its chunk over, with the lease at LEASE seconds.
# against `salvo mock` on loopback and a throwaway PostgreSQL cluster (initdb in a
# temporary directory; as the postgres user when run as root). Wall times, so that the
# final error wait counts alike for the file and the workers.
#
#   scripts/pg-campaign-bench.sh [N=1000000] [extra flags for send and run...]
#
# RUNS (default 3): repeats of part 1; CHUNK (default 10000): --chunk-size; LEASE (default 2):
# --lease-seconds of part 4; SALVO: the executable (default .build/release/salvo); PROTOCOL:
# binary (default) or h2; MOCK_FLAGS: more flags for the mock (e.g. --response-delay-ms 50
# with h2); RUN_FLAGS: more flags for the workers only.
set -euo pipefail
count=${1:-1000000}
shift || true
chunk=${CHUNK:-10000}
lease=${LEASE:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
salvo=${SALVO:-$root/.build/release/salvo}
[ -x "$salvo" ] || (cd "$root" && swift build -c release --product salvo >&2)
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
work=$(mktemp -d)
chmod 755 "$work"
as=()
# As postgres, from its own directory: the checkout (where this shell is) may be under a
# 0700 home that user cannot enter.
if [ "$(id -u)" = 0 ]; then as=(env -C "$work/pg" runuser -u postgres --); mkdir "$work/pg"; chown postgres "$work/pg"; else mkdir "$work/pg"; fi
mock="" workers=()
cleanup() {
  kill "${workers[@]}" $mock 2>/dev/null || true
  "${as[@]}" "$bin/pg_ctl" -D "$work/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"${as[@]}" "$bin/initdb" -D "$work/pg/data" -U salvo -A trust --no-sync >/dev/null
pgport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" "$bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w start \
  -o "-p $pgport -k $work/pg -c listen_addresses=127.0.0.1" >/dev/null
db="postgres://salvo@127.0.0.1:$pgport/postgres"
psql() { "$bin/psql" -h 127.0.0.1 -p "$pgport" -U salvo -d postgres -At -c "$1"; }

"$root/scripts/certs.sh" "$work/certs" >/dev/null
tls=(--cert "$work/certs/client.pem" --key "$work/certs/client.key" --ca "$work/certs/ca.pem")
printf '%s' '{"aps":{"alert":{"title":"Salvo","body":"Your weekly summary is ready."},"badge":1,"sound":"default"}}' > "$work/payload.json"
python3 -c "
import sys
with open('$work/tokens.txt', 'w') as out:
    for n in range(1, $count + 1): out.write('5a' * 24 + format(n, '016x') + '\n')"

protocol=${PROTOCOL:-binary}
feedback=(--feedback-port 0)
[ "$protocol" = h2 ] && feedback=()
coproc MOCK { exec "$salvo" mock --protocol "$protocol" --port 0 "${feedback[@]}" --loops 1 --cert "$work/certs/server.pem" \
  --key "$work/certs/server.key" --ca "$work/certs/ca.pem" --require-client-cert ${MOCK_FLAGS:-}; }
mock=$MOCK_PID
read -r line <&"${MOCK[0]}"
port=$(sed -n 's/^listening gateway=\([0-9]*\).*/\1/p' <<<"$line")
gateway=(--gateway "127.0.0.1:$port" --protocol "$protocol")
now() { date +%s.%N; }
rate() { python3 -c "print('%d /s (%.2f s)' % ($count / ($2 - $1), $2 - $1))"; }
create() {
  local t0; t0=$(now)
  "$salvo" campaign create --db "$db" --name "$1" --tokens "$work/tokens.txt" --payload "$work/payload.json" \
    --no-registry --chunk-size "$chunk" >/dev/null
  echo "create $1 (COPY of $count tokens): $(rate "$t0" "$(now)")"
}
# The last process's CPU (user + system, bash's time) per notification.
TIMEFORMAT='%U %S'
cpu() { python3 -c "u, s = map(float, open('$work/cpu').read().split()[-2:]); print('CPU %.2f us/notif' % ((u + s) * 1e6 / $count))"; }
rows() { psql "SELECT pg_stat_force_next_flush(); SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables WHERE relname <> 'campaign_items'" | tail -1; }

echo "N=$count chunk=$chunk protocol=$protocol mock flags: ${MOCK_FLAGS:-} flags: $*"
# Part 1, RUNS times (default 3), the file and the worker alternating: on two shared cores a
# single pair says little, the median ratio more.
ratios=()
for run in $(seq 1 "${RUNS:-3}"); do
  t0=$(now); { time "$salvo" send "${gateway[@]}" "${tls[@]}" --tokens "$work/tokens.txt" --payload "$work/payload.json" \
    "$@" >/dev/null 2>&3; } 3>&2 2>"$work/cpu"
  t1=$(now)
  echo "1. run $run: salvo send from the file: $(rate "$t0" "$t1"), $(cpu)"
  create "one$run"
  before=$(rows)
  t2=$(now); { time "$salvo" campaign run --db "$db" --name "one$run" --worker w1 "${gateway[@]}" "${tls[@]}" "$@" \
    ${RUN_FLAGS:-} >/dev/null 2>&3; } 3>&2 2>"$work/cpu"
  t3=$(now)
  after=$(rows)
  ratio=$(python3 -c "print('%.1f' % (100 * ($t1 - $t0) / ($t3 - $t2)))")
  ratios+=("$ratio")
  echo "1. run $run: one worker from PostgreSQL: $(rate "$t2" "$t3"), $(cpu): $ratio% of the file's rate"
  python3 -c "print('3. run $run: write load: %d rows for %d accepted = %.3f rows per 1,000' % ($after - $before, $count, ($after - $before) * 1000 / $count))"
  "$salvo" campaign status --db "$db" --name "one$run" | grep accounting
done
joined=$(IFS=,; echo "${ratios[*]}")
python3 -c "import statistics; print('1. median ratio: %.1f%% (runs: $joined)' % statistics.median([$joined]))"

create two
t0=$(now)
"$salvo" campaign run --db "$db" --name two --worker w1 "${gateway[@]}" "${tls[@]}" "$@" ${RUN_FLAGS:-} >/dev/null & workers=($!)
"$salvo" campaign run --db "$db" --name two --worker w2 "${gateway[@]}" "${tls[@]}" "$@" ${RUN_FLAGS:-} >/dev/null & workers+=($!)
wait "${workers[@]}"; workers=()
echo "2. two workers from PostgreSQL: $(rate "$t0" "$(now)")"

create three
for w in 1 2 3; do
  "$salvo" campaign run --db "$db" --name three --worker "w$w" --lease-seconds "$lease" "${gateway[@]}" "${tls[@]}" "$@" ${RUN_FLAGS:-} \
    > "$work/w$w.out" 2>&1 & workers+=($!)
done
total=$(psql "SELECT count(*) FROM campaign_chunks k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'three'")
until [ "$(psql "SELECT count(*) >= $total / 5 AND bool_or(lease_owner = 'w1') FROM campaign_chunks k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'three' AND (done OR lease_owner = 'w1')")" = t ]; do sleep 0.01; done
kill -9 "${workers[0]}"; killed=$(now)
held=$(psql "SELECT count(*) FROM campaign_chunks k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'three' AND lease_owner = 'w1' AND NOT done")
until [ "$(psql "SELECT coalesce(sum(takeovers), 0) FROM campaign_chunks k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'three'")" != 0 ]; do sleep 0.01; done
taken=$(now)
wait "${workers[1]}" "${workers[2]}"; workers=()
python3 -c "print('4. kill -9 of w1, holding %d chunks (%d notifications at most): taken over %.2f s later (lease %s s, polled every 10 ms)' % ($held, $held * $chunk, $taken - $killed, $lease))"
"$salvo" campaign status --db "$db" --name three | grep -E "campaign|accounting|possible"
kill -INT "$mock"; wait "$mock" || true; mock=""
