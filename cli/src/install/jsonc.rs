//! Format-preserving edits of JSON (and JSONC) config files.
//!
//! The file is parsed with `jsonc-parser` into spans (comments and trailing
//! commas tolerated, nothing looser), and an edit splices text into, or out
//! of, exactly one place. Every other byte stays as it was. An insert
//! appends after the last child and a removal cuts from the end of the
//! previous child, so uninstalling what was installed gives back the
//! original bytes.
//!
//! Why the splicing is ours and not `jsonc-parser`'s CST editor: tried
//! against these tests, the CST keeps comments, indentation and trailing
//! commas and restores multi-line files byte for byte, but every property
//! it inserts makes its object multi-line, so a one-line file (`{"a":1,
//! "mcpServers":{"x":{}}}`) would not stay one line and uninstalling would
//! not give its bytes back. The parser, string decoding and error positions
//! are the crate's; rendering new values ([`KEY_ORDER`], the file's own
//! indentation unit) and choosing the splice points are the code below.

use jsonc_parser::ParseOptions;
use jsonc_parser::ast;
use serde_json::Value;

/// Why a config could not be read as JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid JSON at line {line}, column {column}: {what}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What is wrong.
    pub what: String,
}

/// Why an edit could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The file is not JSON.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A key on the way is not an object (or the top level is not one).
    #[error("expected {path} to be an object, found something else; edit it by hand")]
    NotAnObject {
        /// Dotted path.
        path: String,
    },
    /// A key on the way is not an array.
    #[error("expected {path} to be an array, found something else; edit it by hand")]
    NotAnArray {
        /// Dotted path.
        path: String,
    },
}

/// A parsed JSON value with its byte span.
#[derive(Debug, Clone)]
pub struct Node {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// What it is.
    pub kind: Kind,
}

/// The shape of a [`Node`].
#[derive(Debug, Clone)]
pub enum Kind {
    /// `{...}`
    Object(Vec<Member>),
    /// `[...]`
    Array(Vec<Node>),
    /// A string, number, `true`, `false` or `null`.
    Scalar,
}

/// One `"key": value` of an object.
#[derive(Debug, Clone)]
pub struct Member {
    /// The decoded key.
    pub key: String,
    /// Where the key's opening quote is.
    pub key_start: usize,
    /// The value.
    pub value: Node,
}

impl Node {
    fn members(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The member `key` of this object.
    pub fn get(&self, key: &str) -> Option<&Member> {
        self.members()?.iter().find(|m| m.key == key)
    }

    /// Children as (start, end) spans: members (key to value end) or items.
    fn child_spans(&self) -> Vec<(usize, usize)> {
        match &self.kind {
            Kind::Object(m) => m.iter().map(|m| (m.key_start, m.value.end)).collect(),
            Kind::Array(items) => items.iter().map(|v| (v.start, v.end)).collect(),
            Kind::Scalar => Vec::new(),
        }
    }
}

/// A parsed document: its text and root.
pub struct Doc<'a> {
    text: &'a str,
    root: Node,
}

impl<'a> Doc<'a> {
    /// Parses `text`; an empty (or all-blank) file (comments count as
    /// blank) is an empty object.
    pub fn parse(text: &'a str) -> Result<Doc<'a>, ParseError> {
        let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &options())
            .map_err(|e| parse_error(text, &e))?;
        let root = match &parsed.value {
            Some(v) => node(v),
            None => Node {
                start: 0,
                end: 0,
                kind: Kind::Scalar,
            },
        };
        Ok(Doc { text, root })
    }

    /// The root node.
    pub fn root(&self) -> &Node {
        &self.root
    }

    fn is_blank(&self) -> bool {
        self.root.end == 0
    }

    /// The node at `path` (object keys), if present.
    pub fn lookup(&self, path: &[&str]) -> Option<&Node> {
        let mut n = &self.root;
        for k in path {
            n = &n.get(k)?.value;
        }
        Some(n)
    }

    /// The value at `path` decoded, if present.
    pub fn value_at(&self, path: &[&str]) -> Option<Value> {
        let n = self.lookup(path)?;
        decode(&self.text[n.start..n.end])
    }

    /// The text of a node.
    pub fn slice(&self, n: &Node) -> &str {
        &self.text[n.start..n.end]
    }

    /// Sets `path` (the last part is the key) to `value`: replaces an existing
    /// different value, or inserts the member, creating missing parent
    /// objects. `None` when it is already equal.
    pub fn set(&self, path: &[&str], value: &Value) -> Result<Option<String>, EditError> {
        let (key, parents) = match path.split_last() {
            Some(x) => x,
            None => return Ok(None),
        };
        if self.is_blank() {
            let nested = nest(parents, key, value);
            let style = Style::default();
            return Ok(Some(format!("{}\n", style.render(&nested, ""))));
        }
        // Walk down as far as the path exists.
        let mut node = &self.root;
        let mut depth = 0;
        while depth < parents.len() {
            match &node.kind {
                Kind::Object(_) => match node.get(parents[depth]) {
                    Some(m) => {
                        node = &m.value;
                        depth += 1;
                    }
                    None => break,
                },
                _ => return Err(not_object(&parents[..depth])),
            }
        }
        if !matches!(node.kind, Kind::Object(_)) {
            return Err(not_object(&parents[..depth]));
        }
        if depth == parents.len()
            && let Some(m) = node.get(key)
        {
            if decode(self.slice(&m.value)).as_ref() == Some(value) {
                return Ok(None);
            }
            let indent = self.line_indent(m.key_start);
            let text = self.style().render(value, &indent);
            return Ok(Some(self.splice(m.value.start, m.value.end, &text)));
        }
        // Insert the member for the first missing part, with the rest nested.
        let nested = nest(&parents[depth..], key, value);
        let (first_key, first_value) = match &nested {
            Value::Object(m) => match m.iter().next() {
                Some((k, v)) => (k.clone(), v.clone()),
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        Ok(Some(self.insert_child(
            node,
            Some(&first_key),
            &first_value,
        )))
    }

    /// Appends `value` to the array at `path`, creating it (and parents) if missing.
    pub fn push(&self, path: &[&str], value: &Value) -> Result<String, EditError> {
        match self.lookup(path) {
            Some(n) if matches!(n.kind, Kind::Array(_)) => Ok(self.insert_child(n, None, value)),
            Some(_) => Err(EditError::NotAnArray {
                path: path.join("."),
            }),
            None => {
                let arr = Value::Array(vec![value.clone()]);
                Ok(self
                    .set(path, &arr)?
                    .unwrap_or_else(|| self.text.to_owned()))
            }
        }
    }

    /// Replaces item `index` of the array at `path` with `value`.
    pub fn replace_item(&self, path: &[&str], index: usize, value: &Value) -> Option<String> {
        let Kind::Array(items) = &self.lookup(path)?.kind else {
            return None;
        };
        let item = items.get(index)?;
        let indent = self.line_indent(item.start);
        let text = self.style().render(value, &indent);
        Some(self.splice(item.start, item.end, &text))
    }

    /// Removes the member at `path`; parents left empty by it (below the
    /// top level) are removed too, except those `keep` names. `None` when
    /// it is not there.
    pub fn remove(&self, path: &[&str], keep: &dyn Fn(&[&str]) -> bool) -> Option<String> {
        self.lookup(path)?;
        // Climb while the parent would be left empty and is not to be kept.
        let mut cut = path.len();
        while cut > 1 {
            let parent_path = &path[..cut - 1];
            let parent = self.lookup(parent_path)?;
            if parent.child_spans().len() == 1 && !keep(parent_path) {
                cut -= 1;
            } else {
                break;
            }
        }
        let container = self.lookup(&path[..cut - 1])?;
        let index = container
            .members()?
            .iter()
            .position(|m| m.key == path[cut - 1])?;
        Some(self.remove_child(container, index))
    }

    /// Removes item `index` of the array at `path`; an array left empty, and
    /// parents left empty, are removed too, except those `keep` names.
    pub fn remove_item(
        &self,
        path: &[&str],
        index: usize,
        keep: &dyn Fn(&[&str]) -> bool,
    ) -> Option<String> {
        let arr = self.lookup(path)?;
        let Kind::Array(items) = &arr.kind else {
            return None;
        };
        if index >= items.len() {
            return None;
        }
        if items.len() == 1 && !path.is_empty() && !keep(path) {
            return self.remove(path, keep);
        }
        Some(self.remove_child(arr, index))
    }

    fn remove_child(&self, container: &Node, index: usize) -> String {
        let spans = container.child_spans();
        let (from, to) = match spans.len() {
            1 => (container.start + 1, container.end - 1),
            _ if index > 0 => (spans[index - 1].1, spans[index].1),
            _ => (spans[0].0, spans[1].0),
        };
        self.splice(from, to, "")
    }

    fn insert_child(&self, container: &Node, key: Option<&str>, value: &Value) -> String {
        let style = self.style();
        let spans = container.child_spans();
        let head = |indent: &str| match key {
            Some(k) => format!(
                "{}: {}",
                Value::String(k.to_owned()),
                style.render(value, indent)
            ),
            None => style.render(value, indent),
        };
        match spans.last() {
            Some(&(_, last_end)) => {
                let first_start = spans[0].0;
                let multiline = self.text[container.start..first_start].contains('\n');
                if multiline {
                    let indent = self.line_indent(first_start);
                    let text = format!(",\n{indent}{}", head(&indent));
                    self.splice(last_end, last_end, &text)
                } else {
                    let compact = Style { unit: None };
                    let text = match key {
                        Some(k) => format!(
                            ", {}: {}",
                            Value::String(k.to_owned()),
                            compact.render(value, "")
                        ),
                        None => format!(", {}", compact.render(value, "")),
                    };
                    self.splice(last_end, last_end, &text)
                }
            }
            None => {
                let outer = self.line_indent(container.start);
                let indent = format!("{outer}{}", style.unit.as_deref().unwrap_or("  "));
                let text = format!("\n{indent}{}\n{outer}", head(&indent));
                self.splice(container.start + 1, container.end - 1, &text)
            }
        }
    }

    fn splice(&self, from: usize, to: usize, with: &str) -> String {
        let mut out = String::with_capacity(self.text.len() + with.len());
        out.push_str(&self.text[..from]);
        out.push_str(with);
        out.push_str(&self.text[to..]);
        out
    }

    /// The white space at the start of the line holding byte `at`.
    fn line_indent(&self, at: usize) -> String {
        let line_start = self.text[..at].rfind('\n').map_or(0, |i| i + 1);
        self.text[line_start..at]
            .chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .collect()
    }

    /// The file's indentation unit: that of the top level's first child.
    fn style(&self) -> Style {
        let spans = self.root.child_spans();
        let unit = spans.first().and_then(|&(s, _)| {
            if self.text[self.root.start..s].contains('\n') {
                let ind = self.line_indent(s);
                let outer = self.line_indent(self.root.start);
                ind.strip_prefix(outer.as_str())
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
            } else {
                None
            }
        });
        match spans.first() {
            // A one-line file stays one line.
            Some(_) if unit.is_none() => Style { unit: None },
            _ => Style {
                unit: Some(unit.unwrap_or_else(|| "  ".to_owned())),
            },
        }
    }
}

/// How new JSON is rendered: pretty with an indentation unit, or compact.
#[derive(Debug, Clone)]
struct Style {
    unit: Option<String>,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            unit: Some("  ".to_owned()),
        }
    }
}

/// Keys rendered first, in this order; others follow alphabetically.
const KEY_ORDER: &[&str] = &[
    "type", "matcher", "command", "args", "env", "enabled", "tools", "hooks", "timeout",
];

impl Style {
    /// Renders `v`; lines after the first start with `indent`.
    fn render(&self, v: &Value, indent: &str) -> String {
        let mut out = String::new();
        self.write(v, indent, &mut out);
        out
    }

    fn write(&self, v: &Value, indent: &str, out: &mut String) {
        let Some(unit) = &self.unit else {
            out.push_str(&compact(v));
            return;
        };
        match v {
            Value::Object(m) if !m.is_empty() => {
                let inner = format!("{indent}{unit}");
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by_key(|k| {
                    (
                        KEY_ORDER
                            .iter()
                            .position(|o| o == k)
                            .unwrap_or(KEY_ORDER.len()),
                        k.as_str(),
                    )
                });
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&inner);
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push_str(": ");
                    self.write(&m[k.as_str()], &inner, out);
                }
                out.push('\n');
                out.push_str(indent);
                out.push('}');
            }
            Value::Array(items) if items.iter().any(|x| x.is_object() || x.is_array()) => {
                let inner = format!("{indent}{unit}");
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&inner);
                    self.write(x, &inner, out);
                }
                out.push('\n');
                out.push_str(indent);
                out.push(']');
            }
            other => out.push_str(&compact(other)),
        }
    }
}

/// One-line JSON with a space after `:` and `,`, keys in [`KEY_ORDER`].
fn compact(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by_key(|k| {
                (
                    KEY_ORDER
                        .iter()
                        .position(|o| o == k)
                        .unwrap_or(KEY_ORDER.len()),
                    k.as_str(),
                )
            });
            let parts: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}: {}",
                        Value::String((*k).clone()),
                        compact(&m[k.as_str()])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", parts.join(", "))
        }
        other => other.to_string(),
    }
}

fn nest(parents: &[&str], key: &str, value: &Value) -> Value {
    let mut v = serde_json::json!({ key: value.clone() });
    for p in parents.iter().rev() {
        v = serde_json::json!({ *p: v });
    }
    v
}

fn not_object(path: &[&str]) -> EditError {
    EditError::NotAnObject {
        path: if path.is_empty() {
            "the top level".to_owned()
        } else {
            path.join(".")
        },
    }
}

/// What is accepted: JSON plus comments and trailing commas (the JSONC
/// that editors write), none of the crate's looser extensions.
fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_extended_string_escapes: false,
        allow_non_finite_numbers: false,
    }
}

/// Where and why `text` is not JSONC. Something left open is reported at
/// the end of the file, where the closing bracket was expected, naming
/// where it was opened.
fn parse_error(text: &str, e: &jsonc_parser::errors::ParseError) -> ParseError {
    use jsonc_parser::errors::ParseErrorKind as K;
    let what = e.kind().to_string();
    if matches!(
        e.kind(),
        K::UnterminatedObject | K::UnterminatedArray | K::UnterminatedCommentBlock
    ) {
        let line = text.matches('\n').count() + 1;
        let column = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        return ParseError {
            line,
            column,
            what: format!(
                "{what} (opened at line {}, column {})",
                e.line_display(),
                e.column_display()
            ),
        };
    }
    ParseError {
        line: e.line_display(),
        column: e.column_display(),
        what,
    }
}

/// The span tree of a parsed value.
fn node(v: &ast::Value<'_>) -> Node {
    let range = |r: &jsonc_parser::common::Range| (r.start, r.end);
    let ((start, end), kind) = match v {
        ast::Value::Object(o) => (
            range(&o.range),
            Kind::Object(
                o.properties
                    .iter()
                    .map(|p| Member {
                        key: p.name.as_str().to_owned(),
                        key_start: p.range.start,
                        value: node(&p.value),
                    })
                    .collect(),
            ),
        ),
        ast::Value::Array(a) => (
            range(&a.range),
            Kind::Array(a.elements.iter().map(node).collect()),
        ),
        ast::Value::StringLit(x) => (range(&x.range), Kind::Scalar),
        ast::Value::NumberLit(x) => (range(&x.range), Kind::Scalar),
        ast::Value::BooleanLit(x) => (range(&x.range), Kind::Scalar),
        ast::Value::NullKeyword(x) => (range(&x.range), Kind::Scalar),
    };
    Node { start, end, kind }
}

/// Decodes a JSON (or JSONC) fragment to a value.
fn decode(text: &str) -> Option<Value> {
    jsonc_parser::parse_to_serde_value::<Value>(text, &options()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> Value {
        json!({"command": "/usr/bin/cairn", "args": ["mcp"]})
    }

    /// Installs then uninstalls, checking the round trip is byte-exact.
    fn round_trip(original: &str) -> String {
        let doc = Doc::parse(original).expect("parse original");
        let added = doc
            .set(&["mcpServers", "cairn"], &entry())
            .expect("set")
            .expect("a change");
        let again = Doc::parse(&added).expect("parse result");
        assert_eq!(
            again.value_at(&["mcpServers", "cairn"]),
            Some(entry()),
            "{added}"
        );
        assert!(
            again
                .set(&["mcpServers", "cairn"], &entry())
                .expect("set")
                .is_none(),
            "second install must be a no-op"
        );
        let removed = again
            .remove(&["mcpServers", "cairn"], &|_| false)
            .expect("removed");
        assert_eq!(removed, original, "uninstall must restore the bytes");
        added
    }

    #[test]
    fn adds_next_to_existing_servers_and_restores() {
        let original = "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"other\": {\"command\": \"x\"}\n  },\n  \"z\": [1, 2]\n}\n";
        let added = round_trip(original);
        assert!(
            added.contains("\"other\": {\"command\": \"x\"},\n    \"cairn\": {\n      \"command\""),
            "{added}"
        );
        assert!(added.starts_with("{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"other\""));
        assert!(added.ends_with("  },\n  \"z\": [1, 2]\n}\n"), "{added}");
    }

    #[test]
    fn creates_the_parent_object_and_removes_it_again() {
        let original = "{\n\t\"theme\": \"dark\"\n}";
        let added = round_trip(original);
        assert!(
            added.contains("\n\t\"mcpServers\": {\n\t\t\"cairn\": {\n\t\t\t\"command\""),
            "{added:?}"
        );
    }

    #[test]
    fn compact_files_stay_compact_and_jsonc_is_tolerated() {
        round_trip(r#"{"a":1,"mcpServers":{"x":{}}}"#);
        round_trip("{} ");
        round_trip("// settings\n{\n  /* keep */ \"a\": 1, // trailing\n  \"b\": [1,],\n}\n");
    }

    #[test]
    fn empty_file_gets_a_fresh_document() {
        let doc = Doc::parse("").expect("blank");
        let text = doc
            .set(&["mcp", "cairn"], &json!({"type": "local"}))
            .expect("set")
            .expect("change");
        assert_eq!(
            text,
            "{\n  \"mcp\": {\n    \"cairn\": {\n      \"type\": \"local\"\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn a_different_value_is_replaced_in_place() {
        let original = "{\n  \"mcpServers\": {\n    \"cairn\": {\"command\": \"/old/cairn\"},\n    \"b\": 1\n  }\n}";
        let doc = Doc::parse(original).expect("parse");
        let text = doc
            .set(&["mcpServers", "cairn"], &entry())
            .expect("set")
            .expect("change");
        let again = Doc::parse(&text).expect("parse");
        assert_eq!(again.value_at(&["mcpServers", "cairn"]), Some(entry()));
        assert_eq!(again.value_at(&["mcpServers", "b"]), Some(json!(1)));
        let removed = again
            .remove(&["mcpServers", "cairn"], &|_| false)
            .expect("remove");
        assert_eq!(removed, "{\n  \"mcpServers\": {\n    \"b\": 1\n  }\n}");
    }

    #[test]
    fn arrays_push_replace_and_remove() {
        let original =
            "{\n  \"hooks\": {\n    \"SessionStart\": [\n      {\"x\": 1}\n    ]\n  }\n}";
        let doc = Doc::parse(original).expect("parse");
        let pushed = doc
            .push(&["hooks", "SessionStart"], &json!({"y": 2}))
            .expect("push");
        let d2 = Doc::parse(&pushed).expect("parse");
        assert_eq!(
            d2.value_at(&["hooks", "SessionStart"]),
            Some(json!([{"x": 1}, {"y": 2}]))
        );
        assert_eq!(
            d2.remove_item(&["hooks", "SessionStart"], 1, &|_| false)
                .as_deref(),
            Some(original)
        );
        let d1 = Doc::parse(original).expect("parse");
        let gone = d1
            .remove_item(&["hooks", "SessionStart"], 0, &|_| false)
            .expect("remove");
        assert_eq!(gone, "{}");
        let fresh = Doc::parse("{\"a\": 1}").expect("parse");
        let made = fresh
            .push(&["hooks", "SessionStart"], &json!({"y": 2}))
            .expect("push");
        assert_eq!(
            Doc::parse(&made).expect("parse").value_at(&["hooks"]),
            Some(json!({"SessionStart": [{"y": 2}]}))
        );
        assert_eq!(
            Doc::parse(&made)
                .expect("parse")
                .remove_item(&["hooks", "SessionStart"], 0, &|_| false)
                .as_deref(),
            Some("{\"a\": 1}")
        );
        let replaced = d2
            .replace_item(&["hooks", "SessionStart"], 1, &json!({"z": 3}))
            .expect("replace");
        assert_eq!(
            Doc::parse(&replaced)
                .expect("parse")
                .value_at(&["hooks", "SessionStart"]),
            Some(json!([{"x": 1}, {"z": 3}]))
        );
    }

    #[test]
    fn kept_parents_stay_even_when_left_empty() {
        let original = "{\n  \"mcp\": {}\n}\n";
        let doc = Doc::parse(original).expect("parse");
        let added = doc
            .set(&["mcp", "cairn"], &entry())
            .expect("set")
            .expect("change");
        let doc = Doc::parse(&added).expect("parse");
        let keep = |p: &[&str]| p == ["mcp"];
        assert_eq!(
            doc.remove(&["mcp", "cairn"], &keep).as_deref(),
            Some(original)
        );
        assert_eq!(
            doc.remove(&["mcp", "cairn"], &|_| false).as_deref(),
            Some("{}\n")
        );
    }

    #[test]
    fn malformed_files_and_wrong_shapes_are_refused() {
        for bad in [
            "{",
            "{\"a\": }",
            "{\"a\" 1}",
            "[1,2",
            "{\"a\": tru}",
            "{} {}",
            "/* open",
        ] {
            assert!(Doc::parse(bad).is_err(), "{bad}");
        }
        let e = Doc::parse("{\n  \"a\": 1,\n  oops\n}")
            .err()
            .expect("error");
        assert_eq!((e.line, e.column), (3, 3));
        let open = Doc::parse("{\n  \"a\": {\n").err().expect("error");
        assert_eq!((open.line, open.column), (3, 1), "{open}");
        assert!(open.what.contains("opened at line 2, column 8"), "{open}");
        let doc = Doc::parse("{\"mcpServers\": []}").expect("parse");
        assert!(matches!(
            doc.set(&["mcpServers", "cairn"], &entry()),
            Err(EditError::NotAnObject { .. })
        ));
        let doc = Doc::parse("[1]").expect("parse");
        assert!(matches!(
            doc.set(&["mcpServers", "cairn"], &entry()),
            Err(EditError::NotAnObject { .. })
        ));
    }
}
