/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * rroce: software RoCEv2 RDMA device -- user/kernel ABI.
 *
 * rroce registers its devices with driver id RDMA_DRIVER_RXE and per-device
 * uverbs ABI version 2, so the unmodified rxe provider of rdma-core
 * (librxe, rdma-core v44 and later) drives it. Every structure below is
 * therefore byte-for-byte the structure of <rdma/rdma_user_rxe.h> (and, for
 * the CQE, struct ib_uverbs_wc of <rdma/ib_user_verbs.h>) under an rroce_
 * name. scripts/check-uapi.sh proves it with _Static_assert against the
 * installed rxe header; tests/abi_layout.rs proves that src/abi/ (the Rust
 * mirror compiled into the kernel module) agrees with this file.
 *
 * Reading guide. Each field's comment says who writes it and who may trust
 * it: "K" is the kernel, "U" is the user-space provider. Everything in a
 * mapped ring is writable by user space at any time, so the kernel trusts
 * nothing it reads there: it masks every index, copies each element into
 * kernel memory once and validates the copy. User space may trust what the
 * kernel writes.
 *
 * Protocol, memory ordering and the extension rules are described in
 * Documentation/abi.rst. In short:
 *
 *  - Create CQ/QP/SRQ (and resize CQ, modify SRQ max_wr) return a
 *    struct rroce_mminfo per ring; user space mmap()s the uverbs command fd
 *    at mminfo.offset for exactly mminfo.size bytes (MAP_SHARED, read and
 *    write). An offset is unique within the uverbs file and stays reserved
 *    until the ring is destroyed and its last mapping is gone.
 *  - A ring is struct rroce_queue_buf followed by 2^n slots of
 *    2^log2_elem_size bytes. The producer writes the element, then stores its
 *    index with release semantics; the consumer loads the peer's index with
 *    acquire semantics. Indices are stored already masked (0..index_mask).
 *    Empty: producer == consumer. Full: ((producer + 1) & mask) == consumer.
 *  - SQ, RQ, SRQ: U produces, K consumes. CQ: K produces, U consumes.
 *  - The send doorbell is IB_USER_VERBS_CMD_POST_SEND with wr_count == 0.
 *    The receive queues have no doorbell.
 *
 * Extension rule: the ring and element layouts are frozen (librxe compiles
 * them in). rroce may only extend the ABI by appending fields to driver
 * responses (these below, or a new GET_CONTEXT response, which librxe
 * requests with length 0); the kernel copies min(sizeof, udata outlen)
 * bytes, so an old provider that passes the old size keeps working, and a
 * new provider detects an extension by the outlen it passed and a non-zero
 * RROCE_ABI_MINOR reported in such an appended field. Driver command input
 * may only grow likewise; the kernel requires unknown trailing input bytes
 * to be zero. Nothing is extended yet: RROCE_ABI_MINOR is 0.
 */

#ifndef RROCE_ABI_USER_H
#define RROCE_ABI_USER_H

#include <linux/types.h>
#include <linux/stddef.h>	/* __DECLARE_FLEX_ARRAY */

/* Identity -------------------------------------------------------------- */

/* enum rdma_driver_id RDMA_DRIVER_RXE: selects librxe. */
#define RROCE_DRIVER_ID			14
/* ib_device_ops.uverbs_abi_ver: librxe accepts 1..2; rxe reports 2. */
#define RROCE_UVERBS_ABI_VERSION	2
/* rroce's own extension level on top of the rxe ABI; see the rule above. */
#define RROCE_ABI_MINOR			0

/* Shared ring header -------------------------------------------------- */

/* Byte offsets inside struct rroce_queue_buf (== offsetof). */
#define RROCE_QUEUE_LOG2_ELEM_SIZE_OFFSET	0
#define RROCE_QUEUE_INDEX_MASK_OFFSET		4
#define RROCE_QUEUE_PRODUCER_OFFSET		128
#define RROCE_QUEUE_CONSUMER_OFFSET		256
#define RROCE_QUEUE_DATA_OFFSET			384

/*
 * The header of every mapped ring (CQ, SQ, RQ, SRQ). The two indices live on
 * their own 128-byte blocks so producer and consumer do not share a cache
 * line. Element i is at data + (i << log2_elem_size). The element size is a
 * power of two, at least 64 and at least the element's natural size (the
 * CQE, or a WQE header plus its SGE/inline area).
 */
struct rroce_queue_buf {
	__u32	log2_elem_size;	/* K at create; U reads it; K never re-reads it */
	__u32	index_mask;	/* K at create: slots - 1; U reads; K never re-reads */
	__u32	pad_1[30];	/* K zeroes; reserved */
	__u32	producer_index;	/* producer side (U for SQ/RQ/SRQ, K for CQ); peer masks it */
	__u32	pad_2[31];	/* K zeroes; reserved */
	__u32	consumer_index;	/* consumer side (K for SQ/RQ/SRQ, U for CQ); peer masks it */
	__u32	pad_3[31];	/* K zeroes; reserved */
	__u8	data[];		/* the slots; written by the producer only */
};

/* Mapping info returned by the create/resize commands. */
struct rroce_mminfo {
	__aligned_u64	offset;	/* K: mmap offset on the uverbs fd; U passes it back to mmap() */
	__u32		size;	/* K: bytes to map (page aligned); other lengths are refused */
	__u32		pad;	/* K writes 0 */
};

/* Driver data of the uverbs commands ------------------------------------ */

/* CREATE_CQ response (driver part): the CQ ring. */
struct rroce_create_cq_resp {
	struct rroce_mminfo	mi;	/* K writes; U maps it */
};

/* RESIZE_CQ response (driver part): the new CQ ring; the old one goes away. */
struct rroce_resize_cq_resp {
	struct rroce_mminfo	mi;	/* K writes; U unmaps the old ring and maps this */
};

/* CREATE_QP response (driver part). The driver command input is empty. */
struct rroce_create_qp_resp {
	struct rroce_mminfo	rq_mi;	/* K writes; ignored (size 0) when the QP uses an SRQ */
	struct rroce_mminfo	sq_mi;	/* K writes; U maps it */
};

/* CREATE_SRQ response (driver part). */
struct rroce_create_srq_resp {
	struct rroce_mminfo	mi;		/* K writes; U maps it */
	__u32			srq_num;	/* K writes; informational */
	__u32			reserved;	/* K writes 0 */
};

/*
 * MODIFY_SRQ command (driver part). When IBV_SRQ_MAX_WR is set the kernel
 * resizes the ring and copy_to_user()s a struct rroce_mminfo to
 * mmap_info_addr (not into a response).
 */
struct rroce_modify_srq_cmd {
	__aligned_u64	mmap_info_addr;	/* U: user address of a struct rroce_mminfo; K validates via copy_to_user */
};

/*
 * CREATE_AH response (driver part). ah_num is never 0: librxe falls back to
 * building an in-WQE address vector only when it sees 0 (an "old kernel").
 */
struct rroce_create_ah_resp {
	__u32	ah_num;		/* K writes: RROCE_MIN_AH_INDEX..RROCE_MAX_AH; U copies into wr.ud.ah_num */
	__u32	reserved;	/* K writes 0 */
};

/* Address vector (UD), as librxe's old-kernel path builds it -------------- */

#define RROCE_NETWORK_TYPE_IPV4		1
#define RROCE_NETWORK_TYPE_IPV6		2

/* The two halves of a GID, big-endian. */
struct rroce_gid_global {
	__be64	subnet_prefix;	/* writer of the enclosing AV */
	__be64	interface_id;	/* writer of the enclosing AV */
};

/* A GID (== union rxe_gid). */
union rroce_gid {
	__u8			raw[16];	/* writer of the enclosing AV */
	struct rroce_gid_global	global;		/* the same bytes as two __be64 */
};

/* GRH fields of an address vector (== struct rxe_global_route). */
struct rroce_global_route {
	union rroce_gid	dgid;		/* U (old-kernel path); K ignores: it uses ah_num */
	__u32		flow_label;	/* U; K ignores */
	__u8		sgid_index;	/* U; K ignores */
	__u8		hop_limit;	/* U; K ignores */
	__u8		traffic_class;	/* U; K ignores */
	__u8		reserved;	/* implicit padding in rxe; K ignores */
};

/* Byte image of struct sockaddr_in (16 bytes). */
struct rroce_sockaddr_in {
	__u16	family;		/* AF_INET (2), host order */
	__be16	port;		/* network order */
	__be32	addr;		/* IPv4 address, network order */
	__u8	zero[8];	/* sin_zero */
};

/* Byte image of struct sockaddr_in6 (28 bytes). */
struct rroce_sockaddr_in6 {
	__u16	family;		/* AF_INET6 (10), host order */
	__be16	port;		/* network order */
	__be32	flowinfo;	/* network order */
	__u8	addr[16];	/* IPv6 address */
	__u32	scope_id;	/* host order */
};

/* The sgid_addr/dgid_addr union of struct rxe_av (28 bytes, 4-aligned). */
union rroce_sockaddr {
	struct rroce_sockaddr_in	sin;	/* when network_type == IPV4 */
	struct rroce_sockaddr_in6	sin6;	/* when network_type == IPV6 */
};

/*
 * Address vector (== struct rxe_av). librxe writes one into wr.ud.av only
 * when create_ah returned ah_num == 0, which rroce never does; rroce
 * resolves the destination from wr.ud.ah_num and ignores these bytes.
 */
struct rroce_av {
	__u8				port_num;	/* U; K ignores */
	__u8				network_type;	/* U: RROCE_NETWORK_TYPE_*; K ignores */
	__u8				dmac[6];	/* U; K ignores */
	struct rroce_global_route	grh;		/* U; K ignores */
	union rroce_sockaddr		sgid_addr;	/* U; K ignores */
	union rroce_sockaddr		dgid_addr;	/* U; K ignores */
};

/* Send work request ------------------------------------------------------- */

/* wr.flush (IB_WR_FLUSH). */
struct rroce_wr_flush {
	__aligned_u64	remote_addr;	/* U; K validates against the rkey's MR */
	__u32		length;		/* U; K validates */
	__u32		rkey;		/* U; K looks it up */
	__u8		type;		/* U: IB_FLUSH_*; K validates */
	__u8		level;		/* U: IB_FLUSH_*; K validates */
	__u8		reserved[6];	/* implicit padding in rxe; K ignores */
};

/* wr.rdma (RDMA WRITE[_WITH_IMM], RDMA READ). */
struct rroce_wr_rdma {
	__aligned_u64	remote_addr;	/* U; K copies, the responder validates */
	__u32		rkey;		/* U; K copies, the responder validates */
	__u32		reserved;	/* U writes 0 (memset); K ignores */
};

/* wr.atomic (CMP_AND_SWP, FETCH_AND_ADD). */
struct rroce_wr_atomic {
	__aligned_u64	remote_addr;	/* U; K requires 8-byte alignment */
	__aligned_u64	compare_add;	/* U; K copies */
	__aligned_u64	swap;		/* U; K copies */
	__u32		rkey;		/* U; K copies, the responder validates */
	__u32		reserved;	/* U writes 0; K ignores */
};

/* wr.ud (UD QPs). */
struct rroce_wr_ud {
	__u32		remote_qpn;	/* U; K masks to 24 bits */
	__u32		remote_qkey;	/* U; K copies (bit 31 set: K uses the QP's qkey) */
	__u16		pkey_index;	/* U writes 0; K ignores */
	__u16		reserved;	/* U writes 0; K ignores */
	__u32		ah_num;		/* U: from rroce_create_ah_resp; K looks it up and checks its PD */
	__u32		pad[4];		/* U writes 0; K ignores */
	struct rroce_av	av;		/* U (old-kernel path only); K ignores */
};

/* wr.mw (BIND_MW). */
struct rroce_wr_mw {
	__aligned_u64	addr;		/* U; K validates against the MR */
	__aligned_u64	length;		/* U; K validates against the MR */
	__u32		mr_lkey;	/* U; K looks it up */
	__u32		mw_rkey;	/* U: the MW's current rkey; K looks it up */
	__u32		rkey;		/* U: the new rkey; K checks its index bits */
	__u32		access;		/* U: IBV_ACCESS_*; K validates */
};

/* The opcode-dependent part of a send WR (120 bytes). */
union rroce_wr_union {
	struct rroce_wr_flush	flush;	/* opcode RROCE_WR_FLUSH */
	struct rroce_wr_rdma	rdma;	/* RDMA WRITE/READ opcodes */
	struct rroce_wr_atomic	atomic;	/* atomic opcodes */
	struct rroce_wr_ud	ud;	/* SEND* on UD QPs */
	struct rroce_wr_mw	mw;	/* RROCE_WR_BIND_MW */
};

/* The work request part of a send WQE (== struct rxe_send_wr, 144 bytes). */
struct rroce_send_wr {
	__aligned_u64		wr_id;		/* U; K copies it into the CQE unchanged */
	__u32			reserved;	/* U: 0 (old providers: num_sge); K ignores */
	__u32			opcode;		/* U: RROCE_WR_*; K validates against the QP type */
	__u32			send_flags;	/* U: RROCE_SEND_*; K validates */
	union {
		__be32		imm_data;		/* U: *_WITH_IMM; network order, K sends it as is */
		__u32		invalidate_rkey;	/* U: SEND_WITH_INV, LOCAL_INV; K looks it up */
	} ex;
	union rroce_wr_union	wr;		/* U; member chosen by opcode and QP type */
};

/* Send and receive WQEs --------------------------------------------------- */

/* A scatter/gather element (== struct ib_sge / struct ibv_sge). */
struct rroce_sge {
	__aligned_u64	addr;	/* U; K checks it against the lkey's MR */
	__u32		length;	/* U; K checks it against the MR and sums it itself */
	__u32		lkey;	/* U; K looks it up in the QP's PD */
};

/*
 * DMA state of a WQE (== struct rxe_dma_info). rxe keeps its progress
 * (resid, cur_sge, sge_offset) here, in user-writable memory; rroce copies
 * the WQE and keeps progress in kernel memory only, so it never reads those
 * three and never writes any field of a ring it does not produce.
 */
struct rroce_dma_info {
	__u32	length;		/* U: total bytes; K: length of inlined data (bounded by max_inline); else ignored, K sums sge[] */
	__u32	resid;		/* U: == length; K ignores */
	__u32	cur_sge;	/* U: 0; K ignores */
	__u32	num_sge;	/* U: SGE count (inline: the caller's count, meaningless); K bounds it by the QP's max_sge */
	__u32	sge_offset;	/* U: 0; K ignores */
	__u32	reserved;	/* U: 0 or stale; K ignores */
	union {
		__DECLARE_FLEX_ARRAY(__u8, inline_data);	/* U: RROCE_SEND_INLINE data, dma.length bytes */
		__DECLARE_FLEX_ARRAY(__u8, atomic_wr);		/* U: the 8 bytes of an ATOMIC_WRITE */
		__DECLARE_FLEX_ARRAY(struct rroce_sge, sge);	/* U: num_sge SGEs */
	};
};

/*
 * A send queue element (== struct rxe_send_wqe): this 208-byte header, then
 * the SGE array or the inlined data at offset 208 (dma.sge). librxe's classic
 * post_send zeroes only wr and writes iova, dma.{length,resid,num_sge,
 * cur_sge,sge_offset}, state and ssn; every other header field is stale.
 * rroce copies the header and reads only wr, dma.length (inlined data),
 * dma.num_sge and the SGE/inline area of the copy.
 */
struct rroce_send_wqe {
	struct rroce_send_wr	wr;		/* U; see struct rroce_send_wr */
	__u32			status;		/* rxe-private; stale; K ignores and never writes */
	__u32			state;		/* U: 0; K ignores and never writes */
	__aligned_u64		iova;		/* U: remote address copy; K uses wr.rdma/atomic instead */
	__u32			mask;		/* rxe-private; stale; K ignores */
	__u32			first_psn;	/* rxe-private; stale; K ignores */
	__u32			last_psn;	/* rxe-private; stale; K ignores */
	__u32			ack_length;	/* rxe-private; stale; K ignores */
	__u32			ssn;		/* U: send sequence number; K ignores (keeps its own) */
	__u32			has_rd_atomic;	/* rxe-private; stale; K ignores */
	struct rroce_dma_info	dma;		/* U; see struct rroce_dma_info */
};

/*
 * A receive queue / SRQ element (== struct rxe_recv_wqe): this 40-byte
 * header, then dma.sge[dma.num_sge] at offset 40.
 */
struct rroce_recv_wqe {
	__aligned_u64		wr_id;		/* U; K copies it into the CQE unchanged */
	__u32			reserved;	/* U: stale (old providers: num_sge); K ignores */
	__u32			padding;	/* U: stale; K ignores */
	struct rroce_dma_info	dma;		/* U: length, num_sge, sge[]; K bounds num_sge, sums sge[] itself */
};

/* Completion queue entry -------------------------------------------------- */

/*
 * A CQ element (== struct ib_uverbs_wc, 48 bytes). librxe memcpy()s it into
 * struct ibv_wc, which has the same layout up to dlid_path_bits.
 */
struct rroce_cqe {
	__aligned_u64	wr_id;		/* K: the WQE's wr_id; U trusts */
	__u32		status;		/* K: RROCE_WC_* status; U trusts */
	__u32		opcode;		/* K: RROCE_WC_* opcode; U trusts */
	__u32		vendor_err;	/* K: 0 */
	__u32		byte_len;	/* K: bytes transferred; U trusts */
	union {
		__be32	imm_data;		/* K: with RROCE_WC_WITH_IMM; network order */
		__u32	invalidate_rkey;	/* K: with RROCE_WC_WITH_INV */
	} ex;
	__u32		qp_num;		/* K: the local QP number */
	__u32		src_qp;		/* K: UD receives: the sender's QPN */
	__u32		wc_flags;	/* K: RROCE_WC_* flags (libibverbs encoding) */
	__u16		pkey_index;	/* K: 0 */
	__u16		slid;		/* K: 0 (RoCE has no LIDs) */
	__u8		sl;		/* K: 0 */
	__u8		dlid_path_bits;	/* K: 0 */
	__u8		port_num;	/* K: 1 on receives; not in struct ibv_wc */
	__u8		reserved;	/* K: 0 */
};

/* Values found in the rings --------------------------------------------- */

/* rroce_send_wr.opcode (== IB_UVERBS_WR_* == IBV_WR_*). */
#define RROCE_WR_RDMA_WRITE			0
#define RROCE_WR_RDMA_WRITE_WITH_IMM		1
#define RROCE_WR_SEND				2
#define RROCE_WR_SEND_WITH_IMM			3
#define RROCE_WR_RDMA_READ			4
#define RROCE_WR_ATOMIC_CMP_AND_SWP		5
#define RROCE_WR_ATOMIC_FETCH_AND_ADD		6
#define RROCE_WR_LOCAL_INV			7
#define RROCE_WR_BIND_MW			8
#define RROCE_WR_SEND_WITH_INV			9
#define RROCE_WR_TSO				10
#define RROCE_WR_RDMA_READ_WITH_INV		11
#define RROCE_WR_MASKED_ATOMIC_CMP_AND_SWP	12
#define RROCE_WR_MASKED_ATOMIC_FETCH_AND_ADD	13
#define RROCE_WR_FLUSH				14
#define RROCE_WR_ATOMIC_WRITE			15

/* rroce_send_wr.send_flags (== IB_SEND_* == IBV_SEND_*). */
#define RROCE_SEND_FENCE		(1U << 0)
#define RROCE_SEND_SIGNALED		(1U << 1)
#define RROCE_SEND_SOLICITED		(1U << 2)
#define RROCE_SEND_INLINE		(1U << 3)
#define RROCE_SEND_IP_CSUM		(1U << 4)

/* rroce_cqe.status (== enum ib_wc_status == enum ibv_wc_status). */
#define RROCE_WC_SUCCESS		0
#define RROCE_WC_LOC_LEN_ERR		1
#define RROCE_WC_LOC_QP_OP_ERR		2
#define RROCE_WC_LOC_EEC_OP_ERR		3
#define RROCE_WC_LOC_PROT_ERR		4
#define RROCE_WC_WR_FLUSH_ERR		5
#define RROCE_WC_MW_BIND_ERR		6
#define RROCE_WC_BAD_RESP_ERR		7
#define RROCE_WC_LOC_ACCESS_ERR		8
#define RROCE_WC_REM_INV_REQ_ERR	9
#define RROCE_WC_REM_ACCESS_ERR		10
#define RROCE_WC_REM_OP_ERR		11
#define RROCE_WC_RETRY_EXC_ERR		12
#define RROCE_WC_RNR_RETRY_EXC_ERR	13
#define RROCE_WC_LOC_RDD_VIOL_ERR	14
#define RROCE_WC_REM_INV_RD_REQ_ERR	15
#define RROCE_WC_REM_ABORT_ERR		16
#define RROCE_WC_INV_EECN_ERR		17
#define RROCE_WC_INV_EEC_STATE_ERR	18
#define RROCE_WC_FATAL_ERR		19
#define RROCE_WC_RESP_TIMEOUT_ERR	20
#define RROCE_WC_GENERAL_ERR		21

/* rroce_cqe.opcode (== IB_UVERBS_WC_* == IBV_WC_*; RECV* == IB_WC_RECV*). */
#define RROCE_WC_SEND			0
#define RROCE_WC_RDMA_WRITE		1
#define RROCE_WC_RDMA_READ		2
#define RROCE_WC_COMP_SWAP		3
#define RROCE_WC_FETCH_ADD		4
#define RROCE_WC_BIND_MW		5
#define RROCE_WC_LOCAL_INV		6
#define RROCE_WC_TSO			7
#define RROCE_WC_FLUSH			8
#define RROCE_WC_ATOMIC_WRITE		9
#define RROCE_WC_RECV			128
#define RROCE_WC_RECV_RDMA_WITH_IMM	129

/*
 * rroce_cqe.wc_flags, in the encoding of libibverbs (enum ibv_wc_flags),
 * because librxe hands the CQE to the application unchanged. The kernel's
 * enum ib_wc_flags differs: its IB_WC_WITH_INVALIDATE is bit 2, which an
 * application reads as IBV_WC_IP_CSUM_OK. rxe writes the kernel encoding;
 * rroce writes this one into user-mapped CQs.
 */
#define RROCE_WC_GRH			(1U << 0)
#define RROCE_WC_WITH_IMM		(1U << 1)
#define RROCE_WC_IP_CSUM_OK		(1U << 2)	/* never set by rroce */
#define RROCE_WC_WITH_INV		(1U << 3)

/*
 * Device limits, as query_device/query_port report them (src/verbs/mod.rs) and
 * as rroce enforces them.
 */
#define RROCE_MAX_QP			0x10000		/* QPs per device */
#define RROCE_MIN_QP_INDEX		16		/* lowest QPN of a normal QP (0, 1: SMI/GSI) */
#define RROCE_MAX_QP_WR			0x4000		/* WRs per SQ/RQ (ring: 32768 slots of <= 1 KiB) */
#define RROCE_MAX_SEND_SGE		32		/* SGEs per send WR */
#define RROCE_MAX_RECV_SGE		32		/* SGEs per receive WR */
#define RROCE_MAX_SGE_RD		32		/* SGEs per RDMA READ WR */
#define RROCE_MAX_INLINE_DATA		512		/* == RROCE_MAX_SEND_SGE * sizeof(struct rroce_sge) */
#define RROCE_MAX_CQ			0x4000		/* CQs per device */
#define RROCE_MAX_CQE			0x7fff		/* CQEs per CQ (ring: 32768 slots of 64 B) */
#define RROCE_MAX_SRQ			0x4000		/* SRQs per device */
#define RROCE_MAX_SRQ_WR		0x4000		/* WRs per SRQ */
#define RROCE_MAX_SRQ_SGE		32		/* SGEs per SRQ WR */
#define RROCE_MAX_PD			0x7ffc		/* PDs per device */
#define RROCE_MAX_MR			0x4000		/* MRs per device */
#define RROCE_MAX_MW			0x4000		/* MWs per device */
#define RROCE_MAX_MR_SIZE		0xffffffffffffffffULL	/* bytes per MR: no limit of its own */
#define RROCE_PAGE_SIZE_CAP		0xfffff000U	/* MR page sizes: 4 KiB .. 2 GiB */
#define RROCE_MAX_FAST_REG_PAGE_LIST_LEN 512		/* pages per fast-register WR */
#define RROCE_MAX_AH			0x3fff		/* AHs per device */
#define RROCE_MIN_AH_INDEX		1		/* lowest ah_num (0 means "no AH index") */
#define RROCE_MAX_QP_RD_ATOM		128		/* responder RDMA READ/atomic resources per QP */
#define RROCE_MAX_QP_INIT_RD_ATOM	128		/* initiator RDMA READ/atomic depth per QP */
#define RROCE_MAX_RES_RD_ATOM		0x3f000		/* responder resources per device */
#define RROCE_MAX_MCAST_GRP		1024		/* UD multicast groups per device */
#define RROCE_MAX_MCAST_QP_ATTACH	56		/* QPs per multicast group */
#define RROCE_MAX_TOTAL_MCAST_QP_ATTACH	16384		/* attachments per device */
#define RROCE_MAX_PKEYS			1		/* P_Key table: 0xffff only */
#define RROCE_GID_TBL_LEN		1024		/* GID table entries per port */
#define RROCE_MAX_MTU			4096		/* IB MTU bytes (IB_MTU_4096) */
#define RROCE_MAX_MSG_SIZE		0x80000000U	/* bytes per message (2 GiB) */
#define RROCE_LOCAL_CA_ACK_DELAY	15		/* 4.096 us * 2^15 */
#define RROCE_VENDOR_ID			0xffffff	/* IBTA: no OUI */

#endif /* RROCE_ABI_USER_H */
