//! Notes: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The notes source.
pub struct Notes;

impl Source for Notes {
    fn agent(&self) -> &'static str {
        "notes"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
