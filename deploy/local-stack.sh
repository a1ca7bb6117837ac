#!/usr/bin/env bash
# Runs the whole stack on this machine, in the foreground, for a trial or a
# demo: a private redis-server on a free loopback port and utxo-cache serve
# using it, with writes enabled by a generated token. Ctrl-C stops both.
#
#   deploy/local-stack.sh [DATA_DIR]        (default ./data)
set -euo pipefail
cd "$(dirname "$0")/.."
data_dir=${1:-./data}
command -v redis-server >/dev/null || { echo "redis-server not found: apt-get install redis-server" >&2; exit 1; }
make build >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6390)
redis_dir=$(mktemp -d)
redis-server deploy/redis.conf --port "$port" --bind 127.0.0.1 --maxmemory 256mb --dir "$redis_dir" --daemonize no >"$redis_dir/redis.log" 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null; wait $redis_pid 2>/dev/null; rm -rf "$redis_dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
token=${UTXO_CACHE_ADMIN_TOKEN:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
echo "redis on 127.0.0.1:$port; admin token: $token" >&2
UTXO_CACHE_ADMIN_TOKEN=$token bin/utxo-cache serve --data-dir "$data_dir" --redis-url "redis://127.0.0.1:$port/0"
