//! `use tma::*;` must leave user code that names `core::` and `std::` paths compiling.
//!
//! A glob-exported item called `core` (as `pub use tma_core as core;` once was) makes every
//! `core::` path in a module that glob-imports `tma` ambiguous with the built-in crate
//! (E0659), so this file stops compiling if one comes back. The same holds for `std`.

use tma::*;

use core::mem::size_of;
use std::collections::BTreeMap;

#[test]
fn glob_import_leaves_core_and_std_paths_alone() {
    assert_eq!(size_of::<u32>(), 4);
    assert_eq!(core::mem::size_of::<u64>(), 8);
    assert_eq!(std::mem::align_of::<u16>(), 2);
    let mut seen = BTreeMap::new();
    seen.insert("u32", core::mem::size_of::<u32>());
    assert_eq!(seen.get("u32"), Some(&4));
}

#[test]
fn glob_import_still_brings_the_api_and_its_modules() {
    let spec = TileSpec::new("glob", DType::BF16, [128, 64], [64, 64]);
    let valid = validate(&spec).map_err(|e| e.to_string());
    assert_eq!(valid.map(|v| v.tx_bytes()), Ok(8192));
    // The core crate's modules are reachable through the glob, without a `core` alias.
    let _ = model::load;
    let _ = render::prelude;
    let _: Option<runtime::Error> = None;
}
