// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for rroce, run when the module is loaded into a kernel built
//! with `CONFIG_KUNIT=y`.
//!
//! The engine core exports its checks as plain `selftest` functions so the
//! very same assertions run here and in `cargo test` on the host; each case
//! below runs one and reports its message on failure.

use kernel::prelude::*;

/// Runs one selftest, printing why it failed.
fn run(name: &str, r: core::result::Result<(), &'static str>) -> Result {
    r.map_err(|msg| {
        pr_err!("selftest {name}: {msg}\n");
        EINVAL
    })
}

#[kunit_tests(rroce_device)]
mod device {
    use super::run;
    use kernel::prelude::*;
    use crate::device::selftest as t;

    #[test]
    fn mtu_mapping() -> Result {
        run("mtu_mapping", t::mtu_mapping())
    }

    #[test]
    fn guid_eui64() -> Result {
        run("guid_eui64", t::guid_eui64())
    }
}

#[kunit_tests(rroce_objects)]
mod objects {
    use super::run;
    use kernel::prelude::*;

    #[test]
    fn index_exhaust_and_refill() -> Result {
        run("index_exhaust_and_refill", crate::index::selftest::exhaust_and_refill())
    }

    #[test]
    fn index_bad_free() -> Result {
        run("index_bad_free", crate::index::selftest::bad_free())
    }

    #[test]
    fn cq_limits() -> Result {
        run("cq_limits", crate::cq::selftest::cqe_limits())
    }

    #[test]
    fn cq_resize_keeps_completions() -> Result {
        run("cq_resize_keeps_completions", crate::cq::selftest::resize_keeps_completions())
    }

    #[test]
    fn cq_hostile_consumer_index() -> Result {
        run("cq_hostile_consumer_index", crate::cq::selftest::hostile_consumer_index())
    }

    #[test]
    fn mr_access_rules() -> Result {
        run("mr_access_rules", crate::mr::selftest::access_rules())
    }
}
