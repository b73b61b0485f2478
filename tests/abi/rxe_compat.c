// SPDX-License-Identifier: GPL-2.0
/*
 * Compile-time proof that uapi/rdma/rroce-abi.h is byte compatible with
 * what librxe was built against. Nothing here runs: every check is a
 * _Static_assert, so the file compiles only if all of them hold.
 * scripts/check-uapi.sh compiles it once per reference:
 *
 *   -DRROCE_CHECK_RXE      against <rdma/rdma_user_rxe.h>,
 *                          <rdma/ib_user_verbs.h>, <rdma/ib_user_ioctl_verbs.h>
 *                          (the distribution's copy, and the kernel tree's)
 *     -DRXE_HAS_FLUSH      the rxe header has wr.flush (Linux >= 6.2)
 *     -DRXE_HAS_ATOMIC_WR  the rxe header has dma.atomic_wr (Linux >= 6.2)
 *     -DUVERBS_HAS_FLUSH   ib_user_verbs.h has the FLUSH/ATOMIC_WRITE opcodes
 *   -DRROCE_CHECK_IBVERBS  against <infiniband/verbs.h> (libibverbs-dev):
 *                          the CQE as librxe hands it to applications
 */
#include <stddef.h>

#include <rdma/rroce-abi.h>

#define CHECK(e) _Static_assert(e, #e)
#define FSIZE(t, f) sizeof(((t *)0)->f)
/* Same size and alignment. */
#define SAME_TYPE(r, x)                                                      \
	CHECK(sizeof(r) == sizeof(x));                                       \
	CHECK(_Alignof(r) == _Alignof(x))
/* Same offset and size of field rf of r and field xf of x. */
#define SAME(r, rf, x, xf)                                                   \
	CHECK(offsetof(r, rf) == offsetof(x, xf));                           \
	CHECK(FSIZE(r, rf) == FSIZE(x, xf))
/* Flexible arrays have no size: same offset only. */
#define SAME_FLEX(r, rf, x, xf) CHECK(offsetof(r, rf) == offsetof(x, xf))

#ifdef RROCE_CHECK_RXE
#include <rdma/rdma_user_rxe.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>

CHECK(RROCE_DRIVER_ID == RDMA_DRIVER_RXE);
CHECK(RROCE_NETWORK_TYPE_IPV4 == RXE_NETWORK_TYPE_IPV4);
CHECK(RROCE_NETWORK_TYPE_IPV6 == RXE_NETWORK_TYPE_IPV6);

/* Ring header. */
#define R struct rroce_queue_buf
#define X struct rxe_queue_buf
SAME_TYPE(R, X);
SAME(R, log2_elem_size, X, log2_elem_size);
SAME(R, index_mask, X, index_mask);
SAME(R, pad_1, X, pad_1);
SAME(R, producer_index, X, producer_index);
SAME(R, pad_2, X, pad_2);
SAME(R, consumer_index, X, consumer_index);
SAME(R, pad_3, X, pad_3);
SAME_FLEX(R, data, X, data);
CHECK(offsetof(X, log2_elem_size) == RROCE_QUEUE_LOG2_ELEM_SIZE_OFFSET);
CHECK(offsetof(X, index_mask) == RROCE_QUEUE_INDEX_MASK_OFFSET);
CHECK(offsetof(X, producer_index) == RROCE_QUEUE_PRODUCER_OFFSET);
CHECK(offsetof(X, consumer_index) == RROCE_QUEUE_CONSUMER_OFFSET);
CHECK(offsetof(X, data) == RROCE_QUEUE_DATA_OFFSET);
#undef R
#undef X

/* Command driver data. */
SAME_TYPE(struct rroce_mminfo, struct mminfo);
SAME(struct rroce_mminfo, offset, struct mminfo, offset);
SAME(struct rroce_mminfo, size, struct mminfo, size);
SAME(struct rroce_mminfo, pad, struct mminfo, pad);

SAME_TYPE(struct rroce_create_cq_resp, struct rxe_create_cq_resp);
SAME(struct rroce_create_cq_resp, mi, struct rxe_create_cq_resp, mi);

SAME_TYPE(struct rroce_resize_cq_resp, struct rxe_resize_cq_resp);
SAME(struct rroce_resize_cq_resp, mi, struct rxe_resize_cq_resp, mi);

SAME_TYPE(struct rroce_create_qp_resp, struct rxe_create_qp_resp);
SAME(struct rroce_create_qp_resp, rq_mi, struct rxe_create_qp_resp, rq_mi);
SAME(struct rroce_create_qp_resp, sq_mi, struct rxe_create_qp_resp, sq_mi);

SAME_TYPE(struct rroce_create_srq_resp, struct rxe_create_srq_resp);
SAME(struct rroce_create_srq_resp, mi, struct rxe_create_srq_resp, mi);
SAME(struct rroce_create_srq_resp, srq_num, struct rxe_create_srq_resp, srq_num);
SAME(struct rroce_create_srq_resp, reserved, struct rxe_create_srq_resp, reserved);

SAME_TYPE(struct rroce_modify_srq_cmd, struct rxe_modify_srq_cmd);
SAME(struct rroce_modify_srq_cmd, mmap_info_addr, struct rxe_modify_srq_cmd, mmap_info_addr);

SAME_TYPE(struct rroce_create_ah_resp, struct rxe_create_ah_resp);
SAME(struct rroce_create_ah_resp, ah_num, struct rxe_create_ah_resp, ah_num);
SAME(struct rroce_create_ah_resp, reserved, struct rxe_create_ah_resp, reserved);

/* Address vector. */
SAME_TYPE(union rroce_gid, union rxe_gid);
SAME(union rroce_gid, raw, union rxe_gid, raw);
SAME(union rroce_gid, global, union rxe_gid, global);
SAME(union rroce_gid, global.subnet_prefix, union rxe_gid, global.subnet_prefix);
SAME(union rroce_gid, global.interface_id, union rxe_gid, global.interface_id);

#define R struct rroce_global_route
#define X struct rxe_global_route
SAME_TYPE(R, X);
SAME(R, dgid, X, dgid);
SAME(R, flow_label, X, flow_label);
SAME(R, sgid_index, X, sgid_index);
SAME(R, hop_limit, X, hop_limit);
SAME(R, traffic_class, X, traffic_class);
#undef R
#undef X

SAME_TYPE(struct rroce_sockaddr_in, struct sockaddr_in);
SAME(struct rroce_sockaddr_in, family, struct sockaddr_in, sin_family);
SAME(struct rroce_sockaddr_in, port, struct sockaddr_in, sin_port);
SAME(struct rroce_sockaddr_in, addr, struct sockaddr_in, sin_addr);
SAME(struct rroce_sockaddr_in, zero, struct sockaddr_in, __pad);

SAME_TYPE(struct rroce_sockaddr_in6, struct sockaddr_in6);
SAME(struct rroce_sockaddr_in6, family, struct sockaddr_in6, sin6_family);
SAME(struct rroce_sockaddr_in6, port, struct sockaddr_in6, sin6_port);
SAME(struct rroce_sockaddr_in6, flowinfo, struct sockaddr_in6, sin6_flowinfo);
SAME(struct rroce_sockaddr_in6, addr, struct sockaddr_in6, sin6_addr);
SAME(struct rroce_sockaddr_in6, scope_id, struct sockaddr_in6, sin6_scope_id);

#define R struct rroce_av
#define X struct rxe_av
SAME_TYPE(R, X);
SAME(R, port_num, X, port_num);
SAME(R, network_type, X, network_type);
SAME(R, dmac, X, dmac);
SAME(R, grh, X, grh);
SAME(R, sgid_addr, X, sgid_addr);
SAME(R, sgid_addr.sin, X, sgid_addr._sockaddr_in);
SAME(R, sgid_addr.sin6, X, sgid_addr._sockaddr_in6);
SAME(R, dgid_addr, X, dgid_addr);
SAME(R, dgid_addr.sin, X, dgid_addr._sockaddr_in);
SAME(R, dgid_addr.sin6, X, dgid_addr._sockaddr_in6);
#undef R
#undef X

/* Send WR: every member of every union member, by its full path. */
#define R struct rroce_send_wr
#define X struct rxe_send_wr
SAME_TYPE(R, X);
SAME(R, wr_id, X, wr_id);
SAME(R, reserved, X, reserved);
SAME(R, opcode, X, opcode);
SAME(R, send_flags, X, send_flags);
SAME(R, ex, X, ex);
SAME(R, ex.imm_data, X, ex.imm_data);
SAME(R, ex.invalidate_rkey, X, ex.invalidate_rkey);
SAME(R, wr, X, wr);
#ifdef RXE_HAS_FLUSH
SAME(R, wr.flush.remote_addr, X, wr.flush.remote_addr);
SAME(R, wr.flush.length, X, wr.flush.length);
SAME(R, wr.flush.rkey, X, wr.flush.rkey);
SAME(R, wr.flush.type, X, wr.flush.type);
SAME(R, wr.flush.level, X, wr.flush.level);
CHECK(sizeof(((R *)0)->wr.flush) == sizeof(((X *)0)->wr.flush));
#endif
SAME(R, wr.rdma, X, wr.rdma);
SAME(R, wr.rdma.remote_addr, X, wr.rdma.remote_addr);
SAME(R, wr.rdma.rkey, X, wr.rdma.rkey);
SAME(R, wr.rdma.reserved, X, wr.rdma.reserved);
SAME(R, wr.atomic, X, wr.atomic);
SAME(R, wr.atomic.remote_addr, X, wr.atomic.remote_addr);
SAME(R, wr.atomic.compare_add, X, wr.atomic.compare_add);
SAME(R, wr.atomic.swap, X, wr.atomic.swap);
SAME(R, wr.atomic.rkey, X, wr.atomic.rkey);
SAME(R, wr.atomic.reserved, X, wr.atomic.reserved);
SAME(R, wr.ud, X, wr.ud);
SAME(R, wr.ud.remote_qpn, X, wr.ud.remote_qpn);
SAME(R, wr.ud.remote_qkey, X, wr.ud.remote_qkey);
SAME(R, wr.ud.pkey_index, X, wr.ud.pkey_index);
SAME(R, wr.ud.reserved, X, wr.ud.reserved);
SAME(R, wr.ud.ah_num, X, wr.ud.ah_num);
SAME(R, wr.ud.pad, X, wr.ud.pad);
SAME(R, wr.ud.av, X, wr.ud.av);
SAME(R, wr.mw, X, wr.mw);
SAME(R, wr.mw.addr, X, wr.mw.addr);
SAME(R, wr.mw.length, X, wr.mw.length);
SAME(R, wr.mw.mr_lkey, X, wr.mw.mr_lkey);
SAME(R, wr.mw.mw_rkey, X, wr.mw.mw_rkey);
SAME(R, wr.mw.rkey, X, wr.mw.rkey);
SAME(R, wr.mw.access, X, wr.mw.access);
#undef R
#undef X

/* WQEs. */
SAME_TYPE(struct rroce_sge, struct rxe_sge);
SAME(struct rroce_sge, addr, struct rxe_sge, addr);
SAME(struct rroce_sge, length, struct rxe_sge, length);
SAME(struct rroce_sge, lkey, struct rxe_sge, lkey);

#define R struct rroce_dma_info
#define X struct rxe_dma_info
SAME_TYPE(R, X);
SAME(R, length, X, length);
SAME(R, resid, X, resid);
SAME(R, cur_sge, X, cur_sge);
SAME(R, num_sge, X, num_sge);
SAME(R, sge_offset, X, sge_offset);
SAME(R, reserved, X, reserved);
SAME_FLEX(R, inline_data, X, inline_data);
#ifdef RXE_HAS_ATOMIC_WR
SAME_FLEX(R, atomic_wr, X, atomic_wr);
#endif
SAME_FLEX(R, sge, X, sge);
#undef R
#undef X

#define R struct rroce_send_wqe
#define X struct rxe_send_wqe
SAME_TYPE(R, X);
SAME(R, wr, X, wr);
SAME(R, status, X, status);
SAME(R, state, X, state);
SAME(R, iova, X, iova);
SAME(R, mask, X, mask);
SAME(R, first_psn, X, first_psn);
SAME(R, last_psn, X, last_psn);
SAME(R, ack_length, X, ack_length);
SAME(R, ssn, X, ssn);
SAME(R, has_rd_atomic, X, has_rd_atomic);
SAME(R, dma, X, dma);
SAME_FLEX(R, dma.sge, X, dma.sge);
SAME_FLEX(R, dma.inline_data, X, dma.inline_data);
#undef R
#undef X

#define R struct rroce_recv_wqe
#define X struct rxe_recv_wqe
SAME_TYPE(R, X);
SAME(R, wr_id, X, wr_id);
SAME(R, reserved, X, reserved);
SAME(R, padding, X, padding);
SAME(R, dma, X, dma);
SAME_FLEX(R, dma.sge, X, dma.sge);
#undef R
#undef X

/* The CQE is struct ib_uverbs_wc. */
#define R struct rroce_cqe
#define X struct ib_uverbs_wc
SAME_TYPE(R, X);
SAME(R, wr_id, X, wr_id);
SAME(R, status, X, status);
SAME(R, opcode, X, opcode);
SAME(R, vendor_err, X, vendor_err);
SAME(R, byte_len, X, byte_len);
SAME(R, ex, X, ex);
SAME(R, ex.imm_data, X, ex.imm_data);
SAME(R, ex.invalidate_rkey, X, ex.invalidate_rkey);
SAME(R, qp_num, X, qp_num);
SAME(R, src_qp, X, src_qp);
SAME(R, wc_flags, X, wc_flags);
SAME(R, pkey_index, X, pkey_index);
SAME(R, slid, X, slid);
SAME(R, sl, X, sl);
SAME(R, dlid_path_bits, X, dlid_path_bits);
SAME(R, port_num, X, port_num);
SAME(R, reserved, X, reserved);
#undef R
#undef X

/* Opcodes in the rings. */
CHECK(RROCE_WR_RDMA_WRITE == IB_UVERBS_WR_RDMA_WRITE);
CHECK(RROCE_WR_RDMA_WRITE_WITH_IMM == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM);
CHECK(RROCE_WR_SEND == IB_UVERBS_WR_SEND);
CHECK(RROCE_WR_SEND_WITH_IMM == IB_UVERBS_WR_SEND_WITH_IMM);
CHECK(RROCE_WR_RDMA_READ == IB_UVERBS_WR_RDMA_READ);
CHECK(RROCE_WR_ATOMIC_CMP_AND_SWP == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP);
CHECK(RROCE_WR_ATOMIC_FETCH_AND_ADD == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD);
CHECK(RROCE_WR_LOCAL_INV == IB_UVERBS_WR_LOCAL_INV);
CHECK(RROCE_WR_BIND_MW == IB_UVERBS_WR_BIND_MW);
CHECK(RROCE_WR_SEND_WITH_INV == IB_UVERBS_WR_SEND_WITH_INV);
CHECK(RROCE_WR_TSO == IB_UVERBS_WR_TSO);
CHECK(RROCE_WR_RDMA_READ_WITH_INV == IB_UVERBS_WR_RDMA_READ_WITH_INV);
CHECK(RROCE_WR_MASKED_ATOMIC_CMP_AND_SWP == IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP);
CHECK(RROCE_WR_MASKED_ATOMIC_FETCH_AND_ADD == IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD);
#ifdef UVERBS_HAS_FLUSH
CHECK(RROCE_WR_FLUSH == IB_UVERBS_WR_FLUSH);
CHECK(RROCE_WR_ATOMIC_WRITE == IB_UVERBS_WR_ATOMIC_WRITE);
CHECK(RROCE_WC_FLUSH == IB_UVERBS_WC_FLUSH);
CHECK(RROCE_WC_ATOMIC_WRITE == IB_UVERBS_WC_ATOMIC_WRITE);
#endif
CHECK(RROCE_WC_SEND == IB_UVERBS_WC_SEND);
CHECK(RROCE_WC_RDMA_WRITE == IB_UVERBS_WC_RDMA_WRITE);
CHECK(RROCE_WC_RDMA_READ == IB_UVERBS_WC_RDMA_READ);
CHECK(RROCE_WC_COMP_SWAP == IB_UVERBS_WC_COMP_SWAP);
CHECK(RROCE_WC_FETCH_ADD == IB_UVERBS_WC_FETCH_ADD);
CHECK(RROCE_WC_BIND_MW == IB_UVERBS_WC_BIND_MW);
CHECK(RROCE_WC_LOCAL_INV == IB_UVERBS_WC_LOCAL_INV);
CHECK(RROCE_WC_TSO == IB_UVERBS_WC_TSO);

/* Doorbell command number and limits that follow from the layout. */
CHECK(IB_USER_VERBS_CMD_POST_SEND == 28);
CHECK(RROCE_MAX_INLINE_DATA == RROCE_MAX_SEND_SGE * sizeof(struct rxe_sge));
#endif /* RROCE_CHECK_RXE */

#ifdef RROCE_CHECK_IBVERBS
#include <infiniband/verbs.h>

/*
 * librxe's poll_cq memcpy()s sizeof(struct ibv_wc) bytes of a CQE into the
 * application's struct ibv_wc.
 */
#define R struct rroce_cqe
#define X struct ibv_wc
CHECK(sizeof(R) >= sizeof(X));
CHECK(_Alignof(R) == _Alignof(X));
SAME(R, wr_id, X, wr_id);
SAME(R, status, X, status);
SAME(R, opcode, X, opcode);
SAME(R, vendor_err, X, vendor_err);
SAME(R, byte_len, X, byte_len);
SAME(R, ex.imm_data, X, imm_data);
SAME(R, ex.invalidate_rkey, X, invalidated_rkey);
SAME(R, qp_num, X, qp_num);
SAME(R, src_qp, X, src_qp);
SAME(R, wc_flags, X, wc_flags);
SAME(R, pkey_index, X, pkey_index);
SAME(R, slid, X, slid);
SAME(R, sl, X, sl);
SAME(R, dlid_path_bits, X, dlid_path_bits);
#undef R
#undef X

/* librxe memcpy()s the application's struct ibv_sge array into the WQE. */
SAME_TYPE(struct rroce_sge, struct ibv_sge);
SAME(struct rroce_sge, addr, struct ibv_sge, addr);
SAME(struct rroce_sge, length, struct ibv_sge, length);
SAME(struct rroce_sge, lkey, struct ibv_sge, lkey);

/* librxe copies ibv_send_wr.opcode and .send_flags into the WQE unchanged. */
CHECK(RROCE_WR_RDMA_WRITE == IBV_WR_RDMA_WRITE);
CHECK(RROCE_WR_RDMA_WRITE_WITH_IMM == IBV_WR_RDMA_WRITE_WITH_IMM);
CHECK(RROCE_WR_SEND == IBV_WR_SEND);
CHECK(RROCE_WR_SEND_WITH_IMM == IBV_WR_SEND_WITH_IMM);
CHECK(RROCE_WR_RDMA_READ == IBV_WR_RDMA_READ);
CHECK(RROCE_WR_ATOMIC_CMP_AND_SWP == IBV_WR_ATOMIC_CMP_AND_SWP);
CHECK(RROCE_WR_ATOMIC_FETCH_AND_ADD == IBV_WR_ATOMIC_FETCH_AND_ADD);
CHECK(RROCE_WR_LOCAL_INV == IBV_WR_LOCAL_INV);
CHECK(RROCE_WR_BIND_MW == IBV_WR_BIND_MW);
CHECK(RROCE_WR_SEND_WITH_INV == IBV_WR_SEND_WITH_INV);
CHECK(RROCE_WR_TSO == IBV_WR_TSO);
CHECK(RROCE_WR_ATOMIC_WRITE == IBV_WR_ATOMIC_WRITE);
CHECK(RROCE_SEND_FENCE == IBV_SEND_FENCE);
CHECK(RROCE_SEND_SIGNALED == IBV_SEND_SIGNALED);
CHECK(RROCE_SEND_SOLICITED == IBV_SEND_SOLICITED);
CHECK(RROCE_SEND_INLINE == IBV_SEND_INLINE);
CHECK(RROCE_SEND_IP_CSUM == IBV_SEND_IP_CSUM);

/* The application reads the CQE's status, opcode and flags as IBV_WC_*. */
CHECK(RROCE_WC_SUCCESS == IBV_WC_SUCCESS);
CHECK(RROCE_WC_LOC_LEN_ERR == IBV_WC_LOC_LEN_ERR);
CHECK(RROCE_WC_LOC_QP_OP_ERR == IBV_WC_LOC_QP_OP_ERR);
CHECK(RROCE_WC_LOC_EEC_OP_ERR == IBV_WC_LOC_EEC_OP_ERR);
CHECK(RROCE_WC_LOC_PROT_ERR == IBV_WC_LOC_PROT_ERR);
CHECK(RROCE_WC_WR_FLUSH_ERR == IBV_WC_WR_FLUSH_ERR);
CHECK(RROCE_WC_MW_BIND_ERR == IBV_WC_MW_BIND_ERR);
CHECK(RROCE_WC_BAD_RESP_ERR == IBV_WC_BAD_RESP_ERR);
CHECK(RROCE_WC_LOC_ACCESS_ERR == IBV_WC_LOC_ACCESS_ERR);
CHECK(RROCE_WC_REM_INV_REQ_ERR == IBV_WC_REM_INV_REQ_ERR);
CHECK(RROCE_WC_REM_ACCESS_ERR == IBV_WC_REM_ACCESS_ERR);
CHECK(RROCE_WC_REM_OP_ERR == IBV_WC_REM_OP_ERR);
CHECK(RROCE_WC_RETRY_EXC_ERR == IBV_WC_RETRY_EXC_ERR);
CHECK(RROCE_WC_RNR_RETRY_EXC_ERR == IBV_WC_RNR_RETRY_EXC_ERR);
CHECK(RROCE_WC_LOC_RDD_VIOL_ERR == IBV_WC_LOC_RDD_VIOL_ERR);
CHECK(RROCE_WC_REM_INV_RD_REQ_ERR == IBV_WC_REM_INV_RD_REQ_ERR);
CHECK(RROCE_WC_REM_ABORT_ERR == IBV_WC_REM_ABORT_ERR);
CHECK(RROCE_WC_INV_EECN_ERR == IBV_WC_INV_EECN_ERR);
CHECK(RROCE_WC_INV_EEC_STATE_ERR == IBV_WC_INV_EEC_STATE_ERR);
CHECK(RROCE_WC_FATAL_ERR == IBV_WC_FATAL_ERR);
CHECK(RROCE_WC_RESP_TIMEOUT_ERR == IBV_WC_RESP_TIMEOUT_ERR);
CHECK(RROCE_WC_GENERAL_ERR == IBV_WC_GENERAL_ERR);
CHECK(RROCE_WC_SEND == IBV_WC_SEND);
CHECK(RROCE_WC_RDMA_WRITE == IBV_WC_RDMA_WRITE);
CHECK(RROCE_WC_RDMA_READ == IBV_WC_RDMA_READ);
CHECK(RROCE_WC_COMP_SWAP == IBV_WC_COMP_SWAP);
CHECK(RROCE_WC_FETCH_ADD == IBV_WC_FETCH_ADD);
CHECK(RROCE_WC_BIND_MW == IBV_WC_BIND_MW);
CHECK(RROCE_WC_LOCAL_INV == IBV_WC_LOCAL_INV);
CHECK(RROCE_WC_TSO == IBV_WC_TSO);
CHECK(RROCE_WC_ATOMIC_WRITE == IBV_WC_ATOMIC_WRITE);
CHECK(RROCE_WC_RECV == IBV_WC_RECV);
CHECK(RROCE_WC_RECV_RDMA_WITH_IMM == IBV_WC_RECV_RDMA_WITH_IMM);
CHECK(RROCE_WC_GRH == IBV_WC_GRH);
CHECK(RROCE_WC_WITH_IMM == IBV_WC_WITH_IMM);
CHECK(RROCE_WC_IP_CSUM_OK == IBV_WC_IP_CSUM_OK);
CHECK(RROCE_WC_WITH_INV == IBV_WC_WITH_INV);
#endif /* RROCE_CHECK_IBVERBS */

int rroce_rxe_compat_dummy;
