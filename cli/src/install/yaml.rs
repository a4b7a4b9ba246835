//! Line-level edits of one YAML block list (Continue's `mcpServers:` in
//! `config.yaml`): adds, finds or removes the item named `cairn` and keeps
//! every other byte of the file. It understands only block style at the top
//! level; anything else (flow style, a quoted or inline key, tabs, several
//! documents, an empty file) is refused with a reason, never guessed at.
//! It must not touch any other key or item.

/// Why a YAML config could not be edited; the file is left untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    /// Nothing to add to: an absent or empty config.
    #[error(
        "the file is missing or empty; Continue would then load only cairn's entry and lose \
         its models: run the agent once to create its config, or add the entry by hand"
    )]
    Empty,
    /// A form the line editor does not handle safely.
    #[error("cannot edit this YAML safely ({0}); add the `cairn` entry under `{1}:` by hand")]
    Unsupported(&'static str, String),
}

/// One line: its full text (with its line ending) and its content.
struct Line<'a> {
    full: &'a str,
    body: &'a str,
}

impl Line<'_> {
    fn indent(&self) -> usize {
        self.body.len() - self.body.trim_start_matches(' ').len()
    }
    /// Blank or a comment: carries no structure.
    fn inert(&self) -> bool {
        let t = self.body.trim_start();
        t.is_empty() || t.starts_with('#')
    }
}

fn lines(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n')
        .map(|full| Line {
            full,
            body: full.trim_end_matches(['\n', '\r']),
        })
        .collect()
}

/// The list under a top-level key: where its header is, its item indent and
/// each item's line span `[start, end)`.
struct Block {
    header: usize,
    items: Vec<(usize, usize)>,
    /// First line after the block's last item (or after the header).
    end: usize,
    indent: usize,
}

/// The value after `key:` on a header line, without a trailing comment.
fn header_rest<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let rest = body.strip_prefix(key)?.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with([' ', '#'])) {
        return None;
    }
    let rest = rest.trim();
    Some(if rest.starts_with('#') { "" } else { rest })
}

fn find_block(ls: &[Line<'_>], key: &str) -> Result<Option<Block>, YamlError> {
    let bad = |why| Err(YamlError::Unsupported(why, key.to_owned()));
    let mut seen_content = false;
    let mut header = None;
    for (i, l) in ls.iter().enumerate() {
        if l.body.starts_with('\t') || l.body.trim_start_matches(' ').starts_with('\t') {
            return bad("tab indentation");
        }
        if l.inert() {
            continue;
        }
        if l.indent() == 0 {
            let b = l.body;
            if b.starts_with("---") || b.starts_with("...") {
                if seen_content {
                    return bad("several YAML documents");
                }
                continue;
            }
            if b.starts_with(['{', '[', '%', '&', '!', '?']) {
                return bad("flow style or tags at the top level");
            }
            if b.starts_with(&format!("\"{key}\"")) || b.starts_with(&format!("'{key}'")) {
                return bad("a quoted key");
            }
            if let Some(rest) = header_rest(b, key) {
                if header.is_some() {
                    return bad("the key appears twice");
                }
                if !rest.is_empty() {
                    return bad("the list is written inline");
                }
                header = Some(i);
            }
        }
        seen_content = true;
    }
    let Some(header) = header else {
        return Ok(None);
    };
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut indent = None;
    let mut end = header + 1;
    for (i, l) in ls.iter().enumerate().skip(header + 1) {
        if l.inert() {
            continue;
        }
        let ind = l.indent();
        let t = l.body.trim_start();
        let dash = t == "-" || t.starts_with("- ");
        match indent {
            None if dash => indent = Some(ind),
            None if ind == 0 => break,
            None => return bad("the key does not hold a block list"),
            Some(_) => {}
        }
        let item = indent.unwrap_or(0);
        if dash && ind == item {
            items.push((i, i + 1));
        } else if ind > item {
            if let Some(last) = items.last_mut() {
                last.1 = i + 1;
            }
        } else if ind == 0 {
            break;
        } else {
            return bad("uneven indentation in the list");
        }
        end = i + 1;
    }
    Ok(Some(Block {
        header,
        items,
        end,
        indent: indent.unwrap_or(2),
    }))
}

/// A plain scalar's value: quotes removed, trailing comment dropped.
fn scalar(s: &str) -> String {
    let s = s.trim();
    if let Some(q) = s.strip_prefix('"')
        && let Some(end) = q.find('"')
    {
        return serde_json::from_str::<String>(&s[..end + 2]).unwrap_or_else(|_| q[..end].into());
    }
    if let Some(q) = s.strip_prefix('\'')
        && let Some(end) = q.find('\'')
    {
        return q[..end].to_owned();
    }
    s.split(" #").next().unwrap_or(s).trim().to_owned()
}

/// `name`, `command` and `args` of one item.
fn fields(ls: &[Line<'_>], (start, end): (usize, usize)) -> (String, String, Vec<String>) {
    let first = ls[start].body;
    let key_indent = ls[start].indent() + 2;
    let (mut name, mut command, mut args) = (String::new(), String::new(), Vec::new());
    let mut in_args = false;
    for (i, l) in ls.iter().enumerate().take(end).skip(start) {
        if l.inert() {
            continue;
        }
        let t = if i == start {
            first.trim_start()[1..].trim_start()
        } else {
            l.body.trim_start()
        };
        let at_key = i == start || l.indent() == key_indent;
        if at_key {
            in_args = false;
            if let Some((k, v)) = t.split_once(':') {
                match k.trim() {
                    "name" => name = scalar(v),
                    "command" => command = scalar(v),
                    "args" => {
                        let v = v.trim();
                        if let Some(flow) = v.strip_prefix('[') {
                            let flow = flow.split(']').next().unwrap_or_default();
                            args = flow
                                .split(',')
                                .map(scalar)
                                .filter(|a| !a.is_empty())
                                .collect();
                        } else {
                            in_args = true;
                        }
                    }
                    _ => {}
                }
            }
        } else if in_args && let Some(a) = t.strip_prefix("- ") {
            args.push(scalar(a));
        }
    }
    (name, command, args)
}

fn ours(ls: &[Line<'_>], block: &Block, name: &str) -> Option<(usize, usize)> {
    block
        .items
        .iter()
        .copied()
        .find(|&span| fields(ls, span).0 == name)
}

/// A scalar as YAML: plain when unambiguous, else double-quoted.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+~@".contains(c))
        && !s.starts_with(['-', '~', '@']);
    if plain {
        s.to_owned()
    } else {
        serde_json::Value::from(s).to_string()
    }
}

fn render(indent: usize, name: &str, command: &str, args: &[&str], eol: &str) -> String {
    let pad = " ".repeat(indent);
    let mut s = format!("{pad}- name: {}{eol}", quote(name));
    s += &format!("{pad}  command: {}{eol}", quote(command));
    s += &format!("{pad}  args:{eol}");
    for a in args {
        s += &format!("{pad}    - {}{eol}", quote(a));
    }
    s
}

/// The `command` and `args` of item `name` in the list under `key`, if present.
pub fn entry(
    text: &str,
    key: &str,
    name: &str,
) -> Result<Option<(String, Vec<String>)>, YamlError> {
    let ls = lines(text);
    let Some(block) = find_block(&ls, key)? else {
        return Ok(None);
    };
    Ok(ours(&ls, &block, name).map(|span| {
        let (_, c, a) = fields(&ls, span);
        (c, a)
    }))
}

/// The command line of item `name` in the list under `key`, if present.
pub fn server(text: &str, key: &str, name: &str) -> Result<Option<String>, YamlError> {
    Ok(entry(text, key, name)?
        .map(|(c, a)| std::iter::once(c).chain(a).collect::<Vec<_>>().join(" ")))
}

/// The text with item `name` running `command args` in the list under
/// `key`; `None` when it is already so.
pub fn set_server(
    text: &str,
    key: &str,
    name: &str,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, YamlError> {
    if text.trim().is_empty() {
        return Err(YamlError::Empty);
    }
    let ls = lines(text);
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let block = find_block(&ls, key)?;
    let mut out = String::with_capacity(text.len() + 128);
    match block {
        None => {
            out.push_str(text);
            if !text.ends_with('\n') {
                out.push_str(eol);
            }
            out.push_str(&format!("{key}:{eol}"));
            out.push_str(&render(2, name, command, args, eol));
        }
        Some(block) => {
            let item = render(block.indent, name, command, args, eol);
            let (at, skip_to) = match ours(&ls, &block, name) {
                Some(span) => {
                    let (_, c, a) = fields(&ls, span);
                    if c == command && a.iter().map(String::as_str).eq(args.iter().copied()) {
                        return Ok(None);
                    }
                    span
                }
                None => (block.end, block.end),
            };
            for l in &ls[..at] {
                out.push_str(l.full);
            }
            if !out.ends_with('\n') {
                out.push_str(eol);
            }
            out.push_str(&item);
            for l in &ls[skip_to..] {
                out.push_str(l.full);
            }
        }
    }
    Ok(Some(out))
}

/// The text without item `name` in the list under `key`; `None` when it is
/// not there. A list left empty loses its key line too.
pub fn remove_server(text: &str, key: &str, name: &str) -> Result<Option<String>, YamlError> {
    let ls = lines(text);
    let Some(block) = find_block(&ls, key)? else {
        return Ok(None);
    };
    let Some((start, end)) = ours(&ls, &block, name) else {
        return Ok(None);
    };
    let drop_header = block.items.len() == 1;
    let out: String = ls
        .iter()
        .enumerate()
        .filter(|(i, _)| !((start..end).contains(i) || (drop_header && *i == block.header)))
        .map(|(_, l)| l.full)
        .collect();
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "mcpServers";
    const CFG: &str = "name: Local Config # mine\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: m\n    provider: openai\n    model: gpt-4o\n    apiBase: http://127.0.0.1:1/v1\n";

    fn set(t: &str) -> Result<Option<String>, YamlError> {
        set_server(t, K, "cairn", "/opt/cairn", &["mcp"])
    }

    #[test]
    fn adds_the_key_after_everything_else_and_removes_it_byte_for_byte() {
        let out = set(CFG).unwrap().unwrap();
        assert!(out.starts_with(CFG), "{out}");
        assert_eq!(
            &out[CFG.len()..],
            "mcpServers:\n  - name: cairn\n    command: /opt/cairn\n    args:\n      - mcp\n"
        );
        assert_eq!(
            server(&out, K, "cairn").unwrap().as_deref(),
            Some("/opt/cairn mcp")
        );
        assert_eq!(set(&out).unwrap(), None, "idempotent");
        assert_eq!(
            remove_server(&out, K, "cairn").unwrap().as_deref(),
            Some(CFG)
        );
        assert_eq!(remove_server(CFG, K, "cairn").unwrap(), None);
    }

    #[test]
    fn joins_an_existing_list_and_keeps_the_other_servers() {
        let t = format!(
            "{CFG}mcpServers:\n- name: other # theirs\n  command: npx\n  args: [\"-y\", x]\n\n# trailing note\nrules:\n  - be brief\n"
        );
        let out = set(&t).unwrap().unwrap();
        assert!(
            out.contains("  args: [\"-y\", x]\n- name: cairn\n  command: /opt/cairn\n  args:\n    - mcp\n\n# trailing note\nrules:\n"),
            "{out}"
        );
        assert_eq!(
            server(&out, K, "other").unwrap().as_deref(),
            Some("npx -y x")
        );
        assert_eq!(
            remove_server(&out, K, "cairn").unwrap().as_deref(),
            Some(t.as_str())
        );
    }

    #[test]
    fn updates_a_stale_command_in_place() {
        let t = format!(
            "{CFG}mcpServers:\n  - name: cairn\n    command: /old/cairn\n    args:\n      - mcp\nrules: []\n"
        );
        let out = set(&t).unwrap().unwrap();
        assert_eq!(out, t.replace("/old/cairn", "/opt/cairn"));
        let spaced = set_server(CFG, K, "cairn", "/my tools/cairn", &["mcp"])
            .unwrap()
            .unwrap();
        assert!(
            spaced.contains("command: \"/my tools/cairn\"\n"),
            "{spaced}"
        );
        assert_eq!(
            server(&spaced, K, "cairn").unwrap().as_deref(),
            Some("/my tools/cairn mcp")
        );
    }

    #[test]
    fn keeps_crlf_and_a_missing_final_newline() {
        let t = "name: c\r\nversion: 1.0.0\r\nschema: v1";
        let out = set(t).unwrap().unwrap();
        assert!(
            out.starts_with(
                "name: c\r\nversion: 1.0.0\r\nschema: v1\r\nmcpServers:\r\n  - name: cairn\r\n"
            ),
            "{out:?}"
        );
        assert_eq!(
            server(&out, K, "cairn").unwrap().as_deref(),
            Some("/opt/cairn mcp")
        );
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        assert_eq!(set(""), Err(YamlError::Empty));
        assert_eq!(set("  \n"), Err(YamlError::Empty));
        for (t, why) in [
            (
                "{name: c, mcpServers: []}\n",
                "flow style or tags at the top level",
            ),
            ("name: c\nmcpServers: []\n", "the list is written inline"),
            (
                "name: c\nmcpServers:\n  cairn:\n    command: x\n",
                "the key does not hold a block list",
            ),
            ("name: c\n\"mcpServers\":\n  - name: x\n", "a quoted key"),
            ("name: c\n---\nname: d\n", "several YAML documents"),
            ("name: c\nmodels:\n\t- name: m\n", "tab indentation"),
            (
                "name: c\nmcpServers:\n  - name: a\nmcpServers:\n  - name: b\n",
                "the key appears twice",
            ),
        ] {
            assert_eq!(set(t), Err(YamlError::Unsupported(why, K.into())), "{t}");
            assert!(remove_server(t, K, "cairn").is_err(), "{t}");
        }
    }
}
