// SPDX-License-Identifier: GPL-2.0

//! Glue to the kernel's RDMA core: raw bindings and the small safe
//! abstractions rroce builds on them.

pub(crate) mod ah_attr;
pub(crate) mod ibcq;
pub(crate) mod mem;
pub(crate) mod mmap;
pub(crate) mod rcu_table;
pub(crate) mod sys;
pub(crate) mod work;

/// The kernel's `IS_ERR()`: whether a pointer the kernel returned encodes
/// an errno (the last page of the address space).
pub(crate) fn is_err_ptr<T>(p: *const T) -> bool {
    (p as usize) >= (-4095isize) as usize
}
