#!/usr/bin/env bash
# Check a static HTML report in headless Chromium and save a screenshot of it.
#
# Fails (exit 1) if Chromium reports a page error or a resource it could not load, or
# if any image of the rendered page is missing, empty or does not decode, or a local
# link (e.g. to a training report) points nowhere. Exit 2: no Chromium installed
# (Debian: apt-get install -y chromium).
#
# Usage: scripts/check-report.sh [PAGE] [SCREENSHOT]
#   PAGE        default var/reports/monitoring/index.html ('panda-predictor report')
#   SCREENSHOT  default: the page's name with .png (e.g. index.png next to it)
#   WIDTH, HEIGHT (environment) the window, default 1200 x 4200 pixels.
set -euo pipefail
page="$(realpath "${1:-var/reports/monitoring/index.html}")"
shot="$(realpath -m "${2:-${page%.html}.png}")"
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"

chromium="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [ -z "$chromium" ]; then
  echo "check-report: no Chromium found; install it (apt-get install -y chromium)" >&2
  exit 2
fi
[ -f "$page" ] || { echo "check-report: no page $page" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
       --enable-logging=stderr --v=0 --virtual-time-budget=5000
       --allow-file-access-from-files)
"$chromium" "${flags[@]}" --dump-dom "file://$page" >"$tmp/dom.html" 2>"$tmp/console.log"
if grep -E "Failed to load resource|ERR_FILE_NOT_FOUND|Uncaught|CONSOLE\(.*error" \
    "$tmp/console.log"; then
  echo "check-report: Chromium reported errors for $page" >&2
  exit 1
fi
# The DOM as Chromium rendered it, checked next to the page so relative paths hold.
rendered="$(dirname "$page")/.rendered-$(basename "$page")"
{ echo "<!DOCTYPE html>"; cat "$tmp/dom.html"; } >"$rendered"
status=0
python -m pipelines.monitoring.report_check "$rendered" || status=1
rm -f "$rendered"
[ "$status" -eq 0 ] || { echo "check-report: $page has broken parts" >&2; exit 1; }

"$chromium" "${flags[@]}" --window-size="${WIDTH:-1200},${HEIGHT:-4200}" \
  --screenshot="$shot" "file://$page" 2>"$tmp/shot.log" >/dev/null
[ -s "$shot" ] || { echo "check-report: no screenshot written" >&2; exit 1; }
echo "check-report: $page renders without errors; screenshot $shot"
