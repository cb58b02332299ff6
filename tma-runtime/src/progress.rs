//! Progress bars on stderr (indicatif), drawn only when stderr is a terminal: a log file or
//! CI output gets nothing from them.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps labelled `what`; hidden unless stderr is a terminal.
pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    bar_if(std::io::stderr().is_terminal(), len, what)
}

/// A bar drawn on stderr when `visible`, else a hidden one (every call on it does nothing).
pub(crate) fn bar_if(visible: bool, len: u64, what: &str) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_unless_visible() {
        assert!(bar_if(false, 3, "compiling").is_hidden());
        // Under CI (no terminal) the automatic choice is quiet as well.
        if !std::io::stderr().is_terminal() {
            assert!(bar(3, "compiling").is_hidden());
        }
    }
}
