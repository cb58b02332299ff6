//! Text fuzzing: byte 0 picks the entry point ([`tma_fuzz::Mode`]), the rest is the text.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tma_fuzz::{run, Mode};

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    run(Mode::ALL[usize::from(m) % Mode::ALL.len()], text);
});
