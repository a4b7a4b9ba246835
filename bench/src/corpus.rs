//! A synthetic corpus shaped like real Claude Code and Codex histories:
//! JSONL envelopes with ids, timestamps and usage, prose with a Zipf-like
//! vocabulary, code blocks, tool calls and long tool outputs.

use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::json;

/// A rare word planted exactly once, for the rare-term search.
pub const RARE: &str = "zanzibarquux";
/// A multi-word query whose words are common but co-occur rarely.
pub const MULTI: &str = "why did we pin the tokio runtime version";

/// Deterministic xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

const COMMON: &[&str] = &[
    "the", "to", "and", "a", "of", "in", "is", "that", "it", "for", "we", "this", "with", "on",
    "not", "be", "should", "can", "test", "error", "file", "function", "build", "fix", "run",
    "change", "use", "code", "value", "type", "return", "need", "because", "then", "now", "add",
    "update", "check", "config", "version", "crate", "module", "server", "client", "request",
    "response", "data", "path", "line", "output", "failing", "works", "issue", "cache", "tokio",
    "async", "runtime", "database", "query", "index", "parser", "struct", "trait", "impl",
];

const SYLLABLES: &[&str] = &[
    "ka", "ro", "mi", "ten", "sal", "vo", "dre", "pli", "gon", "ux", "ber", "tas", "lin", "qua",
    "zor", "fen", "mar", "ol", "ist", "ent", "ic", "ash", "bel", "cor", "dun", "ex", "fra",
];

/// The vocabulary: common words first, then synthetic ones; index = rank.
fn vocabulary(rng: &mut Rng) -> Vec<String> {
    let mut v: Vec<String> = COMMON.iter().map(|s| (*s).to_owned()).collect();
    while v.len() < 8000 {
        let n = rng.range(2, 4);
        let w: String = (0..n)
            .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
            .collect();
        v.push(w);
    }
    v
}

struct Gen {
    rng: Rng,
    vocab: Vec<String>,
    /// Cumulative Zipf weights.
    cdf: Vec<f64>,
    t_ms: i64,
    n: u64,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng(seed | 1);
        let vocab = vocabulary(&mut rng);
        let mut cdf = Vec::with_capacity(vocab.len());
        let mut acc = 0.0;
        for i in 0..vocab.len() {
            acc += 1.0 / (i as f64 + 1.0).powf(1.05);
            cdf.push(acc);
        }
        Gen {
            rng,
            vocab,
            cdf,
            t_ms: 1_735_689_600_000,
            n: 0,
        }
    }

    fn word(&mut self) -> String {
        let total = *self.cdf.last().unwrap_or(&1.0);
        let x = (self.rng.next() as f64 / u64::MAX as f64) * total;
        let i = self
            .cdf
            .partition_point(|c| *c < x)
            .min(self.vocab.len() - 1);
        self.vocab[i].clone()
    }

    fn prose(&mut self, words: u64) -> String {
        let mut s = String::new();
        for i in 0..words {
            if i > 0 {
                s.push(if self.rng.below(14) == 0 { '.' } else { ' ' });
                if s.ends_with('.') {
                    s.push(' ');
                }
            }
            let w = self.word();
            s.push_str(&w);
        }
        s.push('.');
        s
    }

    fn code(&mut self, lines: u64) -> String {
        let mut s = String::new();
        for i in 0..lines {
            let a = self.word();
            let b = self.word();
            let c = self.word();
            let line = match i % 5 {
                0 => format!("pub fn {a}_{b}(input: &{c}) -> Result<{a}, Error> {{"),
                1 => format!("    let {a} = {b}::{c}(&input)?;"),
                2 => format!("    if {a}.is_empty() {{ return Err(Error::{b}(\"{c}\".into())); }}"),
                3 => format!("    tracing::debug!({a} = %{b}, \"{c}\");"),
                _ => "}".to_owned(),
            };
            s.push_str(&format!("{:>5}\u{2192}{line}\n", i + 1));
        }
        s
    }

    fn log(&mut self, lines: u64) -> String {
        let mut s = String::new();
        for _ in 0..lines {
            let a = self.word();
            let b = self.word();
            let ok = if self.rng.below(10) == 0 {
                "FAILED"
            } else {
                "ok"
            };
            s.push_str(&format!("test {a}::tests::{b}_{a} ... {ok}\n"));
        }
        s.push_str("test result: ok. 42 passed; 0 failed; 0 ignored\n");
        s
    }

    fn prose_in(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.range(lo, hi);
        self.prose(n)
    }

    fn code_in(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.range(lo, hi);
        self.code(n)
    }

    fn log_in(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.range(lo, hi);
        self.log(n)
    }

    fn tick(&mut self) -> String {
        self.t_ms += self.rng.range(500, 40_000) as i64;
        chrono::DateTime::from_timestamp_millis(self.t_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default()
    }

    fn uuid(&mut self) -> String {
        let a = self.rng.next();
        let b = self.rng.next();
        format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }
}

fn line(w: &mut impl Write, v: &serde_json::Value) -> std::io::Result<u64> {
    let s = serde_json::to_string(v).map_err(std::io::Error::other)?;
    w.write_all(s.as_bytes())?;
    w.write_all(b"\n")?;
    Ok(s.len() as u64 + 1)
}

/// Writes one Claude Code session of about `target` bytes; returns bytes written.
fn claude_session(
    g: &mut Gen,
    dir: &Path,
    target: u64,
    plant: Option<&str>,
) -> std::io::Result<u64> {
    let sid = g.uuid();
    let cwd = format!("/home/dev/{}", g.word());
    let pdir = dir.join(format!(
        "-home-dev-{}",
        cwd.rsplit('/').next().unwrap_or("x")
    ));
    std::fs::create_dir_all(&pdir)?;
    let mut w = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(pdir.join(format!("{sid}.jsonl")))?,
    );
    let mut written = 0;
    let mut parent: Option<String> = None;
    let env = |g: &mut Gen, parent: &Option<String>| {
        let uuid = g.uuid();
        (
            uuid.clone(),
            json!({"parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": cwd, "sessionId": sid, "version": "2.1.38", "gitBranch": "main", "uuid": uuid, "timestamp": g.tick()}),
        )
    };
    let mut first = true;
    while written < target {
        g.n += 1;
        let mut prompt = g.prose_in(8, 60);
        if first {
            if let Some(p) = plant {
                prompt = format!("{prompt} {p}");
            }
            first = false;
        }
        let (u, mut v) = env(g, &parent);
        v["type"] = json!("user");
        v["message"] = json!({"role": "user", "content": prompt});
        written += line(&mut w, &v)?;
        parent = Some(u);
        let msg_id = format!("msg_{:024x}", g.rng.next());
        let (u, mut v) = env(g, &parent);
        v["type"] = json!("assistant");
        let mut text = g.prose_in(30, 200);
        if g.rng.below(3) == 0 {
            text.push_str(&format!("\n\n```rust\n{}```\n", g.code_in(5, 30)));
        }
        v["message"] = json!({"id": msg_id, "model": "claude-sonnet-4-5", "role": "assistant", "type": "message",
            "content": [{"type": "text", "text": text}], "stop_reason": null,
            "usage": {"input_tokens": 1200, "cache_read_input_tokens": 45000, "output_tokens": 310, "service_tier": "standard"}});
        v["requestId"] = json!(format!("req_{:020x}", g.rng.next()));
        written += line(&mut w, &v)?;
        parent = Some(u);
        for _ in 0..g.rng.range(1, 4) {
            let tool_id = format!("toolu_{:020x}", g.rng.next());
            let file = format!("src/{}/{}.rs", g.word(), g.word());
            let (name, input, output) = match g.rng.below(3) {
                0 => (
                    "Read",
                    json!({"file_path": format!("{cwd}/{file}")}),
                    g.code_in(40, 400),
                ),
                1 => (
                    "Bash",
                    json!({"command": format!("cargo test -p {}", g.word()), "description": "Run tests"}),
                    g.log_in(20, 300),
                ),
                _ => (
                    "Edit",
                    json!({"file_path": format!("{cwd}/{file}"), "old_string": g.code(3), "new_string": g.code(4)}),
                    "The file has been updated.".to_owned(),
                ),
            };
            let (u, mut v) = env(g, &parent);
            v["type"] = json!("assistant");
            v["message"] = json!({"id": msg_id, "model": "claude-sonnet-4-5", "role": "assistant", "type": "message",
                "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": input}],
                "usage": {"input_tokens": 1200, "output_tokens": 90}});
            written += line(&mut w, &v)?;
            parent = Some(u);
            let (u, mut v) = env(g, &parent);
            v["type"] = json!("user");
            v["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]});
            v["toolUseResult"] = json!({"stdout": "", "stderr": "", "interrupted": false});
            written += line(&mut w, &v)?;
            parent = Some(u);
        }
    }
    w.flush()?;
    Ok(written)
}

/// Writes one Codex rollout of about `target` bytes; returns bytes written.
fn codex_session(g: &mut Gen, dir: &Path, target: u64) -> std::io::Result<u64> {
    let id = g.uuid();
    let day = dir.join(format!(
        "2026/{:02}/{:02}",
        g.rng.range(1, 12),
        g.rng.range(1, 28)
    ));
    std::fs::create_dir_all(&day)?;
    let mut w = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(day.join(format!("rollout-2026-01-01T10-00-00-{id}.jsonl")))?,
    );
    let cwd = format!("/home/dev/{}", g.word());
    let mut written = line(
        &mut w,
        &json!({"timestamp": g.tick(), "type": "session_meta", "payload": {"id": id, "timestamp": g.tick(), "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.58.0", "model_provider": "openai"}}),
    )?;
    while written < target {
        let prompt = g.prose_in(8, 50);
        written += line(
            &mut w,
            &json!({"timestamp": g.tick(), "type": "event_msg", "payload": {"type": "user_message", "message": prompt}}),
        )?;
        written += line(
            &mut w,
            &json!({"timestamp": g.tick(), "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}}),
        )?;
        for _ in 0..g.rng.range(1, 4) {
            let call = format!("call_{:016x}", g.rng.next());
            let cmd = format!("rg -n {} src", g.word());
            written += line(
                &mut w,
                &json!({"timestamp": g.tick(), "type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": json!({"command": ["bash", "-lc", cmd], "workdir": cwd}).to_string(), "call_id": call}}),
            )?;
            let out = g.code_in(20, 250);
            written += line(
                &mut w,
                &json!({"timestamp": g.tick(), "type": "response_item", "payload": {"type": "function_call_output", "call_id": call, "output": json!({"output": out, "metadata": {"exit_code": 0, "duration_seconds": 0.4}}).to_string()}}),
            )?;
        }
        let answer = g.prose_in(30, 160);
        written += line(
            &mut w,
            &json!({"timestamp": g.tick(), "type": "event_msg", "payload": {"type": "agent_message", "message": answer}}),
        )?;
        written += line(
            &mut w,
            &json!({"timestamp": g.tick(), "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}}),
        )?;
        written += line(
            &mut w,
            &json!({"timestamp": g.tick(), "type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 52000, "output_tokens": 900}}}}),
        )?;
    }
    w.flush()?;
    Ok(written)
}

/// Generates about `total` bytes under `home`, one Claude transcript of
/// `big` bytes among them. Returns the bytes written.
pub fn generate(home: &Path, total: u64, big: u64) -> anyhow::Result<u64> {
    let mut g = Gen::new(0x00C0_FFEE);
    let claude = home.join(".claude/projects");
    let codex = home.join(".codex/sessions");
    let mut written = claude_session(&mut g, &claude, big.min(total), None)?;
    let mut planted = false;
    while written < total {
        let size = g.rng.range(200_000, 3_000_000).min(total - written + 1);
        written += if g.rng.below(3) == 0 {
            codex_session(&mut g, &codex, size)?
        } else {
            let plant = (!planted).then_some(RARE);
            planted = true;
            claude_session(&mut g, &claude, size, plant)?
        };
    }
    if !planted {
        written += claude_session(&mut g, &claude, 10_000, Some(RARE))?;
    }
    let extra = format!("{MULTI}: we pinned it because the 1.40 upgrade deadlocked the scheduler");
    written += claude_session(&mut g, &claude, 5_000, Some(&extra))?;
    Ok(written)
}

/// Total bytes of the files under a folder.
pub fn size_of(dir: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            n += if p.is_dir() {
                size_of(&p)
            } else {
                e.metadata().map_or(0, |m| m.len())
            };
        }
    }
    n
}

/// The path of the big transcript (the largest Claude file).
pub fn biggest_claude_file(home: &Path) -> Option<std::path::PathBuf> {
    let mut best: Option<(u64, std::path::PathBuf)> = None;
    let root = home.join(".claude/projects");
    for d in std::fs::read_dir(root).ok()?.flatten() {
        for f in std::fs::read_dir(d.path()).ok()?.flatten() {
            let len = f.metadata().map_or(0, |m| m.len());
            if best.as_ref().is_none_or(|(l, _)| len > *l) {
                best = Some((len, f.path()));
            }
        }
    }
    best.map(|(_, p)| p)
}
