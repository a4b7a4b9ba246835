//! The module layering of `cairn-node`, checked from the source text.
//!
//! Reads every `node/src/**.rs`, collects the `crate::x` and root-reaching
//! `super::x` paths of each top-level module (test code left out: tests may
//! reach up to check what they test), and checks the resulting graph:
//! no import loop between top-level modules, and every import goes to a
//! lower layer of [`LAYERS`], the table ARCHITECTURE.md documents.
//!
//! It reads text, not the compiler's view: `super::` is resolved from the
//! file's place, so inside an inline `mod x { ... }` block name siblings
//! with `crate::` paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, lowest first. A module imports only from layers below its own;
/// a module missing from this table fails the test, so a new module is
/// placed (and documented in ARCHITECTURE.md) when it is added.
const LAYERS: &[&[&str]] = &[
    // Plain data and helpers with no other module below them.
    &[
        "record", "home", "lock", "clock", "hex", "text", "embed", "pathmap",
    ],
    // Secret scrubbing (pure), the node's key pair and signing with it
    // (seals).
    &["redact", "identity", "seal"],
    // Reading the agents' histories.
    &["sources"],
    // Where the per-project stores are, found without configuration.
    &["projects"],
    // Settings (which sources, where) and the database.
    &["config", "store"],
    // What is built on the store: indexing, search and handoff briefs.
    &["indexer", "search", "handoff"],
    // The node: the façade over store, indexer and search.
    &["node"],
    // Replication, which drives a shared node (and its own façade,
    // `sync::facade`, for the CLI).
    &["sync"],
    // The `cairn serve` daemon: the index loop, the watch, the search
    // socket and the sync service around one shared node.
    &["daemon"],
    // Front ends served from the library.
    &["mcp", "ui"],
];

/// Imports that break the layering today, each with the work that removes
/// it. The test fails when one of them is gone, so the list only shrinks.
const PENDING: &[(&str, &str, &str)] = &[];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read node/src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `store/mod.rs` is `[store]`, `store/fts.rs`
/// is `[store, fts]`, `lib.rs` is `[]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The source without test code and line comments.
fn non_test_code(file_name: &str, text: &str) -> String {
    if file_name == "tests.rs" || file_name.ends_with("_tests.rs") {
        return String::new();
    }
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            // Test modules sit at the end of a file, by the house style.
            break;
        }
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segments after `at` (just past a `::`): one identifier,
/// or each item's first identifier in a `{a::b, c}` group.
fn first_segments(code: &str, at: usize) -> Vec<String> {
    let rest = &code[at..];
    if let Some(group) = rest.strip_prefix('{') {
        let mut out = Vec::new();
        let mut depth = 0usize;
        let mut item_start = true;
        let mut chars = group.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => item_start = true,
                c if item_start && depth == 0 && is_ident(c) => {
                    let end = group[i..]
                        .find(|c: char| !is_ident(c))
                        .map_or(group.len(), |e| i + e);
                    out.push(group[i..end].to_owned());
                    item_start = false;
                    while chars.peek().is_some_and(|&(j, _)| j < end) {
                        chars.next();
                    }
                }
                _ => {}
            }
        }
        return out;
    }
    let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
    if end == 0 {
        Vec::new()
    } else {
        vec![rest[..end].to_owned()]
    }
}

/// Top-level modules that the code of module `path` names.
fn imports(path: &[String], code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && code[..i].ends_with(|c: char| is_ident(c) || c == ':') {
            continue; // `cairn_node::crate::`-like or `$crate::` never occur; be strict anyway.
        }
        out.extend(first_segments(code, i + "crate::".len()));
    }
    for (i, _) in code.match_indices("super::") {
        if i > 0 && code[..i].ends_with(|c: char| is_ident(c) || c == ':') {
            continue; // the middle of a `super::super::` chain
        }
        let mut at = i;
        let mut ups = 0;
        while code[at..].starts_with("super::") {
            at += "super::".len();
            ups += 1;
        }
        if ups == path.len() {
            out.extend(first_segments(code, at));
        }
    }
    out
}

/// Edges between top-level modules, each with the files that make it.
fn graph() -> BTreeMap<(String, String), BTreeSet<String>> {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 20, "node/src not found at {}", root.display());
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&root).expect("under src").to_path_buf();
        let path = module_path(&rel);
        let Some(top) = path.first() else { continue };
        let name = rel.file_name().expect("file name").to_string_lossy();
        let text = std::fs::read_to_string(&file).expect("read source");
        let code = non_test_code(&name, &text);
        for to in imports(&path, &code) {
            if &to != top {
                edges
                    .entry((top.clone(), to))
                    .or_default()
                    .insert(rel.display().to_string());
            }
        }
    }
    edges
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn pending(from: &str, to: &str) -> bool {
    PENDING.iter().any(|&(f, t, _)| f == from && t == to)
}

#[test]
fn the_parser_sees_grouped_and_super_paths() {
    let path = vec!["store".to_owned(), "fts".to_owned()];
    let code = "use crate::{record::Role, text::{index_form, tokens}};\n\
                use super::super::embed::Model;\nuse super::schema;\n";
    let got: Vec<String> = imports(&path, code).into_iter().collect();
    assert_eq!(got, ["embed", "record", "text"]);
    let cut = non_test_code(
        "x.rs",
        "use crate::a; // crate::b\n#[cfg(test)]\nmod tests {\n use crate::c;\n}\n",
    );
    let got: Vec<String> = imports(&["x".to_owned()], &cut).into_iter().collect();
    assert_eq!(got, ["a"]);
}

#[test]
fn no_import_loops_between_top_level_modules() {
    let edges = graph();
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if !pending(from, to) {
            next.entry(from).or_default().push(to);
        }
    }
    // Depth-first search for a back edge; report the loop it closes.
    fn visit<'a>(
        m: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(i) = stack.iter().position(|s| *s == m) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(m);
            return Some(cycle);
        }
        if !done.insert(m) {
            return None;
        }
        stack.push(m);
        for to in next.get(m).into_iter().flatten() {
            if let Some(c) = visit(to, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for m in next.keys() {
        if let Some(cycle) = visit(m, &next, &mut Vec::new(), &mut done) {
            let files: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let key = (w[0].to_owned(), w[1].to_owned());
                    format!("{} -> {} ({:?})", w[0], w[1], edges[&key])
                })
                .collect();
            panic!("import loop: {}\n{}", cycle.join(" -> "), files.join("\n"));
        }
    }
}

#[test]
fn every_import_goes_down_a_layer() {
    let edges = graph();
    let mut wrong = Vec::new();
    for ((from, to), files) in &edges {
        let (Some(f), Some(t)) = (layer_of(from), layer_of(to)) else {
            wrong.push(format!(
                "{from} -> {to}: a module missing from LAYERS (place it there and in ARCHITECTURE.md)"
            ));
            continue;
        };
        if t >= f && !pending(from, to) {
            wrong.push(format!(
                "{from} (layer {f}) -> {to} (layer {t}) in {files:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
    for &(from, to, work) in PENDING {
        assert!(
            edges.contains_key(&(from.to_owned(), to.to_owned())),
            "{from} -> {to} is gone ({work}): remove it from PENDING"
        );
    }
}

#[test]
fn every_module_is_placed_in_a_layer() {
    let mut top = BTreeSet::new();
    for entry in std::fs::read_dir(src_dir()).expect("read node/src") {
        let p = entry.expect("dir entry").path();
        let name = p.file_stem().expect("name").to_string_lossy().into_owned();
        if name != "lib" && (p.is_dir() || p.extension().is_some_and(|e| e == "rs")) {
            top.insert(name);
        }
    }
    let missing: Vec<&String> = top.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(missing.is_empty(), "modules not in LAYERS: {missing:?}");
    for layer in LAYERS {
        for m in *layer {
            assert!(top.contains(*m), "LAYERS names {m}, which is not a module");
        }
    }
}

/// `sync` is what the daemon uses; it never reaches back into it (the
/// layering implies it, this names it).
#[test]
fn sync_never_imports_the_daemon() {
    let edges = graph();
    let back = edges.get(&("sync".to_owned(), "daemon".to_owned()));
    assert!(back.is_none(), "sync imports daemon in {back:?}");
}

/// The daemon's search socket (its wire, its client for the CLI and MCP,
/// its server) uses nothing else of the daemon: the CLI links its client
/// without the index loop, the watch or the instance files.
#[test]
fn the_search_socket_uses_nothing_else_of_the_daemon() {
    let root = src_dir();
    let dir = root.join("daemon").join("search_socket");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(!files.is_empty(), "no {}", dir.display());
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).expect("under src");
        let path = module_path(rel);
        let name = rel.file_name().expect("file name").to_string_lossy();
        let text = std::fs::read_to_string(&file).expect("read source");
        let code = non_test_code(&name, &text);
        // `crate::daemon::x` and `super::...::x` reaching `daemon` name x.
        let mut named: Vec<String> = code
            .match_indices("crate::daemon::")
            .flat_map(|(i, m)| first_segments(&code, i + m.len()))
            .collect();
        let ups = path.len() - 1;
        let chain = "super::".repeat(ups);
        for (i, _) in code.match_indices(&chain) {
            let whole =
                !code[..i].ends_with(':') && !code[i + chain.len()..].starts_with("super::");
            if whole {
                named.extend(first_segments(&code, i + chain.len()));
            }
        }
        for n in named.into_iter().filter(|n| n != "search_socket") {
            wrong.push(format!("{} names daemon::{n}", rel.display()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
