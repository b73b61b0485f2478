// SPDX-License-Identifier: GPL-2.0

//! rroce's engine core: everything that needs no kernel.
//!
//! Nothing below this module imports `kernel::`; it uses `core` only, so the
//! same files compile into the module (tested by KUnit through the
//! `selftest` functions each submodule exports) and on the host (`cargo test`,
//! property tests, fuzzing, loom). Kernel glue lives outside `src/engine/`.
//!
//! The `selftest` modules are test code: they are built only for host tests
//! (`cfg(test)`) and for kernels with `CONFIG_KUNIT`, so a module built
//! against a kernel without KUnit carries none of them.

pub mod fastreg;
pub mod gso;
pub mod handover;
pub mod icrc;
pub mod index;
pub mod lane;
pub mod mw;
pub mod notify;
pub mod psn;
pub mod rc;
pub mod ring;
pub mod scatter;
pub mod srq;
pub mod wire;
