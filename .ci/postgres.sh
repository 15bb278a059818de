#!/usr/bin/env bash
# Sourced by .ci/run: a PostgreSQL server for the Postgres tests, exported as AGUI_TEST_POSTGRES_DSN.
# It uses a server already answering on 127.0.0.1:5432 (user postgres, trust or PGPASSWORD); otherwise it
# starts a throwaway one (Debian's postgresql package, installed if missing) in a temporary folder on a
# free port, run as the postgres user because initdb refuses root, and stops it when the shell exits.

postgres_start() {
    if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
        export AGUI_TEST_POSTGRES_DSN="${AGUI_TEST_POSTGRES_DSN:-postgresql://postgres@127.0.0.1:5432/postgres}"
        return
    fi
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$bin" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
        bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    fi
    local as_postgres=()
    [ "$(id -u)" = 0 ] && as_postgres=(runuser -u postgres --)
    PG_TMP=$(mktemp -d /tmp/agui-pg.XXXXXX)
    chmod 755 "$PG_TMP"
    [ "$(id -u)" = 0 ] && chown postgres "$PG_TMP"
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${as_postgres[@]}" "$bin/initdb" -D "$PG_TMP/data" -U postgres -A trust --no-sync >/dev/null
    "${as_postgres[@]}" "$bin/pg_ctl" -D "$PG_TMP/data" -l "$PG_TMP/log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $PG_TMP -c fsync=off -c max_connections=300" start >/dev/null
    PG_BIN=$bin
    export AGUI_TEST_POSTGRES_DSN="postgresql://postgres@127.0.0.1:$port/postgres"
    trap postgres_stop EXIT
}

postgres_stop() {
    if [ -n "${PG_TMP:-}" ]; then
        local as_postgres=()
        [ "$(id -u)" = 0 ] && as_postgres=(runuser -u postgres --)
        "${as_postgres[@]}" "$PG_BIN/pg_ctl" -D "$PG_TMP/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$PG_TMP"
        PG_TMP=
    fi
}
