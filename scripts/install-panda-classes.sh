#!/usr/bin/env bash
# Install PanDA's own classes (panda-server + panda-common, which hold JEDI's
# TaskRefiner) into the project venv, with a minimal configuration, so the JEDI
# refiner plugin is tested against the real parent class.
#
# Idempotent: a second run only re-checks the pinned versions and the import
# (another installed version is replaced by the pinned one). Usage:
#   scripts/install-panda-classes.sh            # uses $PANDA_PREDICTOR_VENV or .venv
# Afterwards source the environment it prints (or let the test fixture do it):
#   PANDA_HOME=<venv>/panda-home, PYTHONPATH += pandacommon and pandaserver folders.
set -euo pipefail
# Pinned: the plugin subclasses PanDA's TaskRefiner and is tested against exactly
# these releases; a newer panda-server may change the refiner's hooks. Bump both
# here (and re-run tests/plugins/test_jedi_refiner.py) to move on.
PANDA_SERVER_VERSION="1.0.4"
PANDA_COMMON_VERSION="0.1.11"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PANDA_PREDICTOR_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
PANDA_HOME_DIR="${PANDA_HOME:-$VENV/panda-home}"

# panda-server's build hook looks up the user atlpan and the group zp when run as root.
if [ "$(id -u)" -eq 0 ]; then
  getent group zp >/dev/null 2>&1 || groupadd -r zp
  getent passwd atlpan >/dev/null 2>&1 || useradd -r -g zp atlpan
fi

installed_versions() {
  "$PY" -c 'from importlib.metadata import version as v
import pandaserver, pandacommon
print(v("panda-server"), v("panda-common"))' 2>/dev/null || true
}

if [ "$(installed_versions)" != "$PANDA_SERVER_VERSION $PANDA_COMMON_VERSION" ]; then
  echo "==> installing panda-server $PANDA_SERVER_VERSION and panda-common" \
    "$PANDA_COMMON_VERSION into $VENV" >&2
  # The full dependency list wants mod_wsgi and workflow packages: install the
  # classes without them, then only the light dependencies the refiner path imports.
  "$PY" -m pip install --quiet --no-deps "panda-server==$PANDA_SERVER_VERSION" \
    "panda-common==$PANDA_COMMON_VERSION"
  "$PY" -m pip install --quiet pytz requests pyyaml packaging psutil numpy \
    panda-client-light stomp-py pyjwt werkzeug python-daemon
fi

SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TEMPLATES="$("$PY" -c 'import sys; print(sys.prefix)')/etc/panda"
CONF="$PANDA_HOME_DIR/etc/panda"
LOGS="$PANDA_HOME_DIR/log"
mkdir -p "$CONF" "$LOGS"
for name in panda_common panda_server panda_jedi; do
  target="$CONF/$name.cfg"
  [ -f "$target" ] && continue
  template="$TEMPLATES/$name.cfg.rpmnew"
  if [ ! -f "$template" ]; then
    echo "missing template $template: is panda-server installed in $VENV?" >&2
    exit 1
  fi
  # Every log folder must be writable; the PostgreSQL backend imports without an
  # Oracle client.
  sed -e "s#^\(\s*logdir\s*=\).*#\1 $LOGS#" \
      -e "s#^\s*\#\?\s*backend\s*=\s*postgres\s*\$#backend = postgres#" \
      "$template" > "$target"
done

export PANDA_HOME="$PANDA_HOME_DIR"
export PYTHONPATH="$SITE/pandacommon:$SITE/pandaserver${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "from pandajedi.jedirefine.GenTaskRefiner import GenTaskRefiner" >/dev/null
echo "PANDA_HOME=$PANDA_HOME_DIR"
echo "PYTHONPATH=$SITE/pandacommon:$SITE/pandaserver"
