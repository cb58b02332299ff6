//! Every accepted declaration compiles. Random translation units of accepted declarations
//! (`tma_test_support::testgen::random_unit`: tiles of every rank with run-time dims and strides, tile
//! sets, aliases, pipelines with multicast and every consumer kind, warp roles of warpgroups
//! or warps with named barriers (per consumer too), kernel plans with staging and scratch
//! regions, wgmma operand pairs), their names drawn near what the generated code already
//! calls by name (`half`, `BOX_x`, `x_map`, `TMA_..`, prefixes of helpers, long ones): each
//! unit's source, with a body using every declaration, goes through NVRTC with and without
//! `TMA_DEBUG`, and the header of all their tiles through nvcc with and without Mirage MPK's
//! names (debug and release). A name the checks let through that breaks generated code fails
//! here with the seed, the compiler's words and the names.
//!
//! Runs without a GPU; with `CI=true` (or `TMA_REQUIRE_NVRTC` / `TMA_REQUIRE_NVCC`) a missing
//! NVRTC or nvcc is a failure, not a skip. `eval "$(scripts/cuda-tools.sh --headers)"`
//! installs both. About 8 NVRTC and 4 nvcc compiles (cached NVRTC results are reused).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use tma::render::{header_with, HeaderOptions};
use tma::runtime::{CompileOptions, Compiler, Error};
use tma::Arch;
use tma_test_support::nvcc::nvcc_with_headers;
use tma_test_support::skip::require_nvrtc_or_skip;
use tma_test_support::testgen::{name_pools, random_unit, RandomUnit, Taken, XorShift};

/// Seeds, and the parts of each unit: one translation unit per seed. `TMA_NAME_SEEDS=<n>` (and
/// `TMA_NAME_SEED0=<first>`) runs more, for a soak.
const SEEDS: u64 = 4;
const PARTS: usize = 6;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The units, all names distinct across them (one header holds every tile).
fn units() -> Vec<(u64, RandomUnit)> {
    let pools = name_pools();
    let mut taken = Taken::default();
    let first = env_u64("TMA_NAME_SEED0", 0);
    (first..first + env_u64("TMA_NAME_SEEDS", SEEDS))
        .map(|seed| {
            let mut rng = XorShift::new(0x6e61_6d65 + seed);
            (seed, random_unit(&mut rng, &pools, &mut taken, PARTS))
        })
        .collect()
}

/// The first errors of a compiler log (`<file>(<line>): error: ..`), each with its source
/// line: the generated code and the user name in it.
fn errors_at(log: &str, src: &str) -> String {
    let lines: Vec<&str> = src.lines().collect();
    log.lines()
        .filter(|l| l.contains("error"))
        .take(8)
        .map(|l| {
            // NVRTC and cicc say `file(12): error`, the host compiler `file:12:3: error`.
            let paren = l
                .split_once('(')
                .and_then(|(_, r)| r.split_once(')'))
                .and_then(|(n, _)| n.parse::<usize>().ok());
            let colon = || l.split(':').nth(1).and_then(|n| n.parse::<usize>().ok());
            let at = paren
                .or_else(colon)
                .and_then(|n| lines.get(n.wrapping_sub(1)));
            match at {
                Some(code) => format!("{l}\n    | {}", code.trim()),
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_accepted_declaration_compiles_under_nvrtc() {
    let test = "every_accepted_declaration_compiles_under_nvrtc";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    let units = units();
    let refused: usize = units.iter().map(|(_, u)| u.refused).sum();
    let jobs: Vec<(u64, String, bool, &RandomUnit)> = units
        .iter()
        .flat_map(|(seed, unit)| {
            let src = unit
                .source
                .build()
                .unwrap_or_else(|e| panic!("seed {seed}: an accepted unit did not render: {e}"));
            [false, true].map(|debug| (*seed, src.clone(), debug, unit))
        })
        .collect();
    // Two at a time: NVRTC compiles are independent.
    let compiler = &compiler;
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(jobs.len().div_ceil(2))
            .map(|chunk| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for (seed, src, debug, unit) in chunk {
                        let opts = CompileOptions::new(Arch::Sm90a).debug_waits(*debug);
                        match compiler.compile(src, &opts) {
                            Ok(c) => assert!(!c.ptx.is_empty()),
                            Err(Error::Compile { log, .. }) => out.push(format!(
                                "seed {seed}, TMA_DEBUG {debug}: NVRTC refused an accepted unit ({} names):\n{}",
                                unit.names.len(),
                                errors_at(&log, src)
                            )),
                            Err(other) => out.push(format!("seed {seed}, TMA_DEBUG {debug}: {other}")),
                        }
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!(
        "{} units ({} names, {refused} draws refused) compiled with and without TMA_DEBUG",
        units.len(),
        units.iter().map(|(_, u)| u.names.len()).sum::<usize>()
    );
}

#[test]
fn every_accepted_tile_builds_in_a_header_with_nvcc() {
    let test = "every_accepted_tile_builds_in_a_header_with_nvcc";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let units = units();
    let tiles: Vec<_> = units.iter().flat_map(|(_, u)| u.tiles.clone()).collect();
    let dir = std::env::temp_dir().join(format!("tma-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for mpk in [false, true] {
        let header = header_with(&tiles, HeaderOptions { mpk })
            .unwrap_or_else(|e| panic!("accepted tiles gave no header: {e}"));
        let h = format!("tiles_{mpk}.cuh");
        std::fs::write(dir.join(&h), &header).unwrap();
        let cu = format!("use_{mpk}.cu");
        std::fs::write(
            dir.join(&cu),
            format!("#include \"{h}\"\nint main() {{ return 0; }}\n"),
        )
        .unwrap();
        for debug in [false, true] {
            let mut cmd = Command::new(&nvcc);
            cmd.current_dir(&dir)
                .args(["-arch=sm_90a", "-std=c++20", "-c", "-o"])
                .arg(format!("use_{mpk}_{debug}.o"))
                .arg(&cu);
            if debug {
                cmd.arg("-DTMA_DEBUG");
            }
            let out = cmd.output().unwrap();
            let log = String::from_utf8_lossy(&out.stderr).to_string()
                + &String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                failures.push(format!(
                    "nvcc (mpk {mpk}, TMA_DEBUG {debug}) refused the header of {} accepted tiles:\n{}",
                    tiles.len(),
                    errors_at(&log.replace(&format!("{h}("), "tma.cu("), &header)
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!(
        "{} tiles in a header: nvcc with and without MPK, TMA_DEBUG",
        tiles.len()
    );
}
