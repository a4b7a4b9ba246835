//! Format-preserving edits of TOML configs with `toml_edit`: only cairn's
//! entry is touched, a table `[mcp_servers.cairn]` (Codex's `config.toml`)
//! or the item named `cairn` of an array `[[mcp_servers]]` (Mistral
//! Vibe's, which also reads the array written inline).

use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value, value};

/// Why a TOML config could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TomlError {
    /// The file is not TOML.
    #[error("not valid TOML: {0}")]
    Parse(String),
    /// `[mcp_servers]` is there but not a table.
    #[error("expected `{0}` to be a table, found something else; edit it by hand")]
    NotATable(String),
    /// `mcp_servers` is there but not an array of tables.
    #[error("expected `{0}` to be an array of tables, found something else; edit it by hand")]
    NotAnArray(String),
}

fn parse(text: &str) -> Result<DocumentMut, TomlError> {
    text.parse::<DocumentMut>()
        .map_err(|e| TomlError::Parse(e.to_string().trim().replace('\n', " ")))
}

/// The `command` and `args` of server `name` under `parent`, if present.
pub fn server(
    text: &str,
    parent: &str,
    name: &str,
) -> Result<Option<(String, Vec<String>)>, TomlError> {
    let doc = parse(text)?;
    let Some(t) = doc.get(parent).and_then(Item::as_table_like) else {
        return Ok(None);
    };
    Ok(t.get(name)
        .and_then(Item::as_table_like)
        .map(command_and_args))
}

/// Adds (or updates) `[parent.name]` with `command` and `args`; `None` when already so.
pub fn set_server(
    text: &str,
    parent: &str,
    name: &str,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, TomlError> {
    if runs(server(text, parent, name)?, command, args) {
        return Ok(None);
    }
    let mut doc = parse(text)?;
    if !doc.contains_key(parent) {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert(parent, Item::Table(t));
    }
    let servers = doc
        .get_mut(parent)
        .and_then(Item::as_table_mut)
        .ok_or_else(|| TomlError::NotATable(parent.to_owned()))?;
    let mut arr = Array::new();
    for a in args {
        arr.push(*a);
    }
    match servers.get_mut(name).and_then(Item::as_table_mut) {
        Some(existing) => {
            existing.insert("command", value(command));
            existing.insert("args", value(arr));
        }
        None => {
            let mut t = Table::new();
            t.insert("command", value(command));
            t.insert("args", value(arr));
            servers.insert(name, Item::Table(t));
        }
    }
    Ok(Some(doc.to_string()))
}

/// Removes `[parent.name]` (and `[parent]` when it was only implied by it); `None` when absent.
pub fn remove_server(text: &str, parent: &str, name: &str) -> Result<Option<String>, TomlError> {
    if server(text, parent, name)?.is_none() {
        return Ok(None);
    }
    let mut doc = parse(text)?;
    let Some(servers) = doc.get_mut(parent).and_then(Item::as_table_mut) else {
        return Err(TomlError::NotATable(parent.to_owned()));
    };
    servers.remove(name);
    if servers.is_empty() && servers.is_implicit() {
        doc.remove(parent);
    }
    Ok(Some(doc.to_string()))
}

/// Whether a server entry found (its command and args) runs `command`
/// with `args`.
fn runs(found: Option<(String, Vec<String>)>, command: &str, args: &[&str]) -> bool {
    found
        .is_some_and(|(c, a)| c == command && a.iter().map(String::as_str).eq(args.iter().copied()))
}

/// The `command` and `args` of a server table or inline table.
fn command_and_args(s: &dyn toml_edit::TableLike) -> (String, Vec<String>) {
    let command = s.get("command").and_then(Item::as_str).unwrap_or_default();
    let args = s
        .get("args")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (command.to_owned(), args)
}

fn is_named(t: &dyn toml_edit::TableLike, name: &str) -> bool {
    t.get("name").and_then(Item::as_str) == Some(name)
}

/// The `command` and `args` of the item named `name` in the array of
/// tables `key`, if present.
pub fn listed_server(
    text: &str,
    key: &str,
    name: &str,
) -> Result<Option<(String, Vec<String>)>, TomlError> {
    let doc = parse(text)?;
    Ok(match doc.get(key) {
        Some(Item::ArrayOfTables(a)) => a
            .iter()
            .find(|t| is_named(*t, name))
            .map(|t| command_and_args(t)),
        Some(Item::Value(Value::Array(a))) => a
            .iter()
            .filter_map(Value::as_inline_table)
            .find(|t| is_named(*t, name))
            .map(|t| command_and_args(t)),
        _ => None,
    })
}

/// Adds (or updates) the stdio server `name` running `command` with
/// `args` in the array of tables `key`; `None` when already so.
pub fn set_listed_server(
    text: &str,
    key: &str,
    name: &str,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, TomlError> {
    if runs(listed_server(text, key, name)?, command, args) {
        return Ok(None);
    }
    let mut doc = parse(text)?;
    let args: Array = args.iter().copied().collect();
    let fill = |t: &mut dyn toml_edit::TableLike| {
        t.insert("name", value(name));
        t.insert("transport", value("stdio"));
        t.insert("command", value(command));
        t.insert("args", value(args.clone()));
    };
    match doc.get_mut(key) {
        None => {
            let mut t = Table::new();
            fill(&mut t);
            let mut list = ArrayOfTables::new();
            list.push(t);
            doc.insert(key, Item::ArrayOfTables(list));
        }
        Some(Item::ArrayOfTables(list)) => {
            let at = list.iter().position(|t| is_named(t, name));
            match at {
                Some(i) => fill(list.get_mut(i).expect("found")),
                None => {
                    let mut t = Table::new();
                    fill(&mut t);
                    list.push(t);
                }
            }
        }
        Some(Item::Value(Value::Array(list))) => {
            let found = list
                .iter()
                .position(|v| v.as_inline_table().is_some_and(|t| is_named(t, name)));
            match found.and_then(|i| list.get_mut(i)?.as_inline_table_mut()) {
                Some(t) => fill(t),
                None => {
                    let mut t = InlineTable::new();
                    fill(&mut t);
                    list.push(t);
                }
            }
        }
        Some(_) => return Err(TomlError::NotAnArray(key.to_owned())),
    }
    Ok(Some(doc.to_string()))
}

/// Removes the item named `name` from the array of tables `key` (and
/// the array when a table array held only it); `None` when absent.
pub fn remove_listed_server(
    text: &str,
    key: &str,
    name: &str,
) -> Result<Option<String>, TomlError> {
    if listed_server(text, key, name)?.is_none() {
        return Ok(None);
    }
    let mut doc = parse(text)?;
    match doc.get_mut(key) {
        Some(Item::ArrayOfTables(list)) => {
            list.retain(|t| !is_named(t, name));
            if list.is_empty() {
                doc.remove(key);
            }
        }
        Some(Item::Value(Value::Array(list))) => {
            list.retain(|v| !v.as_inline_table().is_some_and(|t| is_named(t, name)));
        }
        _ => return Err(TomlError::NotAnArray(key.to_owned())),
    }
    Ok(Some(doc.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/opt/bin/cairn";

    type Get = fn(&str, &str, &str) -> Result<Option<(String, Vec<String>)>, TomlError>;
    type Set = fn(&str, &str, &str, &str, &[&str]) -> Result<Option<String>, TomlError>;
    type Remove = fn(&str, &str, &str) -> Result<Option<String>, TomlError>;
    /// The table form (`[mcp_servers.cairn]`) and the listed one (`[[mcp_servers]]`).
    const TABLE: (Get, Set, Remove) = (server, set_server, remove_server);
    const LISTED: (Get, Set, Remove) = (listed_server, set_listed_server, remove_listed_server);

    /// Adds cairn's entry in one form, checks it reads back and that a
    /// second add changes nothing, removes it and gets `original` back.
    fn round_trip_in((get, set, remove): (Get, Set, Remove), original: &str) -> String {
        let added = set(original, "mcp_servers", "cairn", BIN, &["mcp"])
            .expect("set")
            .expect("a change");
        assert_eq!(
            get(&added, "mcp_servers", "cairn").expect("parse"),
            Some((BIN.to_owned(), vec!["mcp".to_owned()]))
        );
        assert_eq!(
            set(&added, "mcp_servers", "cairn", BIN, &["mcp"]).expect("set"),
            None
        );
        let removed = remove(&added, "mcp_servers", "cairn")
            .expect("remove")
            .expect("a change");
        assert_eq!(removed, original);
        added
    }

    fn round_trip(original: &str) -> String {
        round_trip_in(TABLE, original)
    }

    #[test]
    fn codex_config_round_trips_byte_for_byte() {
        let original = "# my codex config\nmodel = \"o4\"   # keep this comment\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [ \"--port\", \"0\" ]\n\n[profiles.fast]\nmodel = \"mini\"\n";
        let added = round_trip(original);
        assert!(
            added.contains("[mcp_servers.cairn]\ncommand = \"/opt/bin/cairn\"\nargs = [\"mcp\"]"),
            "{added}"
        );
        assert!(added.starts_with("# my codex config\nmodel = \"o4\"   # keep this comment\n"));
        round_trip("model = \"o4\"\n");
        round_trip("");
    }

    #[test]
    fn bad_toml_and_wrong_shapes_are_refused() {
        assert!(matches!(
            set_server("model = ", "mcp_servers", "cairn", BIN, &["mcp"]),
            Err(TomlError::Parse(_))
        ));
        assert!(matches!(
            set_server("mcp_servers = 3\n", "mcp_servers", "cairn", BIN, &["mcp"]),
            Err(TomlError::NotATable(_))
        ));
    }

    fn listed_round_trip(original: &str) -> String {
        round_trip_in(LISTED, original)
    }

    #[test]
    fn vibe_config_gets_an_item_of_its_server_array_and_loses_it_again() {
        let original = "# vibe\nactive_model = \"devstral\"  # mine\n\n[[mcp_servers]]\nname = \"docs\"\ntransport = \"stdio\"\ncommand = \"docs-mcp\"\n\n[[models]]\nname = \"m\"\n";
        let added = listed_round_trip(original);
        assert!(
            added.contains("[[mcp_servers]]\nname = \"cairn\"\ntransport = \"stdio\"\ncommand = \"/opt/bin/cairn\"\nargs = [\"mcp\"]"),
            "{added}"
        );
        assert!(added.starts_with("# vibe\nactive_model = \"devstral\"  # mine\n"));
        assert!(added.contains("name = \"docs\""), "{added}");
        listed_round_trip("active_model = \"x\"\n");
        listed_round_trip("");
        // Written inline (as Vibe's own writer leaves an empty list).
        let inline = listed_round_trip("mcp_servers = []\n");
        assert!(inline.contains("name = \"cairn\""), "{inline}");
        // A moved binary is updated in place; the user's other keys stay.
        let old = "[[mcp_servers]]\nname = \"cairn\"\ntransport = \"stdio\"\ncommand = \"/old/cairn\"\nargs = [\"mcp\"]\ntool_timeout_sec = 90\n";
        let moved = set_listed_server(old, "mcp_servers", "cairn", BIN, &["mcp"])
            .expect("set")
            .expect("change");
        assert!(moved.contains("command = \"/opt/bin/cairn\""), "{moved}");
        assert!(moved.contains("tool_timeout_sec = 90"), "{moved}");
        assert_eq!(moved.matches("[[mcp_servers]]").count(), 1, "{moved}");
        // Other shapes are refused, the text untouched.
        assert!(matches!(
            set_listed_server("mcp_servers = 3\n", "mcp_servers", "cairn", BIN, &["mcp"]),
            Err(TomlError::NotAnArray(_))
        ));
        assert!(matches!(
            set_listed_server("[mcp_servers]\n", "mcp_servers", "cairn", BIN, &["mcp"]),
            Err(TomlError::NotAnArray(_))
        ));
    }

    #[test]
    fn a_moved_binary_is_updated_in_place() {
        let original = "[mcp_servers.cairn]\ncommand = \"/old/cairn\"\nargs = [\"mcp\"]\nstartup_timeout_sec = 20\n";
        let text = set_server(original, "mcp_servers", "cairn", BIN, &["mcp"])
            .expect("set")
            .expect("change");
        assert!(text.contains("command = \"/opt/bin/cairn\""), "{text}");
        assert!(text.contains("startup_timeout_sec = 20"), "{text}");
    }
}
