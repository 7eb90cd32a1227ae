#!/bin/bash
# The lifecycle figures of docs/BENCHMARKS.md ("Shop with the order
# lifecycle"): one throwaway redis-server, one SQLite file, two `seckill
# serve` instances with a short payment timeout, a voucher, then
# `seckill load --mix ... --expect-expiry-within ...`; the report goes to
# stdout and the load's exit status is the script's.
#
#   cargo build --release -p seckill
#   crates/seckill/benches/lifecycle-mix.sh STRATEGY [USERS [STOCK [load options...]]]
#   crates/seckill/benches/lifecycle-mix.sh reserve 10000 1000 --clicks 3 \
#       --mix pay=60,cancel=20,expire=20 --expect-expiry-within 10s
#
# SECKILL (default target/release/seckill) and PAYMENT_TIMEOUT (default 3s)
# may be set in the environment. Needs redis-server and curl on PATH.
set -euo pipefail
STRATEGY=${1:?usage: $0 STRATEGY [USERS [STOCK [load options...]]]}
USERS=${2:-10000}
STOCK=${3:-1000}
shift $(($# < 3 ? $# : 3))
BIN=${SECKILL:-target/release/seckill}
DIR=$(mktemp -d)
PORT=$((20000 + RANDOM % 20000))
PIDS=()
cleanup() {
    local status=$?
    if [ "$status" -ne 0 ]; then
        # Say why (a port taken, an instance that did not start).
        tail -n 5 "$DIR"/*.log >&2 || true
    fi
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

redis-server --port "$PORT" --save '' --appendonly no > "$DIR/redis.log" 2>&1 &
PIDS+=($!)
sleep 0.3
DB="sqlite://$DIR/shop.db?mode=rwc"
for i in 1 2; do
    "$BIN" serve --listen "127.0.0.1:$((PORT + i))" --redis "redis://127.0.0.1:$PORT" \
        --database "$DB" --strategy "$STRATEGY" --instance "$i" \
        --payment-timeout "${PAYMENT_TIMEOUT:-3s}" > "$DIR/serve$i.log" 2>&1 &
    PIDS+=($!)
    # One at a time: the first creates the schema.
    for attempt in $(seq 100); do
        curl -sf "http://127.0.0.1:$((PORT + i))/health" > /dev/null && break
        [ "$attempt" -lt 100 ] || { echo "instance $i did not start" >&2; exit 1; }
        sleep 0.1
    done
done
NOW=$(date -u +%s)
BODY="{\"title\":\"lifecycle mix\",\"stock\":$STOCK,\"begin_at\":\"$(date -u -d "@$((NOW - 60))" +%FT%TZ)\",\"end_at\":\"$(date -u -d "@$((NOW + 3600))" +%FT%TZ)\"}"
VOUCHER=$(curl -sf -X POST "http://127.0.0.1:$((PORT + 1))/vouchers" \
    -H 'content-type: application/json' -d "$BODY" | sed 's/.*"id":\([0-9]*\).*/\1/')
"$BIN" load --target "http://127.0.0.1:$((PORT + 1))" --target "http://127.0.0.1:$((PORT + 2))" \
    --voucher "$VOUCHER" --users "$USERS" --database "$DB" "$@"
