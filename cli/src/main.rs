//! The `cairn` binary: parse arguments, run the command, map errors to exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    cairn::run(std::env::args_os())
}
