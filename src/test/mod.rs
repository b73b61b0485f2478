// SPDX-License-Identifier: GPL-2.0

//! rroce's in-kernel tests, compiled only into a module built against a
//! kernel with `CONFIG_KUNIT` (the crate root declares this module under
//! `#[cfg(CONFIG_KUNIT)]`): the KUnit suites that run at module load
//! ([`kunit`]) and the in-kernel consumer conformance tests they call
//! ([`kconsumer`]). A module built for a kernel without KUnit contains none
//! of this code.

mod kconsumer;
mod kunit;
