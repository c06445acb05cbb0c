# Sourced, not run: `start_temp_pg` starts a temporary cluster of Debian's PostgreSQL on a free
# loopback port, as an unprivileged user (initdb refuses root; CI runs as root), fsync off, and
# stops and removes it when the shell exits; it exports PG_ADMIN_URL (the `postgres` database
# of the superuser `car`). Used by scripts/test.sh and the team benchmark. `PG_OPTS` adds server
# options (e.g. `-c shared_preload_libraries=pg_stat_statements` to see where a run's time goes).
start_temp_pg() {
  local pg_bin
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$pg_bin" ]; then
    echo "PostgreSQL is not installed (apt-get install postgresql)" >&2
    return 1
  fi
  pg_dir=$(mktemp -d /tmp/car-pg.XXXXXX)
  as_pg=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$pg_dir"
    as_pg=(runuser -u postgres --)
  fi
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as_pg[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U car -E UTF8 --no-sync >/dev/null
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
    -o "-p $port -k $pg_dir -c listen_addresses=127.0.0.1 -c fsync=${PG_FSYNC:-off} -c max_connections=300 ${PG_OPTS:-}" start >/dev/null
  PG_BIN=$pg_bin
  stop_temp_pg() { "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$pg_dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$pg_dir"; }
  trap stop_temp_pg EXIT
  export PG_ADMIN_URL="postgres://car@127.0.0.1:$port/postgres"
  echo "==> PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') at 127.0.0.1:$port" >&2
}
