//! Gemini: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The gemini source.
pub struct Gemini;

impl Source for Gemini {
    fn agent(&self) -> &'static str {
        "gemini"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
