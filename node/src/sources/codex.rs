//! Codex: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The codex source.
pub struct Codex;

impl Source for Codex {
    fn agent(&self) -> &'static str {
        "codex"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
