//! End-to-end tests: the real `cairn` binary against a temporary `$HOME`
//! seeded with the fixtures under `fixtures/home`.

#[path = "../netns/nat_hub.rs"]
mod nat_hub;
mod util;

mod agents;
mod cli;
mod conformance;
mod derived;
mod discovery;
mod docs;
mod forget;
mod handoff;
mod hook;
mod install;
mod mcp;
mod not_understood;
mod pairing;
#[cfg(unix)]
mod privacy;
mod project_stores;
#[cfg(unix)]
mod realresume;
mod search;
mod secrets;
mod semantic;
mod service;
mod startup;
mod sync;
mod ui;
mod ui_browser;
#[cfg(unix)]
mod unreadable;
mod wiring;
