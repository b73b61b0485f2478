// SPDX-License-Identifier: GPL-2.0

//! rroce: a software RoCEv2 RDMA device.
//!
//! The crate root of `rroce.ko`. It holds the module declaration and the
//! module list; the kernel-independent engine core lives in `engine` and is
//! also built on the host (see `host/lib.rs`), the user ABI in `abi`.

use kernel::prelude::*;

pub mod abi;
mod ah;
mod completion;
mod counters;
mod cq;
mod dev;
pub mod engine;
mod link;
mod mcast;
mod mr;
mod mw;
mod net;
mod qp;
mod rdma;
mod recv;
mod registry;
mod srq;
#[cfg(CONFIG_KUNIT)]
mod test;
mod transport;
mod verbs;

module! {
    type: Rroce,
    name: "rroce",
    authors: ["rroce developers"],
    description: "Software RoCEv2 RDMA device",
    license: "GPL",
    alias: ["rdma-link-rroce"],
}

struct Rroce {
    _reg: link::Registration,
}

impl kernel::Module for Rroce {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let reg = link::Registration::new()?;
        pr_info!("loaded: rdma link add NAME type rroce netdev DEV\n");
        Ok(Rroce { _reg: reg })
    }
}
