// SPDX-License-Identifier: GPL-2.0

//! Glue to the kernel's RDMA core: raw bindings and the small safe
//! abstractions rroce builds on them.

pub(crate) mod mmap;
pub(crate) mod sys;
