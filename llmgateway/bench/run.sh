#!/usr/bin/env bash
# Side by side: llmgateway and Portkey's gateway (npm @portkey-ai/gateway) in front of one
# loopback OpenAI-compatible mock, under open-loop load from cmd/gwload, one-shot and
# streaming; the anchor is the same load sent to the mock directly, in the same run.
# llmgateway runs twice: as configured (gateway.yaml, Go's default GOMAXPROCS) and,
# as target llmgateway-p1, with the same file plus `procs: 1` on other ports (PROCS1=0
# leaves that one out). Target netproxy is `gwload proxy`, a bare net/http reverse
# proxy to the same mock: the CPU and latency floor of a Go gateway on net/http.
# Everything listens on 127.0.0.1. Needs Go, Node.js >= 18 and npm.
#
#   llmgateway/bench/run.sh                      # defaults below
#   RATES=50,200,500 DURATION=5s llmgateway/bench/run.sh
#   PAIRED=1 llmgateway/bench/run.sh             # each target beside its own direct anchor
#
# Portkey is installed with npm into a temporary directory (PORTKEY_DIR reuses one);
# @hono/node-server 1.13.5 and @hono/node-ws 1.2.0 are pinned (later ones break its
# streams). Its start script listens on every interface: loopback.mjs, preloaded, binds
# it to 127.0.0.1. Results: the tables on stdout, JSON lines in $OUT/results.jsonl.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mod=$(cd "$here/.." && pwd)
RATES=${RATES:-50,100,200,300,500,750,1000,1500}
DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
MODES=${MODES:-oneshot,stream}
PROCS1=${PROCS1:-1}
PORTKEY_VERSION=${PORTKEY_VERSION:-1.15.2}
work=$(mktemp -d /tmp/gwbench.XXXXXX)
OUT=${OUT:-$work}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

echo "work dir: $work" >&2
(cd "$mod" && go build -o "$work/gwload" ./cmd/gwload && go build -o "$work/llmgateway" ./cmd/llmgateway)

pk=${PORTKEY_DIR:-$work/portkey}
if [ ! -f "$pk/node_modules/@portkey-ai/gateway/build/start-server.js" ]; then
  mkdir -p "$pk"
  (cd "$pk" && npm init -y >/dev/null &&
    npm install --no-audit --no-fund "@portkey-ai/gateway@$PORTKEY_VERSION" \
      @hono/node-server@1.13.5 @hono/node-ws@1.2.0 >&2)
fi

waitport() { # host:port
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on $1" >&2; return 1
}

"$work/gwload" mock -listen 127.0.0.1:9100 2>"$work/mock.log" &
pids+=($!)
"$work/gwload" proxy -listen 127.0.0.1:9104 -upstream http://127.0.0.1:9100 2>"$work/proxy.log" &
px=$!; pids+=($px)

export GWB_UPSTREAM_KEY=sk-mock GWB_TENANT_KEY=gw-bench-key GWB_ADMIN_TOKEN=gw-bench-admin
"$work/llmgateway" -config "$here/gateway.yaml" -watch 0 2>"$work/llmgateway.log" &
gw=$!; pids+=($gw)
p1_target=()
if [ "$PROCS1" != 0 ]; then
  sed -e 's/127.0.0.1:9101/127.0.0.1:9111/; s/127.0.0.1:9103/127.0.0.1:9113/' "$here/gateway.yaml" >"$work/gateway-p1.yaml"
  echo "procs: 1" >>"$work/gateway-p1.yaml"
  "$work/llmgateway" -config "$work/gateway-p1.yaml" -watch 0 2>"$work/llmgateway-p1.log" &
  gw1=$!; pids+=($gw1)
  p1_target=(-target "llmgateway-p1=http://127.0.0.1:9111/v1,pid=$gw1,header=Authorization: Bearer $GWB_TENANT_KEY")
fi

node --import "$here/loopback.mjs" "$pk/node_modules/@portkey-ai/gateway/build/start-server.js" \
  --port=9102 --headless >"$work/portkey.log" 2>&1 &
pk_pid=$!; pids+=($pk_pid)

waitport 127.0.0.1:9100; waitport 127.0.0.1:9101; waitport 127.0.0.1:9102; waitport 127.0.0.1:9104
if [ "$PROCS1" != 0 ]; then waitport 127.0.0.1:9111; fi
# Portkey must be on loopback only.
if ss -ltn 2>/dev/null | grep -E ':9102\b' | grep -vq '127.0.0.1:9102'; then
  echo "Portkey listens beyond loopback:" >&2; ss -ltn | grep 9102 >&2; exit 1
fi

echo "node $(node --version), $(go version | cut -d' ' -f3), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$work/gwload" sweep -direct http://127.0.0.1:9100/v1 \
  -target "netproxy=http://127.0.0.1:9104/v1,pid=$px" \
  -target "llmgateway=http://127.0.0.1:9101/v1,pid=$gw,header=Authorization: Bearer $GWB_TENANT_KEY" \
  "${p1_target[@]}" \
  -target "portkey=http://127.0.0.1:9102/v1,pid=$pk_pid,header=Authorization: Bearer $GWB_UPSTREAM_KEY,header=x-portkey-provider: openai,header=x-portkey-custom-host: http://127.0.0.1:9100/v1" \
  -rates "$RATES" -duration "$DURATION" -warmup "$WARMUP" -modes "$MODES" ${PAIRED:+-paired} -json "$OUT/results.jsonl"
