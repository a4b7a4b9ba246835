//! The real-agent conformance suite: what today's agent releases really
//! wrote (`fixtures/agents/<agent>/<release>/home/`, recorded by
//! `tools/realagents/record.sh`; see each `PROVENANCE.md`), and exactly
//! what cairn must read from it.
//!
//! Every recording is one scripted session: the user asks to run
//! `echo hello` and what was decided about the quokka library; the model
//! calls the shell tool once, then answers with a planted decision. For each
//! recording (one entry of [`RECORDINGS`]) the real `cairn` binary indexes a
//! copy of the recorded HOME, and the test checks the agent, every session's
//! id, parent and project, every record's role, text and time (the times the
//! files hold, to the millisecond), that `cairn search` finds the decision
//! under the right agent and project, that nothing was skipped as
//! malformed, and that neither the scripted model's API keys nor a secret
//! it planted in the session reach the index.
//! Every folder under `fixtures/agents/*/*` must have an entry, so a new
//! recording cannot go unchecked. All recordings are checked before the
//! test fails, each mismatch shown as a diff.

use crate::util::{
    TestHome, agent_fixtures, all_bytes_under, copy_tree, recorded_releases, same_recordings,
};

/// What the scripted user asked (`{PROJ}` is the project folder).
const PROMPT: &str = "Run the shell command `echo hello` in this project, then tell me what we \
    decided about the quokka library. (see {PROJ}/README.md)";

/// What the scripted model answered last: the planted decision.
const FACT: &str = "I ran the command and it printed hello. Decision: we pinned the quokka \
    library to 2.3 because 2.4 broke the parser.";

/// The fake GitHub token `tools/realagents/record.sh` (and `more.sh`)
/// plant after the decision, and the decision as stored with it redacted.
const RECORD_SECRET: &str = "ghp_R3c0rdedAgentS3cretQuokka2026xYz1234";
const FACT_REDACTED: &str = "{FACT} The staging deploy token is [REDACTED:github-token] for now.";

/// Words of the decision to search for.
const QUERY: &str = "quokka parser";

/// The fake API keys the recorder configured the agents with: none may be
/// indexed.
const KEYS: &[&str] = &["sk-fake", "sk-ant-fake", "fake-key"];

/// One recorded agent run.
struct Recording {
    /// `<agent>/<release>` under `fixtures/agents`.
    dir: &'static str,
    /// cairn's id for the agent.
    agent: &'static str,
    /// The recorder's name for the run: HOME was
    /// `/home/dev/agent/home-<run>`, the project `~/code/proj-<run>`.
    run: &'static str,
    /// Secrets the scripted model planted in the session (see
    /// `tools/realagents/record.sh`): each must be redacted, never stored.
    secrets: &'static [&'static str],
    /// Every session cairn must find, the one holding the decision first.
    sessions: &'static [Session],
}

/// Recordings whose store lies in the project folder itself (aider writes
/// `<git root>/.aider.chat.history.md`). cairn finds it under the copied
/// home, so the session's project is that copy, and its id (a digest of the
/// file's path and header, written `*` in the entry) is whatever 16 hex
/// digits cairn reports for the one session.
const IN_PROJECT_FOLDER: &[&str] = &["aider/0.86.2"];

/// Recordings of another scenario than the quokka decision, and the words
/// of their decision to search for instead of [`QUERY`].
const OWN_QUERY: &[(&str, &str)] = &[
    ("claude-code/2.1.332-subagent", "platypus nightly"),
    ("kilo/7.7.7-subagent", "platypus nightly"),
    ("copilot/1.0.102-subagent", "platypus nightly"),
];

/// One session as cairn must read it.
struct Session {
    id: &'static str,
    parent: Option<&'static str>,
    /// (role, text, time in Unix ms) in order; `{PROMPT}`, `{FACT}` and
    /// `{PROJ}` stand for the texts above and the project folder.
    records: &'static [(&'static str, &'static str, i64)],
}

/// The usual four records: prompt, shell call, its output, the decision.
const fn turn(
    call: &'static str,
    output: &'static str,
    times: [i64; 4],
) -> [(&'static str, &'static str, i64); 4] {
    [
        ("user", "{PROMPT}", times[0]),
        ("tool_call", call, times[1]),
        ("tool_output", output, times[2]),
        ("assistant", "{FACT}", times[3]),
    ]
}

/// The two-turn scenario (`tools/realagents/scenario.sh`, its model
/// `scenario_model.py`): a failing shell call, then the session resumed.
const TURN1: &str = "List the folder /nonexistent-quokka-dir with the shell, then tell me where \
    we keep the quokka fixtures.";
const ANSWER1: &str = "The listing failed: that folder does not exist. Decision: we keep the \
    quokka fixtures in tests/data because the parser loads them from there.";
const TURN2: &str = "Now run `echo second` and remind me what we decided about the walrus cache.";
/// The second answer as stored: its fake GitHub token redacted.
const ANSWER2: &str = "It printed second. Decision: the walrus cache stays at 64 MB because a \
    bigger one evicts the hot set. The cache admin token is [REDACTED:github-token] for now.";
/// The fake token the second answer held.
const TURNS_SECRET: &str = "ghp_Sc3nari0TwoTurnWalrus2026abcdEFGH567";
/// What the failing call printed.
const NO_DIR: &str = "ls: cannot access '/nonexistent-quokka-dir': No such file or directory";

/// The subagent scenario (`tools/realagents/scenario.sh --subagent`): the
/// model hands `echo from-subagent` to the agent's subagent tool, then
/// answers with a decision.
const SUB_PROMPT: &str = "Ask a subagent to run `echo from-subagent` with the shell and report, \
    then tell me what we decided about the platypus build.";
const SUB_TASK: &str =
    "Run the shell command `echo from-subagent` and report exactly what it printed.";
const SUB_CHILD_ANSWER: &str = "The command printed from-subagent.";
const SUB_ANSWER: &str = "The subagent reported from-subagent. Decision: the platypus build runs \
    nightly because the daytime runners are saturated.";
/// What Claude Code 2.1.332's `-p` returned for the Agent call: it runs
/// the subagent in the background.
const CLAUDE_ASYNC_AGENT: &str = "Agent: Async agent launched successfully. (This tool result is \
    internal metadata \u{2014} never quote or paste any part of it, including the agentId below, \
    into a user-facing reply.)\nagentId: ac261e2093b5047c3 (internal ID - do not mention to user. \
    Use SendMessage with to: 'ac261e2093b5047c3', summary: '<5-10 word recap>' to continue this \
    agent.)\nThe agent is working in the background. You will be notified automatically when it \
    completes. You know nothing about its results until that notification arrives \u{2014} do not \
    report, assume, or predict them; continue other work or respond to the user in the \
    meantime.\nDo not duplicate this agent's work \u{2014} avoid working with the same files or \
    topics it is using.\noutput_file: /tmp/claude-0/-home-dev-agent-home-claude-subagent-code-\
    proj-claude-subagent/a98dbe2f-00b7-4bef-bd24-ba82d64bcf9f/tasks/ac261e2093b5047c3.output\nDo \
    NOT Read or tail this file via the shell tool \u{2014} it is the full subagent JSONL transcript \
    and reading it will overflow your context. If the user asks for progress, say the agent is \
    still running; you'll get a completion notification.";

const RECORDINGS: &[Recording] = &[
    Recording {
        dir: "aider/0.86.2",
        agent: "aider",
        run: "aider",
        secrets: &[],
        // aider calls no tools in its whole-file edit format; its own notices
        // (`> ` lines) are read as tool output. The file has one time, the
        // chat's start (`2026-12-05 18:01:59`, local time, the recorder's
        // UTC), which every record takes.
        sessions: &[Session {
            id: "*",
            parent: None,
            records: &[
                (
                    "tool_output",
                    "Update git name with: git config user.name \"Your Name\"\nUpdate git email \
                     with: git config user.email \"you@example.com\"\nYou can skip this check \
                     with --no-gitignore",
                    1796493719000,
                ),
                (
                    "tool_output",
                    "Warning for openai/fake-model: Unknown context window size and costs, using \
                     sane defaults.\nYou can skip this check with --no-show-model-warnings\n\
                     https://aider.chat/docs/llms/warnings.html",
                    1796493719000,
                ),
                ("user", "{PROMPT}", 1796493719000),
                ("assistant", "{FACT}", 1796493719000),
            ],
        }],
    },
    Recording {
        dir: "claude-code/2.1.197",
        agent: "claude-code",
        run: "claude",
        secrets: &[],
        sessions: &[Session {
            id: "7bfbe8e8-ed3d-4101-b7e7-5d3d3a8cbcf4",
            parent: None,
            records: &turn(
                "Bash: echo hello",
                "Bash: hello",
                [1796493674423, 1796493674477, 1796493674526, 1796493674542],
            ),
        }],
    },
    Recording {
        dir: "claude-code/2.1.332",
        agent: "claude-code",
        run: "claude",
        secrets: &[],
        // New line types (`api-request-blob` repeating the request, with
        // system reminders) are not conversation and are not read.
        sessions: &[Session {
            id: "4f387010-2cec-47ff-a247-f029014d4801",
            parent: None,
            records: &turn(
                "Bash: echo hello",
                "Bash: hello",
                [1796498251030, 1796498251192, 1796498251250, 1796498251281],
            ),
        }],
    },
    Recording {
        dir: "claude-code/2.1.337",
        agent: "claude-code",
        run: "claude",
        secrets: &[RECORD_SECRET],
        sessions: &[Session {
            id: "d22b2864-2eb8-49de-aea6-868b042fad33",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796692602853),
                ("tool_call", "Bash: echo hello", 1796692602919),
                ("tool_output", "Bash: hello", 1796692602971),
                ("assistant", FACT_REDACTED, 1796692602993),
            ],
        }],
    },
    Recording {
        dir: "cline/3.0.65",
        agent: "cline",
        run: "cline",
        secrets: &[],
        // The `<user_input mode="act">` wrapper is not the user's words; a
        // `run_commands` result is the command, then what it printed.
        sessions: &[Session {
            id: "1796493695129_i0f63",
            parent: None,
            records: &turn(
                r#"run_commands {"commands":["echo hello"]}"#,
                "echo hello\nhello",
                [1796493695477, 1796493695801, 1796493695859, 1796493695984],
            ),
        }],
    },
    Recording {
        dir: "code-puppy/0.0.946",
        agent: "code-puppy",
        run: "puppy",
        secrets: &["ghp_R3c0rdedAgentS3cretQuokka2026xYz1234"],
        // pydantic-ai messages: each part's time, else its message's; the
        // shell's return value is `{stdout, stderr, exit_code, ...}`; the
        // project is the `_meta.json` sidecar's `scope_key`.
        sessions: &[Session {
            id: "auto_session_20261205_215905_211493_6318",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796507945819),
                ("tool_call", "shell: echo hello", 1796507946109),
                ("tool_output", "hello", 1796507946252),
                (
                    "assistant",
                    "{FACT} The staging deploy token is [REDACTED:github-token] for now.",
                    1796507946357,
                ),
            ],
        }],
    },
    Recording {
        dir: "codex/0.171.0",
        agent: "codex",
        run: "codex",
        secrets: &[],
        sessions: &[Session {
            id: "01a2475e-02cf-7be3-9101-d8c7fac925d8",
            parent: None,
            records: &turn(
                "Shell: echo hello",
                "exec_command: Chunk ID: df8e80\nWall time: 0.0000 seconds\nProcess exited \
                 with code 0\nOriginal token count: 2\nOutput:\nhello",
                [1796493673276, 1796493673296, 1796493673347, 1796493673366],
            ),
        }],
    },
    Recording {
        dir: "continue/1.5.47",
        agent: "continue",
        run: "cn",
        secrets: &[],
        sessions: &[Session {
            id: "ae585ff5-0a36-4c3c-a249-bcf231bb4cdd",
            parent: None,
            // No times in the session file: the index's `dateCreated` for all.
            records: &turn(
                "Bash: echo hello",
                "hello\n",
                [1796493689259, 1796493689259, 1796493689259, 1796493689259],
            ),
        }],
    },
    Recording {
        dir: "gemini/0.61.0",
        agent: "gemini",
        run: "gemini",
        secrets: &[],
        sessions: &[Session {
            id: "acb4c9b4-ebfd-494d-a4bd-3890fa1c31d9",
            parent: None,
            records: &turn(
                "run_shell_command: echo hello",
                "<untrusted_context>\nOutput: hello\nProcess Group PGID: 1930\n</untrusted_context>",
                [1796493683745, 1796493683901, 1796493683901, 1796493683931],
            ),
        }],
    },
    Recording {
        dir: "gptme/0.35.1",
        agent: "gptme",
        run: "gptme",
        secrets: &["ghp_R3c0rdedAgentS3cretQuokka2026xYz1234"],
        // Times are naive local times (the recorder's UTC); the shell call
        // is an `@shell(call_id): {json}` line of the assistant's text, its
        // output a visible system message. gptme's `<system>` auto-reply
        // after the answer is not the user's and is not read.
        sessions: &[Session {
            id: "2026-12-05-climbing-yellow-jellyfish",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796507489042),
                ("tool_call", "shell: echo hello", 1796507493750),
                (
                    "tool_output",
                    "Ran allowlisted command: `echo hello`\n\n`hello`\n\n",
                    1796507494406,
                ),
                (
                    "assistant",
                    "{FACT} The staging deploy token is [REDACTED:github-token] for now.",
                    1796507494830,
                ),
            ],
        }],
    },
    Recording {
        dir: "nanocoder/1.30.0",
        agent: "nanocoder",
        run: "nanocoder",
        secrets: &["ghp_R3c0rdedAgentS3cretQuokka2026xYz1234"],
        // Messages carry no time: the session's `createdAt`, and for the
        // last message the last save's `lastAccessedAt`.
        sessions: &[Session {
            id: "b6047734-3840-4fca-89e2-fbf9ca6ad2c9",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796506327287),
                ("tool_call", "execute_bash: echo hello", 1796506327287),
                ("tool_output", "EXIT_CODE: 0\nhello\n", 1796506327287),
                (
                    "assistant",
                    "{FACT} The staging deploy token is [REDACTED:github-token] for now.",
                    1796506328304,
                ),
            ],
        }],
    },
    Recording {
        dir: "kimi-cli/1.51.0",
        agent: "kimi-cli",
        run: "kimi",
        secrets: &[],
        sessions: &[Session {
            id: "1a9d2a86-131c-421c-82f4-de63f044cecd",
            parent: None,
            records: &turn(
                "Shell: echo hello",
                "hello\n",
                [1796493701339, 1796493701706, 1796493701719, 1796493701735],
            ),
        }],
    },
    Recording {
        dir: "opencode/1.18.33",
        agent: "opencode",
        run: "opencode",
        secrets: &[],
        sessions: &[Session {
            id: "ses_db8a20b0fffe2zHTysQ8uRVYnv",
            parent: None,
            // `opencode run` stored the prompt with the shell's quotes.
            records: &[
                ("user", "\"{PROMPT}\"", 1796493669734),
                ("tool_call", "Bash: echo hello", 1796493671779),
                ("tool_output", "hello\n", 1796493671895),
                ("assistant", "{FACT}", 1796493672183),
            ],
        }],
    },
    Recording {
        dir: "openhands/1.16.0",
        agent: "openhands",
        run: "openhands",
        secrets: &[],
        sessions: &[Session {
            id: "7289d99dae8942899b90f31bc0b9d14b",
            parent: None,
            records: &turn(
                "terminal: echo hello",
                "hello",
                [1796493746038, 1796493746415, 1796493746820, 1796493746852],
            ),
        }],
    },
    Recording {
        dir: "pi/0.73.1",
        agent: "pi",
        run: "pi",
        secrets: &[],
        sessions: &[Session {
            id: "01a2475e-36b4-72ec-bb08-2b63605df445",
            parent: None,
            records: &turn(
                "bash: echo hello",
                "hello\n",
                [1796493686468, 1796493686535, 1796493686582, 1796493686587],
            ),
        }],
    },
    Recording {
        dir: "qwen/0.15.10",
        agent: "qwen",
        run: "qwen",
        secrets: &[],
        sessions: &[Session {
            id: "6cbba4ae-9121-4ea0-8404-6dd1976a1092",
            parent: None,
            records: &turn(
                "run_shell_command: echo hello",
                "Command: echo hello\nDirectory: (root)\nOutput: hello\nError: (none)\nExit \
                 Code: 0\nSignal: 0\nProcess Group PGID: 1781",
                [1796493677544, 1796493677599, 1796493679519, 1796493679571],
            ),
        }],
    },
    Recording {
        dir: "qwen/0.24.4",
        agent: "qwen",
        run: "qwen",
        // Recorded with record.sh's planted token in the decision.
        secrets: &["ghp_R3c0rdedAgentS3cretQuokka2026xYz1234"],
        sessions: &[Session {
            id: "aa9970e7-3183-43dc-8f39-f72758c87ea6",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796499006443),
                ("tool_call", "run_shell_command: echo hello", 1796499007746),
                (
                    "tool_output",
                    "Command: echo hello\nDirectory: (root)\nOutput: hello\nError: (none)\nExit \
                     Code: 0\nSignal: (none)\nProcess Group PGID: (none)",
                    1796499008470,
                ),
                (
                    "assistant",
                    "{FACT} The staging deploy token is [REDACTED:github-token] for now.",
                    1796499008605,
                ),
            ],
        }],
    },
    Recording {
        dir: "vibe/2.26.1-legacy",
        agent: "vibe",
        run: "vibe2legacy",
        secrets: &[],
        sessions: &[Session {
            id: "c09b9b9a-80bc-da5b-fda2-74dff2af91e9",
            parent: None,
            // No times on the messages: the session's start time for all.
            records: &turn(
                "bash: echo hello",
                "command: echo hello\nshell: \nexit_code: 0\nstdout: hello\n\nstderr: \nreturncode: 0",
                [1796493715059, 1796493715059, 1796493715059, 1796493715059],
            ),
        }],
    },
    Recording {
        dir: "vibe/2.26.1-unified",
        agent: "vibe",
        run: "vibe2",
        secrets: &[],
        sessions: &[Session {
            id: "e1847fc5-0b97-c0a0-7c12-993a8e862ab5",
            parent: None,
            records: &turn(
                "file_system.bash: echo hello",
                "hello\n",
                [1796493711177, 1796493711352, 1796493711374, 1796493711404],
            ),
        }],
    },
    Recording {
        dir: "vibe/3.0.2",
        agent: "vibe",
        run: "vibe",
        secrets: &[],
        sessions: &[Session {
            id: "f10ad50d-9c7e-68f0-df65-782fbf629dd7",
            parent: None,
            records: &turn(
                "file_system.bash: echo hello",
                "hello\n",
                [1796493706074, 1796493706246, 1796493706270, 1796493706302],
            ),
        }],
    },
    Recording {
        dir: "claude-code/2.1.332-turns",
        agent: "claude-code",
        run: "claude-turns",
        secrets: &[TURNS_SECRET],
        // `claude -p --continue` appends the second turn to the same file.
        sessions: &[Session {
            id: "7e2a0ced-5003-45f6-8376-5ed87b34a2ed",
            parent: None,
            records: &[
                ("user", TURN1, 1796501165913),
                (
                    "tool_call",
                    "Bash: ls /nonexistent-quokka-dir",
                    1796501165956,
                ),
                (
                    "tool_output",
                    "Bash (error): Exit code 2\nls: cannot access '/nonexistent-quokka-dir': No \
                     such file or directory",
                    1796501165990,
                ),
                ("assistant", ANSWER1, 1796501166003),
                ("user", TURN2, 1796501166309),
                ("tool_call", "Bash: echo second", 1796501166355),
                ("tool_output", "Bash: second", 1796501166385),
                ("assistant", ANSWER2, 1796501166398),
            ],
        }],
    },
    Recording {
        dir: "codex/0.171.0-turns",
        agent: "codex",
        run: "codex-turns",
        secrets: &[TURNS_SECRET],
        // `codex exec resume --last` appends to the same rollout; the exit
        // code is only in the output text.
        sessions: &[Session {
            id: "01a247d0-66b1-7f70-b49e-a15735905b05",
            parent: None,
            records: &[
                ("user", TURN1, 1796501169886),
                (
                    "tool_call",
                    "Shell: ls /nonexistent-quokka-dir",
                    1796501169903,
                ),
                (
                    "tool_output",
                    "exec_command: Chunk ID: 2e22f1\nWall time: 0.0000 seconds\nProcess exited \
                     with code 2\nOriginal token count: 18\nOutput:\nls: cannot access \
                     '/nonexistent-quokka-dir': No such file or directory",
                    1796501169951,
                ),
                ("assistant", ANSWER1, 1796501169966),
                ("user", TURN2, 1796501170155),
                ("tool_call", "Shell: echo second", 1796501170173),
                (
                    "tool_output",
                    "exec_command: Chunk ID: c6d506\nWall time: 0.0000 seconds\nProcess exited \
                     with code 0\nOriginal token count: 2\nOutput:\nsecond",
                    1796501170216,
                ),
                ("assistant", ANSWER2, 1796501170234),
            ],
        }],
    },
    Recording {
        dir: "opencode/1.18.33-turns",
        agent: "opencode",
        run: "opencode-turns",
        secrets: &[TURNS_SECRET],
        // `opencode run --continue` adds the second turn to the same
        // session; a shell command that exits non-zero is a "completed"
        // tool part, its output the error text.
        sessions: &[Session {
            id: "ses_db82eee7cffeESB8Vt5JMSd6i7",
            parent: None,
            records: &[
                ("user", "\"{TURN1}\"", 1796501213757),
                (
                    "tool_call",
                    "Bash: ls /nonexistent-quokka-dir",
                    1796501214997,
                ),
                ("tool_output", "{NO_DIR}\n", 1796501215059),
                ("assistant", ANSWER1, 1796501215167),
                ("user", "\"{TURN2}\"", 1796501216822),
                ("tool_call", "Bash: echo second", 1796501218447),
                ("tool_output", "second\n", 1796501218573),
                ("assistant", ANSWER2, 1796501218666),
            ],
        }],
    },
    Recording {
        dir: "claude-code/2.1.332-subagent",
        agent: "claude-code",
        run: "claude-subagent",
        secrets: &[],
        // `claude -p` runs the Agent tool in the background: the parent
        // answers once on the launch and again when the subagent's
        // `<task-notification>` (a user line the harness wrote) brings its
        // result. The child's file is `<parent>/subagents/agent-<id>.jsonl`.
        sessions: &[
            Session {
                id: "a98dbe2f-00b7-4bef-bd24-ba82d64bcf9f",
                parent: None,
                records: &[
                    ("user", SUB_PROMPT, 1796506009008),
                    (
                        "tool_call",
                        "Agent: Run echo from-subagent\n{SUB_TASK}",
                        1796506009167,
                    ),
                    ("tool_output", CLAUDE_ASYNC_AGENT, 1796506009314),
                    ("assistant", SUB_ANSWER, 1796506009410),
                    (
                        "tool_output",
                        "Agent \"Run echo from-subagent\" finished\n{SUB_CHILD_ANSWER}",
                        1796506010408,
                    ),
                    ("assistant", SUB_ANSWER, 1796506010443),
                ],
            },
            Session {
                id: "agent-ac261e2093b5047c3",
                parent: Some("a98dbe2f-00b7-4bef-bd24-ba82d64bcf9f"),
                records: &[
                    ("user", SUB_TASK, 1796506009241),
                    ("tool_call", "Bash: echo from-subagent", 1796506009519),
                    ("tool_output", "Bash: from-subagent", 1796506009601),
                    ("assistant", SUB_CHILD_ANSWER, 1796506009874),
                ],
            },
        ],
    },
    Recording {
        dir: "copilot/1.0.102",
        agent: "copilot",
        run: "copilot",
        secrets: &[RECORD_SECRET],
        // Run offline with its BYOK provider variables (no GitHub login):
        // `tools/realagents/more.sh copilot`. The shell's result carries
        // the CLI's own `<shellId: …>` trailer.
        sessions: &[Session {
            id: "086853cd-d3c0-4205-8069-506d3c825497",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796507278341),
                ("tool_call", "bash: echo hello", 1796507278453),
                (
                    "tool_output",
                    "hello\n<shellId: 0 completed with exit code 0>",
                    1796507278511,
                ),
                ("assistant", FACT_REDACTED, 1796507278549),
            ],
        }],
    },
    Recording {
        dir: "kilo/7.7.7",
        agent: "kilo",
        run: "kilo",
        secrets: &[RECORD_SECRET],
        // opencode's code base: `~/.local/share/kilo/kilo.db`, the prompt
        // stored with the shell's quotes as `opencode run` does.
        sessions: &[Session {
            id: "ses_db7d17f50ffeljjHxXxCRJB6FK",
            parent: None,
            records: &[
                ("user", "\"{PROMPT}\"", 1796507355287),
                ("tool_call", "Bash: echo hello", 1796507361050),
                ("tool_output", "hello\n", 1796507362650),
                ("assistant", FACT_REDACTED, 1796507367049),
            ],
        }],
    },
    Recording {
        dir: "factory/0.225.2",
        agent: "factory",
        run: "droid",
        secrets: &[RECORD_SECRET],
        // `droid exec` with a BYOK custom model; the first user line is
        // the harness's `<system-reminder>` context, not read.
        sessions: &[Session {
            id: "fe5a0b9d-b360-466f-833f-26494cae010f",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796507416821),
                ("tool_call", "Execute: echo hello", 1796507417018),
                (
                    "tool_output",
                    "hello\n\n\n[Process exited with code 0]",
                    1796507417309,
                ),
                ("assistant", FACT_REDACTED, 1796507417573),
            ],
        }],
    },
    Recording {
        dir: "hermes/0.19.0",
        agent: "hermes",
        run: "hermes",
        secrets: &[RECORD_SECRET],
        // `state.db`: the working folder is in `sessions.cwd`, times are
        // REAL seconds, the terminal tool's result is JSON; Hermes masked
        // the planted token itself before storing it.
        sessions: &[Session {
            id: "20261205_215155_203cd3",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796507577580),
                ("tool_call", "terminal: echo hello", 1796507580402),
                ("tool_output", "hello", 1796507580696),
                (
                    "assistant",
                    "{FACT} The staging deploy token is ghp_R3...1234 for now.",
                    1796507580987,
                ),
            ],
        }],
    },
    Recording {
        dir: "omp/18.2.3",
        agent: "omp",
        run: "omp",
        secrets: &[RECORD_SECRET],
        // pi's format under `~/.omp/agent/sessions/`; each message's own
        // `timestamp` (ms) is its time. The bash tool appends its wall time.
        sessions: &[Session {
            id: "01a24836-ed0f-73da-868d-f58cc6a307db",
            parent: None,
            records: &[
                ("user", "{PROMPT}", 1796507889506),
                ("tool_call", "bash: echo hello", 1796507891808),
                (
                    "tool_output",
                    "hello\n\n\nWall time: 0.16 seconds",
                    1796507892094,
                ),
                ("assistant", FACT_REDACTED, 1796507892158),
            ],
        }],
    },
    Recording {
        dir: "kilo/7.7.7-subagent",
        agent: "kilo",
        run: "kilo-subagent",
        secrets: &[],
        // opencode's `task` tool: the child is its own session row whose
        // `parent_id` names the caller; the call's output wraps the child's
        // answer in `<task>`.
        sessions: &[
            Session {
                id: "ses_db7bfb16fffe4wZ5owjCPUMkGp",
                parent: None,
                records: &[
                    ("user", "\"{SUB_PROMPT}\"", 1796508524431),
                    ("tool_call", "Task: {SUB_TASK}", 1796508530985),
                    (
                        "tool_output",
                        "<task id=\"ses_db7bf469effeAOCz63STj633Zk\" state=\"completed\">\n\
                         <task_result>\n{SUB_CHILD_ANSWER}\n</task_result>\n</task>",
                        1796508538977,
                    ),
                    ("assistant", SUB_ANSWER, 1796508540764),
                ],
            },
            Session {
                id: "ses_db7bf469effeAOCz63STj633Zk",
                parent: Some("ses_db7bfb16fffe4wZ5owjCPUMkGp"),
                records: &[
                    ("user", SUB_TASK, 1796508531134),
                    ("tool_call", "Bash: echo from-subagent", 1796508532729),
                    ("tool_output", "from-subagent\n", 1796508534210),
                    ("assistant", SUB_CHILD_ANSWER, 1796508538111),
                ],
            },
        ],
    },
    Recording {
        dir: "copilot/1.0.102-subagent",
        agent: "copilot",
        run: "copilot-subagent",
        secrets: &[],
        // The `task` tool's subagent runs inside the parent's events.jsonl:
        // its prompt follows `subagent.started`, its events carry
        // `parentToolCallId`. cairn reads it as a child session named
        // after the call.
        sessions: &[
            Session {
                id: "c71d9b92-277f-4e5d-a0ea-08a1e3010cf2",
                parent: None,
                records: &[
                    ("user", SUB_PROMPT, 1796508628858),
                    (
                        "tool_call",
                        "task: Run echo from-subagent\n{SUB_TASK}",
                        1796508629472,
                    ),
                    ("tool_output", SUB_CHILD_ANSWER, 1796508629644),
                    ("assistant", SUB_ANSWER, 1796508629759),
                ],
            },
            Session {
                id: "c71d9b92-277f-4e5d-a0ea-08a1e3010cf2-call_ddc78fba24694893aef4",
                parent: Some("c71d9b92-277f-4e5d-a0ea-08a1e3010cf2"),
                records: &[
                    ("user", SUB_TASK, 1796508629520),
                    ("tool_call", "bash: echo from-subagent", 1796508629545),
                    (
                        "tool_output",
                        "from-subagent\n<shellId: 0 completed with exit code 0>",
                        1796508629623,
                    ),
                    ("assistant", SUB_CHILD_ANSWER, 1796508629640),
                ],
            },
        ],
    },
    Recording {
        dir: "copilot/1.0.102-turns",
        agent: "copilot",
        run: "copilot-turns",
        secrets: &[TURNS_SECRET],
        // `copilot -p --continue` appends the second turn to the same
        // events.jsonl; the failing call's exit code is in its output.
        sessions: &[Session {
            id: "d3323fc5-9696-4397-8857-e850676f30a1",
            parent: None,
            records: &[
                ("user", TURN1, 1796508902465),
                (
                    "tool_call",
                    "bash: ls /nonexistent-quokka-dir",
                    1796508902662,
                ),
                (
                    "tool_output",
                    "{NO_DIR}\n<shellId: 0 completed with exit code 2>",
                    1796508902761,
                ),
                ("assistant", ANSWER1, 1796508902909),
                ("user", TURN2, 1796508905747),
                ("tool_call", "bash: echo second", 1796508905985),
                (
                    "tool_output",
                    "second\n<shellId: 0 completed with exit code 0>",
                    1796508906042,
                ),
                ("assistant", ANSWER2, 1796508906099),
            ],
        }],
    },
    Recording {
        dir: "kilo/7.7.7-turns",
        agent: "kilo",
        run: "kilo-turns",
        secrets: &[TURNS_SECRET],
        // `kilo run --continue`, as opencode: the same session; a failing
        // shell command is a completed tool part holding the error text.
        sessions: &[Session {
            id: "ses_db7b93324ffehlCjzsaCrFVIyD",
            parent: None,
            records: &[
                ("user", "\"{TURN1}\"", 1796508941669),
                (
                    "tool_call",
                    "Bash: ls /nonexistent-quokka-dir",
                    1796508944788,
                ),
                ("tool_output", "{NO_DIR}\n", 1796508945773),
                ("assistant", ANSWER1, 1796508947106),
                ("user", "\"{TURN2}\"", 1796508969701),
                ("tool_call", "Bash: echo second", 1796508973433),
                ("tool_output", "second\n", 1796508974719),
                ("assistant", ANSWER2, 1796508975978),
            ],
        }],
    },
    Recording {
        dir: "hermes/0.19.0-turns",
        agent: "hermes",
        run: "hermes-turns",
        secrets: &[TURNS_SECRET],
        // `hermes chat --continue` appends to the same session; the
        // terminal tool's JSON result carries the exit code; Hermes masked
        // the token itself.
        sessions: &[Session {
            id: "20261205_221627_2c7b93",
            parent: None,
            records: &[
                ("user", TURN1, 1796508998839),
                (
                    "tool_call",
                    "terminal: ls /nonexistent-quokka-dir",
                    1796508999887,
                ),
                ("tool_output", "{NO_DIR}\n(exit code 2)", 1796509000009),
                ("assistant", ANSWER1, 1796509000367),
                ("user", TURN2, 1796509010215),
                ("tool_call", "terminal: echo second", 1796509011942),
                ("tool_output", "second", 1796509012041),
                (
                    "assistant",
                    "It printed second. Decision: the walrus cache stays at 64 MB because a \
                     bigger one evicts the hot set. The cache admin token is ghp_Sc...H567 for now.",
                    1796509012190,
                ),
            ],
        }],
    },
    Recording {
        dir: "openclaw/2026.9.6-turns",
        agent: "openclaw",
        run: "openclaw-turns",
        secrets: &[TURNS_SECRET],
        // 2026.9 keeps transcripts in `openclaw-agent.sqlite`
        // (`transcript_events`, pi's events as rows); times are each
        // message's own `timestamp`. A second `agent --local` run continues
        // the main session; OpenClaw masked the token itself.
        sessions: &[Session {
            id: "f80d44b4-0ffc-43c3-aa1c-19d45d646a86",
            parent: None,
            records: &[
                ("user", TURN1, 1796509553490),
                (
                    "tool_call",
                    "exec: ls /nonexistent-quokka-dir",
                    1796509576811,
                ),
                (
                    "tool_output",
                    "{NO_DIR}\n\n(Command exited with code 2)",
                    1796509582073,
                ),
                ("assistant", ANSWER1, 1796509582100),
                ("user", TURN2, 1796509617098),
                ("tool_call", "exec: echo second", 1796509641518),
                ("tool_output", "second", 1796509646860),
                (
                    "assistant",
                    "It printed second. Decision: the walrus cache stays at 64 MB because a \
                     bigger one evicts the hot set. The cache admin token is ghp_Sc\u{2026}H567 \
                     for now.",
                    1796509646963,
                ),
            ],
        }],
    },
];

/// One line per session fact and record, for a readable diff.
fn render(
    agent: &str,
    project: &str,
    sessions: &[(String, Option<String>, Vec<String>)],
) -> String {
    let mut s = String::new();
    for (id, parent, records) in sessions {
        s.push_str(&format!(
            "session {id} agent={agent} parent={} project={project}\n",
            parent.as_deref().unwrap_or("-")
        ));
        for r in records {
            s.push_str(&format!("  {r}\n"));
        }
    }
    s
}

fn record_line(role: &str, time: Option<i64>, text: &str) -> String {
    let t = time.map_or("-".to_owned(), |t| t.to_string());
    format!("{role} @{t} {text:?}")
}

/// Checks one recording; returns what went wrong, if anything.
fn check(rec: &Recording) -> Result<(), String> {
    let home = TestHome::empty();
    copy_tree(&agent_fixtures().join(rec.dir).join("home"), home.path());
    let project = format!("/home/dev/agent/home-{0}/code/proj-{0}", rec.run);
    let fill = |t: &str| {
        t.replace("{PROMPT}", PROMPT)
            .replace("{FACT}", FACT)
            .replace("{TURN1}", TURN1)
            .replace("{TURN2}", TURN2)
            .replace("{NO_DIR}", NO_DIR)
            .replace("{SUB_PROMPT}", SUB_PROMPT)
            .replace("{SUB_TASK}", SUB_TASK)
            .replace("{SUB_CHILD_ANSWER}", SUB_CHILD_ANSWER)
            .replace("{PROJ}", &project)
    };
    let in_folder = IN_PROJECT_FOLDER.contains(&rec.dir);
    let query = OWN_QUERY
        .iter()
        .find(|(dir, _)| *dir == rec.dir)
        .map_or(QUERY, |(_, q)| *q);
    let mut problems = Vec::new();

    let report = home.json(&["index", "--json"]);
    if report["skipped"] != 0 || report["failed"].as_array().is_none_or(|f| !f.is_empty()) {
        problems.push(format!("index skipped or failed input: {report}"));
    }
    let status = home.json(&["status", "--json"]);
    let agents = status["agents"].as_object().cloned().unwrap_or_default();
    let with_records: Vec<&str> = agents
        .iter()
        .filter(|(_, a)| a["records"].as_u64().unwrap_or(0) > 0)
        .map(|(k, _)| k.as_str())
        .collect();
    if with_records != [rec.agent] {
        problems.push(format!(
            "agents with records: {with_records:?}, want [{:?}]",
            rec.agent
        ));
    }
    let sessions = agents
        .get(rec.agent)
        .and_then(|a| a["sessions"].as_u64())
        .unwrap_or(0);
    if sessions != rec.sessions.len() as u64 {
        problems.push(format!("{sessions} sessions, want {}", rec.sessions.len()));
    }

    let want_project = if in_folder {
        home.path()
            .join(format!("code/proj-{}", rec.run))
            .display()
            .to_string()
    } else {
        project.clone()
    };
    let ids: Vec<String> = rec
        .sessions
        .iter()
        .map(|s| {
            if s.id != "*" {
                return s.id.to_owned();
            }
            let hits = home.search(query, &["--no-refresh"]);
            let id = hits
                .first()
                .and_then(|h| h["session_id"].as_str())
                .unwrap_or("(unresolved)")
                .to_owned();
            if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                problems.push(format!("session id {id:?}, want 16 hex digits"));
            }
            id
        })
        .collect();
    let want: Vec<(String, Option<String>, Vec<String>)> = rec
        .sessions
        .iter()
        .zip(&ids)
        .map(|(s, id)| {
            let records = s
                .records
                .iter()
                .map(|(role, text, t)| record_line(role, Some(*t), &fill(text)))
                .collect();
            (id.clone(), s.parent.map(str::to_owned), records)
        })
        .collect();
    let mut got = Vec::new();
    let mut got_agent = rec.agent.to_owned();
    let mut got_project = want_project.clone();
    for id in &ids {
        let out = home.run(&["show", "--json", "--no-pager", id]);
        if !out.status.success() {
            got.push((id.clone(), None, vec!["(no such session)".to_owned()]));
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("show JSON");
        let info = &v["session"];
        if info["agent"] != rec.agent {
            got_agent = info["agent"].to_string();
        }
        if info["project"] != want_project.as_str() {
            got_project = info["project"].to_string();
        }
        let records = v["records"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                record_line(
                    r["role"].as_str().unwrap_or("?"),
                    r["time_ms"].as_i64(),
                    r["text"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        got.push((
            info["session_id"].as_str().unwrap_or_default().to_owned(),
            info["parent_session"].as_str().map(str::to_owned),
            records,
        ));
    }
    let (want, got) = (
        render(rec.agent, &want_project, &want),
        render(&got_agent, &got_project, &got),
    );
    if want != got {
        let diff = similar::TextDiff::from_lines(&want, &got)
            .unified_diff()
            .header("expected (from the recorded files)", "what cairn read")
            .to_string();
        problems.push(diff);
    }

    let hits = home.search(query, &["--no-refresh"]);
    let top = hits.first();
    let found = top.map(|h| {
        (
            h["agent"].as_str().unwrap_or_default(),
            h["project"].as_str().unwrap_or_default(),
            h["session_id"].as_str().unwrap_or_default(),
        )
    });
    let want_hit = (rec.agent, want_project.as_str(), ids[0].as_str());
    if found != Some(want_hit) {
        problems.push(format!(
            "search {query:?}: top hit {found:?}, want {want_hit:?}"
        ));
    }

    for (path, bytes) in all_bytes_under(&home.cairn_home()) {
        for key in KEYS.iter().chain(rec.secrets) {
            if bytes.windows(key.len()).any(|w| w == key.as_bytes()) {
                problems.push(format!("{key:?} stored in {}", path.display()));
            }
        }
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[test]
fn every_recorded_release_is_read_exactly() {
    let on_disk = recorded_releases("home");
    let listed: Vec<&str> = RECORDINGS.iter().map(|r| r.dir).collect();
    same_recordings("fixtures/agents and RECORDINGS", &on_disk, &listed);
    let mut failures = Vec::new();
    for rec in RECORDINGS {
        if let Err(why) = check(rec) {
            eprintln!("---- {} ({})\n{why}\n", rec.dir, rec.agent);
            failures.push(rec.dir);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} recordings not read as recorded: {failures:?} (diffs above)",
        failures.len(),
        RECORDINGS.len()
    );
}

/// An agent no release of which can run here, read from fixtures written
/// from the agent's own source (`fixtures/agents/<agent>/source/`, see its
/// `PROVENANCE.md`).
struct FromSource {
    agent: &'static str,
    /// Lays the fixture out in a home as the agent would.
    lay_out: fn(&std::path::Path),
    /// How many sessions the fixture holds.
    sessions: u64,
    /// The decision to search for, and the project and session it is in.
    query: &'static str,
    project: &'static str,
    session: &'static str,
    /// A fake secret in the fixture that must never be stored.
    secret: &'static str,
}

const FROM_SOURCE: &[FromSource] = &[
    // microsoft/vscode objectMutationLog.ts @ 047238f9, chatModel.ts @ 8c035459.
    FromSource {
        agent: "vscode",
        lay_out: |home| copy_tree(&agent_fixtures().join("vscode/source/tree"), home),
        sessions: 3,
        query: "quokka fixtures re-encoded",
        project: "/home/dev/quokka app",
        session: "6d1f3b52-8c0e-4a71-9f35-2b7c4e9a1d08",
        secret: "ghp_S0urceFixtureVsC0deLedger2026abcdEF12",
    },
    // zed-industries/zed crates/agent/src/db.rs @ 0642ec7e.
    FromSource {
        agent: "zed",
        lay_out: zed_threads_db,
        sessions: 3,
        query: "quokka fixtures re-encoded",
        project: "/home/dev/quokka",
        session: "5b0e9c2a-71d4-4f3e-9a8b-2c1d0e9f8a7b",
        secret: "ghp_S0urceFixtureZedThreads2026abcdEF1234",
    },
];

/// Zed's `threads.db` in the home's data folder, from `schema.sql` and the
/// rows of `threads.json` (`data` zstd-compressed when `data_type` says so,
/// as Zed's `save_thread_sync` does).
fn zed_threads_db(home: &std::path::Path) {
    let src = agent_fixtures().join("zed/source");
    let dir = home.join(".local/share/zed/threads");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let conn = rusqlite::Connection::open(dir.join("threads.db")).expect("open");
    conn.execute_batch(&std::fs::read_to_string(src.join("schema.sql")).expect("schema"))
        .expect("schema");
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(src.join("threads.json")).expect("rows"))
            .expect("rows json");
    for r in rows {
        let s = |k: &str| r[k].as_str().map(str::to_owned);
        let json = serde_json::to_vec(&r["data"]).expect("data");
        let data = if s("data_type").as_deref() == Some("zstd") {
            zstd::encode_all(&json[..], 3).expect("zstd")
        } else {
            json
        };
        conn.execute(
            "INSERT INTO threads (id, parent_id, folder_paths, folder_paths_order, summary, \
             updated_at, data_type, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            rusqlite::params![
                s("id"),
                s("parent_id"),
                s("folder_paths"),
                s("folder_paths_order"),
                s("summary"),
                s("updated_at"),
                s("data_type"),
                data,
                s("created_at"),
            ],
        )
        .expect("insert");
    }
}

#[test]
fn source_written_fixtures_are_indexed_redacted_and_found() {
    for f in FROM_SOURCE {
        let agent = f.agent;
        let home = TestHome::empty();
        (f.lay_out)(home.path());
        let report = home.json(&["index", "--json"]);
        assert_eq!(report["skipped"], 0, "{agent}: {report}");
        let status = home.json(&["status", "--json"]);
        assert_eq!(
            status["agents"][agent]["sessions"].as_u64(),
            Some(f.sessions),
            "{agent}: {status}"
        );
        let hits = home.search(f.query, &["--no-refresh"]);
        let top = hits.first().expect("a hit");
        assert_eq!(
            (&top["agent"], &top["project"], &top["session_id"]),
            (
                &serde_json::json!(agent),
                &serde_json::json!(f.project),
                &serde_json::json!(f.session)
            ),
            "{agent}: {hits:?}"
        );
        for (path, bytes) in all_bytes_under(&home.cairn_home()) {
            assert!(
                !bytes
                    .windows(f.secret.len())
                    .any(|w| w == f.secret.as_bytes()),
                "{agent}: {} stored in {}",
                f.secret,
                path.display()
            );
        }
        // The brief to hand the session on (`cairn handoff`): its project,
        // its decision, what was left open, bounded, without the secret.
        let handle = format!("{agent}:{}", f.session);
        let brief = home.json(&["handoff", "--json", &handle]);
        let text = brief["text"].as_str().expect("text");
        assert!(text.len() <= 8192, "{agent}: {} bytes", text.len());
        assert!(
            text.contains(&format!("project: {}", f.project)),
            "{agent}: {text}"
        );
        assert!(text.contains("## Left open"), "{agent}: {text}");
        assert!(!text.contains(f.secret), "{agent}: {text}");
        let decided = brief["decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .any(|d| d["text"].as_str().is_some_and(|t| t.contains("re-encoded")));
        assert!(decided, "{agent}: no decision in {text}");
    }
}
