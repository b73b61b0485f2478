// SPDX-License-Identifier: GPL-2.0

//! rroce: a software RoCEv2 RDMA device.
//!
//! The crate root of `rroce.ko`. It holds the module declaration and the
//! module list; the kernel-independent engine core lives in [`engine`] and is
//! also built on the host (see `host/lib.rs`), the user ABI in [`abi`].

use kernel::prelude::*;

// pub mod abi;
// pub mod engine;
mod kunit;

module! {
    type: Rroce,
    name: "rroce",
    authors: ["rroce developers"],
    description: "Software RoCEv2 RDMA device",
    license: "GPL",
}

struct Rroce;

impl kernel::Module for Rroce {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("loaded (engine core only; no RDMA device yet)\n");
        Ok(Rroce)
    }
}

impl Drop for Rroce {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}
