//! Near-valid declarations: a seed from `seeds.txt` (its entry point on its first line) with
//! some of its integer literals replaced by boundary values, and some of its word values
//! (after `=` or `:`) by other keys' words. Input: two bytes pick the seed, then each pair of
//! bytes `a, b` replaces literal `a` (mod their count) by value `b` (mod the table), or, when
//! `b` is odd and `a` past 127, word `a` by word `b`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tma_fuzz::{run, Mode};

const SEEDS: &str = include_str!("../seeds.txt");

/// Boundaries of the fields' types and of the hardware rules.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "7",
    "8",
    "9",
    "15",
    "16",
    "17",
    "24",
    "31",
    "32",
    "33",
    "48",
    "63",
    "64",
    "65",
    "96",
    "127",
    "128",
    "129",
    "192",
    "255",
    "256",
    "257",
    "384",
    "511",
    "512",
    "513",
    "1023",
    "1024",
    "1025",
    "2047",
    "2048",
    "4095",
    "4096",
    "4097",
    "8192",
    "16384",
    "32768",
    "49152",
    "65535",
    "65536",
    "65537",
    "98304",
    "131072",
    "232448",
    "233472",
    "262144",
    "1048576",
    "16777216",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "4294967297",
    "8589934592",
    "1099511627776",
    "281474976710656",
    "9007199254740993",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "-1",
    "-2",
    "-8",
    "-128",
    "-129",
    "-32768",
    "-2147483648",
    "-2147483649",
    "0u8",
    "255u8",
    "256u8",
    "65535u16",
    "4294967295u32",
    "18446744073709551615u64",
    "1i32",
    "-1i32",
    "64usize",
    "0x40",
    "0b1",
    "1_000",
    "0o777",
    "1e3",
    "64.0",
];

/// Words the keys take (and some they refuse).
const WORDS: &[&str] = &[
    "_",
    "none",
    "zero",
    "nan",
    "bf16",
    "f16",
    "f32",
    "f64",
    "u8",
    "i8",
    "u16",
    "i16",
    "u32",
    "i32",
    "u64",
    "i64",
    "tf32",
    "e4m3",
    "e5m2",
    "sm_90a",
    "sm_100a",
    "sm_120a",
    "sm_80",
    "true",
    "false",
    "x",
    "y",
    "z",
    "a_k_major",
    "b_k_major",
    "a_mn_major",
    "b_mn_major",
    "\"\"",
    "\"_\"",
    "\"a_\"",
    "\"int\"",
    "r#fn",
    "__x",
    "threadIdx",
    "A",
    "a",
    "128b_atom_32b",
    "128b_atom_32b_flip_8b",
    "128b_atom_64b",
    "warps(0)",
    "warpgroups(3)",
    "threads(4294967295)",
    "per_consumer(0)",
    "[]",
    "[1, 1, 1, 1]",
    "[_, _]",
    "64",
];

/// Byte ranges of the words written as values: an identifier right after `= ` or `: `.
fn words(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let after_sep = {
            let mut k = i;
            while k > 0 && b[k - 1] == b' ' {
                k -= 1;
            }
            k > 0 && (b[k - 1] == b'=' || b[k - 1] == b':') && k != i
        };
        if after_sep && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            out.push((i, j));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

fn seeds() -> &'static [(Mode, String)] {
    static S: OnceLock<Vec<(Mode, String)>> = OnceLock::new();
    S.get_or_init(|| {
        SEEDS
            .split("\n=====\n")
            .filter_map(|e| {
                let (mode, text) = e.split_once('\n')?;
                let m = Mode::ALL[mode.trim().parse::<usize>().ok()? % Mode::ALL.len()];
                Some((m, text.to_string()))
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let seeds = seeds();
    if data.len() < 2 || seeds.is_empty() {
        return;
    }
    let (mode, seed) = &seeds[usize::from(u16::from_le_bytes([data[0], data[1]])) % seeds.len()];
    let mut text = seed.clone();
    for pair in data[2..].chunks_exact(2) {
        if pair[0] >= 128 && pair[1] % 2 == 1 {
            let ws = words(&text);
            if let Some(&(a, b)) = ws.get(usize::from(pair[0] - 128) % ws.len().max(1)) {
                text.replace_range(a..b, WORDS[usize::from(pair[1] / 2) % WORDS.len()]);
            }
            continue;
        }
        let lits = tma_test_support::testgen::integer_literals(&text);
        if lits.is_empty() {
            break;
        }
        let (a, b) = lits[usize::from(pair[0]) % lits.len()];
        let v = VALUES[usize::from(pair[1]) % VALUES.len()];
        text.replace_range(a..b, v);
    }
    run(*mode, &text);
});
