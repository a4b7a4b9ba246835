//! Copilot: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The copilot source.
pub struct Copilot;

impl Source for Copilot {
    fn agent(&self) -> &'static str {
        "copilot"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
