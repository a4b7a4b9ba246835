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

/// True when stdout is a terminal and `NO_COLOR` is not set (to anything
/// non-empty): only then is output coloured.
pub fn color_enabled() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

const HL_ON: &str = "\u{1b}[1;33m";
const HL_OFF: &str = "\u{1b}[0m";

/// Marks the words of `text` that match a query word (lowercase): a word
/// starting with it (so "pin" marks "pinned"), or for CJK the characters
/// themselves. Plain text comes back unchanged when `color` is false.
pub fn highlight(text: &str, words: &[String], color: bool) -> String {
    if !color || words.is_empty() {
        return text.to_owned();
    }
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|(_, c)| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut marked = vec![false; chars.len()];
    for w in words {
        let w: Vec<char> = w.chars().collect();
        if w.is_empty() || w.len() > lower.len() {
            continue;
        }
        let cjk = w.iter().any(|c| cairn_node::text::is_cjk(*c));
        for i in 0..=lower.len() - w.len() {
            if lower[i..i + w.len()] != w[..] {
                continue;
            }
            let at_start = i == 0 || !lower[i - 1].is_alphanumeric();
            if !cjk && !at_start {
                continue;
            }
            let mut end = i + w.len();
            if !cjk {
                while end < lower.len() && lower[end].is_alphanumeric() {
                    end += 1;
                }
            }
            marked[i..end].iter_mut().for_each(|m| *m = true);
        }
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut on = false;
    for (k, (_, c)) in chars.iter().enumerate() {
        if marked[k] != on {
            out.push_str(if marked[k] { HL_ON } else { HL_OFF });
            on = marked[k];
        }
        out.push(*c);
    }
    if on {
        out.push_str(HL_OFF);
    }
    out
}

/// "just now", "5 minutes ago", "3 days ago", "2 years ago".
pub fn relative(ms: i64, now_ms: i64) -> String {
    let secs = (now_ms - ms) / 1000;
    if secs < 0 {
        return "in the future".to_owned();
    }
    let plural = |n: i64, unit: &str| format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" });
    match secs {
        0..60 => "just now".to_owned(),
        60..3_600 => plural(secs / 60, "minute"),
        3_600..86_400 => plural(secs / 3_600, "hour"),
        86_400..2_592_000 => plural(secs / 86_400, "day"),
        2_592_000..31_536_000 => plural(secs / 2_592_000, "month"),
        _ => plural(secs / 31_536_000, "year"),
    }
}

/// An RFC 3339 time as local time with a relative form:
/// "2025-11-03 10:15 (3 days ago)"; "-" when absent or unreadable.
pub fn local_time(rfc3339: Option<&str>, now_ms: i64) -> String {
    rfc3339
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| {
            format!(
                "{} ({})",
                t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M"),
                relative(t.timestamp_millis(), now_ms)
            )
        })
        .unwrap_or_else(|| "-".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highlight_marks_whole_words_from_their_start() {
        let w = vec!["pin".to_owned(), "hyper".to_owned()];
        assert_eq!(
            highlight("We pinned Hyper; spinning", &w, true),
            "We \u{1b}[1;33mpinned\u{1b}[0m \u{1b}[1;33mHyper\u{1b}[0m; spinning"
        );
        assert_eq!(highlight("We pinned Hyper", &w, false), "We pinned Hyper");
        let cjk = vec!["缓存".to_owned()];
        assert_eq!(
            highlight("禁用缓存了", &cjk, true),
            "禁用\u{1b}[1;33m缓存\u{1b}[0m了"
        );
    }

    #[test]
    fn relative_times() {
        let now = 1_800_000_000_000;
        assert_eq!(relative(now - 10_000, now), "just now");
        assert_eq!(relative(now - 3 * 86_400_000, now), "3 days ago");
        assert_eq!(relative(now - 86_400_000, now), "1 day ago");
        assert_eq!(relative(now - 400 * 86_400_000, now), "1 year ago");
        assert_eq!(local_time(None, now), "-");
        assert!(local_time(Some("2027-01-12T08:00:00Z"), now).ends_with("(3 days ago)"));
    }
}
