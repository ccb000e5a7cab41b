#!/usr/bin/env bash
# The gateway's live heap under steady streaming load: llmgateway (built from this checkout,
# or the binary in $GW) in front of `gwload mock`, `gwload sweep` sending RATE streams a
# second for DURATION, and the heap's allocated bytes (runtime.MemStats.HeapAlloc, read from
# the admin listener's /debug/pprof/heap?debug=1) sampled every half second. GOGC defaults to
# 400 here, which makes what a collection leaves behind show. Everything on 127.0.0.1.
#
#   llmgateway/bench/heap.sh                    # RATE=300 DURATION=20s GOGC=400
#   GW=/tmp/llmgateway-old llmgateway/bench/heap.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mod=$(cd "$here/.." && pwd)
RATE=${RATE:-300}
DURATION=${DURATION:-20s}
export GOGC=${GOGC:-400}
work=$(mktemp -d /tmp/gwheap.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
(cd "$mod" && go build -o "$work/gwload" ./cmd/gwload)
gw=${GW:-}
if [ -z "$gw" ]; then (cd "$mod" && go build -o "$work/llmgateway" ./cmd/llmgateway); gw=$work/llmgateway; fi
export GWB_ADMIN_TOKEN=admin GWB_UPSTREAM_KEY=upstream GWB_TENANT_KEY=tenant
sed 's/level: info/level: warn/' "$here/gateway.yaml" > "$work/gateway.yaml"
"$work/gwload" mock -listen 127.0.0.1:9100 2>"$work/mock.log" & pids+=($!)
"$gw" -config "$work/gateway.yaml" 2>"$work/gateway.log" & g=$!; pids+=($g)
for _ in $(seq 1 100); do
  curl -sf -o /dev/null -H "Authorization: Bearer admin" http://127.0.0.1:9103/healthz && break
  sleep 0.1
done
(while kill -0 "$g" 2>/dev/null; do
  curl -s -H "Authorization: Bearer admin" "http://127.0.0.1:9103/debug/pprof/heap?debug=1" |
    sed -n 's/^# HeapAlloc = \([0-9]*\).*/\1/p'
  sleep 0.5
done) > "$work/heap.txt" & pids+=($!)
"$work/gwload" sweep -direct http://127.0.0.1:9100/v1 \
  -target "llmgateway=http://127.0.0.1:9101/v1,pid=$g,header=Authorization: Bearer tenant" \
  -rates "$RATE" -duration "$DURATION" -warmup 2s -modes stream | grep '^| llmgateway'
# the first two seconds are the warm-up
tail -n +5 "$work/heap.txt" | awk '{s+=$1; if ($1>m) m=$1; n++} END {printf "HeapAlloc over %d samples: mean %.1f MB, max %.1f MB\n", n, s/n/1e6, m/1e6}'
