// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for rroce, run when the module is loaded into a kernel built
//! with `CONFIG_KUNIT=y`.

use kernel::prelude::*;

#[kunit_tests(rroce_smoke)]
mod smoke {
    #[test]
    fn arithmetic() {
        assert_eq!(1u32.wrapping_add(u32::MAX), 0);
    }
}
