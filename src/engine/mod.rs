// SPDX-License-Identifier: GPL-2.0

//! rroce's engine core: everything that needs no kernel.
//!
//! Nothing below this module imports `kernel::`; it uses `core` only, so the
//! same files compile into the module (tested by KUnit through the
//! `selftest` functions each submodule exports) and on the host (`cargo test`,
//! property tests, fuzzing, loom). Kernel glue lives outside `src/engine/`.

pub mod icrc;
pub mod index;
pub mod notify;
pub mod psn;
pub mod rc;
pub mod ring;
pub mod wire;
