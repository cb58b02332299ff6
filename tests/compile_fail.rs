//! Compile-fail tests of the macros: one diagnostic per `tests/ui/*.rs` / `.stderr` pair
//! (regenerate with `TRYBUILD=overwrite` and review each one).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
