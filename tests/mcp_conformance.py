#!/usr/bin/env python3
"""MCP conformance check for `cairn mcp` with the official Python MCP SDK.

A client no one on the cairn team wrote starts `cairn mcp` over stdio
against a throwaway home seeded with fixtures/home, lists the tools, and
calls `search` (and `session`, `handoff`) for a planted fact and gets
the `continue-session` prompt. Exits non-zero on any
failure.

Usage: python tests/mcp_conformance.py path/to/cairn
(needs `pip install mcp`; .ci/run does it in a virtualenv)
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "home"
TIMEOUT_S = 60
FACT = "pinned hyper to 0.14"
FENCE = '<recalled_memory source="cairn" untrusted="true">'


class Failure(Exception):
    pass


def fail(msg: str) -> None:
    raise Failure(msg)


def leaves(e: BaseException):
    """The innermost exceptions of a (possibly nested) exception group."""
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            yield from leaves(inner)
    else:
        yield e


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def annotations_read_only(tool):
    ann = getattr(tool, "annotations", None)
    if ann is None:
        return None
    for name in ("read_only_hint", "readOnlyHint"):
        if hasattr(ann, name):
            return getattr(ann, name)
    return None


async def check(cairn: str, home: Path) -> None:
    env = {"HOME": str(home), "HOSTNAME": "conformance", "CAIRN_LOG": "error"}
    params = StdioServerParameters(command=cairn, args=["mcp"], env=env, cwd=str(home))
    with anyio.fail_after(TIMEOUT_S):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                info = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
                if info is None or info.name != "cairn":
                    fail(f"server did not introduce itself as cairn: {init!r}")

                listed = await session.list_tools()
                names = [t.name for t in listed.tools]
                if sorted(names) != ["handoff", "remember", "search", "session", "status"]:
                    fail(f"unexpected tools: {names}")
                by_name = {t.name: t for t in listed.tools}
                for name in ("search", "session", "status", "handoff"):
                    if annotations_read_only(by_name[name]) is not True:
                        fail(f"{name} is not annotated read-only")
                schema = getattr(by_name["search"], "input_schema", None) or by_name["search"].inputSchema
                if schema.get("type") != "object" or "query" not in schema.get("required", []):
                    fail(f"search input schema is wrong: {schema}")

                found = await session.call_tool("search", {"query": "hyper"})
                body = text_of(found)
                if is_error(found) or FACT not in body or FENCE not in body:
                    fail(f"search did not return the planted fact: {body!r}")
                handle = next(
                    (l.strip()[len("handle: "):].split()[0] for l in body.splitlines() if l.strip().startswith("handle: ")),
                    None,
                )
                if not handle:
                    fail(f"no handle in the search answer: {body!r}")

                window = await session.call_tool("session", {"handle": handle, "limit": 50})
                if is_error(window) or "corporate proxy" not in text_of(window):
                    fail(f"session did not return the hit's session: {text_of(window)!r}")

                brief = await session.call_tool("handoff", {"handle": handle})
                if is_error(brief) or FACT not in text_of(brief) or FENCE not in text_of(brief):
                    fail(f"handoff did not return the session's brief: {text_of(brief)!r}")

                prompts = await session.list_prompts()
                if [p.name for p in prompts.prompts] != ["continue-session"]:
                    fail(f"unexpected prompts: {prompts.prompts!r}")
                got = await session.get_prompt("continue-session", {"session": handle})
                first = got.messages[0].content if got.messages else None
                if first is None or FACT not in getattr(first, "text", ""):
                    fail(f"continue-session did not carry the brief: {got!r}")

                bad = await session.call_tool("search", {"query": "hyper", "limit": 5000})
                if not is_error(bad) or "limit" not in text_of(bad):
                    fail(f"bad arguments were not a clear tool error: {text_of(bad)!r}")

                print(f"mcp conformance: ok ({len(names)} tools; search found {FACT!r})")


def main() -> None:
    try:
        run()
    except BaseException as e:  # noqa: BLE001 - report every failure the same way
        if isinstance(e, SystemExit) and e.code == 0:
            raise
        why = "; ".join(f"{type(x).__name__}: {x}" for x in leaves(e))
        print(f"mcp conformance: FAIL: {why}", file=sys.stderr)
        sys.exit(1)


def run() -> None:
    if len(sys.argv) != 2:
        fail("usage: mcp_conformance.py path/to/cairn")
    cairn = str(Path(sys.argv[1]).resolve())
    if not os.access(cairn, os.X_OK):
        fail(f"{cairn} is not an executable")
    with tempfile.TemporaryDirectory(prefix="cairn-mcp-conformance-") as tmp:
        home = Path(tmp) / "home"
        shutil.copytree(FIXTURES, home, symlinks=True)
        env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "HOSTNAME": "conformance", "CAIRN_LOG": "error"}
        done = subprocess.run([cairn, "index", "--quiet"], env=env, cwd=home, capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode != 0:
            fail(f"cairn index failed ({done.returncode}): {done.stderr}")
        anyio.run(check, cairn, home)


if __name__ == "__main__":
    main()
