#!/usr/bin/env python3
"""A scripted model for the conformance suite's two-turn scenario.

It plays the model side of one session that readers tend to get wrong:

  turn 1  user: FIRST_PROMPT (asks to list a folder that does not exist)
          model: a shell tool call that fails (`ls /nonexistent-quokka-dir`)
          agent: the failed output
          model: FIRST_ANSWER
  turn 2  (the session resumed with a second prompt mentioning the walrus)
          model: a shell tool call that succeeds (`echo second`)
          agent: its output
          model: SECOND_ANSWER

With the subagent prompt (SUB_PROMPT, scenario.sh --subagent) it plays a
parent that calls the agent's own subagent tool (Agent/Task/task) with
SUB_TASK, the child that runs `echo from-subagent` and reports, and the
parent's final answer (SUB_ANSWER).

It is stateless: each request is answered from the conversation it carries
(which prompt is the last real user message, and whether a tool result
follows it). Requests that offer no tools (titles, summaries) get a short
title. Speaks the OpenAI Chat Completions and Responses APIs and the
Anthropic Messages API, streamed or not; every request is appended to a
JSON-lines log (and its body kept with --bodies). Python stdlib only.

With --wiring QUERY it plays the wiring check instead (tools/realagents/
wiring.sh): it calls cairn's search with QUERY, going through the agent's
own tool search first when the agent only lists cairn's tools by name
(Claude Code's ToolSearch; Qwen Code's tool_search, then its tool_call;
Mistral Vibe's search_tool_functions, then a run_typescript program that
calls it) and into a tool namespace when the agent groups them (Codex), then answers briefly once the
search result is back.

usage: scenario_model.py [--port 18092] [--log FILE] [--bodies DIR] [--wiring QUERY]
"""
import argparse
import json
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIRST_PROMPT = ("List the folder /nonexistent-quokka-dir with the shell, "
                "then tell me where we keep the quokka fixtures.")
SECOND_PROMPT = "Now run `echo second` and remind me what we decided about the walrus cache."
FAILING = "ls /nonexistent-quokka-dir"
SUCCEEDING = "echo second"
FIRST_ANSWER = ("The listing failed: that folder does not exist. "
                "Decision: we keep the quokka fixtures in tests/data because the parser loads them from there.")
# A fake GitHub token in the session: the suite checks it is never stored.
SECRET = "ghp_Sc3nari0TwoTurnWalrus2026abcdEFGH567"
SECOND_ANSWER = ("It printed second. Decision: the walrus cache stays at 64 MB "
                 "because a bigger one evicts the hot set. The cache admin token is " + SECRET + " for now.")
TITLE = "Quokka fixtures and walrus cache"

# The subagent scenario (scenario.sh --subagent): the model hands a task to
# the agent's own subagent tool; the child calls the shell once and reports;
# the parent answers with a decision.
SUB_PROMPT = ("Ask a subagent to run `echo from-subagent` with the shell and report, "
              "then tell me what we decided about the platypus build.")
SUB_TASK = "Run the shell command `echo from-subagent` and report exactly what it printed."
SUB_COMMAND = "echo from-subagent"
SUB_CHILD_ANSWER = "The command printed from-subagent."
SUB_ANSWER = ("The subagent reported from-subagent. Decision: the platypus build runs nightly "
              "because the daytime runners are saturated.")
SUBAGENT_TOOL = re.compile(r"^(Task|Agent|task|agent|spawn_agent|subagent|delegate_task)$")
SHELL = re.compile(r"^(bash|shell|shell_command|exec_command|exec|run_shell_command|execute_command|terminal)$", re.I)

CAIRN_SEARCH = re.compile(r"cairn.*search|^search$", re.I)
TOOL_SEARCH = re.compile(r"^(ToolSearch|tool_search)$")

LOCK = threading.Lock()
LOG = None
BODIES = None
WIRING = None
SEQ = [0]
STARTED = time.strftime("%H%M%S")


def log(entry):
    entry["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with LOCK, open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:20]


def shell_args(schema, command):
    """Arguments for a shell tool, from its JSON schema."""
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    args = {}
    for name, p in props.items():
        kind = p.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        low = name.lower()
        if low in ("command", "cmd"):
            args[name] = ["bash", "-lc", command] if kind == "array" else command
        elif low == "description":
            args[name] = "Run " + command
        elif name in required:
            args[name] = {"boolean": False, "integer": 10000, "number": 10000,
                          "array": [], "object": {}}.get(kind, ".")
    return args or {"command": command}


def described(schema, description):
    """A tool's schema with its description beside it (the subagent tool
    names its kinds of agent there)."""
    return dict(schema or {}, _description=description or "")


def subagent_args(schema):
    """Arguments for a subagent tool, from its JSON schema: the task as its
    prompt, a short description, the general-purpose kind of subagent."""
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    args = {}
    for name, p in props.items():
        low = name.lower()
        if low in ("prompt", "task", "message", "instructions", "goal"):
            args[name] = SUB_TASK
        elif low in ("description", "title", "name"):
            args[name] = "Run echo from-subagent"
        elif low in ("subagent_type", "agent", "agent_type", "subagent_name", "type"):
            kinds = p.get("enum") or []
            # Without an enum, the general kind by the name the agent's
            # description of the field gives it ("general" in opencode's).
            # (the shortest: opencode's text names "general" and, in prose,
            # "general-purpose").
            # droid names no general kind: its "worker" is.
            said = re.findall(r"general[\w-]*", json.dumps(schema), re.I) \
                or re.findall(r"\bworker\b", json.dumps(schema))
            fallback = min(said, key=len) if said else "general-purpose"
            args[name] = next((k for k in kinds if "general" in k.lower()), kinds[0] if kinds else fallback)
        elif name in required:
            kind = p.get("type")
            args[name] = {"boolean": False, "integer": 1, "number": 1, "array": [], "object": {}}.get(kind, ".")
    return args or {"prompt": SUB_TASK}


def fill_args(schema, query):
    """Arguments for a search tool: the query, and any other required field."""
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    args = {}
    for name, p in props.items():
        if name.lower() in ("query", "q"):
            args[name] = query
        elif name in required and p.get("enum"):
            # (OpenHands adds a required `security_risk` enum to every tool.)
            args[name] = p["enum"][0]
        elif name in required:
            kind = p.get("type")
            args[name] = {"boolean": False, "integer": 5, "number": 5, "array": [], "object": {}}.get(kind, ".")
    return args or {"query": query}


def decide_wiring(tools, calls_after, results_after, text):
    """The wiring check's next step. tools: [(name, schema)]; calls_after: the
    tools called since the last user message; text: the whole request."""
    if any(CAIRN_SEARCH.search(c or "") for c in calls_after) and results_after:
        return ("text", "cairn's memory answered the search.")
    cairn = next(((n, s) for n, s in tools if CAIRN_SEARCH.search(n or "")), None)
    if cairn and not any(CAIRN_SEARCH.search(c or "") for c in calls_after):
        return ("call", cairn[0], fill_args(cairn[1], WIRING))
    finder = next(((n, s) for n, s in tools if TOOL_SEARCH.match(n or "")), None)
    listed = re.search(r"mcp__cairn__search", text)
    if finder and finder[0] not in calls_after:
        return ("call", finder[0], fill_args(finder[1], "select:" + listed.group(0) if listed else "cairn search"))
    # Mistral Vibe 3 runs tools from TypeScript (run_typescript) and finds
    # them with search_tool_functions: find cairn's search, then call it.
    runner = next((n for n, _ in tools if n == "run_typescript"), None)
    lookup = next((n for n, _ in tools if n == "search_tool_functions"), None)
    if runner and lookup:
        if runner in calls_after and results_after:
            return ("text", "cairn's memory answered the search.")
        if lookup not in calls_after:
            return ("call", lookup, {"mode": "best_match", "query": "search memory", "connectors": ["mcp_cairn"]})
        found = re.search(r"mcp_cairn\.\w*search\w*", text)
        if found:
            code = "async function main() { return await tools.%s({ query: %s }); }" % (
                found.group(0), json.dumps(WIRING))
            return ("call", runner, {"code": code})
    # Qwen Code keeps a found tool hidden: it is called through its tool_call.
    relay = next((n for n, _ in tools if n == "tool_call"), None)
    if relay and listed and relay not in calls_after:
        return ("call", relay, {"name": listed.group(0), "arguments": {"query": WIRING}})
    if relay and relay in calls_after and results_after:
        return ("text", "cairn's memory answered the search.")
    return ("text", "cairn's search was not offered.")


REFUSED_KIND = re.compile(r"Available subagents: ([\w-]+)")


def decide(tools, last_user, tool_result_after, last_result=""):
    """('call', name, args) or ('text', text) for the conversation so far.

    tools: [(name, schema)]; last_user: the last real user text; whether a
    tool result follows it."""
    if not tools:
        return ("text", TITLE)
    if last_user and SUB_TASK in last_user:  # the subagent's own conversation
        if tool_result_after:
            return ("text", SUB_CHILD_ANSWER)
        shell = next(((n, s) for n, s in tools if SHELL.match(n or "")), None)
        if shell is None:
            return ("text", "No shell tool was offered. " + SUB_CHILD_ANSWER)
        return ("call", shell[0], shell_args(shell[1], SUB_COMMAND))
    if last_user and SUB_PROMPT in last_user:  # the parent
        spawn = next(((n, s) for n, s in tools if SUBAGENT_TOOL.match(n or "")), None)
        refused = REFUSED_KIND.search(last_result or "")
        if tool_result_after and refused and spawn:
            # The agent refused the kind asked for and named its own (droid):
            # ask again for the first it named.
            return ("call", spawn[0], dict(subagent_args(spawn[1]), subagent_type=refused.group(1)))
        if tool_result_after:
            return ("text", SUB_ANSWER)
        if spawn is None:
            return ("text", "No subagent tool was offered. " + SUB_ANSWER)
        return ("call", spawn[0], subagent_args(spawn[1]))
    second = "walrus" in (last_user or "")
    if tool_result_after:
        return ("text", SECOND_ANSWER if second else FIRST_ANSWER)
    shell = next(((n, s) for n, s in tools if SHELL.match(n or "")), None)
    if shell is None:
        return ("text", "No shell tool was offered. " + (SECOND_ANSWER if second else FIRST_ANSWER))
    command = SUCCEEDING if second else FAILING
    return ("call", shell[0], shell_args(shell[1], command))


# Context an agent adds as a user message after a tool result (OpenClaw):
# not a new prompt.
HARNESS_CONTEXT = ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>",)


def user_texts(content):
    """The user-typed text of a message's content (not tool results or reminders)."""
    if isinstance(content, str):
        return "" if content.lstrip().startswith(HARNESS_CONTEXT) else content
    out = []
    for b in content or []:
        if isinstance(b, dict) and b.get("type") in ("text", "input_text"):
            t = b.get("text", "")
            if not t.startswith("<system-reminder>") and not t.lstrip().startswith(HARNESS_CONTEXT):
                out.append(t)
    return "\n".join(out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    last_result = ""  # the last tool result in the request being answered

    def log_message(self, *a):
        pass

    def reply(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, data, name=None):
        head = "event: %s\n" % name if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(("%sdata: %s\n\n" % (head, body)).encode())
        self.wfile.flush()

    def do_GET(self):
        models = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "scenario",
                   "type": "model", "display_name": m} for m in ("fake-model", "claude-sonnet-4-5")]
        self.reply({"object": "list", "data": models, "has_more": False})

    def do_POST(self):
        size = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(size) if size else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        with LOCK:
            SEQ[0] += 1
            seq = SEQ[0]
        if BODIES:
            name = "%s-%04d%s.json" % (STARTED, seq, re.sub(r"[^\w.-]", "_", path))
            with open(os.path.join(BODIES, name), "wb") as f:
                f.write(raw)
        entry = {"seq": seq, "method": "POST", "path": path, "stream": bool(body.get("stream"))}
        try:
            if path.endswith("/chat/completions"):
                self.chat(body, entry)
            elif path.endswith("/responses"):
                self.openai_responses(body, entry)
            elif path.endswith("/messages/count_tokens"):
                self.reply({"input_tokens": 100})
            elif path.endswith("/messages"):
                self.anthropic(body, entry)
            else:
                entry["action"] = "404"
                self.reply({"error": {"message": "not found"}}, 404)
        except (BrokenPipeError, ConnectionResetError) as e:
            entry["error"] = repr(e)
        log(entry)

    def act(self, entry, api, tools, last_user, after, calls, body):
        if WIRING is not None:
            a = decide_wiring(tools, calls, after, json.dumps(body))
        else:
            a = decide(tools, last_user, after, self.last_result)
        entry.update({"api": api, "ntools": len(tools),
                      "action": "tool:" + a[1] if a[0] == "call" else "final",
                      "args": a[2] if a[0] == "call" else None})
        return a

    # -------------------------------------------------------- OpenAI chat
    def chat(self, body, entry):
        tools = [((t.get("function") or {}).get("name"),
                  described((t.get("function") or {}).get("parameters"), (t.get("function") or {}).get("description")))
                 for t in body.get("tools") or []]
        last_user, after, calls = None, False, []
        for m in body.get("messages") or []:
            if m.get("role") == "user" and user_texts(m.get("content")).strip():
                last_user, after, calls = user_texts(m.get("content")), False, []
            elif m.get("role") == "tool":
                after = True
                self.last_result = json.dumps(m.get("content"))
            for tc in m.get("tool_calls") or []:
                calls.append((tc.get("function") or {}).get("name"))
        act = self.act(entry, "chat", tools, last_user, after, calls, body)
        cid, model = new_id("chatcmpl-"), body.get("model", "fake-model")
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        msg = {"role": "assistant", "content": act[1] if act[0] == "text" else None}
        if act[0] == "call":
            msg["tool_calls"] = [{"id": new_id("call_"), "type": "function",
                                  "function": {"name": act[1], "arguments": json.dumps(act[2])}}]
        finish = "tool_calls" if act[0] == "call" else "stop"
        if not body.get("stream"):
            return self.reply({"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                               "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})
        self.stream_start()

        def chunk(delta, fin=None, **extra):
            self.event(dict({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                             "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]},
                            **extra))
        chunk({"role": "assistant", "content": ""})
        if act[0] == "call":
            tc = msg["tool_calls"][0]
            chunk({"tool_calls": [dict(tc, index=0)]})
        else:
            chunk({"content": act[1]})
        chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            self.event({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": model, "choices": [], "usage": usage})
        self.event("[DONE]")

    # -------------------------------------------------------- OpenAI responses
    def openai_responses(self, body, entry):
        tools, spaces = [], {}
        for t in body.get("tools") or []:
            if t.get("type") == "function":
                tools.append((t.get("name"), t.get("parameters")))
            elif t.get("type") == "namespace":  # Codex groups an MCP server's tools
                for inner in t.get("tools") or []:
                    qualified = "%s__%s" % (t.get("name"), inner.get("name"))
                    tools.append((qualified, inner.get("parameters")))
                    spaces[qualified] = (t.get("name"), inner.get("name"))
        items = body.get("input")
        items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items or []
        last_user, after, calls = None, False, []
        for it in items:
            if it.get("role") == "user" and it.get("type", "message") == "message":
                text = user_texts(it.get("content"))
                # Codex sends its own context (AGENTS.md, environment) as user messages.
                if text.strip() and not text.lstrip().startswith("<"):
                    last_user, after, calls = text, False, []
            elif str(it.get("type", "")).endswith("_output"):
                after = True
            elif it.get("type") == "function_call":
                ns = it.get("namespace")
                calls.append("%s__%s" % (ns, it.get("name")) if ns else it.get("name"))
        act = self.act(entry, "responses", tools, last_user, after, calls, body)
        if act[0] == "call":
            item = {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"), "name": act[1],
                    "arguments": json.dumps(act[2]), "status": "completed"}
            if act[1] in spaces:
                item["namespace"], item["name"] = spaces[act[1]]
        else:
            item = {"type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": act[1], "annotations": []}]}
        resp = {"id": new_id("resp_"), "object": "response", "created_at": int(time.time()),
                "status": "completed", "model": body.get("model", "fake-model"), "output": [item],
                "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 120},
                "error": None, "incomplete_details": None}
        if not body.get("stream"):
            return self.reply(resp)
        self.stream_start()
        seq = [0]

        def ev(kind, **fields):
            seq[0] += 1
            self.event(dict({"type": kind, "sequence_number": seq[0]}, **fields), kind)
        ev("response.created", response=dict(resp, status="in_progress", output=[], usage=None))
        ev("response.output_item.added", output_index=0, item=item)
        ev("response.output_item.done", output_index=0, item=item)
        ev("response.completed", response=resp)

    # -------------------------------------------------------- Anthropic
    def anthropic(self, body, entry):
        tools = [(t.get("name"), described(t.get("input_schema"), t.get("description")))
                 for t in body.get("tools") or [] if t.get("name")]
        last_user, after, calls = None, False, []
        for m in body.get("messages") or []:
            c = m.get("content")
            if m.get("role") == "assistant":
                calls += [b.get("name") for b in c if isinstance(b, dict) and b.get("type") == "tool_use"] \
                    if isinstance(c, list) else []
                continue
            if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
                after = True
            elif user_texts(c).strip():
                last_user, after, calls = user_texts(c), False, []
        act = self.act(entry, "anthropic", tools, last_user, after, calls, body)
        mid, model = new_id("msg_"), body.get("model", "claude-sonnet-4-5")
        if act[0] == "call":
            block = {"type": "tool_use", "id": new_id("toolu_"), "name": act[1], "input": act[2]}
        else:
            block = {"type": "text", "text": act[1]}
        stop = "tool_use" if act[0] == "call" else "end_turn"
        usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return self.reply({"id": mid, "type": "message", "role": "assistant", "model": model,
                               "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage})
        self.stream_start()
        self.event({"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}}, "message_start")
        if act[0] == "call":
            self.event({"type": "content_block_start", "index": 0, "content_block": dict(block, input={})},
                       "content_block_start")
            self.event({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(act[2])}},
                       "content_block_delta")
        else:
            self.event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                       "content_block_start")
            self.event({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": act[1]}}, "content_block_delta")
        self.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self.event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20}}, "message_delta")
        self.event({"type": "message_stop"}, "message_stop")


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18092)
    ap.add_argument("--log", default="scenario_model.jsonl")
    ap.add_argument("--bodies", help="keep each request's body in this folder")
    ap.add_argument("--wiring", metavar="QUERY", help="play the wiring check: call cairn's search with QUERY")
    a = ap.parse_args()
    global BODIES, WIRING
    LOG, BODIES, WIRING = a.log, a.bodies, a.wiring
    if BODIES:
        os.makedirs(BODIES, exist_ok=True)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    print("scenario model on 127.0.0.1:%d" % a.port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
