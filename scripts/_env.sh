# Sourced by scripts/demo.sh and scripts/test.sh: make sure the project's virtual
# environment exists and has what setup.cfg asks for, then activate it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PANDA_PREDICTOR_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating the virtual environment in $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
# Re-install only when the dependency list changed (the stamp holds its hash).
STAMP="$VENV/.panda-predictor-installed"
WANT="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "==> installing panda-predictor and its dependencies (first run: a few minutes)" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip 'setuptools<81' wheel
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[dev]"
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export MLFLOW_DISABLE_TELEMETRY=true
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
cd "$ROOT"
