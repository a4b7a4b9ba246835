//! One-line excerpts around the first matching word.

/// An excerpt of at most about `width` characters around the first
/// occurrence of any of `words` (lowercase), whitespace folded to single
/// spaces, with `…` where text was cut.
pub fn make(text: &str, words: &[String], width: usize) -> String {
    let folded: String = {
        let mut s = String::with_capacity(text.len().min(64 * 1024));
        let mut space = false;
        for c in text.chars() {
            if c.is_whitespace() || c.is_control() {
                space = true;
            } else {
                if space && !s.is_empty() {
                    s.push(' ');
                }
                space = false;
                s.push(c);
            }
        }
        s
    };
    let chars: Vec<char> = folded.chars().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let hit = words
        .iter()
        .filter(|w| !w.is_empty())
        .filter_map(|w| {
            let w: Vec<char> = w.chars().collect();
            lower.windows(w.len()).position(|win| win == w.as_slice())
        })
        .min()
        .unwrap_or(0);
    let start = hit.saturating_sub(width / 3);
    let end = (start + width).min(chars.len());
    let start = end.saturating_sub(width).min(start);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centres_on_the_match() {
        let text = format!(
            "{} we pinned Hyper to 0.14 {}",
            "x ".repeat(200),
            "y ".repeat(200)
        );
        let s = make(&text, &["hyper".into()], 60);
        assert!(s.contains("pinned Hyper"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
    }

    #[test]
    fn folds_whitespace_and_handles_no_match() {
        assert_eq!(make("a\n\n b\tc", &["zzz".into()], 50), "a b c");
        assert_eq!(make("", &[], 10), "");
    }
}
