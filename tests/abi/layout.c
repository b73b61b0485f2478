// SPDX-License-Identifier: GPL-2.0
/*
 * Print the layout of every structure in uapi/rdma/rroce-abi.h and the
 * value of every constant, one fact per line:
 *
 *   size <type> <bytes>
 *   align <type> <bytes>
 *   <type>.<field> <offset> <size>      (size 0: flexible array)
 *   const <NAME> <value>
 *
 * tests/abi_layout.rs compiles and runs this and compares each line with
 * the Rust mirror in src/abi/. Every field of every type must be listed
 * here: the test also checks that the listed fields of each struct tile it
 * with no gap, so a field missing from this list (or implicit padding)
 * fails the test.
 */
#include <stddef.h>
#include <stdio.h>

#include <rdma/rroce-abi.h>

#define TYPE(kind, t)                                                        \
	printf("size %s %zu\nalign %s %zu\n", #t, sizeof(kind t), #t,       \
	       _Alignof(kind t))
#define F(kind, t, f)                                                        \
	printf("%s.%s %zu %zu\n", #t, #f, offsetof(kind t, f),              \
	       sizeof(((kind t *)0)->f))
#define FLEX(kind, t, f) printf("%s.%s %zu 0\n", #t, #f, offsetof(kind t, f))
#define S(t) TYPE(struct, t)
#define SF(t, f) F(struct, t, f)
#define U(t) TYPE(union, t)
#define UF(t, f) F(union, t, f)
#define C(n) printf("const %s %llu\n", #n, (unsigned long long)(n))

int main(void)
{
	S(rroce_queue_buf);
	SF(rroce_queue_buf, log2_elem_size);
	SF(rroce_queue_buf, index_mask);
	SF(rroce_queue_buf, pad_1);
	SF(rroce_queue_buf, producer_index);
	SF(rroce_queue_buf, pad_2);
	SF(rroce_queue_buf, consumer_index);
	SF(rroce_queue_buf, pad_3);
	FLEX(struct, rroce_queue_buf, data);

	S(rroce_mminfo);
	SF(rroce_mminfo, offset);
	SF(rroce_mminfo, size);
	SF(rroce_mminfo, pad);

	S(rroce_create_cq_resp);
	SF(rroce_create_cq_resp, mi);

	S(rroce_resize_cq_resp);
	SF(rroce_resize_cq_resp, mi);

	S(rroce_create_qp_resp);
	SF(rroce_create_qp_resp, rq_mi);
	SF(rroce_create_qp_resp, sq_mi);

	S(rroce_create_srq_resp);
	SF(rroce_create_srq_resp, mi);
	SF(rroce_create_srq_resp, srq_num);
	SF(rroce_create_srq_resp, reserved);

	S(rroce_modify_srq_cmd);
	SF(rroce_modify_srq_cmd, mmap_info_addr);

	S(rroce_create_ah_resp);
	SF(rroce_create_ah_resp, ah_num);
	SF(rroce_create_ah_resp, reserved);

	S(rroce_gid_global);
	SF(rroce_gid_global, subnet_prefix);
	SF(rroce_gid_global, interface_id);

	U(rroce_gid);
	UF(rroce_gid, raw);
	UF(rroce_gid, global);

	S(rroce_global_route);
	SF(rroce_global_route, dgid);
	SF(rroce_global_route, flow_label);
	SF(rroce_global_route, sgid_index);
	SF(rroce_global_route, hop_limit);
	SF(rroce_global_route, traffic_class);
	SF(rroce_global_route, reserved);

	S(rroce_sockaddr_in);
	SF(rroce_sockaddr_in, family);
	SF(rroce_sockaddr_in, port);
	SF(rroce_sockaddr_in, addr);
	SF(rroce_sockaddr_in, zero);

	S(rroce_sockaddr_in6);
	SF(rroce_sockaddr_in6, family);
	SF(rroce_sockaddr_in6, port);
	SF(rroce_sockaddr_in6, flowinfo);
	SF(rroce_sockaddr_in6, addr);
	SF(rroce_sockaddr_in6, scope_id);

	U(rroce_sockaddr);
	UF(rroce_sockaddr, sin);
	UF(rroce_sockaddr, sin6);

	S(rroce_av);
	SF(rroce_av, port_num);
	SF(rroce_av, network_type);
	SF(rroce_av, dmac);
	SF(rroce_av, grh);
	SF(rroce_av, sgid_addr);
	SF(rroce_av, dgid_addr);

	S(rroce_wr_flush);
	SF(rroce_wr_flush, remote_addr);
	SF(rroce_wr_flush, length);
	SF(rroce_wr_flush, rkey);
	SF(rroce_wr_flush, type);
	SF(rroce_wr_flush, level);
	SF(rroce_wr_flush, reserved);

	S(rroce_wr_rdma);
	SF(rroce_wr_rdma, remote_addr);
	SF(rroce_wr_rdma, rkey);
	SF(rroce_wr_rdma, reserved);

	S(rroce_wr_atomic);
	SF(rroce_wr_atomic, remote_addr);
	SF(rroce_wr_atomic, compare_add);
	SF(rroce_wr_atomic, swap);
	SF(rroce_wr_atomic, rkey);
	SF(rroce_wr_atomic, reserved);

	S(rroce_wr_ud);
	SF(rroce_wr_ud, remote_qpn);
	SF(rroce_wr_ud, remote_qkey);
	SF(rroce_wr_ud, pkey_index);
	SF(rroce_wr_ud, reserved);
	SF(rroce_wr_ud, ah_num);
	SF(rroce_wr_ud, pad);
	SF(rroce_wr_ud, av);

	S(rroce_wr_mw);
	SF(rroce_wr_mw, addr);
	SF(rroce_wr_mw, length);
	SF(rroce_wr_mw, mr_lkey);
	SF(rroce_wr_mw, mw_rkey);
	SF(rroce_wr_mw, rkey);
	SF(rroce_wr_mw, access);

	U(rroce_wr_union);
	UF(rroce_wr_union, flush);
	UF(rroce_wr_union, rdma);
	UF(rroce_wr_union, atomic);
	UF(rroce_wr_union, ud);
	UF(rroce_wr_union, mw);

	S(rroce_send_wr);
	SF(rroce_send_wr, wr_id);
	SF(rroce_send_wr, reserved);
	SF(rroce_send_wr, opcode);
	SF(rroce_send_wr, send_flags);
	SF(rroce_send_wr, ex);
	SF(rroce_send_wr, ex.imm_data);
	SF(rroce_send_wr, ex.invalidate_rkey);
	SF(rroce_send_wr, wr);

	S(rroce_sge);
	SF(rroce_sge, addr);
	SF(rroce_sge, length);
	SF(rroce_sge, lkey);

	S(rroce_dma_info);
	SF(rroce_dma_info, length);
	SF(rroce_dma_info, resid);
	SF(rroce_dma_info, cur_sge);
	SF(rroce_dma_info, num_sge);
	SF(rroce_dma_info, sge_offset);
	SF(rroce_dma_info, reserved);
	FLEX(struct, rroce_dma_info, inline_data);
	FLEX(struct, rroce_dma_info, atomic_wr);
	FLEX(struct, rroce_dma_info, sge);

	S(rroce_send_wqe);
	SF(rroce_send_wqe, wr);
	SF(rroce_send_wqe, status);
	SF(rroce_send_wqe, state);
	SF(rroce_send_wqe, iova);
	SF(rroce_send_wqe, mask);
	SF(rroce_send_wqe, first_psn);
	SF(rroce_send_wqe, last_psn);
	SF(rroce_send_wqe, ack_length);
	SF(rroce_send_wqe, ssn);
	SF(rroce_send_wqe, has_rd_atomic);
	SF(rroce_send_wqe, dma);

	S(rroce_recv_wqe);
	SF(rroce_recv_wqe, wr_id);
	SF(rroce_recv_wqe, reserved);
	SF(rroce_recv_wqe, padding);
	SF(rroce_recv_wqe, dma);

	S(rroce_cqe);
	SF(rroce_cqe, wr_id);
	SF(rroce_cqe, status);
	SF(rroce_cqe, opcode);
	SF(rroce_cqe, vendor_err);
	SF(rroce_cqe, byte_len);
	SF(rroce_cqe, ex);
	SF(rroce_cqe, ex.imm_data);
	SF(rroce_cqe, ex.invalidate_rkey);
	SF(rroce_cqe, qp_num);
	SF(rroce_cqe, src_qp);
	SF(rroce_cqe, wc_flags);
	SF(rroce_cqe, pkey_index);
	SF(rroce_cqe, slid);
	SF(rroce_cqe, sl);
	SF(rroce_cqe, dlid_path_bits);
	SF(rroce_cqe, port_num);
	SF(rroce_cqe, reserved);

	C(RROCE_DRIVER_ID);
	C(RROCE_UVERBS_ABI_VERSION);
	C(RROCE_ABI_MINOR);

	C(RROCE_QUEUE_LOG2_ELEM_SIZE_OFFSET);
	C(RROCE_QUEUE_INDEX_MASK_OFFSET);
	C(RROCE_QUEUE_PRODUCER_OFFSET);
	C(RROCE_QUEUE_CONSUMER_OFFSET);
	C(RROCE_QUEUE_DATA_OFFSET);

	C(RROCE_NETWORK_TYPE_IPV4);
	C(RROCE_NETWORK_TYPE_IPV6);

	C(RROCE_WR_RDMA_WRITE);
	C(RROCE_WR_RDMA_WRITE_WITH_IMM);
	C(RROCE_WR_SEND);
	C(RROCE_WR_SEND_WITH_IMM);
	C(RROCE_WR_RDMA_READ);
	C(RROCE_WR_ATOMIC_CMP_AND_SWP);
	C(RROCE_WR_ATOMIC_FETCH_AND_ADD);
	C(RROCE_WR_LOCAL_INV);
	C(RROCE_WR_BIND_MW);
	C(RROCE_WR_SEND_WITH_INV);
	C(RROCE_WR_TSO);
	C(RROCE_WR_RDMA_READ_WITH_INV);
	C(RROCE_WR_MASKED_ATOMIC_CMP_AND_SWP);
	C(RROCE_WR_MASKED_ATOMIC_FETCH_AND_ADD);
	C(RROCE_WR_FLUSH);
	C(RROCE_WR_ATOMIC_WRITE);

	C(RROCE_SEND_FENCE);
	C(RROCE_SEND_SIGNALED);
	C(RROCE_SEND_SOLICITED);
	C(RROCE_SEND_INLINE);
	C(RROCE_SEND_IP_CSUM);

	C(RROCE_WC_SUCCESS);
	C(RROCE_WC_LOC_LEN_ERR);
	C(RROCE_WC_LOC_QP_OP_ERR);
	C(RROCE_WC_LOC_EEC_OP_ERR);
	C(RROCE_WC_LOC_PROT_ERR);
	C(RROCE_WC_WR_FLUSH_ERR);
	C(RROCE_WC_MW_BIND_ERR);
	C(RROCE_WC_BAD_RESP_ERR);
	C(RROCE_WC_LOC_ACCESS_ERR);
	C(RROCE_WC_REM_INV_REQ_ERR);
	C(RROCE_WC_REM_ACCESS_ERR);
	C(RROCE_WC_REM_OP_ERR);
	C(RROCE_WC_RETRY_EXC_ERR);
	C(RROCE_WC_RNR_RETRY_EXC_ERR);
	C(RROCE_WC_LOC_RDD_VIOL_ERR);
	C(RROCE_WC_REM_INV_RD_REQ_ERR);
	C(RROCE_WC_REM_ABORT_ERR);
	C(RROCE_WC_INV_EECN_ERR);
	C(RROCE_WC_INV_EEC_STATE_ERR);
	C(RROCE_WC_FATAL_ERR);
	C(RROCE_WC_RESP_TIMEOUT_ERR);
	C(RROCE_WC_GENERAL_ERR);

	C(RROCE_WC_SEND);
	C(RROCE_WC_RDMA_WRITE);
	C(RROCE_WC_RDMA_READ);
	C(RROCE_WC_COMP_SWAP);
	C(RROCE_WC_FETCH_ADD);
	C(RROCE_WC_BIND_MW);
	C(RROCE_WC_LOCAL_INV);
	C(RROCE_WC_TSO);
	C(RROCE_WC_FLUSH);
	C(RROCE_WC_ATOMIC_WRITE);
	C(RROCE_WC_RECV);
	C(RROCE_WC_RECV_RDMA_WITH_IMM);

	C(RROCE_WC_GRH);
	C(RROCE_WC_WITH_IMM);
	C(RROCE_WC_IP_CSUM_OK);
	C(RROCE_WC_WITH_INV);

	C(RROCE_MAX_QP);
	C(RROCE_MIN_QP_INDEX);
	C(RROCE_MAX_QP_WR);
	C(RROCE_MAX_SEND_SGE);
	C(RROCE_MAX_RECV_SGE);
	C(RROCE_MAX_SGE_RD);
	C(RROCE_MAX_INLINE_DATA);
	C(RROCE_MAX_CQ);
	C(RROCE_MAX_CQE);
	C(RROCE_MAX_SRQ);
	C(RROCE_MAX_SRQ_WR);
	C(RROCE_MAX_SRQ_SGE);
	C(RROCE_MAX_PD);
	C(RROCE_MAX_MR);
	C(RROCE_MAX_MW);
	C(RROCE_MAX_MR_SIZE);
	C(RROCE_PAGE_SIZE_CAP);
	C(RROCE_MAX_FAST_REG_PAGE_LIST_LEN);
	C(RROCE_MAX_AH);
	C(RROCE_MIN_AH_INDEX);
	C(RROCE_MAX_QP_RD_ATOM);
	C(RROCE_MAX_QP_INIT_RD_ATOM);
	C(RROCE_MAX_RES_RD_ATOM);
	C(RROCE_MAX_MCAST_GRP);
	C(RROCE_MAX_MCAST_QP_ATTACH);
	C(RROCE_MAX_TOTAL_MCAST_QP_ATTACH);
	C(RROCE_MAX_PKEYS);
	C(RROCE_GID_TBL_LEN);
	C(RROCE_MAX_MTU);
	C(RROCE_MAX_MSG_SIZE);
	C(RROCE_LOCAL_CA_ACK_DELAY);
	C(RROCE_VENDOR_ID);
	return 0;
}
