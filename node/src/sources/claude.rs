//! ClaudeCode: not implemented yet (placeholder so the registry compiles).

use super::{Locations, Source, SourceFile};

/// The claude-code source.
pub struct ClaudeCode;

impl Source for ClaudeCode {
    fn agent(&self) -> &'static str {
        "claude-code"
    }

    fn discover(&self, _loc: &Locations) -> Vec<SourceFile> {
        Vec::new()
    }
}
