// SPDX-License-Identifier: GPL-2.0

//! The QP verbs. Placeholder until the QP trampolines move here from
//! `crate::qp`: re-exports them under the names the ops table uses.

pub(super) use crate::qp::{create_qp, destroy_qp, modify_qp, post_recv, post_send, query_qp};
