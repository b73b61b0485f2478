// SPDX-License-Identifier: GPL-2.0

//! The `ib_device_ops` entry points: raw pointers from the RDMA core turned
//! into safe types, errno at the edge.

pub(crate) mod qp;
