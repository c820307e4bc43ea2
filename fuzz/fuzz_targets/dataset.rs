//! The `dataset` fuzz target (docs/fuzzing.md). Under `cargo fuzz` a libFuzzer
//! entry point; built by the stable toolchain, a replay tool:
//! `cargo run --release -p loaderx-fuzz --bin dataset -- FILE_OR_DIR...`.
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| loaderx_fuzz::dataset(data));

#[cfg(not(fuzzing))]
fn main() {
    loaderx_fuzz::replay_main(loaderx_fuzz::dataset);
}
