//! Format-preserving edits of TOML configs (Codex's `config.toml`) with
//! `toml_edit`: only the `[mcp_servers.cairn]` table is touched.

use toml_edit::{Array, DocumentMut, Item, Table, value};

/// Why a TOML config could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TomlError {
    /// The file is not TOML.
    #[error("not valid TOML: {0}")]
    Parse(String),
    /// `[mcp_servers]` is there but not a table.
    #[error("expected `{0}` to be a table, found something else; edit it by hand")]
    NotATable(String),
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
    let Some(s) = t.get(name).and_then(Item::as_table_like) else {
        return Ok(None);
    };
    let command = s
        .get("command")
        .and_then(Item::as_str)
        .unwrap_or_default()
        .to_owned();
    let args = s
        .get("args")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Some((command, args)))
}

/// Adds (or updates) `[parent.name]` with `command` and `args`; `None` when already so.
pub fn set_server(
    text: &str,
    parent: &str,
    name: &str,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, TomlError> {
    if let Some((c, a)) = server(text, parent, name)?
        && c == command
        && a.iter().map(String::as_str).eq(args.iter().copied())
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    const BIN: &str = "/opt/bin/cairn";

    fn round_trip(original: &str) -> String {
        let added = set_server(original, "mcp_servers", "cairn", BIN, &["mcp"])
            .expect("set")
            .expect("a change");
        assert_eq!(
            server(&added, "mcp_servers", "cairn").expect("parse"),
            Some((BIN.to_owned(), vec!["mcp".to_owned()]))
        );
        assert_eq!(
            set_server(&added, "mcp_servers", "cairn", BIN, &["mcp"]).expect("set"),
            None
        );
        let removed = remove_server(&added, "mcp_servers", "cairn")
            .expect("remove")
            .expect("a change");
        assert_eq!(removed, original);
        added
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
