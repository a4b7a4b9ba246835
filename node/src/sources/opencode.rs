//! OpenCode: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The opencode source.
pub struct OpenCode;

impl Source for OpenCode {
    fn agent(&self) -> &'static str {
        "opencode"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
