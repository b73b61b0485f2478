// SPDX-License-Identifier: GPL-2.0
/*
 * A UD send doorbell must return after bounded work even while the process
 * keeps publishing send WQEs. One thread keeps rewriting the mapped send
 * queue's producer index to one behind the kernel's consumer index (every
 * load sees a full ring of valid, unsignaled UD SENDs); the main thread
 * rings the doorbell (the post_send command librxe writes, with no work
 * request) and reports how long it took.
 *
 *   ud_doorbell DEVICE GID_INDEX SECONDS
 *
 * Prints "doorbell returned after N ms" and exits 0 if the doorbell came
 * back within SECONDS; the caller's deadline catches one that never does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#include "../../samples/rroce_util.h"

#define SQ_WR 255 /* 256 slots: index mask 255 */
#define QKEY 0x11111111

/* struct rxe_queue_buf */
#define OFF_LOG2 0
#define OFF_MASK 4
#define OFF_PROD 128
#define OFF_CONS 256
#define OFF_DATA 384

static volatile int stop;
static uint8_t *sq;
static uint32_t mask;

static void *chase(void *arg)
{
	uint32_t *prod = (uint32_t *)(sq + OFF_PROD);
	uint32_t *cons = (uint32_t *)(sq + OFF_CONS);

	(void)arg;
	while (!stop) {
		uint32_t c = __atomic_load_n(cons, __ATOMIC_ACQUIRE);

		__atomic_store_n(prod, (c - 1) & mask, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* The mapped send queue: a uverbs mapping whose header says 256 slots of
 * `elem` bytes. */
static uint8_t *find_sq(uint32_t log2_elem)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uint8_t *found = NULL;

	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (!strstr(line, "uverbs") || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if (hi - lo < OFF_DATA)
			continue;
		uint8_t *p = (uint8_t *)lo;

		if (*(uint32_t *)(p + OFF_MASK) == SQ_WR &&
		    *(uint32_t *)(p + OFF_LOG2) == log2_elem)
			found = p;
	}
	fclose(f);
	return found;
}

static int doorbell(struct ibv_qp *qp)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} c = { 0 };
	struct ib_uverbs_post_send_resp resp;

	c.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	c.hdr.in_words = sizeof(c) / 4;
	c.hdr.out_words = sizeof(resp) / 4;
	c.cmd.response = (uintptr_t)&resp;
	c.cmd.qp_handle = qp->handle;
	c.cmd.wqe_size = sizeof(struct ib_uverbs_send_wr);
	return write(qp->context->cmd_fd, &c, sizeof(c)) == sizeof(c) ? 0 : errno;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX SECONDS\n", argv[0]);
		return 2;
	}
	int gid_index = atoi(argv[2]);
	double limit = atof(argv[3]) * 1e3;
	struct ibv_context *ctx = rroce_open_dev(argv[1]);

	if (!ctx) {
		fprintf(stderr, "no device %s\n", argv[1]);
		return 1;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = SQ_WR, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;

	if (!qp) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		return 1;
	}
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return perror("INIT"), 1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return perror("RTR"), 1;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return perror("RTS"), 1;

	/* Datagrams to our own QP (no receive posted: counted, dropped). */
	union ibv_gid gid;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };

	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		return perror("gid"), 1;
	aa.grh.dgid = gid;
	aa.grh.sgid_index = gid_index;
	aa.grh.hop_limit = 1;
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);

	if (!ah)
		return perror("ah"), 1;

	/* One honest post: its WQE becomes the template for every slot. */
	char msg[16] = "t42";
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = sizeof(msg) };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_INLINE,
		.wr.ud = { .ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = QKEY },
	}, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		return perror("post_send"), 1;
	uint32_t log2_elem = 0;

	for (uint32_t e = 208 + 64; (1u << log2_elem) < e; log2_elem++)
		;
	sq = find_sq(log2_elem);
	if (!sq) {
		fprintf(stderr, "send queue mapping not found\n");
		return 1;
	}
	mask = *(uint32_t *)(sq + OFF_MASK);
	for (int i = 0; i < 1000 && *(volatile uint32_t *)(sq + OFF_CONS) != 1; i++)
		usleep(10000);
	size_t elem = (size_t)1 << log2_elem;

	for (uint32_t i = 1; i <= mask; i++)
		memcpy(sq + OFF_DATA + i * elem, sq + OFF_DATA, elem);

	pthread_t t;

	pthread_create(&t, NULL, chase, NULL);
	usleep(100000);
	double t0 = now_ms();
	int err = doorbell(qp);
	double dt = now_ms() - t0;

	stop = 1;
	pthread_join(t, NULL);
	printf("doorbell returned after %.0f ms (%s)\n", dt, err ? strerror(err) : "ok");
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return dt <= limit ? 0 : 1;
}
