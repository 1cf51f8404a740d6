#!/usr/bin/env bash
# profile.sh BIN TAG [N] [NGHTTP2_SOURCE]: perf samples per thread in salvo bench's 0 ms device
# and broadcast cells (3 runs of 500,000 each, 1,000 channels), split at the first broadcast
# sample by ../hpack-runs-2026-11-29/split.py: the mock's loop, the sender's shard loop and
# its producer, with the N functions whose samples grew most. Debian's libnghttp2 has no
# symbols for its internal functions; given an nghttp2 source tree (the version Debian
# ships, 1.52.0), a copy with symbols is built and the mock loads it instead.
# BENCH_FLAGS: more salvo bench flags (e.g. "--connections 4" for a fixed count).
set -eu
bin=$(realpath "$1"); tag=$2; top=${3:-20}; source=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
out=/tmp/salvo-profile-$tag; mkdir -p $out
if [ -n "$source" ]; then
  # The sources, and the installed headers (nghttp2ver.h is generated) as <nghttp2/...>.
  mkdir -p $out/nghttp2/nghttp2 && cp "$source"/lib/*.c "$source"/lib/*.h $out/nghttp2/
  cp /usr/include/nghttp2/*.h $out/nghttp2/nghttp2/
  printf '#define HAVE_STDINT_H 1\n#define HAVE_UNISTD_H 1\n#define HAVE_ARPA_INET_H 1\n#define HAVE_NETINET_IN_H 1\n' > $out/nghttp2/config.h
  (cd $out/nghttp2 && gcc -O2 -g -fPIC -shared -DHAVE_CONFIG_H -DBUILDING_NGHTTP2 -I. \
     -o libnghttp2.so.14 -Wl,-soname,libnghttp2.so.14 ./*.c)
  export LD_LIBRARY_PATH=$out/nghttp2
fi
perf record -F 1999 -g -a -o $out/perf.data -- "$bin" bench --protocol h2 --error-rates 0 --response-delays 0 \
  --payload-sizes 100 --broadcast-channels 1000 --count 500000 --runs 3 ${BENCH_FLAGS:-} --output $out/bench --json-only > /dev/null 2>&1
perf script -F comm,tid,time,ip,sym -i $out/perf.data 2>/dev/null \
  | python3 "$here/../hpack-runs-2026-11-29/split.py" "$top" mock-h2-0,salvo-shard-0,oot.default-qos
