// SPDX-License-Identifier: GPL-2.0

//! Raw bindings for the RDMA core and UDP tunnel headers.
//!
//! Generated at build time by `scripts/gen-bindings.sh` from
//! `src/rdma/bindings_helper.h` with the kernel's own bindgen flags. These
//! types are distinct from `kernel::bindings`' copies of the same C structs;
//! pointers are cast at the boundary where both meet.

#![allow(
    warnings,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::ptr_as_ptr,
    clippy::cast_lossless,
    clippy::as_underscore,
    clippy::ref_as_ptr,
    clippy::ptr_cast_constness,
    missing_docs,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    rust_2018_idioms
)]

// The kernel blocklists these in its own bindings and defines them by hand.
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
