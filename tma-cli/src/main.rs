//! `tma`: see the `tma_cli` library (`tma --help`).

fn main() {
    let outcome = tma_cli::run(std::env::args_os());
    std::process::exit(tma_cli::emit(&outcome));
}
