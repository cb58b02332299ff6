//! User text echoed in messages (a name, a value, a key): [`shown`] keeps at most
//! [`ECHO_CHARS`] characters of it and escapes control characters, so a huge or hostile
//! name neither floods a terminal nor breaks a message's lines. Every finding, parse error
//! and command-line message that repeats what a user wrote goes through it.

use std::fmt::Write;

/// How many characters of user text a message repeats.
pub const ECHO_CHARS: usize = 64;

/// `text` as a message repeats it: control characters escaped (`\n`, `\u{1b}`), and past
/// [`ECHO_CHARS`] characters cut, with `...` and the whole length:
/// `aaaa...aaaa... (10000 chars)`.
///
/// ```
/// use tma_core::echo::shown;
/// assert_eq!(shown("K"), "K");
/// assert_eq!(shown("a\nb"), "a\\nb");
/// let long = "x".repeat(1000);
/// assert_eq!(shown(&long), format!("{}... (1000 chars)", "x".repeat(64)));
/// ```
pub fn shown(text: &str) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    for c in text.chars() {
        count += 1;
        if count > ECHO_CHARS {
            continue;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    if count > ECHO_CHARS {
        let _ = write!(out, "... ({count} chars)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_long_text_is_cut_with_its_length() {
        assert_eq!(shown(""), "");
        assert_eq!(shown(&"é".repeat(ECHO_CHARS)), "é".repeat(ECHO_CHARS));
        assert_eq!(
            shown(&"é".repeat(ECHO_CHARS + 1)),
            format!("{}... ({} chars)", "é".repeat(ECHO_CHARS), ECHO_CHARS + 1)
        );
        assert_eq!(shown("a\u{1b}[31m\r"), "a\\u{1b}[31m\\r");
    }
}
