//! The `cairn` binary: parse arguments, run the command, map errors to exit codes.

use std::process::ExitCode;

mod heap;

fn main() -> ExitCode {
    heap::settle();
    cairn::run(std::env::args_os())
}
