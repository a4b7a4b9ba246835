//! Cursor: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The cursor source.
pub struct Cursor;

impl Source for Cursor {
    fn agent(&self) -> &'static str {
        "cursor"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
