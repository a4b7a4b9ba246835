//! Aider: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The aider source.
pub struct Aider;

impl Source for Aider {
    fn agent(&self) -> &'static str {
        "aider"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
