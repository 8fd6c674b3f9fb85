#!/usr/bin/env bash
# The bench environment for side-by-side comparisons with peer systems (GEPA, OpenEvolve,
# mini-swe-agent). Its packages are never dependencies of Ratchet: they live in their own
# virtual environment, which the peer benches drive as a separate process (bench/evolve_peers.py).
# Usage: scripts/setup-bench.sh [VENV_DIR]   (default .venv-bench; safe to run again)
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_VENV=${1:-${BENCH_VENV:-.venv-bench}}
PEERS=(gepa==0.1.4 openevolve==0.4.0 mini-swe-agent==2.4.6)

PY=""
for c in python3.11 "$HOME"/.pyenv/versions/3.11*/bin/python3 python3; do
  command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
  "$c" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else 1)' 2>/dev/null && { PY=$c; break; }
done
[ -n "$PY" ] || { echo "error: the bench environment needs Python >= 3.11; none found" >&2; exit 1; }

if [ ! -x "$BENCH_VENV/bin/python" ]; then
  echo "==> creating $BENCH_VENV with $PY"
  "$PY" -m venv "$BENCH_VENV"
fi
"$BENCH_VENV/bin/python" -m pip install --quiet --upgrade pip
echo "==> installing ${PEERS[*]} into $BENCH_VENV"
"$BENCH_VENV/bin/python" -m pip install --quiet "${PEERS[@]}"
"$BENCH_VENV/bin/python" -c 'import gepa, openevolve, minisweagent; print("bench env ok")'
echo "done"
