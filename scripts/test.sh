#!/usr/bin/env bash
# Run the whole test suite (installs what it needs first). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

# The database tests need the real PostgreSQL server; start it if it is down.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "==> starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
fi

# PanDA's own JEDI classes, for the refiner plugin's tests (installed once, --no-deps).
bash scripts/install-panda-classes.sh >/dev/null

set +e
python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$status"
