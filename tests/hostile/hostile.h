/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers of the hostile-user programs (tests/hostile/): device and
 * RC QP setup through the stock libibverbs, bounded polling, result lines,
 * and the one thing a normal program never does: finding the rings librxe
 * mapped from /dev/infiniband/uverbsN so that the test can scribble on them
 * as a hostile process would.
 */
#ifndef RROCE_HOSTILE_H
#define RROCE_HOSTILE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rroce-abi.h>

#include "rroce_util.h"

static int hu_failures, hu_passes;

/* One result line: "  ok   ..." or "  FAIL ..."; counted for the exit code. */
#define CHECK(ok, ...)                                                \
	do {                                                          \
		int _ok = (ok);                                       \
		printf("%s ", _ok ? "  ok  " : "  FAIL");             \
		printf(__VA_ARGS__);                                  \
		printf("\n");                                         \
		if (_ok)                                              \
			hu_passes++;                                  \
		else                                                  \
			hu_failures++;                                \
	} while (0)
#define INFO(...)                                                     \
	do {                                                          \
		printf("  info ");                                    \
		printf(__VA_ARGS__);                                  \
		printf("\n");                                         \
	} while (0)

static inline double hu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64*: reproducible garbage (the seed is printed). */
static uint64_t hu_rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t hu_rand(void)
{
	uint64_t x = hu_rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	hu_rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * Every wait in these programs is bounded; the watchdog is the last resort
 * for a verb that never returns (a kernel loop): it names the phase and
 * exits non-zero.
 */
static const char *volatile hu_phase = "start";
static void hu_alarm(int sig)
{
	char msg[200];
	int n = snprintf(msg, sizeof(msg), "  FAIL watchdog: stuck for too long in \"%s\"\n",
			 hu_phase);

	(void)sig;
	if (write(1, msg, n) < 0)
		_exit(3);
	_exit(3);
}
static inline void hu_watchdog(unsigned int secs)
{
	signal(SIGALRM, hu_alarm);
	alarm(secs);
}

/* Pins the calling thread to @cpu (if the machine has it); 0 on success. */
static inline int hu_pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}
static inline int hu_ncpus(void)
{
	cpu_set_t s;

	if (sched_getaffinity(0, sizeof(s), &s))
		return 1;
	return CPU_COUNT(&s);
}

/* ---- devices and QPs ---------------------------------------------------- */

struct hu_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	union ibv_gid gid;
	int gid_index;
};

#define HU_ALL_ACCESS                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* Opens @dev with a PD, a @len-byte MR and two CQs of @cqe entries. */
static inline int hu_open(struct hu_side *s, const char *dev, int gid_index, size_t len, int cqe)
{
	memset(s, 0, sizeof(*s));
	s->ctx = rroce_open_dev(dev);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->len = len;
	s->buf = aligned_alloc(4096, len);
	if (!s->pd || !s->buf)
		return -1;
	memset(s->buf, 0, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len, HU_ALL_ACCESS);
	s->scq = ibv_create_cq(s->ctx, cqe, NULL, NULL, 0);
	s->rcq = ibv_create_cq(s->ctx, cqe, NULL, NULL, 0);
	s->gid_index = gid_index;
	if (!s->mr || !s->scq || !s->rcq || ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		return -1;
	return 0;
}

static inline void hu_close(struct hu_side *s)
{
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->scq)
		ibv_destroy_cq(s->scq);
	if (s->rcq)
		ibv_destroy_cq(s->rcq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/* An RC QP with @sdepth send and @rdepth receive WRs. */
static inline struct ibv_qp *hu_rc_qp2(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
				       int sdepth, int rdepth, int sig_all)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = sdepth, .max_recv_wr = rdepth, .max_send_sge = 4,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = sig_all,
	};
	return ibv_create_qp(pd, &ia);
}

static inline struct ibv_qp *hu_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
				      int depth, int sig_all)
{
	return hu_rc_qp2(pd, scq, rcq, depth, depth, sig_all);
}

static inline int hu_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = HU_ALL_ACCESS,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS);
}

struct hu_conn {
	enum ibv_mtu mtu;
	int rd_atomic;	/* max_rd_atomic = max_dest_rd_atomic */
	int timeout;	/* local ACK timeout exponent */
	int retry, rnr_retry;
};
#define HU_CONN_DEFAULT ((struct hu_conn){ IBV_MTU_1024, 16, 14, 7, 7 })

/* RESET -> INIT -> RTR -> RTS towards @rqp on @peer's GID. */
static inline int hu_connect(struct ibv_qp *qp, const struct hu_side *self,
			     const struct hu_side *peer, const struct ibv_qp *rqp,
			     struct hu_conn c)
{
	struct ibv_qp_attr a;

	if (hu_to_init(qp))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = c.mtu;
	a.dest_qp_num = rqp->qp_num;
	a.rq_psn = 0x123456 ^ rqp->qp_num;
	a.max_dest_rd_atomic = c.rd_atomic;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = self->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = c.timeout;
	a.retry_cnt = c.retry;
	a.rnr_retry = c.rnr_retry;
	a.sq_psn = 0x123456 ^ qp->qp_num;
	a.max_rd_atomic = c.rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int hu_set_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = { .qp_state = st };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static inline int hu_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? -1 : (int)a.qp_state;
}

/* Polls up to @n completions into @wc for at most @secs; returns how many. */
static inline int hu_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, double secs)
{
	double end = hu_now() + secs;
	int got = 0;

	while (got < n && hu_now() < end) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return got;
		got += r;
		if (!r)
			usleep(200);
	}
	return got;
}

static inline int hu_post_recv(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len,
			       uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static inline int hu_post_send(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr,
			       uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/*
 * The send doorbell alone, as librxe's post_send_db writes it: a legacy
 * POST_SEND command with no work requests. (librxe's ibv_post_send refuses
 * an empty list before ringing, so the test rings it itself.)
 */
struct hu_doorbell_cmd {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
	__u32 qp_handle, wr_count, sge_count, wqe_size;
};
static inline int hu_doorbell(struct ibv_qp *qp)
{
	struct ib_uverbs_post_send_resp resp;
	struct hu_doorbell_cmd cmd = {
		.hdr = { IB_USER_VERBS_CMD_POST_SEND, sizeof(cmd) / 4, sizeof(resp) / 4 },
		.response = (uintptr_t)&resp,
		.qp_handle = qp->handle,
		.wqe_size = sizeof(struct ibv_send_wr),
	};

	return write(qp->context->cmd_fd, &cmd, sizeof(cmd)) == sizeof(cmd) ? 0 : errno;
}

/* ---- the mapped rings --------------------------------------------------- */

struct hu_map {
	uintptr_t start, end;
	unsigned long long off;
};

/* The uverbs mappings of this process (/proc/self/maps), at most @max. */
static inline int hu_maps(struct hu_map *m, int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		unsigned long long off;
		char perms[8];

		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%lx-%lx %7s %llx", &s, &e, perms, &off) != 4)
			continue;
		m[n++] = (struct hu_map){ s, e, off };
	}
	fclose(f);
	return n;
}

/* A ring as mapped: struct rroce_queue_buf, then the slots. */
struct hu_ring {
	uint8_t *base;
	size_t size;
	uint32_t log2, mask;
};

static inline _Atomic uint32_t *hu_prod(const struct hu_ring *r)
{
	return (_Atomic uint32_t *)(r->base + RROCE_QUEUE_PRODUCER_OFFSET);
}
static inline _Atomic uint32_t *hu_cons(const struct hu_ring *r)
{
	return (_Atomic uint32_t *)(r->base + RROCE_QUEUE_CONSUMER_OFFSET);
}
static inline uint8_t *hu_slot(const struct hu_ring *r, uint32_t i)
{
	return r->base + RROCE_QUEUE_DATA_OFFSET + ((size_t)(i & r->mask) << r->log2);
}

/*
 * The rings that appeared since @before (from hu_maps), sorted by element
 * size (so for a QP with max_recv_sge 1: RQ first, SQ second). Returns the
 * count, at most @max.
 */
static inline int hu_new_rings(const struct hu_map *before, int nb, struct hu_ring *out, int max)
{
	struct hu_map now[256];
	int na = hu_maps(now, 256), n = 0;

	for (int i = 0; i < na && n < max; i++) {
		int seen = 0;

		for (int j = 0; j < nb; j++)
			seen |= before[j].start == now[i].start && before[j].off == now[i].off;
		if (seen)
			continue;
		struct hu_ring r = { (uint8_t *)now[i].start, now[i].end - now[i].start, 0, 0 };

		r.log2 = *(volatile uint32_t *)(r.base + RROCE_QUEUE_LOG2_ELEM_SIZE_OFFSET);
		r.mask = *(volatile uint32_t *)(r.base + RROCE_QUEUE_INDEX_MASK_OFFSET);
		if (r.log2 > 16 || RROCE_QUEUE_DATA_OFFSET + ((size_t)(r.mask + 1) << r.log2) > r.size)
			continue;
		out[n++] = r;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && out[j].log2 < out[j - 1].log2; j--) {
			struct hu_ring t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

/*
 * A hostile thread may still write into a ring that librxe has just
 * unmapped (destroy, resize): the fault handler maps anonymous memory over
 * the hole and lets the write land there. Only for addresses inside a
 * registered ring range; anything else is a real crash.
 */
#define HU_MAX_GUARDED 256
static struct {
	_Atomic uintptr_t start, end;
} hu_guarded[HU_MAX_GUARDED];

static void hu_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	(void)uc;
	for (int i = 0; i < HU_MAX_GUARDED; i++) {
		uintptr_t s = hu_guarded[i].start, e = hu_guarded[i].end;

		if (s && a >= s && a < e) {
			uintptr_t p = a & ~(uintptr_t)4095;

			if (mmap((void *)p, 4096, PROT_READ | PROT_WRITE,
				 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED)
				return;
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void hu_guard(const struct hu_ring *r)
{
	static int installed;

	if (!installed) {
		struct sigaction sa = { .sa_sigaction = hu_segv, .sa_flags = SA_SIGINFO };

		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		installed = 1;
	}
	static int next;
	int i = next++ % HU_MAX_GUARDED;

	hu_guarded[i].start = 0;
	hu_guarded[i].end = (uintptr_t)r->base + r->size;
	hu_guarded[i].start = (uintptr_t)r->base;
}

static inline void hu_unguard_all(void)
{
	for (int i = 0; i < HU_MAX_GUARDED; i++)
		hu_guarded[i].start = hu_guarded[i].end = 0;
}

static inline int hu_summary(void)
{
	printf("%d passed, %d failed\n", hu_passes, hu_failures);
	return hu_failures ? 1 : 0;
}

#endif /* RROCE_HOSTILE_H */
