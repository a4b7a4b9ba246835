#!/usr/bin/env python3
"""Evidence of one wiring run (tools/realagents/wiring.sh), trimmed for the repo.

Two steps:
  config   right after `cairn install`: find each config file under HOME that
           install wrote (newer than the stamp, naming the cairn binary), the
           key path of its `cairn` entry and the entry itself; print them as JSON.
  requests after the agent ran: read the scripted model's request log and
           bodies, and write OUT/wiring.json (the config found before, the tools
           the agent offered the model, the tool the model called, the tool
           result the agent sent back in its next request, whether cairn's
           answer was in it) and OUT/PROVENANCE.md.

Paths are rewritten ({CAIRN} for the binary, {HOME} for the throwaway home)
and the scripted model's fake keys dropped, so the evidence holds no secret
and no machine-specific path. Python stdlib only.
"""
import argparse
import datetime
import glob
import json
import os
import re
import sys
import tomllib

FAKE_KEYS = ["sk-ant-fake", "sk-fake", "fake-key"]
SKIP_DIRS = {"code", ".npm", ".cache", "node_modules", ".bun", ".local/share/cairn"}
RESULT_MAX = 1200


def scrub(text, cairn, home):
    text = text.replace(cairn, "{CAIRN}").replace(home, "{HOME}")
    for k in FAKE_KEYS:
        text = text.replace(k, "<fake key>")
    return text


def scrub_value(v, cairn, home):
    return json.loads(scrub(json.dumps(v), cairn, home))


def cairn_entries(doc, path=()):
    """Key paths of every member named `cairn` holding an object."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "cairn" and isinstance(v, dict):
                yield list(path) + [k], v
            else:
                yield from cairn_entries(v, path + (k,))
    elif isinstance(doc, list):
        # A YAML list of named items (Continue's mcpServers): the item
        # named cairn, keyed by that name.
        for v in doc:
            if isinstance(v, dict) and v.get("name") == "cairn":
                yield list(path) + ["cairn"], v
            else:
                yield from cairn_entries(v, path)


def step_config(a):
    stamp = os.path.getmtime(a.stamp)
    found = []
    for root, dirs, files in os.walk(a.home):
        rel_root = os.path.relpath(root, a.home)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel_root, d)) not in SKIP_DIRS]
        for f in files:
            p = os.path.join(root, f)
            try:
                if os.path.getmtime(p) < stamp or os.path.getsize(p) > 1 << 20:
                    continue
                text = open(p, encoding="utf-8").read()
            except (OSError, UnicodeDecodeError):
                continue
            if a.cairn not in text:
                continue
            rel = os.path.relpath(p, a.home)
            if f.endswith(".toml"):
                fmt, doc = "toml", tomllib.loads(text)
            elif f.endswith((".yaml", ".yml")):
                import yaml  # PyYAML, only for the agents whose config is YAML
                fmt, doc = "yaml", yaml.safe_load(text)
            else:
                fmt, doc = "json", json.loads(text)
            for key, entry in cairn_entries(doc):
                found.append({"file": rel, "format": fmt, "key": key,
                              "entry": scrub_value(entry, a.cairn, a.home),
                              "text": scrub(text, a.cairn, a.home)})
    if not found:
        sys.exit("wiring_evidence: cairn install wrote no config naming %s under %s" % (a.cairn, a.home))
    json.dump(found, sys.stdout, indent=1)


# ------------------------------------------------------------ requests
def tool_names(body):
    """The tools a request offers, nested ones as `<namespace>/<tool>`."""
    out = []

    def walk(tools, prefix):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            decls = t.get("functionDeclarations") or t.get("function_declarations")
            if decls:
                walk(decls, prefix)
                continue
            name = t.get("name") or (t.get("function") or {}).get("name") or t.get("type")
            if isinstance(t.get("tools"), list):
                walk(t["tools"], prefix + str(name) + "/")
            elif name:
                out.append(prefix + str(name))
    walk(body.get("tools"), "")
    return out


def text_of(v):
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(text_of(x) for x in v)
    if isinstance(v, dict):
        for k in ("text", "output", "content", "result", "response"):
            if k in v:
                return text_of(v[k])
        return json.dumps(v)
    return "" if v is None else str(v)


def tool_results(body):
    """The tool results a request carries, in order, as text."""
    out = []
    for m in body.get("messages") or []:  # OpenAI chat, Anthropic
        if m.get("role") == "tool":
            out.append(text_of(m.get("content")))
        elif isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append(text_of(b.get("content")))
    inp = body.get("input")
    for it in inp if isinstance(inp, list) else []:  # OpenAI responses
        if str(it.get("type", "")).endswith("_output"):
            out.append(text_of(it.get("output")))
    for c in body.get("contents") or []:  # Gemini
        for p in c.get("parts") or []:
            if "functionResponse" in p:
                out.append(text_of(p["functionResponse"].get("response")))
    return out


def strings_in(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from strings_in(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings_in(x)


def mentioned(body):
    rest = {k: v for k, v in body.items() if k != "tools"}
    # (Mistral Vibe names the group of cairn's tools, `mcp_cairn`.)
    found = r"[\w.-]*cairn(?:__|_|\.|/)[\w.-]+|\bmcp_cairn\b"
    return sorted({m for text in strings_in(rest) for m in re.findall(found, text)})


def step_requests(a):
    config = json.load(open(a.config))
    entries = [json.loads(l) for l in open(a.log) if l.strip()] if os.path.exists(a.log) else []
    posts = sorted((e for e in entries if e.get("method") == "POST" and e.get("api")), key=lambda e: e["seq"])
    reqs = []
    for e in posts:
        files = glob.glob(os.path.join(a.bodies, "*-%04d_*" % e["seq"]))
        body = json.load(open(files[0])) if files else {}
        reqs.append((e, body))
    with_tools = [(e, b) for e, b in reqs if tool_names(b)]
    actions = [str(e.get("action", ""))[len("tool:"):] for e, _ in reqs if str(e.get("action", "")).startswith("tool:")]
    # The model's call of cairn's search (after the agent's own tool search, where it has one).
    # (Qwen Code relays it through its tool_call: the name is in the arguments.)
    def cairn_call(e):
        name = str(e.get("action", ""))
        if name == "tool:tool_call":
            name = "tool:" + str((e.get("args") or {}).get("name"))
        # (Mistral Vibe calls it from a run_typescript program.)
        if name == "tool:run_typescript":
            name = "tool:" + " ".join(re.findall(r"mcp_cairn\.\w+", str((e.get("args") or {}).get("code"))))
        return re.search(r"cairn.*search|^tool:search$", name, re.I)
    call = next(((e, b) for e, b in with_tools if cairn_call(e)), None)
    first = with_tools[0] if with_tools else None
    called = call[0]["action"][len("tool:"):] if call else None
    if called == "tool_call":
        called += " -> " + str((call[0].get("args") or {}).get("name"))
    if called == "run_typescript":
        called += " -> " + " ".join(re.findall(r"mcp_cairn\.\w+", str((call[0].get("args") or {}).get("code"))))
    result, passed = None, False
    if call:
        for e, b in reqs:
            if e["seq"] > call[0]["seq"] and tool_results(b):
                result = tool_results(b)[-1]
                break
        passed = result is not None and a.fact_words in result
    evidence = {
        "agent": a.agent,
        "release": a.release,
        "recorded": datetime.date.today().isoformat(),
        "config": [{k: c[k] for k in ("file", "format", "key", "entry")} for c in config],
        "requests": len(reqs),
        # The tools of the first request that offered any, and cairn's tools
        # named outside that list (an agent that defers MCP tools behind a
        # tool search of its own lists them in the prompt).
        "offered_first": tool_names(first[1]) if first else [],
        "mentioned_first": mentioned(first[1]) if first else [],
        # Every tool the model called, then the tools offered when it called
        # cairn's search.
        "calls": actions,
        "offered": tool_names(call[1]) if call else [],
        "called": called,
        "arguments": call[0].get("args") if call else None,
        "result": scrub(result, a.cairn, a.home)[:RESULT_MAX] if result is not None else None,
        "answer_passed": passed,
    }
    if a.debug_glob:  # an agent that lists its tool registry in a log of its own
        lines = []
        for p in sorted(glob.glob(os.path.join(a.home, a.debug_glob))):
            for line in open(p, errors="replace"):
                if "cairn" in line and len(lines) < 20:
                    lines.append(scrub(line.rstrip(), a.cairn, a.home)[:400])
        evidence["agent_log"] = {"glob": a.debug_glob, "lines": lines}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "wiring.json"), "w") as f:
        json.dump(evidence, f, indent=1)
        f.write("\n")
    for c in config:
        dst = os.path.join(a.out, "config", c["file"])
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "w").write(c["text"])
    with open(os.path.join(a.out, "PROVENANCE.md"), "w") as f:
        f.write(PROVENANCE.format(agent=a.agent, release=a.release, date=evidence["recorded"],
                                  command=a.command, files=", ".join("`config/%s`" % c["file"] for c in config),
                                  called=called or "nothing", passed="yes" if passed else "no",
                                  n=len(reqs)))
    print("%s %s: offered %d tools, called %s, answer passed: %s -> %s" % (
        a.agent, a.release, len(evidence["offered"]), called, passed, a.out))


PROVENANCE = """# {agent} {release}: cairn's MCP wiring, checked with the real client

- Recorded {date} with `{command}` (a fresh HOME, the scripted model on
  loopback; see the script's header).
- `cairn install --agent {agent} --no-service` (a debug build of this tree)
  wrote {files}, copied here as install left them, before the agent
  ran (the binary's path written `{{CAIRN}}`, the home `{{HOME}}`, the scripted
  model's fake keys dropped).
- `wiring.json`: the config entry, the tools the agent offered the model first
  and when the model called cairn's search ({n} requests in all), the
  tools it called (cairn's search as `{called}`), the tool result the agent sent back in its
  next request (trimmed) and whether it held the decision cairn had indexed
  (answer passed on: {passed}).
- Checked by `cargo test -p cairn --test e2e wiring`.
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["config", "requests"])
    ap.add_argument("--home", required=True)
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--stamp")
    ap.add_argument("--config")
    ap.add_argument("--agent")
    ap.add_argument("--release")
    ap.add_argument("--log")
    ap.add_argument("--bodies")
    ap.add_argument("--fact-words", default="walrus cache stays at 64 MB")
    ap.add_argument("--debug-glob", default="")
    ap.add_argument("--out")
    ap.add_argument("--command", default="tools/realagents/wiring.sh")
    a = ap.parse_args()
    a.home = os.path.realpath(a.home)
    step_config(a) if a.step == "config" else step_requests(a)


if __name__ == "__main__":
    main()
