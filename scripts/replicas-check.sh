#!/usr/bin/env bash
# Replicas and faults, one suite: two `serve` processes over one PostgreSQL, on a private
# cluster this script makes (initdb on a port of its own, never the shared one on 5432) and
# removes after. It prints what it did and fails on the first broken promise.
#
#   1. The replica suites against that cluster: each of 100 schedule slots fires exactly once
#      across two schedulers (tasks, and processes) on one database; a Slack event (and Slack's
#      retry delivered to the other replica) starts one run; a run started on one replica is live in the other's
#      /runs feed and stops from either; a replica killed with SIGKILL mid-run has its runs
#      interrupted by the other once its lease lapses, and only its runs.
#   2. The outside failing: Slack's Web API answering errors and hanging (the stamp is
#      `unknown` and the reply still lands), the Access key set's endpoint down (held keys
#      serve, a new kid is refused, past the TTL every token is), SQLite on a full disk (a
#      clear 503, the file intact with every acknowledged run).
#   3. PostgreSQL restarted under load: ingress requests in flight on both replicas while the
#      cluster restarts. Every answer is 200/202 or a clear 503 (none hangs, none is a 500), both
#      replicas answer again without a restart, and every accepted run is recorded once.
#   4. A minutely schedule on two `serve` over one database, both on the test-only driven
#      clock (cargo feature `driven-clock`, 300x): 100 consecutive slots or more, each fired
#      exactly once, by one replica or the other (or, at most 3 times, overslept by both and
#      said by the next firing's catch-up note, as after downtime).
#
# Needs PostgreSQL's server binaries (Debian's postgresql package), curl and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
  echo "replicas-check: PostgreSQL's server binaries are missing; apt-get install postgresql" >&2
  exit 2
fi
port=${SWITCHBOARD_REPLICAS_PG_PORT:-54329}
work=$(mktemp -d /tmp/switchboard-replicas.XXXXXX)
chmod 755 "$work"
cluster="$work/pg"
mkdir "$cluster"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$cluster"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  as_pg "$pgbin/pg_ctl" -D "$cluster" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
pg_start() {
  as_pg "$pgbin/pg_ctl" -D "$cluster" -l "$cluster/server.log" -w \
    -o "-p $port -k $cluster -c listen_addresses=127.0.0.1" start >/dev/null
}
as_pg "$pgbin/initdb" -D "$cluster" -A trust -U postgres >/dev/null
pg_start
url="postgres://postgres@127.0.0.1:$port/postgres"
echo "replicas-check: a private PostgreSQL on 127.0.0.1:$port ($cluster)"

echo "replicas-check: 1/4 the replica suites against it"
suites="$work/suites.log"
if ! SWITCHBOARD_TEST_POSTGRES_URL="$url" cargo nextest run --locked -p cli -p schedule --no-fail-fast -E \
  'test(/^slack_replicas::/) | test(/^access_replicas::/) | test(/^replica_faults::/) | test(/fire_each_of_100_slots_exactly_once/)' \
  >"$suites" 2>&1; then
  cat "$suites" >&2
  echo "replicas-check: a replica suite failed" >&2
  exit 1
fi
grep -E '^\s+PASS|Summary' "$suites"

echo "replicas-check: 2/4 the outside failing: Slack's Web API failing and hung, the JWKS endpoint down, SQLite on a full disk"
faults="$work/faults.log"
if ! cargo nextest run --locked -p slack -p access-api -p cli --no-fail-fast -E \
  'test(a_failed_lookup_stamps_unknown_and_the_reply_still_lands) | test(a_hung_api_is_a_timeout_and_unknown_not_a_stuck_stamp) | test(a_key_set_endpoint_down_serves_the_held_keys_then_fails_closed) | test(a_full_disk_refuses_clearly_and_loses_nothing_acknowledged)' \
  >"$faults" 2>&1; then
  cat "$faults" >&2
  echo "replicas-check: a fault of the outside was not met as promised" >&2
  exit 1
fi
grep -E '^\s+PASS|Summary' "$faults"

echo "replicas-check: 3/4 PostgreSQL restarted under load"
cargo build --locked -q -p cli
bin="$root/target/debug/switchboard"
token="replicas-check-token-0123456789"
ports=(18741 18742)
launch() { # index, directory, VAR=value...: `serve` on ports[index] with that directory's config
  local i=$1 dir=$2
  shift 2
  env "$@" NO_COLOR=1 "$bin" --config "$dir/switchboard.toml" serve --listen "127.0.0.1:${ports[$i]}" \
    >"$dir/stdout.log" 2>"$dir/stderr.log" &
  pids+=($!)
}
# psql as the cluster's owner: database, then psql's arguments.
psql_in() { local db=$1; shift; as_pg "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"; }
for i in 0 1; do
  dir="$work/replica-$i"
  mkdir -p "$dir"
  cat >"$dir/switchboard.toml" <<TOML
[server]
replica_id = "check-$i"
data_dir = "$dir/data"
heartbeat_seconds = 1
lease_seconds = 3
[store]
url = "$url"
[agents]
default = "echo"
max_per_actor = 10000
max_concurrent = 10000
[agents.echo]
[grants."http:loadbot"]
actions = ["runs:read", "runs:write", "agent:run:echo"]
channels = ["http:load"]
TOML
  launch "$i" "$dir" SWITCHBOARD_INGRESS_TOKENS="{\"$token\": {\"subject\": \"loadbot\", \"channel\": \"http:load\"}}"
done
ready() { # port, seconds
  for _ in $(seq 1 $(($2 * 10))); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}
for p in "${ports[@]}"; do ready "$p" 30 || { echo "replicas-check: a replica on $p never became ready" >&2; exit 1; }; done

answers="$work/answers"
: >"$answers"
stop_load="$work/stop-load"
load() { # port [count]: until $stop_load exists, or count requests
  n=0
  while [ ! -e "$stop_load" ] || [ -n "${2:-}" ]; do
    n=$((n + 1))
    [ -n "${2:-}" ] && [ "$n" -gt "$2" ] && break
    body=$(curl -s --max-time 20 -o - -w '\n%{http_code} %{time_total}' \
      -H "authorization: Bearer $token" -H 'accept: application/json' \
      -d "load $1 $n" "http://127.0.0.1:$1/ingress" || echo $'\n000 20')
    status=$(tail -n1 <<<"$body")
    run=$(head -n -1 <<<"$body" | sed -n 's/.*"run_id":"\([^"]*\)".*/\1/p')
    echo "$1 $status ${run:--}" >>"$answers"
    case "$status" in 2*) ;; *) echo "$1 $status $(head -n -1 <<<"$body" | head -c 300)" >>"$work/refusals" ;; esac
    sleep 0.02
  done
}
load "${ports[0]}" &
l0=$!
load "${ports[1]}" &
l1=$!
sleep 2
as_pg "$pgbin/pg_ctl" -D "$cluster" -m fast -w stop >/dev/null
echo "replicas-check: PostgreSQL stopped with requests in flight; down for 12 s (past the pool's 10 s wait)"
sleep 12
pg_start
echo "replicas-check: PostgreSQL started again"
sleep 3
touch "$stop_load"
wait "$l0" "$l1"
for p in "${ports[@]}"; do ready "$p" 30 || { echo "replicas-check: the replica on $p did not recover" >&2; exit 1; }; done
load "${ports[0]}" 5
load "${ports[1]}" 5

total=$(wc -l <"$answers")
summary=$(awk '{print $2}' "$answers" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')
slowest=$(awk '$3 > max {max = $3} END {print max}' "$answers")
echo "replicas-check: $total requests: ${summary%, }; the slowest answered in ${slowest}s"
bad=$(awk '$2 !~ /^20[02]$/ && $2 != "503" && n++ < 5 {print}' "$answers")
if [ -n "$bad" ]; then
  echo "replicas-check: answers that are neither 200/202 nor 503 (000 is a request that hung past 20 s):" >&2
  echo "$bad" >&2
  sed -n 1,5p "$work/refusals" >&2
  exit 1
fi
slow=$(awk '{print $2}' "$answers" | grep -c 000 || true)
[ "$slow" = 0 ] || { echo "replicas-check: $slow requests hung" >&2; exit 1; }
tail -n 10 "$answers" | awk '$2 !~ /^20[02]$/ {bad=1} END {exit bad}' ||
  { echo "replicas-check: a replica still refused after PostgreSQL came back" >&2; exit 1; }
accepted=$(awk '$2 ~ /^20[02]$/ && $4 != "-" {print $4}' "$answers" | sort)
recorded=$(psql_in postgres -At -c "select id from runs" | sort)
missing=$(comm -23 <(uniq <<<"$accepted") <(uniq <<<"$recorded") | sed -n 1,3p)
twice=$(uniq -d <<<"$accepted" | sed -n 1,3p)
if [ -n "$missing" ] || [ -n "$twice" ]; then
  echo "replicas-check: accepted runs missing from the store: ${missing:-none}; answered twice: ${twice:-none}" >&2
  exit 1
fi
echo "replicas-check: $(wc -l <<<"$accepted") accepted runs, each recorded once; both replicas recovered without a restart"
stop_replicas() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
stop_replicas

pace=300
echo "replicas-check: 4/4 a minutely schedule on two serve over one database, on a clock driven ${pace}x"
# The test-only `driven-clock` build: both replicas' clocks run $pace times the wall clock
# from one anchor, so a virtual minute (one slot) passes every $((60000 / pace)) ms of wall time.
cargo build --locked -q -p cli --features driven-clock
psql_in postgres -qc "create database slots" >/dev/null
slots_url="postgres://postgres@127.0.0.1:$port/slots"
slots=${SWITCHBOARD_REPLICAS_SLOTS:-100}
anchor=$(($(date +%s%N) / 1000))
for i in 0 1; do
  dir="$work/slots-$i"
  mkdir -p "$dir"
  cat >"$dir/switchboard.toml" <<TOML
[server]
replica_id = "slots-$i"
data_dir = "$dir/data"
[store]
url = "$slots_url"
[agents]
default = "echo"
[agents.echo]
[[schedules]]
name = "minutely"
cron = "* * * * *"
command = "help"
[grants."schedule:minutely"]
actions = ["help:read"]
TOML
  launch "$i" "$dir" SWITCHBOARD_DRIVEN_CLOCK="$pace@$anchor"
done
for p in "${ports[@]}"; do ready "$p" 30 || { echo "replicas-check: a slots replica on $p never became ready" >&2; exit 1; }; done
# Both replicas tick through $slots slots (and a few more, so a late first tick still leaves
# $slots) after the later one is ready, then stop.
sleep "$(awk -v n="$slots" -v pace="$pace" 'BEGIN {printf "%.2f", (n + 5) * 60 / pace}')"
stop_replicas
query() { psql_in slots -At -F ' ' -c "$1"; }
read -r fired distinct_slots distinct_runs first last completed <<<"$(query \
  "select count(*), count(distinct slot), count(distinct run_id), min(slot_at), max(slot_at), count(*) filter (where status = 'completed') from schedule_firings where name = 'minutely'")"
runs=$(query "select count(*) from runs where channel_id = 'schedule:minutely'")
# A slot both replicas' timers overslept (a loaded machine; a slot is $((60000 / pace)) ms here)
# is not fired alone: the next firing stands for it and says so ("caught up after downtime: N
# missed slot(s)"). Every slot not fired must be said so, and only a few are allowed. (A note
# counts from its replica's own last slot, so it may also count one the other replica fired.)
caught_up=$(query "select coalesce(sum((regexp_match(detail, 'caught up after downtime: ([0-9]+)'))[1]::int), 0) from schedule_firings where name = 'minutely'")
by_replica=$(query "select owner, count(*) from runs where channel_id = 'schedule:minutely' group by owner order by owner" | tr '\n' ' ')
span=$(( (last - first) / 60000000 + 1 ))
echo "replicas-check: $fired slots fired ($span minutes from the first to the last, $caught_up overslept and said by the next firing), $runs runs; runs by replica: $by_replica"
if [ "$fired" -lt "$slots" ] || [ "$distinct_slots" != "$fired" ] || [ "$distinct_runs" != "$fired" ] \
  || [ "$runs" != "$fired" ] || [ "$completed" != "$fired" ] || [ "$((span - fired))" -gt "$caught_up" ] \
  || [ "$((span - fired))" -gt 3 ]; then
  echo "replicas-check: each slot once was broken: $fired firings and $caught_up caught up over $span slots, $distinct_slots distinct slots, $distinct_runs distinct runs, $runs runs, $completed completed (want $slots or more, all equal, at most 3 slots unfired and each said)" >&2
  exit 1
fi
echo "replicas-check: of $span consecutive slots, $fired fired exactly once across both replicas and $((span - fired)) were said by the next firing"

if grep -l panicked "$work"/replica-*/stderr.log "$work"/slots-*/stderr.log >/dev/null 2>&1; then
  echo "replicas-check: a replica panicked" >&2
  exit 1
fi
echo "replicas-check: passed"
