#!/usr/bin/env bash
# One-shot set-up of a fresh machine: the main virtual environment (Python >= 3.11, with the
# embedded model runtime and the CPU trainer), the sandbox's bubblewrap, and a second small
# environment on Python >= 3.12 for the TextArena games that need it (Chess, Checkers, ...).
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
ENVS_VENV=${ENVS_VENV:-.venv-envs}
EXTRAS=${EXTRAS:-local,learn,ray,ui,mcp,otel,humaneval,dev}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Probe for interpreters rather than hard-coding one path: some machines have 3.12 only under
# pyenv, others ship 3.13 as the system Python.
find_python() {  # $1 = minimum minor version of Python 3
  local min=$1 cand
  for cand in python3 python3.11 python3.12 python3.13 python3.14 \
      "$HOME"/.pyenv/versions/3.1[1-9]*/bin/python3 /usr/bin/python3 /usr/local/bin/python3; do
    [ -n "$cand" ] || continue
    command -v "$cand" >/dev/null 2>&1 || [ -x "$cand" ] || continue
    if "$cand" -c "import sys; sys.exit(0 if sys.version_info[:2] >= (3, $min) else 1)" 2>/dev/null; then
      command -v "$cand" 2>/dev/null || echo "$cand"; return 0
    fi
  done
  return 1
}

# The trainer's CPU torch build exists for 3.11 only, so the main environment prefers exactly 3.11.
MAIN_PY=$(for c in python3.11 python3 "$HOME"/.pyenv/versions/3.11*/bin/python3; do
  command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
  "$c" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null && { echo "$c"; break; }
done || true)
MAIN_PY=${MAIN_PY:-$(find_python 11 || true)}
[ -n "$MAIN_PY" ] || { echo "error: Ratchet needs Python >= 3.11; none found on PATH or under pyenv" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $MAIN_PY"
  "$MAIN_PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip wheel
fi

STAMP="$VENV/.installed-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  say "installing ratchet[$EXTRAS] into $VENV (first time: llama.cpp compiles for ~5 min)"
  # A lean, portable llama.cpp build: as fast at run time as -march=native, quicker to build, and
  # the cached wheel runs on any x86-64 CPU with AVX2.
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  CMAKE_ARGS=${CMAKE_ARGS:-"-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"} \
    "$VENV/bin/pip" install -q -e ".[$EXTRAS]"
  touch "$STAMP"
fi

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing bubblewrap (the sandbox's isolation)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "warning: bubblewrap not found and cannot be installed here; the sandbox falls back to a weaker isolation (see docs/sandbox.md)" >&2
  fi
fi

# The dashboard's browser tests drive the system's chromium through Playwright (never a downloaded one).
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium (the dashboard's browser tests)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: /usr/bin/chromium not found and cannot be installed here; the dashboard's browser tests will be skipped" >&2
  fi
fi

ENVS_PY=$(find_python 12 || true)
if [ -n "$ENVS_PY" ]; then
  ENVS_STAMP="$ENVS_VENV/.installed-$(sha256sum pyproject.toml | cut -c1-12)"
  if [ ! -f "$ENVS_STAMP" ]; then
    say "creating $ENVS_VENV with $ENVS_PY for the TextArena games that need Python >= 3.12"
    [ -x "$ENVS_VENV/bin/python" ] || "$ENVS_PY" -m venv "$ENVS_VENV"
    "$ENVS_VENV/bin/pip" install -q --upgrade pip
    "$ENVS_VENV/bin/pip" install -q "textarena==0.7.4" numpy "pydantic>=2.7" pyyaml
    "$ENVS_VENV/bin/pip" install -q --no-deps -e .
    touch "$ENVS_STAMP"
  fi
else
  echo "warning: no Python >= 3.12 found: Chess, Checkers, ReverseTicTacToe, IteratedStagHunt and UltimateTexasHoldem will be listed as unavailable" >&2
fi
say "set-up done"
