//! The `cairn` binary: parse arguments, run the command, map errors to exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Parsing starts no thread, so the heap can still be set up after it,
    // for the command at hand.
    let cli = match cairn::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    cairn::heap::settle(cli.command.heap_use());
    cairn::run_parsed(cli)
}
