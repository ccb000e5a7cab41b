#!/usr/bin/env bash
# The HTTP stack's share of a Go gateway's CPU: in one gwload sweep, the mock directly
# (the anchor), Portkey's gateway, llmgateway, and four bare proxies to the same mock —
# net/http both sides (gwload proxy), fasthttp both sides (fhproxy), a net/http server
# with a fasthttp client (nethttp+fhclient) and a fasthttp server with a net/http client
# (fhserver+netclient). Everything listens on 127.0.0.1; needs Go, Node.js >= 18, and
# Portkey's gateway installed as ../run.sh installs it (PORTKEY_DIR).
#
#   PORTKEY_DIR=/tmp/pk llmgateway/bench/stacks/run.sh
#   RATES=50,300 DURATION=6s PORTKEY_DIR=/tmp/pk llmgateway/bench/stacks/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/.." && pwd)
mod=$(cd "$bench/.." && pwd)
RATES=${RATES:-50,300,1000}; DURATION=${DURATION:-6s}; WARMUP=${WARMUP:-2s}
work=$(mktemp -d /tmp/gwstacks.XXXXXX)
OUT=${OUT:-$work}; mkdir -p "$OUT"
pk=${PORTKEY_DIR:?PORTKEY_DIR: a directory where ../run.sh installed Portkey}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
waitport() { for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing on $1" >&2; return 1; }
(cd "$mod" && go build -o "$work/gwload" ./cmd/gwload && go build -o "$work/llmgateway" ./cmd/llmgateway)
(cd "$here" && go build -o "$work/stacks" .)
"$work/gwload" mock -listen 127.0.0.1:9100 2>"$OUT/mock.log" & pids+=($!)
"$work/gwload" proxy -listen 127.0.0.1:9104 -upstream http://127.0.0.1:9100 2>"$OUT/proxy.log" & px=$!; pids+=($px)
"$work/stacks" fhproxy -listen 127.0.0.1:9105 2>"$OUT/fhproxy.log" & fh=$!; pids+=($fh)
"$work/stacks" nhfc -listen 127.0.0.1:9106 2>"$OUT/nhfc.log" & nf=$!; pids+=($nf)
"$work/stacks" fhnc -listen 127.0.0.1:9107 2>"$OUT/fhnc.log" & fn=$!; pids+=($fn)
export GWB_UPSTREAM_KEY=sk-mock GWB_TENANT_KEY=gw-bench-key GWB_ADMIN_TOKEN=gw-bench-admin
"$work/llmgateway" -config "$bench/gateway.yaml" -watch 0 2>"$OUT/llmgateway.log" & gw=$!; pids+=($gw)
node --import "$bench/loopback.mjs" "$pk/node_modules/@portkey-ai/gateway/build/start-server.js" \
  --port=9102 --headless >"$OUT/portkey.log" 2>&1 & pkp=$!; pids+=($pkp)
for p in 9100 9101 9102 9104 9105 9106 9107; do waitport 127.0.0.1:$p; done
echo "node $(node --version), $(go version | cut -d' ' -f3), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$work/gwload" sweep -direct http://127.0.0.1:9100/v1 \
  -target "portkey=http://127.0.0.1:9102/v1,pid=$pkp,header=Authorization: Bearer $GWB_UPSTREAM_KEY,header=x-portkey-provider: openai,header=x-portkey-custom-host: http://127.0.0.1:9100/v1" \
  -target "llmgateway=http://127.0.0.1:9101/v1,pid=$gw,header=Authorization: Bearer $GWB_TENANT_KEY" \
  -target "netproxy=http://127.0.0.1:9104/v1,pid=$px" \
  -target "fhproxy=http://127.0.0.1:9105/v1,pid=$fh" \
  -target "nethttp+fhclient=http://127.0.0.1:9106/v1,pid=$nf" \
  -target "fhserver+netclient=http://127.0.0.1:9107/v1,pid=$fn" \
  -rates "$RATES" -duration "$DURATION" -warmup "$WARMUP" ${PAIRED:+-paired} -json "$OUT/results.jsonl" | tee "$OUT/tables.md"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
