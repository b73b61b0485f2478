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

/// One KUnit suite whose cases each run a `selftest` function of `$path`.
macro_rules! selftest_suite {
    ($suite:ident, $path:path, [$($case:ident),* $(,)?]) => {
        #[kunit_tests($suite)]
        mod $suite {
            use super::run;
            use kernel::prelude::*;
            use $path as t;

            $(
                #[test]
                fn $case() -> Result {
                    run(stringify!($case), t::$case())
                }
            )*
        }
    };
}

selftest_suite!(
    rroce_engine_wire,
    crate::engine::wire::selftest,
    [
        round_trip_all_opcodes,
        parses_in_pieces,
        header_lengths,
        decode_known_packet,
        aeth_syndromes,
        rejects_malformed,
        mtu_rules,
        builder_rejects,
        parses_icrc_vectors,
    ]
);

selftest_suite!(
    rroce_engine_icrc,
    crate::engine::icrc::selftest,
    [
        crc32_core,
        known_answers,
        masking,
        generate_and_reject,
        rxe_captured,
        verifies_in_pieces,
    ]
);

selftest_suite!(
    rroce_engine_gso,
    crate::engine::gso::selftest,
    [headers, icrc_of_each_segment, bounds,]
);

selftest_suite!(
    rroce_engine_scatter,
    crate::engine::scatter::selftest,
    [windows_match_contiguous, helpers,]
);

selftest_suite!(
    rroce_engine_handover,
    crate::engine::handover::selftest,
    [
        keeps_order,
        alone_stays,
        by_size_and_role,
        read_weight,
        role_index,
        role_state,
        doorbells,
    ]
);

selftest_suite!(
    rroce_engine_lane,
    crate::engine::lane::selftest,
    [alone, found_sending,]
);

selftest_suite!(
    rroce_engine_psn,
    crate::engine::psn::selftest,
    [construction, wrap, diff, window, classify,]
);

selftest_suite!(
    rroce_engine_ring,
    crate::engine::ring::selftest,
    [
        layout_rules,
        produce_consume_wrap,
        stale_slots,
        hostile_consumer_index,
        hostile_producer_index,
        resize_plans,
        const_layout,
        drain_bounded_by_snapshot,
    ]
);

selftest_suite!(
    rroce_engine_notify,
    crate::engine::notify::selftest,
    [
        arm_merge_table,
        one_callback_per_arm,
        fire_on_arm,
        fire_on_arm_by_type,
        errors_satisfy_every_arm,
        deferred_callback,
        dead_after_overflow,
        destroy_cancels,
        ib_flags_mapping,
        nd_notify_example,
    ]
);

selftest_suite!(
    rroce_engine_fastreg,
    crate::engine::fastreg::selftest,
    [
        state_rules,
        page_sizes,
        translate_4k_xid,
        translate_other_sizes,
        bad_layouts,
    ]
);

selftest_suite!(
    rroce_engine_mw,
    crate::engine::mw::selftest,
    [key_space, type2_rules, type1_rules,]
);

selftest_suite!(
    rroce_engine_srq,
    crate::engine::srq::selftest,
    [create_rules, modify_rules, limit_fires_once,]
);

selftest_suite!(
    rroce_engine_index,
    crate::engine::index::selftest,
    [exhaust_and_refill, bad_free,]
);

#[kunit_tests(rroce_device)]
mod device {
    use super::run;
    use crate::dev::selftest as t;
    use kernel::prelude::*;

    #[test]
    fn mtu_mapping() -> Result {
        run("mtu_mapping", t::mtu_mapping())
    }

    #[test]
    fn guid_eui64() -> Result {
        run("guid_eui64", t::guid_eui64())
    }

    #[test]
    fn icrc_kernel_crc32() -> Result {
        run(
            "icrc_kernel_crc32",
            crate::rdma::selftest::icrc_crc32_agrees(),
        )
    }
}

#[kunit_tests(rroce_objects)]
mod objects {
    use super::run;
    use kernel::prelude::*;

    #[test]
    fn cq_limits() -> Result {
        run("cq_limits", crate::cq::selftest::cqe_limits())
    }

    #[test]
    fn cq_resize_keeps_completions() -> Result {
        run(
            "cq_resize_keeps_completions",
            crate::cq::selftest::resize_keeps_completions(),
        )
    }

    #[test]
    fn cq_callback_per_arm_on_vector_cpu() -> Result {
        run(
            "cq_callback_per_arm_on_vector_cpu",
            crate::cq::selftest::callback_per_arm_on_vector_cpu(),
        )
    }

    #[test]
    fn cq_solicited_and_errors() -> Result {
        run(
            "cq_solicited_and_errors",
            crate::cq::selftest::solicited_and_errors(),
        )
    }

    #[test]
    fn cq_overflow_kills() -> Result {
        run("cq_overflow_kills", crate::cq::selftest::overflow_kills())
    }

    #[test]
    fn cq_no_overlapping_callbacks() -> Result {
        run(
            "cq_no_overlapping_callbacks",
            crate::cq::selftest::no_overlapping_callbacks(),
        )
    }

    #[test]
    fn qp_wqe_geometry() -> Result {
        run("qp_wqe_geometry", crate::qp::selftest::wqe_geometry())
    }

    #[test]
    fn resp_queue_oldest_first() -> Result {
        run(
            "resp_queue_oldest_first",
            crate::transport::queue_selftest::oldest_first(),
        )
    }

    #[test]
    fn mr_access_rules() -> Result {
        run("mr_access_rules", crate::mr::selftest::access_rules())
    }

    #[test]
    fn skb_gso_run_chain() -> Result {
        run("skb_gso_run_chain", crate::net::skb::selftest::run_chain())
    }

    #[test]
    fn skb_tx_pages() -> Result {
        run("skb_tx_pages", crate::net::skb::selftest::tx_pages())
    }

    #[test]
    fn skb_rx_pieces() -> Result {
        run("skb_rx_pieces", crate::net::skb::selftest::rx_pieces())
    }
}

// In-kernel consumer conformance (NDKPI rules a kernel ULP can observe),
// on a real rroce device and CQs created through the RDMA core.
selftest_suite!(
    rroce_conformance,
    crate::test::kconsumer::selftest,
    [
        concurrent_producers,
        fire_on_arm,
        solicited_and_errors,
        overrun_is_fatal,
        resize_under_load,
        callback_on_vector_cpu,
        kernel_rc_qps,
        idle_qp_retries_after_no_memory,
        ud_post_racing_sqd_sends,
        ud_doorbell_failure_raises_last_wqe,
        query_fills_every_field,
        reset_quiesces_qp,
        last_wqe_event_outside_lock,
        requester_waits_hint,
        requester_streams_hint,
        rejected_modify_changes_nothing,
        qp_table_full,
        query_ah_returns_its_address,
        entry_outlives_dealloc,
    ]
);

// What a responder refuses from its peer, MR keys and the MR table's
// limit, through a kernel consumer (the unmapped-address READ last); a
// requester's reaction to responses in an order a peer rarely produces;
// a responder's to the requests behind its RNR NAK.
selftest_suite!(
    rroce_peer,
    crate::test::kconsumer::peer_selftest,
    [
        send_with_invalidate_refused,
        dma_lkey_not_a_remote_key,
        mr_keys_unpredictable,
        many_mrs,
        mr_table_full,
        ack_ends_rnr_wait,
        rnr_nak_silences_the_rest,
        sqd_finishes_then_resumes,
        sqd_applies_new_timeout,
        partly_sent_bad_wqe_resent,
        uc_counts_no_ack_requests,
        request_passes_held_responses,
        receive_leaves_requests_to_their_post,
        home_follows_an_idle_qps_poster,
        dma_mr_bad_address,
    ]
);

// Fast registration as storage initiators use it, through a kernel
// consumer: REG_MR, the peer's WRITE/READ through the key, LOCAL_INV and
// SEND with invalidate, and what REG_MR and LOCAL_INV refuse.
selftest_suite!(
    rroce_frwr,
    crate::test::kconsumer::frwr_selftest,
    [
        frwr_write_read_local_inv,
        frwr_remote_invalidate,
        frwr_rules,
    ]
);
