//! Pi: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The pi source.
pub struct Pi;

impl Source for Pi {
    fn agent(&self) -> &'static str {
        "pi"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
