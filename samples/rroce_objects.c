// SPDX-License-Identifier: GPL-2.0
/*
 * rroce_objects: open an RDMA device through the stock libibverbs (its rxe
 * provider drives rroce), create and tear down the verbs objects rroce
 * implements, check misuse is refused with the right errno, and print what
 * happened. Exit status 0 only if every step behaved.
 *
 *   rroce_objects [-d DEVICE] [-g GID_INDEX]
 *   rroce_objects -d DEVICE -w SECONDS
 *
 * With -w it only creates a PD, an MR and a CQ (its ring mapped), waits,
 * then polls, arms and tears down, printing what each returned: for tests
 * that remove the device or unload the module under a live process.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rroce_util.h"

#include <rdma/rroce-abi.h>

static int failures;

#define STEP(ok, ...)                                                 \
	do {                                                          \
		int _ok = (ok);                                       \
		printf("%s ", _ok ? "  ok  " : "  FAIL");             \
		printf(__VA_ARGS__);                                  \
		printf("\n");                                         \
		if (!_ok)                                             \
			failures++;                                   \
	} while (0)

/* Hold objects across a device removal: must not crash, must not hang. */
static int hold(struct ibv_context *ctx, int secs)
{
	static char buf[65536];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_wc wc;

	if (!pd || !mr || !cq) {
		printf("hold: could not create objects\n");
		return 1;
	}
	printf("hold: objects created, holding %d s\n", secs);
	fflush(stdout);
	sleep(secs);
	/* The ring stays mapped: polling reads valid memory even now. */
	int n = ibv_poll_cq(cq, 1, &wc);
	int r = ibv_req_notify_cq(cq, 0);
	int d1 = ibv_destroy_cq(cq), d2 = ibv_dereg_mr(mr), d3 = ibv_dealloc_pd(pd);
	printf("hold: after %d s: poll_cq %d, req_notify_cq %d, destroy %d/%d/%d\n", secs, n, r,
	       d1, d2, d3);
	ibv_close_device(ctx);
	printf("hold: done\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *devname = "rroce0";
	int gid_index = 1, opt, hold_secs = -1;

	while ((opt = getopt(argc, argv, "d:g:w:")) != -1) {
		if (opt == 'd')
			devname = optarg;
		else if (opt == 'g')
			gid_index = atoi(optarg);
		else if (opt == 'w')
			hold_secs = atoi(optarg);
		else
			return 2;
	}

	struct ibv_context *ctx = rroce_open_dev(devname);
	STEP(ctx != NULL, "open %s", devname);
	if (!ctx)
		return 1;
	if (hold_secs >= 0)
		return hold(ctx, hold_secs);

	struct ibv_device_attr dattr;
	STEP(ibv_query_device(ctx, &dattr) == 0, "query_device: max_cqe %d max_mr %d", dattr.max_cqe,
	     dattr.max_mr);
	STEP(dattr.max_cqe == RROCE_MAX_CQE, "max_cqe matches the uapi header (%d)", RROCE_MAX_CQE);
	struct ibv_port_attr pattr;
	STEP(ibv_query_port(ctx, 1, &pattr) == 0 && pattr.state == IBV_PORT_ACTIVE &&
		     pattr.link_layer == IBV_LINK_LAYER_ETHERNET,
	     "query_port: ACTIVE, Ethernet, active_mtu %d", 128 << pattr.active_mtu);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	STEP(pd != NULL, "alloc_pd");

	/* Memory regions. */
	size_t len = 1 << 20;
	char *buf = aligned_alloc(4096, len);
	memset(buf, 0x5a, len);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ);
	/* The keys are random: printed apart, so the step's name stays fixed. */
	STEP(mr != NULL, "reg_mr 1 MiB");
	if (mr)
		printf("      lkey 0x%x rkey 0x%x\n", mr->lkey, mr->rkey);
	errno = 0;
	struct ibv_mr *bad = ibv_reg_mr(pd, buf, len, IBV_ACCESS_REMOTE_WRITE);
	STEP(bad == NULL && errno == EINVAL, "reg_mr remote write without local write: %s",
	     strerror(errno));
	errno = 0;
	bad = ibv_reg_mr(pd, buf, len, 1u << 28);
	STEP(bad == NULL && errno == EINVAL, "reg_mr with an unknown access flag: %s",
	     strerror(errno));

	int busy = ibv_dealloc_pd(pd);
	STEP(busy == EBUSY, "dealloc_pd while an MR uses it refused: %s", strerror(busy));

	/* Address handle through the GID table. */
	union ibv_gid gid;
	STEP(ibv_query_gid(ctx, 1, gid_index, &gid) == 0, "query_gid index %d", gid_index);
	struct ibv_ah_attr ah_attr = {
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 64 },
	};
	struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
	STEP(ah != NULL, "create_ah to our own GID");
	ah_attr.is_global = 0;
	errno = 0;
	struct ibv_ah *bad_ah = ibv_create_ah(pd, &ah_attr);
	STEP(bad_ah == NULL, "create_ah without GRH refused: %s", strerror(errno));

	/* Completion queues. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	STEP(ch != NULL, "create_comp_channel");
	struct ibv_cq *cq = ibv_create_cq(ctx, 100, NULL, ch, 0);
	STEP(cq != NULL, "create_cq 100: got %d entries", cq ? cq->cqe : 0);
	errno = 0;
	struct ibv_cq *bad_cq = ibv_create_cq(ctx, 0, NULL, NULL, 0);
	STEP(bad_cq == NULL && errno == EINVAL, "create_cq 0 refused: %s", strerror(errno));
	errno = 0;
	bad_cq = ibv_create_cq(ctx, dattr.max_cqe + 1, NULL, NULL, 0);
	STEP(bad_cq == NULL && errno == EINVAL, "create_cq above max_cqe refused: %s",
	     strerror(errno));
	errno = 0;
	bad_cq = ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors);
	STEP(bad_cq == NULL, "create_cq with comp_vector %d out of range refused: %s",
	     ctx->num_comp_vectors, strerror(errno));

	/* Queue pairs (objects and state machine; the transport comes later). */
	if (cq) {
		struct ibv_qp_init_attr qia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 100, .max_recv_wr = 50, .max_send_sge = 2,
				 .max_recv_sge = 3, .max_inline_data = 100 },
		};
		struct ibv_qp *qp = ibv_create_qp(pd, &qia);
		STEP(qp != NULL && qia.cap.max_send_wr >= 100 && qia.cap.max_inline_data >= 100 &&
			     qia.cap.max_send_sge >= 2,
		     "create_qp RC: qpn %u, send_wr %u, send_sge %u, inline %u", qp ? qp->qp_num : 0,
		     qia.cap.max_send_wr, qia.cap.max_send_sge, qia.cap.max_inline_data);
		struct ibv_qp_init_attr bad_qia = qia;
		bad_qia.cap.max_send_sge = dattr.max_sge + 1;
		errno = 0;
		struct ibv_qp *bad_qp = ibv_create_qp(pd, &bad_qia);
		STEP(bad_qp == NULL, "create_qp with too many SGEs refused: %s", strerror(errno));
		bad_qia = qia;
		bad_qia.qp_type = IBV_QPT_UC;
		struct ibv_qp *uc = ibv_create_qp(pd, &bad_qia);
		STEP(uc != NULL, "create_qp UC: qpn %u", uc ? uc->qp_num : 0);
		if (uc)
			STEP(!ibv_destroy_qp(uc), "destroy_qp UC");
		bad_qia.qp_type = IBV_QPT_RAW_PACKET;
		errno = 0;
		bad_qp = ibv_create_qp(pd, &bad_qia);
		STEP(bad_qp == NULL, "create_qp raw packet refused: %s", strerror(errno));
		qia.qp_type = IBV_QPT_UD;
		struct ibv_qp *ud = ibv_create_qp(pd, &qia);
		STEP(ud != NULL, "create_qp UD: qpn %u", ud ? ud->qp_num : 0);
		if (qp) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
			int r = ibv_modify_qp(qp, &a, IBV_QP_STATE);
			STEP(r != 0, "RESET -> RTS refused: %s", strerror(r));
			a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
						  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
								     IBV_ACCESS_REMOTE_READ };
			r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
							  IBV_QP_ACCESS_FLAGS);
			STEP(r == 0, "RESET -> INIT: %s", strerror(r));
			a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
						  .dest_qp_num = qp->qp_num, .rq_psn = 0x123456,
						  .max_dest_rd_atomic = 4, .min_rnr_timer = 12,
						  .ah_attr = ah_attr };
			a.ah_attr.is_global = 1;
			int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			a.port_num = 2;
			r = ibv_modify_qp(qp, &a, rtr_mask | IBV_QP_PORT);
			STEP(r != 0, "INIT -> RTR with port 2 refused: %s", strerror(r));
			r = ibv_modify_qp(qp, &a, rtr_mask);
			STEP(r == 0, "INIT -> RTR (AV to our own GID): %s", strerror(r));
			a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
						  .rnr_retry = 7, .sq_psn = 0x654321,
						  .max_rd_atomic = 4 };
			r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
							  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
							  IBV_QP_MAX_QP_RD_ATOMIC);
			STEP(r == 0, "RTR -> RTS: %s", strerror(r));
			struct ibv_qp_attr q;
			struct ibv_qp_init_attr qi;
			r = ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_CAP | IBV_QP_SQ_PSN, &qi);
			STEP(r == 0 && q.qp_state == IBV_QPS_RTS && q.sq_psn == 0x654321 &&
				     q.rq_psn == 0x123456 && q.dest_qp_num == qp->qp_num &&
				     qi.cap.max_send_wr == qia.cap.max_send_wr,
			     "query_qp: state %d sq_psn 0x%x rq_psn 0x%x", q.qp_state, q.sq_psn,
			     q.rq_psn);
			errno = 0;
			r = ibv_destroy_cq(cq);
			STEP(r == EBUSY, "destroy_cq while QPs use it refused: %s", strerror(r));
			a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR };
			STEP(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "RTS -> ERR");
			STEP(ibv_destroy_qp(qp) == 0, "destroy_qp RC");
		}
		if (ud)
			STEP(ibv_destroy_qp(ud) == 0, "destroy_qp UD");
	}

	if (cq) {
		struct ibv_wc wc[4];
		STEP(ibv_poll_cq(cq, 4, wc) == 0, "poll empty CQ: 0 completions");
		STEP(ibv_resize_cq(cq, 1000) == 0 && cq->cqe >= 1000, "resize_cq to 1000: %d",
		     cq->cqe);
		STEP(ibv_poll_cq(cq, 4, wc) == 0, "poll resized CQ: 0 completions");
		STEP(ibv_resize_cq(cq, 10) == 0 && cq->cqe >= 10, "resize_cq down to 10: %d",
		     cq->cqe);
		errno = 0;
		int r = ibv_resize_cq(cq, dattr.max_cqe + 1);
		STEP(r != 0, "resize_cq above max_cqe refused: %s", strerror(r));
		STEP(ibv_req_notify_cq(cq, 0) == 0, "req_notify_cq (next completion)");
		STEP(ibv_req_notify_cq(cq, 1) == 0, "req_notify_cq (solicited)");
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		STEP(poll(&pfd, 1, 100) == 0, "no completion event without a completion");
		STEP(ibv_destroy_cq(cq) == 0, "destroy_cq");
	}
	if (ch)
		STEP(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
	if (ah)
		STEP(ibv_destroy_ah(ah) == 0, "destroy_ah");
	if (mr)
		STEP(ibv_dereg_mr(mr) == 0, "dereg_mr");
	if (pd)
		STEP(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	STEP(ibv_close_device(ctx) == 0, "close device");
	free(buf);
	printf("%s: %d failure(s)\n", argv[0], failures);
	return failures ? 1 : 0;
}
