//! aider: `.aider.chat.history.md` in `$HOME`, at `$AIDER_CHAT_HISTORY_FILE`
//! and in each project root: configured, or found without configuration
//! (aider writes it at the git root it runs in; see [`crate::projects`]). One Markdown file holds many
//! sessions, appended forever, so it is read with [`Reader::Whole`].
//!
//! - A session starts at `# aider chat started at YYYY-MM-DD HH:MM:SS`. That
//!   is aider's local time with no zone; it is taken as UTC (the only
//!   timestamp in the file, used for every record of the session).
//! - `#### ` lines are what the user typed; consecutive ones form one prompt.
//!   Answers to aider's `(Y)es/(N)o` confirmation prompts are dropped.
//! - `> ` lines are aider's own output: `Applied edit to <file>` is a tool
//!   call touching that file, `Commit <sha> <message>` a tool call, and the
//!   rest (errors such as `litellm.InternalServerError…`, shell output,
//!   warnings) is tool output, consecutive lines forming one record capped
//!   like other tool output. The start-up banner (the command line,
//!   `Aider v…`, `Main model:`, `Git repo:`, `Repo-map:`…), token/cost
//!   lines and `(Y)es/(N)o` prompts are dropped.
//! - Unprefixed text is the assistant. Inside ``` fences of assistant text,
//!   `####` and `>` lines are content, not markers. Inline
//!   `<thinking-content-…>` blocks (local reasoning models) are dropped.
//! - The trailing two-space Markdown hard break is stripped from every line.
//!
//! aider has no session ids: each is derived as the first 16 hex chars of
//! blake3(file path, start line, ordinal of the session in the file), so a
//! re-parse gives the same ids (moving the file changes them). The project is
//! the folder holding the history file. Offsets are byte offsets of the first
//! line of the block a record came from.

use std::path::{Path, PathBuf};

use super::common::{TEXT_CAP, TOOL_OUTPUT_CAP, cap_text, parse_time_str};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "aider";
const FILE_NAME: &str = ".aider.chat.history.md";
const HEADER: &str = "# aider chat started at ";

/// The aider source.
pub struct Aider;

impl Source for Aider {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = vec![loc.home.join(FILE_NAME)];
        v.extend(loc.aider_history_file.clone());
        v.extend(loc.project_roots().iter().map(|r| r.join(FILE_NAME)));
        v
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["AIDER_CHAT_HISTORY_FILE"]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut candidates: Vec<PathBuf> = vec![loc.home.join(FILE_NAME)];
        candidates.extend(loc.aider_history_file.clone());
        candidates.extend(loc.project_roots().iter().map(|r| r.join(FILE_NAME)));
        let mut seen = Vec::new();
        for c in candidates {
            if c.is_file() && !seen.contains(&c) {
                seen.push(c);
            }
        }
        seen.into_iter()
            .map(|path| SourceFile::new(path, Reader::Whole(parse)))
            .collect()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Block {
    None,
    User,
    Assistant,
    Output,
}

struct State<'a> {
    path: &'a str,
    project: Option<String>,
    ordinal: u64,
    session_id: String,
    time: Option<i64>,
    block: Block,
    lines: Vec<&'a str>,
    block_offset: u64,
    in_fence: bool,
    in_thinking: bool,
    started: bool,
    out: Parsed,
}

impl<'a> State<'a> {
    fn start_session(&mut self, header: &str) {
        let mut h = blake3::Hasher::new();
        h.update(self.path.as_bytes());
        h.update(b"\n");
        h.update(header.as_bytes());
        h.update(b"\n");
        h.update(&self.ordinal.to_le_bytes());
        self.session_id = h.finalize().to_hex()[..16].to_owned();
        self.ordinal += 1;
        self.time = parse_time_str(header.strip_prefix(HEADER).unwrap_or_default());
        self.in_fence = false;
        self.in_thinking = false;
    }

    fn push(&mut self, role: Role, text: String, files: Vec<String>, offset: u64) {
        let mut r = Record::new(AGENT, &self.session_id, role, text);
        r.project = self.project.clone();
        r.time_ms = self.time;
        r.files = files;
        r.offset = offset;
        self.out.records.push(r);
    }

    fn flush(&mut self) {
        let lines = std::mem::take(&mut self.lines);
        let kind = std::mem::replace(&mut self.block, Block::None);
        let text = lines.join("\n");
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match kind {
            Block::User if !is_confirmation(text) => {
                self.push(
                    Role::User,
                    cap_text(text, TEXT_CAP),
                    Vec::new(),
                    self.block_offset,
                );
            }
            Block::Assistant => {
                let off = self.block_offset;
                self.push(Role::Assistant, cap_text(text, TEXT_CAP), Vec::new(), off);
            }
            Block::Output => {
                let off = self.block_offset;
                self.push(
                    Role::ToolOutput,
                    cap_text(text, TOOL_OUTPUT_CAP),
                    Vec::new(),
                    off,
                );
            }
            _ => {}
        }
    }

    fn add(&mut self, kind: Block, line: &'a str, offset: u64) {
        if self.block != kind {
            self.flush();
            self.block = kind;
            self.block_offset = offset;
        }
        self.lines.push(line);
    }

    fn aider_output(&mut self, text: &'a str, offset: u64) {
        if let Some(file) = text.strip_prefix("Applied edit to ") {
            self.flush();
            let file = file.trim();
            if !file.is_empty() {
                self.push(
                    Role::ToolCall,
                    format!("Edit {file}"),
                    vec![file.to_owned()],
                    offset,
                );
            }
        } else if let Some(rest) = text.strip_prefix("Commit ")
            && let sha = rest.split_whitespace().next().unwrap_or_default()
            && sha.len() >= 7
            && sha.bytes().all(|b| b.is_ascii_hexdigit())
        {
            self.flush();
            self.push(
                Role::ToolCall,
                format!("Commit {}", rest.trim()),
                Vec::new(),
                offset,
            );
        } else if is_banner(text) {
            self.flush();
        } else {
            self.add(Block::Output, text, offset);
        }
    }
}

/// aider's start-up banner, usage and prompt lines: not worth indexing.
fn is_banner(text: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "Aider v",
        "Main model:",
        "Weak model:",
        "Editor model:",
        "Model:",
        "Git repo:",
        "Repo-map:",
        "Tokens:",
        "Cost:",
        "Use /help",
        "Added ",
        "Add file to the chat?",
        "Warning: it's best to only add files",
    ];
    text.is_empty()
        || text.contains("(Y)es/(N)o")
        || PREFIXES.iter().any(|p| text.starts_with(p))
        || (text.starts_with('/') && text.contains("aider"))
        || text.starts_with("^C")
}

/// A user line that only answers one of aider's `(Y)es/(N)o` prompts.
fn is_confirmation(text: &str) -> bool {
    !text.contains('\n') && text.contains("(Y)es/(N)o")
}

/// Parses a whole `.aider.chat.history.md`.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let path_str = path.to_string_lossy();
    let mut st = State {
        path: &path_str,
        project: path
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty()),
        ordinal: 0,
        session_id: String::new(),
        time: None,
        block: Block::None,
        lines: Vec::new(),
        block_offset: 0,
        in_fence: false,
        in_thinking: false,
        started: false,
        out: Parsed::default(),
    };
    let mut offset = 0u64;
    for raw in bytes.split(|&b| b == b'\n') {
        let line_offset = offset;
        offset += raw.len() as u64 + 1;
        let Ok(line) = std::str::from_utf8(raw) else {
            st.out.errors.push(ParseError::Utf8 {
                offset: line_offset,
            });
            continue;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = line.strip_suffix("  ").unwrap_or(line);
        // A session header is written by aider at startup; it wins even over
        // an unclosed fence left by the previous session.
        if line.starts_with(HEADER) {
            st.flush();
            st.start_session(line.trim_end());
            st.started = true;
            continue;
        }
        // Text before the first header (a stray `-*- mode -*-` line) is no session.
        if !st.started {
            continue;
        }
        if st.in_fence {
            if line.trim_start().starts_with("```") {
                st.in_fence = false;
            }
            st.add(Block::Assistant, line, line_offset);
            continue;
        }
        if st.in_thinking {
            if line.trim_start().starts_with("</thinking-content-") {
                st.in_thinking = false;
            }
            continue;
        }
        if let Some(prompt) = line.strip_prefix("#### ") {
            st.add(Block::User, prompt, line_offset);
        } else if line == "####" {
            st.add(Block::User, "", line_offset);
        } else if line == ">" || line.starts_with("> ") {
            st.aider_output(
                line[1..].trim_end().strip_prefix(' ').unwrap_or(""),
                line_offset,
            );
        } else if line.trim_start().starts_with("<thinking-content-") {
            st.in_thinking = !line.contains("</thinking-content-");
        } else if line.trim().is_empty() {
            // Blank lines end a prompt but belong to an answer.
            match st.block {
                Block::User | Block::Output => st.flush(),
                Block::Assistant => st.lines.push(""),
                Block::None => {}
            }
        } else {
            if line.trim_start().starts_with("```") {
                st.in_fence = true;
            }
            st.add(Block::Assistant, line, line_offset);
        }
    }
    st.flush();
    st.out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home");
    const REAL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/real-histories/aider"
    );

    fn fixture(rel: &str) -> (PathBuf, Parsed) {
        let path = Path::new(FIXTURES).join(rel);
        let bytes = std::fs::read(&path).unwrap();
        let p = parse(&path, &bytes);
        (path, p)
    }

    #[test]
    fn discovers_home_and_project_roots() {
        let mut loc = Locations::under_home(Path::new(FIXTURES));
        let root = Path::new(FIXTURES).join("projects/webshop");
        loc.aider_roots = vec![root.clone(), Path::new("/nonexistent").into()];
        loc.aider_history_file = Some(Path::new(FIXTURES).join(FILE_NAME));
        let found: Vec<PathBuf> = Aider.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(
            found,
            vec![Path::new(FIXTURES).join(FILE_NAME), root.join(FILE_NAME)]
        );
    }

    #[test]
    fn webshop_history() {
        let (path, p) = fixture("projects/webshop/.aider.chat.history.md");
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let r = &p.records;
        let project = path.parent().unwrap().to_string_lossy().into_owned();
        assert!(
            r.iter()
                .all(|r| r.agent == "aider" && r.project.as_deref() == Some(&project))
        );
        let got: Vec<(Role, &str)> = r.iter().map(|r| (r.role, r.text.as_str())).collect();
        assert_eq!(
            got[0],
            (
                Role::User,
                "the ARM release build fails linking openssl-sys\nour deploy key for the registry is sk-ant-api03-1VOqg6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po-799NksnRH9ucAUsdMlHUvTCQCyEZDz_TddJ8HyS5SUkCnD8zRA9a9SAA, keep it out of the logs"
            )
        );
        assert_eq!(got[1].0, Role::Assistant);
        assert!(got[1].1.starts_with(
            "We decided to vendor the openssl crate because the ARM builder lacks libssl."
        ));
        // Fenced content keeps its `####` and `>` lines.
        assert!(got[1].1.contains("#### not a prompt"));
        assert!(got[1].1.contains("> not aider output"));
        assert!(got[1].1.contains("mysql --password S3cureCaqx9vJupc -h db"));
        assert_eq!(got[2], (Role::ToolCall, "Edit Cargo.toml"));
        assert_eq!(r[2].files, vec!["Cargo.toml"]);
        assert_eq!(
            got[3],
            (
                Role::ToolCall,
                "Commit 3fa9c21 build: vendor openssl for ARM builder"
            )
        );
        // Session 2: Russian prompt, thinking dropped, confirmation dropped.
        assert_eq!(got[4], (Role::User, "почему мы отключили кэширование?"));
        assert_eq!(
            got[5],
            (
                Role::Assistant,
                "Мы отключили кэширование, потому что прокси отдавал устаревшие цены."
            )
        );
        // aider's own output is kept as tool output (the file it offered).
        assert_eq!(got[6], (Role::ToolOutput, "config/cache.yml"));
        assert_eq!(r.len(), 7);
        assert!(!r.iter().any(|r| r.text.contains("(Y)es/(N)o")));
        assert!(!r.iter().any(|r| r.text.contains("internal reasoning")));
        assert!(!r.iter().any(|r| r.text.contains("Tokens:")));
        // Times from the session headers (local time taken as UTC).
        assert_eq!(r[0].time_ms, Some(1_762_506_000_000)); // 2025-11-07 09:00:00
        assert_eq!(r[5].time_ms, Some(1_762_592_400_000)); // 2025-11-08 09:00:00
        // Three headers, one empty session: ids are distinct and stable.
        assert_ne!(r[0].session_id, r[4].session_id);
        assert_eq!(r[0].session_id.len(), 16);
        let again = parse(&path, &std::fs::read(&path).unwrap());
        assert_eq!(again.records, p.records);
        // Offsets point at the start of the block's first line.
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes[r[0].offset as usize..].starts_with(b"#### the ARM"));
    }

    #[test]
    fn aider_output_lines_are_tool_output() {
        let md = "# aider chat started at 2025-01-02 03:04:05\n\
> /usr/bin/aider --model x\n\
> Aider v0.86.2\n\
> Main model: x with diff edit format\n\
\n\
#### fix the build\n\
\n\
> litellm.InternalServerError: AnthropicException - overloaded\n\
> Retrying in 0.2 seconds...\n\
\n\
Done, the build passes.\n\
\n\
> Tokens: 1k sent, 20 received.\n";
        let p = parse(Path::new("/p/.aider.chat.history.md"), md.as_bytes());
        let got: Vec<(Role, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "fix the build"),
                (
                    Role::ToolOutput,
                    "litellm.InternalServerError: AnthropicException - overloaded\nRetrying in 0.2 seconds..."
                ),
                (Role::Assistant, "Done, the build passes."),
            ]
        );
    }

    #[test]
    fn home_history_has_empty_session_and_bad_line() {
        let (_, p) = fixture(".aider.chat.history.md");
        // One line is not UTF-8; the rest is read.
        assert_eq!(p.errors.len(), 1);
        assert!(matches!(p.errors[0], ParseError::Utf8 { .. }));
        let got: Vec<(Role, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Role::User,
                    "/ask where do we keep the nightly cron schedule?"
                ),
                (
                    Role::Assistant,
                    "It lives in deploy/cron.yaml; we moved it there from crontab so it is reviewed like code."
                ),
            ]
        );
        assert!(
            p.records
                .iter()
                .all(|r| r.time_ms == Some(1_762_678_800_000))
        );
    }

    #[test]
    fn real_files() {
        let root = Path::new(REAL);
        if !root.exists() {
            eprintln!("skipping: {} not found", root.display());
            return;
        }
        let spot = [
            (
                "OpenCoder",
                34,
                "Crea una función hello world en un archivo nuevo",
            ),
            ("deja-vu", 11, "what did we do with sing-box?"),
            (
                "mozgoslav",
                3,
                "Про что проект мозгослав и на каком этапе сейчас RAG?",
            ),
            ("zen-mcp-server", 4, "/add **"),
        ];
        for (dir, sessions, needle) in spot {
            let f = root.join(dir).join(FILE_NAME);
            let p = parse(&f, &std::fs::read(&f).unwrap());
            assert!(p.errors.is_empty(), "{dir}: {:?}", p.errors);
            assert!(!p.records.is_empty(), "{dir}");
            assert!(p.records.iter().all(|r| !r.text.is_empty()
                && !r.session_id.is_empty()
                && r.project.as_deref().is_some_and(|p| p.ends_with(dir))
                && r.time_ms.is_some()));
            assert!(
                p.records
                    .iter()
                    .any(|r| r.role == Role::User && r.text == needle),
                "{dir}: {needle}"
            );
            let ids: std::collections::HashSet<&str> =
                p.records.iter().map(|r| r.session_id.as_str()).collect();
            assert!(ids.len() <= sessions, "{dir}");
            assert!(
                !p.records.iter().any(|r| r.text.contains("(Y)es/(N)o")),
                "{dir}"
            );
        }
        let f = root.join("OpenCoder").join(FILE_NAME);
        let p = parse(&f, &std::fs::read(&f).unwrap());
        assert!(p.records.iter().any(|r| r.role == Role::ToolCall
            && r.text == "Edit shutdown_pc.sh"
            && r.files == vec!["shutdown_pc.sh".to_owned()]));
        assert!(
            p.records
                .iter()
                .any(|r| r.text.starts_with("Commit 22f6ebc feat: add shutdown"))
        );
        // Multi-line /add prompts are one record.
        let f = root.join("zen-mcp-server").join(FILE_NAME);
        let p = parse(&f, &std::fs::read(&f).unwrap());
        assert!(p.records.iter().any(|r| {
            r.text.starts_with("/add /home/dragonfsky")
                && r.text
                    .contains("\n  /home/dragonfsky/git/github/zen-mcp-server/config.py")
        }));
        // Reasoning blocks of the local model are not indexed.
        let f = root.join("mozgoslav").join(FILE_NAME);
        let p = parse(&f, &std::fs::read(&f).unwrap());
        assert!(
            !p.records
                .iter()
                .any(|r| r.text.contains("thinking-content"))
        );
        assert!(p.records.iter().any(|r| r.role == Role::Assistant));
    }

    #[test]
    fn every_truncation_never_panics() {
        // No-panic property over every prefix of a fixture.
        let path = Path::new(FIXTURES).join("projects/webshop/.aider.chat.history.md");
        let bytes = std::fs::read(&path).unwrap();
        for n in 0..bytes.len() {
            let _ = parse(&path, &bytes[..n]);
        }
    }

    proptest::proptest! {
        // No-panic property: arbitrary bytes only produce records or errors.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse(Path::new("/h/.aider.chat.history.md"), &bytes);
        }
    }

    const AIDER_0_86_2: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/agents/aider/0.86.2/home"
    );

    #[test]
    fn aider_0_86_2_recording_is_found_and_read_without_configuration() {
        let home = Path::new(AIDER_0_86_2);
        let project = home.join("code/proj-aider");
        let mut loc = Locations::under_home(home);
        // Only the home and configured roots: nothing.
        assert!(Aider.discover(&loc).is_empty());
        let cairn = tempfile::tempdir().expect("tempdir");
        loc.projects_file = Some(cairn.path().join(crate::projects::FILE));
        crate::projects::refresh(&mut loc, 1_796_000_000_000, &crate::projects::LIMITS);
        let found: Vec<PathBuf> = Aider.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(found, [project.join(FILE_NAME)]);
        let bytes = std::fs::read(&found[0]).expect("read");
        let p = parse(&found[0], &bytes);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let got: Vec<(Role, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                // aider's own notices (`> ` lines), as aider records them.
                (
                    Role::ToolOutput,
                    "Update git name with: git config user.name \"Your Name\"\n\
                     Update git email with: git config user.email \"you@example.com\"\n\
                     You can skip this check with --no-gitignore"
                ),
                (
                    Role::ToolOutput,
                    "Warning for openai/fake-model: Unknown context window size and costs, \
                     using sane defaults.\nYou can skip this check with \
                     --no-show-model-warnings\nhttps://aider.chat/docs/llms/warnings.html"
                ),
                (
                    Role::User,
                    "Run the shell command `echo hello` in this project, then tell me what we \
                     decided about the quokka library. (see \
                     /home/dev/agent/home-aider/code/proj-aider/README.md)"
                ),
                (
                    Role::Assistant,
                    "I ran the command and it printed hello. Decision: we pinned the quokka \
                     library to 2.3 because 2.4 broke the parser."
                ),
            ]
        );
        let session = &p.records[0].session_id;
        for r in &p.records {
            assert_eq!(&r.session_id, session);
            assert_eq!(r.agent, "aider");
            // `# aider chat started at 2026-12-05 18:01:59`, taken as UTC.
            assert_eq!(r.time_ms, Some(1_796_493_719_000));
            assert_eq!(r.project.as_deref(), project.to_str());
            assert!(!r.text.contains("sk-fake"), "{r:?}");
        }
    }
}
