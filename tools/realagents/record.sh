#!/bin/bash
# Re-record the conformance suite from the agents' newest releases.
#
# usage: tools/realagents/record.sh [--force] [agent[@version] ...]
#   agents (the recorder's names): opencode codex claude qwen gemini pi cn cline kimi vibe aider openhands
#   copilot kilo droid omp hermes (these five run by tools/realagents/more.sh)
#   default: all of them. agent@version pins a release instead of asking the registry.
#
# For each agent: asks its registry (npm or PyPI) for the newest release, and
# unless fixtures/agents/<agent>/<release>/ exists already (or --force):
# installs exactly that release, runs it once against the scripted model with
# ../shared/realagents/rerun.sh (a fresh HOME, one prompt, one `echo hello`
# tool call, a planted decision), copies what it wrote into
# fixtures/agents/<agent>/<release>/ with import.py (pruned, with a
# PROVENANCE.md), then runs the conformance suite. A new release shows up as a
# failing suite: "recorded without an entry" until its entry is added to
# tests/e2e/conformance.rs from the recorded files, or a diff when an existing
# reader misreads it.
#
# Environment:
#   RA          work folder (installs, homes, logs), default /home/dev/agent: the
#               committed recordings' paths say /home/dev/agent/home-<agent>, so
#               recording there keeps every path the same on every machine.
#   REALAGENTS  the reference recorder, default ../shared/realagents beside the repo.
#   CAIRN_BIN   the cairn binary rerun.sh checks each run with (default: target/debug/cairn,
#               built if missing).
#   FAKE_FACT   the scripted model's planted decision; by default it carries a fake
#               GitHub token, so each new recording checks that a secret an agent
#               wrote into its history never reaches the index. The scripted model
#               reads it only when rerun.sh starts it (nothing else on port 18080).
# Needs node/npm, python3.12 and python3.13 (uv is installed from PyPI into $RA/venv-uv).
set -euo pipefail
export FAKE_FACT=${FAKE_FACT:-"Decision: we pinned the quokka library to 2.3 because 2.4 broke the parser. The staging deploy token is ghp_R3c0rdedAgentS3cretQuokka2026xYz1234 for now."}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export RA=${RA:-/home/dev/agent}
REALAGENTS=${REALAGENTS:-$(cd "$REPO/.." && pwd)/shared/realagents}
FORCE=0
if [ "${1:-}" = "--force" ]; then FORCE=1; shift; fi
AGENTS=${*:-opencode codex claude qwen gemini pi cn cline kimi vibe aider openhands copilot kilo droid omp hermes}
# Agents the reference recorder does not run: tools/realagents/more.sh does.
MORE=" copilot kilo droid omp hermes "

[ -f "$REALAGENTS/rerun.sh" ] || { echo "record.sh: no recorder at $REALAGENTS (set REALAGENTS)" >&2; exit 2; }
mkdir -p "$RA/logs" "$RA/out"
if [ -z "${CAIRN_BIN:-}" ]; then
  (cd "$REPO" && cargo build -q -p cairn)
  CAIRN_BIN=$REPO/target/debug/cairn
fi
export CAIRN_BIN

# name: registry, package, python version (PyPI), label of the out folder
spec() {
  case $1 in
    opencode) echo "npm opencode-ai - opencode";;
    codex) echo "npm @openai/codex - codex";;
    claude) echo "npm @anthropic-ai/claude-code - claude";;
    qwen) echo "npm @qwen-code/qwen-code - qwen";;
    gemini) echo "npm @google/gemini-cli - gemini";;
    pi) echo "npm @mariozechner/pi-coding-agent - pi";;
    cn) echo "npm @continuedev/cli - cn";;
    cline) echo "npm cline - cline";;
    kimi) echo "pypi kimi-cli 3.13 kimi-cli";;
    vibe) echo "pypi mistral-vibe 3.13 mistral-vibe";;
    aider) echo "pypi aider-chat 3.12 aider";;
    openhands) echo "pypi openhands 3.12 openhands";;
    copilot) echo "npm @github/copilot - copilot";;
    kilo) echo "npm @kilocode/cli - kilo";;
    # @factory/cli's own platform package lags it on the registry: the
    # platform package is the droid binary itself.
    droid) echo "npm @factory/cli-linux-x64 - droid";;
    omp) echo "npm @oh-my-pi/pi-coding-agent - omp";;
    hermes) echo "pypi hermes-agent 3.12 hermes";;
    *) echo "record.sh: unknown agent $1" >&2; return 1;;
  esac
}

# The cairn agent id import.py files a label under.
agent_id() {
  case $1 in claude) echo claude-code;; cn) echo continue;; mistral-vibe) echo vibe;; droid) echo factory;; *) echo "$1";; esac
}

newest() {  # registry package python
  if [ "$1" = npm ]; then
    npm view "$2" version 2>/dev/null
  else
    python3 -m pip index versions "$2" --python-version "$3" --only-binary=:all: 2>/dev/null \
      | sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -1
  fi
}

# A Python interpreter of that minor version: on PATH, else a pyenv install.
interp() {
  if "python$1" -c 'import sys' > /dev/null 2>&1; then command -v "python$1"; return; fi
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/"python$1"; do [ -x "$p" ] && { echo "$p"; return; }; done
  echo "$1"  # let uv find (or fetch) one
}

install() {  # name registry package version python
  local name=$1 reg=$2 pkg=$3 ver=$4 py=$5
  echo "install $pkg $ver ($reg)"
  if [ "$reg" = npm ]; then
    mkdir -p "$RA/npm/$name"
    npm install --prefix "$RA/npm/$name" --no-audit --no-fund --loglevel=error "$pkg@$ver" \
      > "$RA/logs/install-$name.log" 2>&1
    # omp runs under bun, whose npm platform package ships the binary.
    if [ "$name" = omp ] && [ ! -x "$RA/npm/bun/node_modules/@oven/bun-linux-x64/bin/bun" ]; then
      npm install --prefix "$RA/npm/bun" --no-audit --no-fund --loglevel=error @oven/bun-linux-x64 \
        >> "$RA/logs/install-$name.log" 2>&1
    fi
  else
    [ -x "$RA/venv-uv/bin/uv" ] || { python3 -m venv "$RA/venv-uv" && "$RA/venv-uv/bin/pip" -q install uv; }
    [ -d "$RA/venv-$name" ] || "$RA/venv-uv/bin/uv" venv -q -p "$(interp "$py")" "$RA/venv-$name" > "$RA/logs/install-$name.log" 2>&1
    VIRTUAL_ENV=$RA/venv-$name "$RA/venv-uv/bin/uv" pip install "$pkg==$ver" >> "$RA/logs/install-$name.log" 2>&1
  fi
}

recorded=()
for arg in $AGENTS; do
  name=${arg%@*}; pin=""; [ "$arg" != "$name" ] && pin=${arg#*@}
  read -r reg pkg py label <<< "$(spec "$name")"
  ver=${pin:-$(newest "$reg" "$pkg" "$py")}
  [ -n "$ver" ] || { echo "$name: the registry named no release of $pkg" >&2; exit 1; }
  release=$ver
  dest=$REPO/fixtures/agents/$(agent_id "$label")/$release
  if [ -d "$dest" ] && [ $FORCE = 0 ]; then
    echo "$name $ver: already recorded ($dest)"; continue
  fi
  install "$name" "$reg" "$pkg" "$ver" "$py"
  if [[ $MORE == *" $name "* ]]; then
    bash "$HERE/more.sh" "$name"
    how="tools/realagents/more.sh"
  else
    bash "$REALAGENTS/rerun.sh" "$name"
    how="tools/realagents/record.sh"
  fi
  run=$RA/out/$label-$ver
  [ -d "$run" ] || { echo "$name: rerun.sh collected nothing into $run (see $RA/logs/run-$name.*)" >&2; exit 1; }
  python3 "$HERE/import.py" "$run" \
    --source "$how on $(date -u +%F), recorder $(realpath --relative-to="$REPO" "$REALAGENTS")"
  recorded+=("$dest")
done

echo "recorded: ${recorded[*]:-nothing new}"
cd "$REPO"
cargo test -q -p cairn --test e2e conformance
