#!/usr/bin/env python3
"""Copy one recorder run into the conformance fixtures.

usage: import.py RUN_DIR [--date YYYY-MM-DD] [--source TEXT] [--dest FIXTURES_AGENTS]

RUN_DIR is what the recorder collected for one agent release, named
`<label>-<release>` (`claude-2.1.197`, `mistral-vibe-2.26.1-unified`): the
files the agent wrote, relative to its HOME. Only the files a reader needs or
could plausibly need are copied, keeping their HOME-relative layout, into
`fixtures/agents/<agent>/<release>/home/`; everything else (bundled skills,
plugins, configs holding the scripted model's API key, logs) is listed as
pruned in the `PROVENANCE.md` written beside `home/`.

Standard library only. Never deletes anything outside the one recording folder
it writes.
"""

import argparse
import fnmatch
import os
import shutil
import sys
from datetime import datetime, timezone

# The scripted model's planted decision unless FAKE_FACT said otherwise.
DEFAULT_FACT = "Decision: we pinned the quokka library to 2.3 because 2.4 broke the parser."

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# label: (cairn agent id, registry, package, run command, files kept)
# The run commands are those of ../shared/realagents/rerun.sh (the scripted
# model at $FAKE, the prompt from common.sh).
AGENTS = {
    "opencode": ("opencode", "npm", "opencode-ai",
                 'opencode run "$PROMPT"',
                 [".local/share/opencode/opencode*.db"]),
    "codex": ("codex", "npm", "@openai/codex",
              'codex exec --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check "$PROMPT"',
              [".codex/sessions/**", ".codex/archived_sessions/**", ".codex/state_*.sqlite",
               ".codex/thread_history_*.sqlite", ".codex/session_index.jsonl"]),
    "claude": ("claude-code", "npm", "@anthropic-ai/claude-code",
               'claude -p --model claude-sonnet-4-5 --allowedTools Bash --permission-mode bypassPermissions "$PROMPT"',
               [".claude/projects/**", ".claude.json"]),
    "qwen": ("qwen", "npm", "@qwen-code/qwen-code",
             'qwen -p "$PROMPT" --yolo',
             [".qwen/projects/**"]),
    "gemini": ("gemini", "npm", "@google/gemini-cli",
               'gemini -p "$PROMPT" --yolo -m gemini-2.5-flash',
               [".gemini/tmp/**", ".gemini/history/**", ".gemini/projects.json"]),
    "pi": ("pi", "npm", "@mariozechner/pi-coding-agent",
           'pi -p --provider fake --model fake-model "$PROMPT"',
           [".pi/agent/sessions/**"]),
    "cn": ("continue", "npm", "@continuedev/cli",
           'cn -p --auto --config ~/.continue/config.yaml "$PROMPT"',
           [".continue/sessions/**"]),
    "cline": ("cline", "npm", "cline",
              'cline --json "$PROMPT"',
              [".cline/data/sessions/**", ".cline/data/tasks/**"]),
    "kimi-cli": ("kimi-cli", "PyPI", "kimi-cli",
                 'kimi --print --yolo -p "$PROMPT"',
                 [".kimi/kimi.json", ".kimi/sessions/**"]),
    "mistral-vibe": ("vibe", "PyPI", "mistral-vibe",
                     'vibe --trust --auto-approve -p "$PROMPT"',
                     [".vibe/logs/session/unified/**", ".vibe/logs/session/session_*/**",
                      ".vibe/logs/session/session_*.json"]),
    "aider": ("aider", "PyPI", "aider-chat",
              'aider --model openai/fake-model --message "$PROMPT" --yes-always --no-stream --no-pretty',
              ["code/*/.aider.chat.history.md", "code/*/.aider.input.history"]),
    "openhands": ("openhands", "PyPI", "openhands",
                  'openhands --headless --override-with-envs --exit-without-confirmation -t "$PROMPT"',
                  [".openhands/conversations/**", ".openhands/v1/**"]),
    # Agents the reference recorder does not run: tools/realagents/more.sh runs them.
    "copilot": ("copilot", "npm", "@github/copilot",
                'COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL=$FAKE/v1 COPILOT_MODEL=fake-model '
                'copilot -p "$PROMPT" --allow-all-tools --no-auto-update',
                [".copilot/session-state/*/events.jsonl", ".copilot/session-state/*/workspace.yaml",
                 ".copilot/session-store.db"]),
    "kilo": ("kilo", "npm", "@kilocode/cli",
             'kilo run "$PROMPT"',
             [".local/share/kilo/kilo*.db"]),
    "droid": ("factory", "npm", "@factory/cli-linux-x64",
              'droid exec --skip-permissions-unsafe -m custom:fake-model "$PROMPT"',
              [".factory/sessions/*/*.jsonl", ".factory/sessions/*/*.settings.json"]),
    "hermes": ("hermes", "PyPI", "hermes-agent",
               'hermes chat -Q --yolo --provider custom -m fake-model -q "$PROMPT"',
               [".hermes/state.db", ".hermes/sessions/**"]),
    "omp": ("omp", "npm", "@oh-my-pi/pi-coding-agent",
            'omp -p --provider fake --model fake-model "$PROMPT"',
            [".omp/agent/sessions/**"]),
    "openclaw": ("openclaw", "npm", "openclaw",
                 'openclaw agent --local --agent main --model fake/fake-model -m "$PROMPT"',
                 [".openclaw/agents/*/agent/openclaw-agent.sqlite", ".openclaw/agents/*/sessions/**"]),
}

# Runs made by tools/realagents/more.sh rather than the reference recorder.
MORE = {"copilot", "kilo", "droid", "hermes", "omp", "openclaw"}


def split_run(name):
    """`mistral-vibe-2.26.1-unified` -> (`mistral-vibe`, `2.26.1-unified`)."""
    for label in sorted(AGENTS, key=len, reverse=True):
        if name.startswith(label + "-"):
            return label, name[len(label) + 1:]
    sys.exit(f"import.py: {name}: not <label>-<release> for a known label ({', '.join(AGENTS)})")


def prune_summary(pruned):
    """The pruned files, a folder of several standing for all of them."""
    groups = {}
    for p in pruned:
        parts = p.split("/")
        key = "/".join(parts[:4]) + "/" if len(parts) > 4 else p
        groups.setdefault(key, []).append(p)
    return sorted(k if len(v) > 1 else v[0] for k, v in groups.items())


def rerun_name(label, release):
    """The recorder's own name for the run (`rerun.sh NAME`, `~/code/proj-NAME`)."""
    if label == "mistral-vibe":
        if release.endswith("-legacy"):
            return "vibe2legacy"
        return "vibe2" if release.endswith("-unified") else "vibe"
    return {"kimi-cli": "kimi"}.get(label, label)


def files_under(root):
    for d, _, names in os.walk(root):
        for n in names:
            yield os.path.relpath(os.path.join(d, n), root)


def home_relative(label, rel):
    # The recorder keeps aider's project-local files under `_project_<proj>/`;
    # in a home they live in the project, `~/code/<proj>/`.
    if label == "aider" and rel.startswith("_project_"):
        proj, _, rest = rel[len("_project_"):].partition("/")
        return f"code/{proj}/{rest}"
    return rel


def kept(rel, globs):
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(rel, g.replace("/**", "/*/**"))
               or (g.endswith("/**") and rel.startswith(g[:-2])) for g in globs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--date", help="day of the recording (default: newest file's mtime)")
    ap.add_argument("--source", help="where the run came from, for PROVENANCE.md")
    ap.add_argument("--dest", default=os.path.join(REPO, "fixtures", "agents"))
    ap.add_argument("--fact", default=os.environ.get("FAKE_FACT", DEFAULT_FACT),
                    help="the scripted model's planted decision (default: $FAKE_FACT, else the recorder's)")
    ap.add_argument("--run", help="the run's name, for a run not made by rerun.sh (HOME was "
                    "/home/dev/agent/home-RUN, the project ~/code/proj-RUN)")
    ap.add_argument("--scripted", help="what was scripted, for a run not made with the "
                    "reference recorder's model (scenario.sh)")
    ap.add_argument("--command", help="the run command, when it differs from the recorder's usual one")
    a = ap.parse_args()
    run = os.path.normpath(a.run_dir)
    label, release = split_run(os.path.basename(run))
    agent, registry, package, command, globs = AGENTS[label]
    command = a.command or command
    version = release.split("-")[0]
    out = os.path.join(a.dest, agent, release)
    home = os.path.join(out, "home")
    if os.path.exists(out):
        shutil.rmtree(out)
    copied, pruned = [], []
    newest = 0.0
    for rel in sorted(files_under(run)):
        src = os.path.join(run, rel)
        newest = max(newest, os.path.getmtime(src))
        dest_rel = home_relative(label, rel)
        if kept(dest_rel, globs):
            dst = os.path.join(home, dest_rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o644)
            copied.append(dest_rel)
        else:
            pruned.append(dest_rel)
    if not copied:
        sys.exit(f"import.py: {run}: no session file matched {globs}")
    date = a.date or datetime.fromtimestamp(newest, timezone.utc).strftime("%Y-%m-%d")
    install = (f"npm install --prefix npm/{label} {package}@{version}" if registry == "npm"
               else f"uv pip install {package}=={version}")
    if label == "mistral-vibe" and release.endswith("-legacy"):
        command = command.replace("vibe ", "vibe --legacy-harness ", 1)
    pruned_dirs = prune_summary(pruned)
    name = a.run or rerun_name(label, release)
    if label in MORE and not a.scripted:
        how = (f"(`tools/realagents/more.sh {name}`),\n  against the scripted model of `../shared/realagents/fakellm.py` (OpenAI,\n"
               f"  Anthropic and Gemini APIs on 127.0.0.1, its own port).", f"""- Scripted: the prompt asks to run `echo hello` and what was decided about the
  quokka library; the model's first turn calls the shell tool with
  `echo hello` (output `hello`), its second answers with the planted decision
  "{a.fact}\"""")
    elif a.scripted and release.endswith("-subagent"):
        how = ("(one run, as `tools/realagents/scenario.sh --subagent` does)", f"- Scripted: {a.scripted}.")
    elif a.scripted:
        how = ("(then resumed with the agent's own continue flag, as "
               "`tools/realagents/scenario.sh` does)", f"- Scripted: {a.scripted}.")
    else:
        how = (f"(`rerun.sh {name}`),\n  against the scripted model of `../shared/realagents/fakellm.py` (OpenAI,\n"
               f"  Anthropic and Gemini APIs on 127.0.0.1:18080).",
               f"""- Scripted: the prompt asks to run `echo hello` and what was decided about the
  quokka library; the model's first turn calls the shell tool with
  `echo hello` (output `hello`), its second answers with the planted decision
  "{a.fact}\"""")
    with open(os.path.join(out, "PROVENANCE.md"), "w") as f:
        f.write(f"""# {agent} {release}

What {package} {version} ({registry}) wrote in a throwaway HOME for one scripted
session, recorded on {date}.

- Source: {a.source or run}
- Install: `{install}`
- Run: `{command}` in `~/code/proj-{name}`
  {how[0]}
{how[1]}
- Paths: the recorder's folder is `/home/dev/agent`, so HOME was
  `/home/dev/agent/home-{name}` and every path in these files says so.
- Kept ({len(copied)} files, HOME-relative under `home/`): what a reader needs
  or could plausibly need.
- Pruned ({len(pruned)} files): {', '.join(f'`{p}`' for p in pruned_dirs) or 'nothing'}
  (bundled skills and plugins, logs, caches, and configs holding the scripted
  model's fake API key).
""")
    print(f"{out}: kept {len(copied)}, pruned {len(pruned)}")


if __name__ == "__main__":
    main()
