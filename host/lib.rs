// SPDX-License-Identifier: GPL-2.0

//! Host build of rroce's engine core.
//!
//! The files under `src/engine/` and `src/abi/` are the very files Kbuild
//! compiles into `rroce.ko`; they use only `core`, so they also build here,
//! where `cargo test`, property tests, the fuzzer and loom can reach them.

#![cfg_attr(not(test), no_std)]

#[path = "../src/engine/mod.rs"]
pub mod engine;

#[path = "../src/abi/mod.rs"]
pub mod abi;
