//! What a handoff brief reads out of single records: the sentences that
//! state a decision, what a tool call did (a shell command, files written
//! or edited), whether a tool's output reports a failure and its last
//! error line, and cutting text to a byte bound without splitting a
//! character or a redaction marker.
//!
//! Pure functions over record text as the readers store it (see
//! `sources::blocks::tool_call`: `Name: command` or `Name path`, with the
//! files the call named). Nothing here reads the store or the clock.

use std::sync::LazyLock;

use regex::Regex;

/// Decision phrases beyond the store's classifier ([`crate::text::is_decision`]):
/// plans stated as settled ("we'll use", "going with", "agreed", "we moved
/// it") and the forms of the other languages the fixtures and real
/// sessions use: Chinese and Japanese (决定 decide, 选择/選択 choose,
/// 改用/改到 switch to, 采用/採用 adopt, 不升级 not upgrading, ことにした
/// "decided to"), Russian (потому что because, решили decided), German,
/// French and Spanish (weil, parce que, porque: because; decided).
static MORE_DECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(we'?ll use|we will use|will use|let'?s use|going with|agreed|opted|we (moved|replaced|dropped|disabled|removed|kept|picked|use|stay)|set to|(changed|raised|lowered|bumped) .{1,40} to|keep(ing)? .{1,40} (at|on) |stay(s)? (at|on) )(?-u:\b)|决定|決定|选择了|選択|改用|改到|采用|採用|不升级|ことにし|потому что|решили|выбрали|перешли на|будем использовать|entschieden|beschlossen|weil|parce que|décidé|avons choisi|porque|decidimos|elegimos",
    )
    .expect("static regex")
});

/// Shell-like tool names (as the agents call them: `Bash`, `shell`,
/// `exec_command`, `run_shell_command`, `execute_command`, `terminal`, ...).
static SHELL_TOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(bash|shell|sh|zsh|exec|exec_command|shell_command|run_shell_command|execute_command|run_command|run_terminal_cmd|terminal|execute_bash|run_shell|command|local_shell|powershell|cmd)$")
        .expect("static regex")
});

/// Tools that create files.
static CREATE_TOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(write|write_file|writefile|create|create_file|createfile|new_file|write_to_file|file_write)$")
        .expect("static regex")
});

/// Tools that change files.
static EDIT_TOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(edit|multiedit|edit_file|editfile|str_replace|str_replace_editor|str_replace_based_edit_tool|replace|search_replace|replace_in_file|patch|apply_diff|notebookedit|insert|insert_content|multi_edit|file_edit|update_file)$")
        .expect("static regex")
});

/// An exit status a tool's output states (`[exit 2]`, `Exit code: 0`,
/// `<exited with exit code 1>`, `exit status 127`).
static EXIT_STATUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\[exit |exit(?:ed)?(?: with)?[ _]?(?:code|status)[:= ]+)(-?[0-9]+)")
        .expect("static regex")
});

/// Lines that report a failure in a tool's output that states no exit status.
static FAILURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?im)^\S* ?\(error\)|(^|\s)(error|fatal|panic)(\[[a-z0-9]+\])?:|traceback \(most recent call last\)|panicked at|command not found|no such file or directory|permission denied|^failed|\bfailed:|HTTP/[0-9.]+ [45][0-9][0-9]\b|(?-i:\bFAILED\b)|npm err!",
    )
    .expect("static regex")
});

/// "Error: (none)" and the like: a field that says there was no error.
static NO_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\berrors?: *(\(none\)|none|null|0)\s*$").expect("static regex")
});

/// A line that reads like an error, to pick the last one of an output.
static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)error|fatal|failed|panic|exception|denied|not found|no such|\[exit [1-9]")
        .expect("static regex")
});

/// A user's instruction that settles something: "Keep five.", "Use the
/// staging database.", "Pin it to 2.3."
static IMPERATIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(keep|use|switch to|pin|stay with|go with|stick with|drop|don'?t use|never use|always use)\b")
        .expect("static regex")
});

/// True when a user's sentence is an instruction that settles something.
pub fn is_instruction(sentence: &str) -> bool {
    IMPERATIVE.is_match(sentence.trim())
}

/// True when `sentence` states a decision or its reason.
pub fn is_decision(sentence: &str) -> bool {
    crate::text::is_decision(sentence) || MORE_DECISION.is_match(sentence)
}

/// The sentences of `text` that state a decision, in order, each trimmed
/// and without markdown list or heading marks. Code blocks are skipped.
pub fn decision_sentences(text: &str) -> Vec<String> {
    decision_sentences_by(text, false)
}

/// [`decision_sentences`], counting instructions ([`is_instruction`]) as
/// decisions too: for what the user said.
pub fn decision_sentences_by(text: &str, user: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || t.is_empty() {
            continue;
        }
        let t = t.trim_start_matches(['-', '*', '#', '>', ' ']).trim();
        for s in sentences(t) {
            let s = s.trim();
            // Too short to carry a decision on its own ("Because.").
            if s.chars().count() >= 12 && (is_decision(s) || (user && is_instruction(s))) {
                out.push(s.to_owned());
            }
        }
    }
    out
}

/// Splits a line into sentences: after `.`, `!` or `?` followed by white
/// space, and after the CJK full stops `。！？`.
fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut iter = line.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let end = i + c.len_utf8();
        let ends = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => iter.peek().is_none_or(|&(_, n)| n.is_whitespace()),
            _ => false,
        };
        if ends {
            out.push(&line[start..end]);
            start = end;
        }
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

/// What a tool call did, read from its stored text and files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A shell command.
    Shell(String),
    /// Files written (created) and edited (changed).
    Files {
        /// Created or overwritten.
        created: Vec<String>,
        /// Changed in place.
        changed: Vec<String>,
        /// Deleted (a patch's `*** Delete File:`).
        deleted: Vec<String>,
    },
    /// Anything else (reads, searches, web fetches, sub-agents).
    Other,
}

/// Reads a tool call record: its text starts with the tool's name
/// (`Bash: cargo test`, `Edit src/a.rs`, `apply_patch src/a.rs\n*** ...`).
pub fn classify_call(text: &str, files: &[String]) -> Call {
    let first = text.lines().next().unwrap_or("");
    let name_end = first
        .find(|c: char| c == ':' || c.is_whitespace())
        .unwrap_or(first.len());
    let name = &first[..name_end];
    // Tools namespaced by an MCP server or a plugin (`mcp__x__bash`, `functions.shell`).
    let bare = name.rsplit(['.', '/']).next().unwrap_or(name);
    let bare = bare.rsplit("__").next().unwrap_or(bare);
    if SHELL_TOOL.is_match(bare) {
        let cmd = first[name_end..].trim_start_matches(':').trim();
        let cmd = if cmd.is_empty() {
            text[first.len()..].trim()
        } else {
            cmd
        };
        return Call::Shell(unwrap_shell(cmd).to_owned());
    }
    if bare.eq_ignore_ascii_case("apply_patch") || text.contains("\n*** Begin Patch") {
        return patch_files(text, files);
    }
    let named = || -> Vec<String> {
        if !files.is_empty() {
            return files.to_vec();
        }
        let rest = first[name_end..].trim_start_matches(':').trim();
        if rest.is_empty() || rest.starts_with('{') {
            Vec::new()
        } else {
            vec![rest.to_owned()]
        }
    };
    if CREATE_TOOL.is_match(bare) {
        return Call::Files {
            created: named(),
            changed: Vec::new(),
            deleted: Vec::new(),
        };
    }
    if EDIT_TOOL.is_match(bare) {
        return Call::Files {
            created: Vec::new(),
            changed: named(),
            deleted: Vec::new(),
        };
    }
    Call::Other
}

/// `bash -lc "cargo test"` → `cargo test`; a JSON array command
/// (`["bash","-lc","cargo test"]`) the same way.
fn unwrap_shell(cmd: &str) -> &str {
    let c = cmd.trim();
    if c.starts_with('[')
        && let Some(last) = c
            .trim_end_matches(']')
            .rsplit("\",")
            .next()
            .map(|s| s.trim().trim_matches('"'))
        && (c.contains("\"-lc\"") || c.contains("\"-c\""))
    {
        return last;
    }
    for prefix in ["bash -lc ", "bash -c ", "sh -c ", "zsh -lc ", "zsh -c "] {
        if let Some(rest) = c.strip_prefix(prefix) {
            let r = rest.trim();
            if r.len() >= 2
                && ((r.starts_with('\'') && r.ends_with('\''))
                    || (r.starts_with('"') && r.ends_with('"')))
            {
                return &r[1..r.len() - 1];
            }
            return r;
        }
    }
    c
}

/// The files of an `apply_patch` call, by the patch's own headers.
fn patch_files(text: &str, files: &[String]) -> Call {
    let (mut created, mut changed, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines() {
        let line = line.trim();
        if let Some(p) = line.strip_prefix("*** Add File:") {
            created.push(p.trim().to_owned());
        } else if let Some(p) = line.strip_prefix("*** Update File:") {
            changed.push(p.trim().to_owned());
        } else if let Some(p) = line.strip_prefix("*** Delete File:") {
            deleted.push(p.trim().to_owned());
        }
    }
    if created.is_empty() && changed.is_empty() && deleted.is_empty() {
        changed = files.to_vec();
    }
    Call::Files {
        created,
        changed,
        deleted,
    }
}

/// When a tool's output reports a failure: its last error line (or, if no
/// line reads like one, its last non-empty line).
pub fn failure(output: &str) -> Option<String> {
    // A stated exit status decides; without one, the words do.
    let status = EXIT_STATUS
        .captures_iter(output)
        .last()
        .and_then(|c| c[1].parse::<i64>().ok());
    let failed = match status {
        Some(code) => code != 0 || output.lines().next().is_some_and(|l| l.contains("(error)")),
        None => output
            .lines()
            .filter(|l| !NO_ERROR.is_match(l))
            .any(|l| FAILURE.is_match(l)),
    };
    if !failed {
        return None;
    }
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| ERROR_LINE.is_match(l) && !NO_ERROR.is_match(l))
        .or(lines.last())
        .copied()
        .unwrap_or("");
    Some(line.to_owned())
}

/// Collapses runs of white space (newlines included) into one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `s` cut to at most `max` bytes: at a character boundary, never inside a
/// `[REDACTED:kind]` marker (cut before it instead), with `…` appended when
/// something was cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let ell = '…'.len_utf8();
    let mut end = max.saturating_sub(ell);
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &s[..end];
    // An opened marker whose `]` was cut off goes whole.
    let end = match kept.rfind("[REDACTED") {
        Some(open) if !kept[open..].contains(']') => open,
        _ => match kept.rfind('[') {
            // A cut right after `[`, `[R`, ... may be the start of a marker.
            Some(open) if "[REDACTED:".starts_with(&kept[open..]) => open,
            _ => end,
        },
    };
    format!("{}…", s[..end].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_found_in_english_and_chinese() {
        let t = "Looked at it.\nWe pinned hyper to 0.14 because 1.0 broke the proxy. Then lunch.\n\
                 总结一下：我们选择了 tantivy，因为它不需要单独的服务器。\n```\nbecause = 1\n```\n- We'll use SQLite for the queue.";
        let d = decision_sentences(t);
        assert_eq!(
            d,
            [
                "We pinned hyper to 0.14 because 1.0 broke the proxy.",
                "总结一下：我们选择了 tantivy，因为它不需要单独的服务器。",
                "We'll use SQLite for the queue.",
            ]
        );
        assert!(decision_sentences("ls -la\nthe build passed").is_empty());
        assert_eq!(
            decision_sentences(
                "Мы отключили кэширование, потому что прокси отдавал устаревшие цены."
            ),
            ["Мы отключили кэширование, потому что прокси отдавал устаревшие цены."]
        );
        // A user's instruction counts only when the user says it.
        assert!(decision_sentences("Keep five; log each attempt.").is_empty());
        assert_eq!(
            decision_sentences_by("Keep five; log each attempt.", true),
            ["Keep five; log each attempt."]
        );
    }

    #[test]
    fn tool_calls_are_read_across_agent_shapes() {
        assert_eq!(
            classify_call("Bash: cargo test -p x", &[]),
            Call::Shell("cargo test -p x".into())
        );
        assert_eq!(
            classify_call("run_shell_command: echo hello", &[]),
            Call::Shell("echo hello".into())
        );
        assert_eq!(
            classify_call(r#"shell: ["bash","-lc","make check"]"#, &[]),
            Call::Shell("make check".into())
        );
        assert_eq!(
            classify_call("exec_command: bash -lc 'npm test'", &[]),
            Call::Shell("npm test".into())
        );
        assert_eq!(
            classify_call("Write src/new.rs\nfn main() {}", &["src/new.rs".into()]),
            Call::Files {
                created: vec!["src/new.rs".into()],
                changed: vec![],
                deleted: vec![]
            }
        );
        assert_eq!(
            classify_call("Edit src/a.rs\nnew", &["src/a.rs".into()]),
            Call::Files {
                created: vec![],
                changed: vec!["src/a.rs".into()],
                deleted: vec![]
            }
        );
        let patch = "apply_patch src/queue.rs, src/old.rs, src/new.rs\n*** Begin Patch\n*** Update File: src/queue.rs\n*** Delete File: src/old.rs\n*** Add File: src/new.rs\n*** End Patch";
        assert_eq!(
            classify_call(patch, &[]),
            Call::Files {
                created: vec!["src/new.rs".into()],
                changed: vec!["src/queue.rs".into()],
                deleted: vec!["src/old.rs".into()]
            }
        );
        assert_eq!(
            classify_call("Read src/a.rs", &["src/a.rs".into()]),
            Call::Other
        );
        assert_eq!(classify_call("Grep foo in src", &[]), Call::Other);
    }

    #[test]
    fn failures_give_their_last_error_line() {
        assert_eq!(
            failure("shell: [exit 2] psql: error: connection refused").as_deref(),
            Some("shell: [exit 2] psql: error: connection refused")
        );
        assert_eq!(
            failure("Bash (error): compiling\nerror[E0308]: mismatched types\n  --> src/a.rs:3\nwarning: 1").as_deref(),
            Some("error[E0308]: mismatched types")
        );
        assert_eq!(
            failure("Traceback (most recent call last):\n  File x\nValueError: bad").as_deref(),
            Some("ValueError: bad")
        );
        assert_eq!(failure("hello\n"), None);
        assert_eq!(failure("test result: ok. 3 passed; 0 failed"), None);
        assert_eq!(failure("Exit code: 0\nOutput:\nfine"), None);
        assert!(failure("Exit code: 1\nOutput:\nboom").is_some());
        // Qwen Code's shell output: an empty error field and exit code 0.
        assert_eq!(
            failure("Command: echo hello\nOutput: hello\nError: (none)\nExit Code: 0\nSignal: 0"),
            None
        );
        assert_eq!(
            failure("error: not really\n<exited with exit code 0>"),
            None
        );
        assert!(failure("x\n<exited with exit code 2>").is_some());
        assert_eq!(
            failure("Edit applied, but the reload hook failed:\n> POST /admin/reload\n< HTTP/1.1 401 Unauthorized").as_deref(),
            Some("Edit applied, but the reload hook failed:")
        );
    }

    #[test]
    fn cut_keeps_characters_and_markers_whole() {
        assert_eq!(cut("short", 10), "short");
        let s = "ab😀cd";
        for max in 0..s.len() {
            let c = cut(s, max);
            assert!(c.len() <= max.max(3), "{max}: {c}");
        }
        let m = "token [REDACTED:github-token] end";
        for max in 0..m.len() {
            let c = cut(m, max);
            assert!(c.len() <= max.max('…'.len_utf8()), "{max}: {c}");
            let opened = c.matches("[REDACTED").count();
            assert!(
                !c.contains('[') || c.contains("[REDACTED:github-token]"),
                "{max}: half marker in {c:?} ({opened})"
            );
        }
    }
}
