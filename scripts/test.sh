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

# The scout_prediction tests publish and consume through RabbitMQ's STOMP plugin
# (port 61613, guest/guest on loopback). Enable it when the port is closed; never
# stop the suite here: without the broker those tests fail (they do not skip).
stomp_up() { (exec 3<>/dev/tcp/127.0.0.1/61613) 2>/dev/null; }
if ! stomp_up; then
  if command -v rabbitmq-plugins >/dev/null 2>&1; then
    echo "==> enabling RabbitMQ's STOMP plugin" >&2
    rabbitmq-plugins enable rabbitmq_stomp >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do stomp_up && break; sleep 1; done
  fi
  stomp_up || echo "warning: no STOMP broker on 127.0.0.1:61613; the message tests will fail" >&2
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
