//! Projects a question names: "what did we fix in tzparse", "the web
//! shop's bundler", "infrastructure work" for a folder `infra`. A
//! project's name (the last part of its path, letters and digits only,
//! lower case) counts as said in every record of its sessions, so a
//! session of the named project covers that part of the question even
//! where its text never repeats the name.
//!
//! It only boosts what the words found; it never filters (`--project`
//! does) and adds no candidates of its own.

use rustc_hash::FxHashSet;

use super::query::is_stopword;
use crate::store::{Store, StoreError};

/// Shortest name that counts: "ui" or "db" would be named by accident.
const SHORTEST: usize = 3;

/// Projects compared with a question at most (one index seek each, about
/// a microsecond): a history of more folders than this has its first
/// ones, in path order, named.
const MOST_PROJECTS: usize = 2_000;

/// A project the question names.
pub(super) struct Named {
    /// The name as the question says it, joined ("web shop" → "webshop").
    pub(super) name: String,
    /// Its sessions' rows.
    pub(super) sessions: FxHashSet<i64>,
    /// Records in those sessions: how common the name is as a word.
    pub(super) records: i64,
}

/// A project path's name: the last part, letters and digits only, lower
/// case (`/home/dev/Web-Shop/` → `webshop`); `None` when too short.
fn name_of(path: &str) -> Option<String> {
    let last = path
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()?;
    let name = squeeze(last);
    (name.chars().count() >= SHORTEST && !is_stopword(&name)).then_some(name)
}

/// Letters and digits of `s`, lower case.
fn squeeze(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The names a question could be saying: each run of letters and digits
/// ("Ledger-API" is two), and each two neighbouring runs joined ("web
/// shop", "web-shop"), in lower case as [`name_of`] squeezes a path.
fn names_in(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(squeeze)
        .collect();
    let mut names: Vec<String> = words.clone();
    names.extend(words.windows(2).map(|w| format!("{}{}", w[0], w[1])));
    names.retain(|n| n.chars().count() >= SHORTEST && !is_stopword(n));
    names.sort();
    names.dedup();
    names
}

/// The projects of `store` that question `text` names, each with its
/// sessions: those of a folder with the name, and of the folders under it
/// (an agent started in `acme/web` works on `acme`). A name whose
/// sessions hold more than `most_records` says little (the home folder
/// holding every project) and is left out, without reading the rest.
pub(super) fn named(
    store: &Store,
    text: &str,
    most_records: i64,
) -> Result<Vec<Named>, StoreError> {
    let asked = names_in(text);
    if asked.is_empty() {
        return Ok(Vec::new());
    }
    let paths = store.project_paths(MOST_PROJECTS)?;
    let mut found: Vec<Named> = Vec::new();
    // Each named folder, with the index of its name in `found`.
    let mut folders: Vec<(String, usize)> = Vec::new();
    for path in &paths {
        let named = name_of(path).and_then(|n| said_as(&asked, &n));
        let under = folders.iter().find(|(f, _)| is_under(path, f)).map(|x| x.1);
        let slot = match (named, under) {
            // Inside a named folder: counted with it.
            (_, Some(slot)) => slot,
            (Some(name), None) => {
                // Several folders can have the same name (two clones).
                let slot = match found.iter().position(|n| n.name == name) {
                    Some(slot) => slot,
                    None => {
                        found.push(Named {
                            name,
                            sessions: FxHashSet::default(),
                            records: 0,
                        });
                        found.len() - 1
                    }
                };
                folders.push((path.clone(), slot));
                slot
            }
            (None, None) => continue,
        };
        let n = &mut found[slot];
        if n.records > most_records {
            continue;
        }
        let (sessions, records) = store.project_sessions(path)?;
        n.sessions.extend(sessions);
        n.records += records;
    }
    found.retain(|n| n.records <= most_records);
    Ok(found)
}

/// Shortest name a longer word of the question also says: "infra" is
/// said by "infrastructure", "ledger" by "ledgers"; shorter ones ("acme",
/// "docs") only as themselves.
const SHORTEST_ABBREVIATION: usize = 5;

/// How question `asked` (sorted) says project name `name`: the word
/// itself, or else a longer word it begins ([`SHORTEST_ABBREVIATION`]).
fn said_as(asked: &[String], name: &str) -> Option<String> {
    // The words beginning with `name` sort from where it would stand, the
    // name itself first when the question says it.
    let from = asked.partition_point(|a| a.as_str() < name);
    let word = asked.get(from).filter(|a| a.starts_with(name))?;
    (word == name || name.chars().count() >= SHORTEST_ABBREVIATION).then(|| word.clone())
}

/// Whether folder `path` lies inside folder `folder`.
fn is_under(path: &str, folder: &str) -> bool {
    let folder = folder.trim_end_matches(['/', '\\']);
    path.strip_prefix(folder)
        .is_some_and(|rest| rest.starts_with(['/', '\\']) && rest.len() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_named_by_its_last_part_squeezed() {
        assert_eq!(name_of("/home/dev/tzparse").as_deref(), Some("tzparse"));
        assert_eq!(name_of("/home/dev/Web-Shop/").as_deref(), Some("webshop"));
        assert_eq!(name_of(r"C:\src\my_app").as_deref(), Some("myapp"));
        // Too short, or a word every question has.
        assert_eq!(name_of("/srv/ui"), None);
        assert_eq!(name_of("/home/dev/the"), None);
        assert_eq!(name_of("/"), None);
    }

    #[test]
    fn a_folder_holds_the_folders_under_it_only() {
        assert!(is_under("/src/acme/web", "/src/acme"));
        assert!(is_under("/src/acme/web", "/src/acme/"));
        assert!(is_under(r"C:\src\acme\web", r"C:\src\acme"));
        assert!(!is_under("/src/acme-web", "/src/acme"));
        assert!(!is_under("/src/acme", "/src/acme"));
        assert!(!is_under("/src/acme/", "/src/acme"));
    }

    #[test]
    fn a_longer_word_says_a_name_of_five_letters_or_more() {
        let asked = names_in("what infrastructure work happened in the acmeweb ledgers");
        let said = |name: &str| said_as(&asked, name);
        assert_eq!(said("infra").as_deref(), Some("infrastructure"));
        assert_eq!(said("ledger").as_deref(), Some("ledgers"));
        // A name said as itself stays itself.
        assert_eq!(said("work").as_deref(), Some("work"));
        // Four letters only as themselves ("acmeweb" does not say "acme"),
        // a name longer than the word is not said by it, nor one the
        // question's words do not begin with.
        assert_eq!(said("acme"), None);
        assert_eq!(said("infrastructures"), None);
        assert_eq!(said("structure"), None);
    }

    #[test]
    fn a_question_names_words_and_pairs_of_words() {
        let names = names_in("Which bundler does the web shop use?");
        for want in ["webshop", "bundler", "shop", "web"] {
            assert!(names.contains(&want.to_string()), "{want} in {names:?}");
        }
        assert!(!names.contains(&"the".to_string()));
        let names = names_in("Warum hängt die Ledger-API?");
        for want in ["ledger", "api", "ledgerapi", "hängt"] {
            assert!(names.contains(&want.to_string()), "{want} in {names:?}");
        }
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
    }
}
