#!/bin/bash
# Check cairn's MCP wiring with the real clients, and keep the evidence.
#
# usage: tools/realagents/wiring.sh [agent ...]
#   agents (the recorder's names): claude gemini opencode kimi codex qwen cline copilot droid kilo cn openhands vibe
#   default: all of them. Each must be installed already (record.sh or
#   ../shared/realagents/install_*.sh put them in $RA/npm/<agent>, $RA/venv-<agent>).
#
# For each agent, in a throwaway HOME ($RA/wiring-<agent>, its project in
# ~/code/proj-<agent>):
#   1. the agent is pointed at a scripted model on loopback: the project's own
#      scenario_model.py --wiring (it goes through the agent's own tool search
#      or tool namespace when cairn's tools are behind one), or for Gemini CLI
#      (whose API it does not speak) the reference recorder's fakellm.py, run
#      by path, never copied;
#   2. a past Claude Code session holding WIRING_FACT is written and indexed,
#      so cairn has something to answer with;
#   3. `cairn install --agent <id> --no-service` wires cairn into the agent's
#      own config, as a user would (the debug cairn built from this tree);
#   4. the agent runs once with a prompt about the walrus cache; the scripted
#      model calls cairn's search when the agent offers it;
#   5. wiring_evidence.py reads what cairn install wrote and the requests the
#      agent sent the model, and writes
#      fixtures/agents/<agent-id>/<release>/wiring/{wiring.json,PROVENANCE.md}:
#      the config entry, the tools the agent offered, the tools the model
#      called to reach cairn's search, the result the agent sent back and
#      whether cairn's answer was in it.
# Then the wiring test runs: cargo test -p cairn --test e2e wiring.
#
# Environment:
#   RA          work folder (installs, homes, logs), default /home/dev/agent.
#   REALAGENTS  the reference recorder (its fakellm.py, for Gemini CLI), default
#               ../shared/realagents beside the repo.
#   CAIRN_BIN   the cairn binary to wire (default: target/debug/cairn, built first).
#   WIRING_PORT the scripted model's port (default 18091: not the recorder's 18080,
#               so both can run at once).
#   WIRING_NO_TEST  set: record only, do not run the test afterwards.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export RA=${RA:-/home/dev/agent}
REALAGENTS=${REALAGENTS:-$(cd "$REPO/.." && pwd)/shared/realagents}
PORT=${WIRING_PORT:-18091}
FAKE=http://127.0.0.1:$PORT
AGENTS=${*:-claude gemini opencode kimi codex qwen cline copilot droid kilo cn openhands vibe}
WIRING_FACT="Decision: the walrus cache stays at 64 MB because a bigger one evicts the hot set."
QUERY="walrus cache"
ORIG_PATH=$PATH

if [ -z "${CAIRN_BIN:-}" ]; then
  (cd "$REPO" && cargo build -q -p cairn)
  CAIRN_BIN=$REPO/target/debug/cairn
fi
CAIRN_BIN=$(realpath "$CAIRN_BIN")
mkdir -p "$RA/logs/wiring"

# cairn's id for a recorder name.
agent_id() {
  case $1 in claude) echo claude-code;; kimi) echo kimi-cli;; droid) echo factory;; cn) echo continue;; *) echo "$1";; esac
}

# A fresh HOME with a git project in it; PATH gets the agent's install.
fresh() {
  export HOME=$RA/wiring-$1 PROJ=$RA/wiring-$1/code/proj-$1
  unset XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME CAIRN_HOME CODEX_HOME
  rm -rf "$HOME"; mkdir -p "$PROJ"
  printf '# demo project for %s\n' "$1" > "$PROJ/README.md"
  (cd "$PROJ" && git init -q && git add README.md && git -c user.email=t@t -c user.name=t commit -qm init)
  export PATH=$RA/npm/$1/node_modules/.bin:$RA/venv-$1/bin:$ORIG_PATH
}

# A past Claude Code session holding the fact, indexed.
seed() {
  local dir=$HOME/.claude/projects/-home-old-proj sid=0f0e0d0c-0b0a-4909-8807-060504030201
  mkdir -p "$dir"
  printf '%s\n' \
    "{\"type\":\"user\",\"sessionId\":\"$sid\",\"uuid\":\"a1\",\"cwd\":\"/home/old/proj\",\"timestamp\":\"2026-10-01T10:00:00Z\",\"message\":{\"role\":\"user\",\"content\":\"what did we settle on for the cache?\"}}" \
    "{\"type\":\"assistant\",\"sessionId\":\"$sid\",\"uuid\":\"a2\",\"parentUuid\":\"a1\",\"cwd\":\"/home/old/proj\",\"timestamp\":\"2026-10-01T10:01:00Z\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"$WIRING_FACT\"}]}}" \
    > "$dir/$sid.jsonl"
  "$CAIRN_BIN" index -q
}

prompt() { echo "Use the cairn memory tools to look up what we decided about the walrus cache, then tell me."; }

# Per agent: its model config (before install, as a user's existing config),
# its version, and how to run it once.
config_claude() { VER=$(claude --version | awk '{print $1}'); }
run_claude() {
  ANTHROPIC_BASE_URL=$FAKE ANTHROPIC_API_KEY=sk-ant-fake DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 timeout 240 claude -p --model claude-sonnet-4-5 \
    --allowedTools mcp__cairn__search --permission-mode bypassPermissions "$(prompt)"
}
config_gemini() {
  mkdir -p "$HOME/.gemini"
  echo '{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true}}' \
    > "$HOME/.gemini/settings.json"
  VER=$(gemini --version)
}
run_gemini() {
  GEMINI_API_KEY=fake-key GOOGLE_GEMINI_BASE_URL=$FAKE GEMINI_CLI_TRUST_WORKSPACE=true \
    timeout 240 gemini -p "$(prompt)" --yolo -m gemini-2.5-flash
}
config_opencode() {
  mkdir -p "$HOME/.config/opencode"
  cat > "$HOME/.config/opencode/opencode.json" <<EOF
{"autoupdate": false, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
 "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
   "options": {"baseURL": "$FAKE/v1", "apiKey": "sk-fake"},
   "models": {"fake-model": {"name": "Fake Model", "tool_call": true}}}},
 "permission": {"bash": "allow", "edit": "allow"}}
EOF
  VER=$(opencode --version)
}
run_opencode() { timeout 240 opencode run "$(prompt)"; }
config_kimi() {
  mkdir -p "$HOME/.kimi"
  cat > "$HOME/.kimi/config.toml" <<EOF
default_model = "fake"
[models.fake]
provider = "fake"
model = "fake-model"
max_context_size = 128000
[providers.fake]
type = "openai_legacy"
base_url = "$FAKE/v1"
api_key = "sk-fake"
EOF
  VER=$(kimi --version | awk '{print $3}')
}
run_kimi() { timeout 240 kimi --print --yolo -p "$(prompt)"; }
config_codex() {
  mkdir -p "$HOME/.codex"
  cat > "$HOME/.codex/config.toml" <<EOF
model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake"
base_url = "$FAKE/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
EOF
  VER=$(codex --version | awk '{print $2}')
}
run_codex() {
  FAKE_API_KEY=sk-fake timeout 240 codex exec --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check "$(prompt)"
}
config_qwen() {
  mkdir -p "$HOME/.qwen"
  echo '{"security":{"auth":{"selectedType":"openai"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}' \
    > "$HOME/.qwen/settings.json"
  VER=$(qwen --version)
}
# Qwen Code offers MCP tools behind its tool_search; its debug log lists the registry.
run_qwen() {
  DEBUG_GLOB='.qwen/debug/*.txt'

  OPENAI_BASE_URL=$FAKE/v1 OPENAI_API_KEY=sk-fake OPENAI_MODEL=fake-model QWEN_CODE_SUPPRESS_YOLO_WARNING=1 \
    timeout 240 qwen -p "$(prompt)" --yolo
}
config_cline() {
  # The CLI makes its data folder (~/.cline/data) on `auth`, so cairn install
  # finds the CLI installed, as it would for a user who has used it.
  timeout 60 cline auth -p openai -k sk-fake -m fake-model -b "$FAKE/v1"
  VER=$(cline --version)
}
run_cline() {
  local rc=0
  timeout 240 cline --json "$(prompt)" || rc=$?
  # The CLI leaves a hub daemon behind: stop the ones running this install, by pid.
  local bin=$RA/npm/cline/node_modules/@cline/cli-linux-x64/bin/cline p
  for p in $(pgrep -f -- "--cline-hub-daemon" || true); do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(realpath "$bin" 2>/dev/null)" ] && kill "$p"
  done
  return $rc
}

# GitHub Copilot CLI offline with its BYOK provider variables (no GitHub
# sign-in); its config folder exists, as it does once the CLI has run.
config_copilot() {
  mkdir -p "$HOME/.copilot"
  VER=$(copilot --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
}
run_copilot() {
  COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false COPILOT_PROVIDER_BASE_URL=$FAKE/v1 COPILOT_PROVIDER_TYPE=openai \
  COPILOT_PROVIDER_API_KEY=sk-fake COPILOT_MODEL=fake-model COPILOT_PROVIDER_MAX_PROMPT_TOKENS=100000 \
  COPILOT_PROVIDER_MAX_OUTPUT_TOKENS=4000 \
    timeout 240 copilot -p "$(prompt)" --allow-all-tools --disable-client-telemetry --no-auto-update
}
# Factory's droid with a BYOK custom model (no Factory sign-in); the binary
# is its platform package's (see record.sh).
config_droid() {
  mkdir -p "$HOME/.factory"
  echo "{\"customModels\": [{\"model\": \"fake-model\", \"displayName\": \"Fake\", \"baseUrl\": \"$FAKE/v1\", \"apiKey\": \"sk-fake\", \"provider\": \"generic-chat-completion-api\", \"maxOutputTokens\": 4000}]}" \
    > "$HOME/.factory/settings.json"
  export PATH=$RA/npm/droid/node_modules/@factory/cli-linux-x64/bin:$PATH
  VER=$(droid --version 2>/dev/null | tail -1)
}
run_droid() {
  export PATH=$RA/npm/droid/node_modules/@factory/cli-linux-x64/bin:$PATH
  timeout 240 droid exec --skip-permissions-unsafe -m custom:fake-model "$(prompt)"
}

# The Kilo CLI: an opencode-style provider in its own config; its data
# folder exists, as it does once the CLI has run.
config_kilo() {
  mkdir -p "$HOME/.config/kilo" "$HOME/.local/share/kilo"
  cat > "$HOME/.config/kilo/kilo.json" <<EOF
{"autoupdate": false, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
 "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
   "options": {"baseURL": "$FAKE/v1", "apiKey": "sk-fake"},
   "models": {"fake-model": {"name": "Fake Model", "tool_call": true}}}},
 "permission": {"bash": "allow", "edit": "allow"}}
EOF
  VER=$(kilo --version 2>/dev/null | tail -1)
}
run_kilo() { timeout 240 kilo run "$(prompt)"; }

# Continue's CLI with the user's config.yaml holding the scripted model;
# `cn` then loads that file by default (no --config), as a user's would.
config_cn() {
  mkdir -p "$HOME/.continue"
  cat > "$HOME/.continue/config.yaml" <<EOF
name: fake-assistant
version: 1.0.0
schema: v1
models:
  - name: fake-model
    provider: openai
    model: fake-model
    apiBase: $FAKE/v1
    apiKey: sk-fake
    roles: [chat, edit, apply]
    capabilities: [tool_use]
EOF
  VER=$(cn --version)
}
run_cn() { timeout 240 cn -p --auto "$(prompt)"; }

# The OpenHands CLI, its model from the environment; its folder exists, as
# it does once the CLI has run.
config_openhands() {
  mkdir -p "$HOME/.openhands"
  VER=$(OPENHANDS_SUPPRESS_BANNER=1 LITELLM_LOCAL_MODEL_COST_MAP=True openhands --version 2>/dev/null \
    | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
}
run_openhands() {
  LITELLM_LOCAL_MODEL_COST_MAP=True OPENHANDS_SUPPRESS_BANNER=1 LLM_MODEL=openai/fake-model LLM_API_KEY=sk-fake \
  LLM_BASE_URL=$FAKE/v1 timeout 300 openhands --headless --override-with-envs --exit-without-confirmation -t "$(prompt)"
}

# Mistral Vibe 3 with a generic provider in the user's config.toml (cairn
# adds its [[mcp_servers]] item to it).
config_vibe() {
  mkdir -p "$HOME/.vibe"
  cat > "$HOME/.vibe/config.toml" <<EOF
active_model = "fake"
enable_telemetry = false
enable_update_checks = false
[[providers]]
name = "fake"
api_base = "$FAKE/v1"
api_key_env_var = "FAKE_API_KEY"
backend = "generic"
[[models]]
name = "fake-model"
provider = "fake"
alias = "fake"
EOF
  VER=$(vibe --version | awk '{print $2}')
}
run_vibe() { FAKE_API_KEY=sk-fake timeout 240 vibe --trust --auto-approve -p "$(prompt)"; }

failed=()
for a in $AGENTS; do
  declare -F "run_$a" > /dev/null || { echo "wiring.sh: unknown agent $a" >&2; exit 2; }
  id=$(agent_id "$a"); logs=$RA/logs/wiring/$a
  rm -rf "$logs"; mkdir -p "$logs"
  echo "################ $a ($id)"
  (
    # (errexit does not hold in a subshell under ||: each step says so itself)
    fresh "$a" && cd "$PROJ" || exit 1
    "config_$a" > "$logs/config.out" 2>&1 || { echo "$a: configuring failed (see $logs/config.out)"; exit 1; }
    seed || exit 1
    touch "$logs/before-install.stamp"; sleep 1
    "$CAIRN_BIN" install --agent "$id" --no-service > "$logs/install.txt" 2>&1 \
      || { echo "$a: cairn install failed: $(cat "$logs/install.txt")"; exit 1; }
    python3 "$HERE/wiring_evidence.py" config --home "$HOME" --cairn "$CAIRN_BIN" \
      --stamp "$logs/before-install.stamp" > "$logs/config.json" || exit 1
    # The scripted model for this run alone: its request log is the evidence.
    if [ "$a" = gemini ]; then
      [ -f "$REALAGENTS/fakellm.py" ] || { echo "$a: no fakellm.py at $REALAGENTS (set REALAGENTS)"; exit 1; }
      FAKE_TOOL_PREFER='cairn.*search|^search$' FAKE_TOOL_QUERY=$QUERY FAKE_FACT="That is what the memory holds." \
        python3 "$REALAGENTS/fakellm.py" --port "$PORT" --log "$logs/model.jsonl" --bodies "$logs/bodies" \
        > "$logs/model.out" 2>&1 &
    else
      python3 -B "$HERE/scenario_model.py" --wiring "$QUERY" --port "$PORT" --log "$logs/model.jsonl" \
        --bodies "$logs/bodies" > "$logs/model.out" 2>&1 &
    fi
    srv=$!
    trap 'kill $srv 2>/dev/null || true' EXIT
    for _ in $(seq 50); do curl -s -o /dev/null --max-time 1 "$FAKE/v1/models" && break; sleep 0.1; done
    rc=0; "run_$a" > "$logs/run.out" 2> "$logs/run.err" < /dev/null || rc=$?
    echo "$a $VER: exit code $rc"
    python3 "$HERE/wiring_evidence.py" requests --agent "$id" --release "$VER" --home "$HOME" \
      --cairn "$CAIRN_BIN" --config "$logs/config.json" --log "$logs/model.jsonl" --bodies "$logs/bodies" \
      --debug-glob "${DEBUG_GLOB:-}" --out "$REPO/fixtures/agents/$id/$VER/wiring" \
      --command "tools/realagents/wiring.sh $a" || exit 1
  ) || failed+=("$a")
done

[ ${#failed[@]} = 0 ] || echo "wiring.sh: no evidence for: ${failed[*]} (see $RA/logs/wiring/<agent>/)" >&2
[ -n "${WIRING_NO_TEST:-}" ] && exit 0
cd "$REPO"
cargo test -q -p cairn --test e2e wiring
