#!/usr/bin/env bash
# The bench environments for side-by-side comparisons with peer systems (GEPA, OpenEvolve,
# mini-swe-agent; ace-framework). Their packages are never dependencies of Ratchet: they live in
# their own virtual environments, which the peer benches drive as a separate process
# (bench/evolve_peers.py, bench/context_playbook.py --arms ace-framework).
# ace-framework needs Python >= 3.12, the other peers run on 3.11, so it gets an environment of
# its own (.venv-bench-ace) built from the first interpreter >= 3.12 found.
# Usage: scripts/setup-bench.sh [VENV_DIR] [--only peers|ace]
#   (defaults: .venv-bench and .venv-bench-ace, both; safe to run again)
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_VENV=${BENCH_VENV:-.venv-bench}
ACE_VENV=${ACE_VENV:-.venv-bench-ace}
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=${2:?--only needs peers or ace}; shift 2 ;;
    -*) echo "error: unknown option $1 (use --only peers|ace)" >&2; exit 2 ;;
    *) BENCH_VENV=$1; shift ;;
  esac
done
PEERS=(gepa==0.1.4 openevolve==0.4.0 mini-swe-agent==2.4.6)
ACE_PEERS=(ace-framework==0.13.0)

# The first interpreter at least MAJOR.MINOR among the candidates (names on PATH or paths).
find_python() {
  local want=$1; shift
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
    "$c" -c "import sys; sys.exit(0 if sys.version_info[:2] >= tuple(map(int, '$want'.split('.'))) else 1)" \
      2>/dev/null && { echo "$c"; return 0; }
  done
  return 1
}

make_env() {  # DIR PYTHON CHECK PACKAGES...
  local dir=$1 py=$2 check=$3; shift 3
  if [ ! -x "$dir/bin/python" ]; then
    echo "==> creating $dir with $py"
    "$py" -m venv "$dir"
  fi
  "$dir/bin/python" -m pip install --quiet --upgrade pip
  echo "==> installing $* into $dir"
  "$dir/bin/python" -m pip install --quiet "$@"
  "$dir/bin/python" -c "$check"
}

if [ "$ONLY" != ace ]; then
  PY=$(find_python 3.11 python3.11 "$HOME"/.pyenv/versions/3.11*/bin/python3 python3) \
    || { echo "error: the bench environment needs Python >= 3.11; none found" >&2; exit 1; }
  make_env "$BENCH_VENV" "$PY" 'import gepa, openevolve, minisweagent; print("bench env ok")' "${PEERS[@]}"
fi
if [ "$ONLY" != peers ]; then
  PY=$(find_python 3.12 python3.12 python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
       "$HOME"/.pyenv/versions/3.13*/bin/python3 python3) \
    || { echo "error: ace-framework needs Python >= 3.12; none found (install one, e.g. with pyenv)" >&2; exit 1; }
  make_env "$ACE_VENV" "$PY" 'import ace; print("ace bench env ok")' "${ACE_PEERS[@]}"
fi
echo "done"
