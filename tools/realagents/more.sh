#!/bin/bash
# Run the agents the reference recorder (../shared/realagents/rerun.sh) does
# not know, the same way it runs the others: a fresh HOME, the agent pointed at
# the scripted model, one run of the same prompt, the files it wrote collected.
#
# usage: RA=WORKDIR CAIRN_BIN=PATH tools/realagents/more.sh [agent ...]
#   agents (the recorder's names): copilot kilo amp droid omp hermes
#   Each must be installed already ($RA/npm/<agent> or $RA/venv-<agent>;
#   record.sh installs them).
#
# It reuses the reference recorder's helpers (common.sh: the HOME, the prompt,
# collecting the files, running cairn on them) and its scripted model
# (fakellm.py), started here on its own port (MORE_PORT, default 18085) so it
# never answers with another recorder's planted decision. What each run wrote
# lands in $RA/out/<label>-<release>/ for import.py, as rerun.sh's runs do.
#
# Environment: RA, CAIRN_BIN, FAKE_FACT as for rerun.sh; REALAGENTS the
# reference recorder (default ../shared/realagents beside the repo).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
REALAGENTS=${REALAGENTS:-$(cd "$REPO/.." && pwd)/shared/realagents}
# shellcheck source=/dev/null
source "$REALAGENTS/common.sh"
PORT=${MORE_PORT:-18085}
export FAKE=http://127.0.0.1:$PORT
AGENTS=${*:-copilot kilo amp droid omp hermes}
B=${CAIRN_BIN:?set CAIRN_BIN to the cairn binary}
mkdir -p "$RA/logs"

SRV_PID=""
python3 "$REALAGENTS/fakellm.py" --port "$PORT" --log "$RA/logs/fakellm-more.jsonl" --bodies "$RA/logs/bodies-more" \
  >> "$RA/logs/fakellm-more.out" 2>&1 &
SRV_PID=$!
trap 'kill $SRV_PID 2>/dev/null' EXIT
for _ in $(seq 50); do curl -s -o /dev/null --max-time 1 "$FAKE/v1/models" && break; sleep 0.1; done

fresh() { rm -rf "$RA/home-$1" "$RA/cairn-$1"; setup_agent "$1"; cd "$PROJ" || exit 1; }

# GitHub Copilot CLI: its own BYOK provider variables, offline (no GitHub login).
run_copilot() {
  fresh copilot; VER=$(copilot --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
  COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false COPILOT_PROVIDER_BASE_URL=$FAKE/v1 COPILOT_PROVIDER_TYPE=openai \
  COPILOT_PROVIDER_API_KEY=sk-fake COPILOT_MODEL=fake-model COPILOT_PROVIDER_MAX_PROMPT_TOKENS=100000 \
  COPILOT_PROVIDER_MAX_OUTPUT_TOKENS=4000 \
    timeout 240 copilot -p "$(prompt)" --allow-all-tools --disable-client-telemetry --no-auto-update
}

# Kilo CLI: opencode's code base, its config and data under "kilo".
run_kilo() {
  fresh kilo; mkdir -p "$HOME/.config/kilo"
  cat > "$HOME/.config/kilo/kilo.json" <<EOF
{ "autoupdate": false, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
  "provider": { "fake": { "npm": "@ai-sdk/openai-compatible", "name": "Fake",
    "options": { "baseURL": "$FAKE/v1", "apiKey": "sk-fake" },
    "models": { "fake-model": { "name": "Fake Model", "tool_call": true } } } },
  "permission": { "bash": "allow", "edit": "allow" } }
EOF
  VER=$(kilo --version 2>/dev/null | tail -1)
  timeout 240 kilo run "$(prompt)"
}

# Factory's droid: a BYOK custom model in ~/.factory/settings.json (and the
# older config.json), no Factory login.
run_droid() {
  fresh droid; mkdir -p "$HOME/.factory"
  local m="{\"model\": \"fake-model\", \"displayName\": \"Fake\", \"baseUrl\": \"$FAKE/v1\", \"apiKey\": \"sk-fake\", \"provider\": \"generic-chat-completion-api\", \"maxOutputTokens\": 4000}"
  echo "{\"customModels\": [$m]}" > "$HOME/.factory/settings.json"
  echo "{\"custom_models\": [{\"model_display_name\": \"Fake\", \"model\": \"fake-model\", \"base_url\": \"$FAKE/v1\", \"api_key\": \"sk-fake\", \"provider\": \"generic-chat-completion-api\", \"max_tokens\": 4000}]}" \
    > "$HOME/.factory/config.json"
  export PATH=$RA/npm/droid/node_modules/@factory/cli-linux-x64/bin:$PATH
  VER=$(droid --version 2>/dev/null | tail -1)
  timeout 240 droid exec --skip-permissions-unsafe -m "${DROID_MODEL:-custom:fake-model}" "$(prompt)"
}

# Hermes agent (PyPI): its "custom" OpenAI-compatible provider in config.yaml.
run_hermes() {
  fresh hermes; mkdir -p "$HOME/.hermes"
  printf '%s\n' 'model:' '  provider: custom' "  base_url: $FAKE/v1" '  default: fake-model' '  api_key: sk-fake' \
    > "$HOME/.hermes/config.yaml"
  VER=$(pip_version hermes hermes-agent)
  timeout 240 hermes chat -Q --yolo --provider custom -m fake-model -q "$(prompt)"
}
# oh-my-pi (omp), a pi fork run by bun (the npm package @oven/bun-linux-x64
# ships the binary: record.sh installs it into $RA/npm/bun): pi's models.json
# under ~/.omp/agent.
run_omp() {
  fresh omp; mkdir -p "$HOME/.omp/agent"
  cat > "$HOME/.omp/agent/models.json" <<EOF
{ "providers": { "fake": { "baseUrl": "$FAKE/v1", "api": "openai-completions", "apiKey": "sk-fake",
  "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": false },
  "models": [ { "id": "fake-model", "name": "Fake Model" } ] } } }
EOF
  export PATH=$RA/npm/bun/node_modules/@oven/bun-linux-x64/bin:$PATH
  VER=$(omp --version 2>&1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
  timeout 240 omp -p --provider fake --model fake-model "$(prompt)"
}
# The release of a PyPI package in the agent's venv.
pip_version() { "$RA/venv-$1/bin/python" -c "import importlib.metadata as m; print(m.version('$2'))"; }

for a in $AGENTS; do
  declare -F "run_$a" > /dev/null || { echo "more.sh: unknown agent $a" >&2; exit 2; }
  echo "################ $a"
  (
    VER=unknown LABEL=""
    "run_$a" > "$RA/logs/run-$a.out" 2> "$RA/logs/run-$a.err" < /dev/null
    rc=$?
    echo "agent: $a ${LABEL:-$a} $VER   exit code: $rc   fact in stdout: $(grep -cF "$FAKE_FACT" "$RA/logs/run-$a.out")"
    find "$HOME" -name '*.db-wal' -not -path '*/node_modules/*' | while read -r wal; do
      python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "${wal%-wal}"
    done
    collect "$a" "$VER" "${LABEL:-$a}" | head -1
    run_cairn "$a"
    cairn_summary "$a"
  )
done
