#!/usr/bin/env bash
# Build the health page of a small demo warehouse (tests/support/health_tables.py: an append table,
# a primary-key table with tags, a branch and a consumer, a 600-file table of many sizes, a broken
# table, two run records) and render it in headless Chromium to a PNG (README's screenshot).
#   bash scripts/render_report.sh [PNG] [WORK_DIR]      default: docs/img/health-report.png
# Needs Debian's chromium (apt-get install -y chromium); CI's test of the page does not.
set -euo pipefail
cd "$(dirname "$0")/.."
PNG="$(realpath -m "${1:-docs/img/health-report.png}")"
WORK="${2:-$(mktemp -d /tmp/health-report.XXXXXX)}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || { echo "error: $CHROMIUM not found: apt-get install -y chromium" >&2; exit 2; }
rm -rf "$WORK/wh" "$WORK/runs"
mkdir -p "$WORK" "$(dirname "$PNG")"
.venv/bin/python -c '
import sys
from tests.support.health_tables import build_health_warehouse, write_run_records
build_health_warehouse(sys.argv[1] + "/wh", broken=True, event_files=600)
write_run_records(sys.argv[1] + "/runs")
' "$WORK"
printf 'warehouse: %s/wh\ntables: ["db.*"]\nreport:\n  out: %s/report.html\n  records: [%s/runs]\n' \
  "$WORK" "$WORK" "$WORK" > "$WORK/maintain.yaml"
set +e
.venv/bin/python -m jobs report --config "$WORK/maintain.yaml" --output "$WORK/report-run.json"
code=$?
set -e
# 2 = the demo's broken table is on the page as an error block, as intended; anything else is a failure
[ "$code" = 2 ] || { echo "error: report exited $code, expected 2 (one broken table)" >&2; exit 1; }
# Flags for a machine without a network or a session bus: no background connections, a fresh profile.
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$WORK/profile" --window-size=1280,2000 --screenshot="$PNG" \
  "file://$WORK/report.html" 2>"$WORK/chromium.log"
echo "page: $WORK/report.html; screenshot: $PNG"
