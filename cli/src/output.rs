//! Writing to stdout: JSON for scripts, plain lines for people. Broken
//! pipes surface as errors the caller maps to success.

use std::io::Write;

use serde::Serialize;

/// A locked, buffered stdout.
pub fn stdout() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::new(std::io::stdout().lock())
}

/// Prints one JSON document and a newline.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = stdout();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Prints one line.
pub fn line(out: &mut impl Write, s: &str) -> anyhow::Result<()> {
    writeln!(out, "{s}")?;
    out.flush()?;
    Ok(())
}

/// Unix ms as a short local-agnostic UTC time.
pub fn short_time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "-".to_owned())
}

/// How long ago `ms` was, in words (`never` when unknown).
pub fn ago(ms: Option<i64>, now_ms: i64) -> String {
    let Some(ms) = ms else {
        return "never".to_owned();
    };
    let secs = (now_ms - ms).max(0) / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}

/// Removes terminal control characters from text shown to a person.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect()
}
