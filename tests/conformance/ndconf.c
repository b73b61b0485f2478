// SPDX-License-Identifier: GPL-2.0
/*
 * ndconf: the NetworkDirect (ND2/NDKPI) completion and queue-pair rules,
 * checked through the stock libibverbs over real RC QP pairs.
 *
 *   ndconf -d DEV [-g GID_INDEX] [-n RACE_ITERATIONS] [-t SUBSTRING] [-l]
 *
 * -d names the RDMA device; every QP lives on it, and the two QPs of a
 * pair connect to each other through the device's own GID at GID_INDEX
 * (default 1), so all traffic is loopback. -n sets the iterations of the
 * arm/poll race (default 3000). -t runs only the tests whose id or name
 * contains SUBSTRING. -l lists the tests, one "ID name" line each.
 *
 * The rule ids (A1..H4) are those of the project's conformance matrix
 * (ND rules on arming, CQ contents, flush, post-time errors, operation
 * semantics and per-operation status). A test checks what the ND rules
 * require, not what a given Linux device does; several fail on the
 * in-tree rdma_rxe, and that is expected. Memory windows (F1, F2, H5)
 * are not tested.
 *
 * Every test runs in its own forked child, which opens the device afresh
 * and owns its PD, CQs, QPs and MR, so a crash or a hang stays contained.
 * The child reports one line through a pipe ("ok   ID name: detail" or
 * "FAIL ID name: detail"); its stdout goes to stderr so provider noise
 * cannot mix with the results. The parent kills a child after 90 s, prints
 * the result lines and ends with "N passed, N failed"; it exits 0 only if
 * all passed. Every wait is bounded: 5 s where a completion or an event
 * is expected, 400 ms where none may come (the suite runs under QEMU TCG).
 * Channel fds are non-blocking and are read only after poll() says so.
 *
 * ND status to ibv_wc_status, the convention of this suite:
 *   ND_SUCCESS                      IBV_WC_SUCCESS
 *   ND_DATA_OVERRUN (send side)     IBV_WC_LOC_LEN_ERR
 *   ND_BUFFER_OVERFLOW (receive)    IBV_WC_LOC_LEN_ERR
 *   ND_ACCESS_VIOLATION             IBV_WC_LOC_PROT_ERR
 *   ND_CANCELED                     IBV_WC_WR_FLUSH_ERR
 *   ND_INVALID_DEVICE_REQUEST       IBV_WC_LOC_QP_OP_ERR
 *   ND_IO_TIMEOUT                   IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR
 *   ND_REMOTE_ERROR                 IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR,
 *                                   IBV_WC_REM_OP_ERR
 * ND arm types: ANY = ibv_req_notify_cq(cq, 0), SOLICITED = (cq, 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rroce_util.h"

#define BUF_SIZE	(8u << 20)	/* one MR: A's half, then B's half */
#define A_OFF		0u
#define B_OFF		(4u << 20)
#define SCRATCH		(3u << 20)	/* within a half: SEND source, RECV target */
#define CQ_DEPTH	512
#define EV_MS		5000		/* an event or a completion must come */
#define QUIET_MS	400		/* nothing may come */
#define SETTLE_US	50000		/* after a send CQE, for the receive CQE */
#define CHILD_TIMEOUT_S	90
#define BUDGET_S	75		/* long loops stop before the parent kills */
#define BAD_KEY		0x5a5a00u
#define MSGS		3000

static const char *dev_name;
static int gid_index = 1;
static int race_iters = 3000;

static double t_budget;			/* end of the child's loop budget */
static char detail[1024];		/* the result line's detail */
static char why[256];			/* the last helper failure */

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

struct qpopt {
	uint32_t send_wr, recv_wr, send_sge, recv_sge, inline_data;
	int sq_sig_all;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	int init_only;			/* leave A in INIT (pair_setup) */
};

static const struct qpopt defopt = {
	.send_wr = 64, .recv_wr = 64, .send_sge = 4, .recv_sge = 4, .inline_data = 64,
	.timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 1,
};

/*
 * A connected RC pair A -> B. CQs a test leaves NULL are created (with a
 * channel each) by pair_setup; CQs it sets beforehand are shared.
 */
struct pair {
	struct ibv_qp *a, *b;
	struct ibv_cq *as, *ar, *bs, *br;
	struct ibv_comp_channel *asc, *arc, *bsc, *brc;
	struct ibv_qp_cap acap, bcap;
	struct qpopt oa, ob;
	unsigned int own;		/* CQs (bit i of as, ar, bs, br) created here */
};

/* ---------------------------------------------------------------- helpers */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spin_us(unsigned int us)
{
	double end = now() + us / 1e6;

	while (now() < end)
		;
}

static int result(int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return ok;
}

static int seterr(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

static int setup_failed(void)
{
	return result(0, "setup: %s", why);
}

/* The rxe provider returns some post errors negated; report them positive. */
static int errnum(int rc)
{
	return rc < 0 ? -rc : rc;
}

static const char *opname(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "?";
	}
}

/* One completion in words (rotating buffers; main thread only). */
static const char *wcs(const struct ibv_wc *w)
{
	static char b[8][128];
	static int k;
	char *s = b[k++ & 7];

	snprintf(s, sizeof(b[0]), "[wr_id %llu %s opcode %s(%d) qp 0x%x]",
		 (unsigned long long)w->wr_id, ibv_wc_status_str(w->status), opname(w->opcode),
		 (int)w->opcode, w->qp_num);
	return s;
}

static const char *evs(int ev)
{
	return ev > 0 ? "event" : ev == 0 ? "no event" : "channel error";
}

static const char *state_name(int s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s >= 0 && s < 7 ? n[s] : "?";
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

static int dev_open(struct dev *d)
{
	memset(d, 0, sizeof(*d));
	d->ctx = rroce_open_dev(dev_name);
	if (!d->ctx)
		return seterr("cannot open device %s", dev_name);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		return seterr("ibv_alloc_pd: %s", strerror(errno));
	d->buf = aligned_alloc(4096, BUF_SIZE);
	if (!d->buf)
		return seterr("out of memory");
	memset(d->buf, 0, BUF_SIZE);
	d->mr = ibv_reg_mr(d->pd, d->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!d->mr)
		return seterr("ibv_reg_mr: %s", strerror(errno));
	if (ibv_query_gid(d->ctx, 1, gid_index, &d->gid))
		return seterr("ibv_query_gid(index %d) failed", gid_index);
	return 0;
}

static uint64_t raddr(struct dev *d, uint32_t off)
{
	return (uintptr_t)d->buf + off;
}

/* A CQ; with @chp, on a new non-blocking completion channel. */
static struct ibv_cq *cq_new(struct dev *d, int size, struct ibv_comp_channel **chp)
{
	struct ibv_comp_channel *ch = NULL;
	struct ibv_cq *cq;

	if (chp) {
		ch = ibv_create_comp_channel(d->ctx);
		if (!ch || set_nonblock(ch->fd)) {
			seterr("completion channel: %s", strerror(errno));
			return NULL;
		}
		*chp = ch;
	}
	cq = ibv_create_cq(d->ctx, size, NULL, ch, 0);
	if (!cq)
		seterr("ibv_create_cq(%d): %s", size, strerror(errno));
	return cq;
}

static struct ibv_qp *qp_new(struct dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
			     const struct qpopt *o, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = o->send_wr, .max_recv_wr = o->recv_wr,
			 .max_send_sge = o->send_sge, .max_recv_sge = o->recv_sge,
			 .max_inline_data = o->inline_data },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = o->sq_sig_all,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);

	if (!qp) {
		seterr("ibv_create_qp: %s", strerror(errno));
		return NULL;
	}
	*cap = ia.cap;		/* what the device granted */
	return qp;
}

static uint32_t psn_of(uint32_t qpn)
{
	return (0x123456 ^ qpn) & 0xffffff;
}

static int qp_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS))
		return seterr("QP 0x%x to INIT: %s", qp->qp_num, strerror(errno));
	return 0;
}

/* INIT -> RTR towards @dest_qpn on the device's own GID (loopback). */
static int qp_rtr(struct dev *d, struct ibv_qp *qp, uint32_t dest_qpn, const struct qpopt *o)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest_qpn,
		.rq_psn = psn_of(dest_qpn),
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = o->min_rnr_timer,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = d->gid, .sgid_index = gid_index, .hop_limit = 64 } },
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER))
		return seterr("QP 0x%x to RTR: %s", qp->qp_num, strerror(errno));
	return 0;
}

static int qp_rts(struct ibv_qp *qp, const struct qpopt *o)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = o->timeout,
		.retry_cnt = o->retry_cnt,
		.rnr_retry = o->rnr_retry,
		.sq_psn = psn_of(qp->qp_num),
		.max_rd_atomic = 16,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return seterr("QP 0x%x to RTS: %s", qp->qp_num, strerror(errno));
	return 0;
}

static int qp_to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return seterr("QP 0x%x to ERR: %s", qp->qp_num, strerror(errno));
	return 0;
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) ? -1 : (int)a.qp_state;
}

/* Polls up to @ms for @qp to reach @state; returns the last state seen. */
static int wait_state(struct ibv_qp *qp, int state, int ms)
{
	double end = now() + ms / 1e3;
	int s;

	while ((s = qp_state(qp)) != state && now() < end)
		usleep(10000);
	return s;
}

static int pair_setup(struct dev *d, struct pair *p, const struct qpopt *oa,
		      const struct qpopt *ob)
{
	struct ibv_cq **cqs[4] = { &p->as, &p->ar, &p->bs, &p->br };
	struct ibv_comp_channel **chs[4] = { &p->asc, &p->arc, &p->bsc, &p->brc };

	p->oa = oa ? *oa : defopt;
	p->ob = ob ? *ob : defopt;
	for (int i = 0; i < 4; i++) {
		if (*cqs[i])
			continue;
		*cqs[i] = cq_new(d, CQ_DEPTH, chs[i]);
		if (!*cqs[i])
			return -1;
		p->own |= 1u << i;
	}
	p->a = qp_new(d, p->as, p->ar, &p->oa, &p->acap);
	if (!p->a)
		return -1;
	p->b = qp_new(d, p->bs, p->br, &p->ob, &p->bcap);
	if (!p->b)
		return -1;
	if (qp_init(p->a) || qp_init(p->b) || qp_rtr(d, p->b, p->a->qp_num, &p->ob) ||
	    qp_rts(p->b, &p->ob))
		return -1;
	if (p->oa.init_only)
		return 0;
	return qp_rtr(d, p->a, p->b->qp_num, &p->oa) || qp_rts(p->a, &p->oa) ? -1 : 0;
}

/* Only for pairs whose channels never delivered an event. */
static void pair_free(struct pair *p)
{
	struct ibv_cq *cqs[4] = { p->as, p->ar, p->bs, p->br };
	struct ibv_comp_channel *chs[4] = { p->asc, p->arc, p->bsc, p->brc };

	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	for (int i = 0; i < 4; i++)
		if (p->own & (1u << i)) {
			ibv_destroy_cq(cqs[i]);
			if (chs[i])
				ibv_destroy_comp_channel(chs[i]);
		}
	memset(p, 0, sizeof(*p));
}

/* Posts one send WR with an explicit SGE list; returns a positive errno. */
static int post_send_sg(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op,
			struct ibv_sge *sg, int nsge, unsigned int flags, uint64_t ra, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = sg, .num_sge = nsge, .opcode = op, .send_flags = flags,
	}, *bad = NULL;

	if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = ra;
		wr.wr.rdma.rkey = rkey;
	}
	return errnum(ibv_post_send(qp, &wr, &bad));
}

/* One SGE at @off of the MR, with @lkey; @roff is an offset into the MR too. */
static int post_send1(struct dev *d, struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op,
		      uint32_t off, uint32_t len, uint32_t lkey, unsigned int flags,
		      uint32_t roff, uint32_t rkey)
{
	struct ibv_sge sge = { raddr(d, off), len, lkey };

	return post_send_sg(qp, id, op, &sge, 1, flags, raddr(d, roff), rkey);
}

static int post_recv_sg(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sg, int nsge)
{
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = sg, .num_sge = nsge }, *bad = NULL;

	return errnum(ibv_post_recv(qp, &wr, &bad));
}

static int post_recv1(struct dev *d, struct ibv_qp *qp, uint64_t id, uint32_t off, uint32_t len,
		      uint32_t lkey)
{
	struct ibv_sge sge = { raddr(d, off), len, lkey };

	return post_recv_sg(qp, id, &sge, 1);
}

/* A 4 KiB receive into B's scratch area. */
static int recv1(struct dev *d, struct ibv_qp *qp, uint64_t id)
{
	int rc = post_recv1(d, qp, id, B_OFF + SCRATCH, 4096, d->mr->lkey);

	return rc ? seterr("ibv_post_recv: %s", strerror(rc)) : 0;
}

/*
 * Streaming 8-byte SENDs from @p->a, for the tests that keep traffic going
 * while something else happens: posts signaled SENDs while fewer than 32 are
 * outstanding and fewer than @limit were posted, then polls their CQ once.
 * The first failure goes to @err. Sets *@posted if it posted anything;
 * returns how many send completions it polled.
 */
static int pump_sends(struct dev *d, struct pair *p, long limit, long *sent, long *sdone,
		      int *posted, char *err, size_t errlen)
{
	struct ibv_wc wc[32];
	int n, rc;

	*posted = 0;
	while (!err[0] && *sent < limit && *sent - *sdone < 32) {
		rc = post_send1(d, p->a, *sent, IBV_WR_SEND, A_OFF + SCRATCH, 8, d->mr->lkey,
				IBV_SEND_SIGNALED, 0, 0);
		if (rc)
			snprintf(err, errlen, "ibv_post_send %ld: %s", *sent, strerror(rc));
		else
			(*sent)++;
		*posted = 1;
	}
	n = ibv_poll_cq(p->as, 32, wc);
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS && !err[0])
			snprintf(err, errlen, "send completion %s", wcs(&wc[i]));
	n = n > 0 ? n : 0;
	*sdone += n;
	return n;
}

/* Polls until @n completions came or @ms passed; returns how many came. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	double end = now() + ms / 1e3;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			break;
		got += r;
		if (got < n) {
			if (now() > end)
				break;
			if (!r)
				usleep(200);
		}
	}
	return got;
}

/* Polls for the whole @ms; keeps up to @max, returns how many showed up. */
static int collect(struct ibv_cq *cq, struct ibv_wc *wc, int max, int ms)
{
	double end = now() + ms / 1e3;
	struct ibv_wc tmp[16];
	int seen = 0;

	do {
		int r = ibv_poll_cq(cq, 16, tmp);

		for (int i = 0; i < r; i++, seen++)
			if (seen < max)
				wc[seen] = tmp[i];
		if (r <= 0)
			usleep(1000);
	} while (now() < end);
	return seen;
}

static int count_status(const struct ibv_wc *wc, int n, enum ibv_wc_status s)
{
	int c = 0;

	for (int i = 0; i < n; i++)
		c += wc[i].status == s;
	return c;
}

/* Non-blocking ibv_poll_cq until empty; returns how many were taken. */
static int drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	while ((n = ibv_poll_cq(cq, 16, wc)) > 0 && total < 100000)
		total += n;
	return total;
}

/*
 * Waits up to @ms for a completion event on @ch, gets and acks it.
 * Returns 1 for an event, 0 on timeout, -1 on error.
 */
static int wait_event(struct ibv_comp_channel *ch, int ms)
{
	double end = now() + ms / 1e3;

	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int left = (int)((end - now()) * 1000), r;

		r = poll(&pfd, 1, left > 0 ? left : 0);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0) {
			struct ibv_cq *cq;
			void *ctx;

			if (!ibv_get_cq_event(ch, &cq, &ctx)) {
				ibv_ack_cq_events(cq, 1);
				return 1;
			}
			if (errno != EAGAIN)
				return -1;
		}
		if (now() >= end)
			return 0;
	}
}

/* Takes and acks whatever events are queued on @ch; returns how many. */
static int drain_events(struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq;
	void *ctx;
	int n = 0;

	while (n < 1000 && !ibv_get_cq_event(ch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		n++;
	}
	return n;
}

static int arm(struct ibv_cq *cq, int solicited)
{
	int rc = ibv_req_notify_cq(cq, solicited);

	return rc ? seterr("ibv_req_notify_cq(%d): %s", solicited, strerror(errnum(rc))) : 0;
}

/*
 * @n signaled SENDs of @len bytes A -> B (wr_id @id, @id + 1, ...), then
 * waits for their requester completions, SUCCESS and in order, and lets the
 * receive completions settle.
 */
static int sends_wait(struct dev *d, struct pair *p, uint64_t id, int n, uint32_t len,
		      unsigned int flags)
{
	struct ibv_wc wc[64];
	int rc, got;

	if (n > 64)
		return seterr("sends_wait: too many");
	for (int i = 0; i < n; i++) {
		rc = post_send1(d, p->a, id + i, IBV_WR_SEND, A_OFF + SCRATCH, len, d->mr->lkey,
				IBV_SEND_SIGNALED | flags, 0, 0);
		if (rc)
			return seterr("ibv_post_send: %s", strerror(rc));
	}
	got = poll_n(p->as, wc, n, EV_MS);
	if (got < n)
		return seterr("%d of %d send completions in %d ms", got, n, EV_MS);
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != id + i)
			return seterr("send completion %s", wcs(&wc[i]));
	usleep(SETTLE_US);
	return 0;
}

static int send_wait(struct dev *d, struct pair *p, uint64_t id, uint32_t len, unsigned int flags)
{
	return sends_wait(d, p, id, 1, len, flags);
}

/* Keeps B's receive queue fed up to @target receives (wr_id = sequence). */
struct feed {
	struct dev *d;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t cap;
	long posted, done, bad;
	struct ibv_wc first_bad;
};

static int feed_reap(struct feed *f)
{
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(f->cq, 32, wc);

	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS && !f->bad++)
			f->first_bad = wc[i];
	if (n > 0)
		f->done += n;
	return n > 0 ? n : 0;
}

static int feed_to(struct feed *f, long target, int ms)
{
	double end = now() + ms / 1e3;

	while (f->posted < target) {
		if (f->posted - f->done >= (long)f->cap) {
			if (!feed_reap(f)) {
				if (now() > end)
					return seterr("receive queue did not drain (%ld of %ld done)",
						      f->done, f->posted);
				usleep(200);
			}
			continue;
		}
		if (recv1(f->d, f->qp, f->posted))
			return -1;
		f->posted++;
	}
	return 0;
}

/* ------------------------------------------------------------ A: arming */

static int t_no_event_unarmed(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	int ev, n;

	if (pair_setup(d, &p, NULL, NULL) || recv1(d, p.b, 1) || send_wait(d, &p, 2, 16, 0))
		return setup_failed();
	ev = wait_event(p.brc, QUIET_MS);
	n = poll_n(p.br, &wc, 1, EV_MS);
	return result(ev == 0 && n == 1 && wc.status == IBV_WC_SUCCESS,
		      "%s within %d ms on a never-armed CQ; receive %s", evs(ev), QUIET_MS,
		      n ? wcs(&wc) : "missing");
}

static int t_arm_merge_any_wins(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	int ev1, ev2, n1, n2;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	/* (a) SOLICITED, then ANY: an unsolicited completion fires. */
	if (arm(p.br, 1) || arm(p.br, 0) || recv1(d, p.b, 1) || send_wait(d, &p, 2, 16, 0))
		return setup_failed();
	ev1 = wait_event(p.brc, EV_MS);
	n1 = poll_n(p.br, &wc, 1, EV_MS);
	drain(p.br);
	/* (b) ANY, then SOLICITED: still ANY. */
	if (arm(p.br, 0) || arm(p.br, 1) || recv1(d, p.b, 3) || send_wait(d, &p, 4, 16, 0))
		return setup_failed();
	ev2 = wait_event(p.brc, EV_MS);
	n2 = poll_n(p.br, &wc, 1, EV_MS);
	return result(ev1 == 1 && ev2 == 1 && n1 == 1 && n2 == 1,
		      "(a) SOLICITED then ANY, unsolicited SEND: %s; (b) ANY then SOLICITED: %s "
		      "(receive CQEs %d, %d)", evs(ev1), evs(ev2), n1, n2);
}

static int t_one_event_per_arm(struct dev *d)
{
	struct pair p = { 0 };
	struct pollfd pfd;
	struct ibv_wc wc[3];
	struct ibv_cq *cq;
	void *ctx;
	int ev, again, r, e, n;

	if (pair_setup(d, &p, NULL, NULL) || arm(p.br, 0))
		return setup_failed();
	for (int i = 0; i < 3; i++)
		if (recv1(d, p.b, i))
			return setup_failed();
	if (sends_wait(d, &p, 10, 3, 16, 0))
		return setup_failed();
	ev = wait_event(p.brc, EV_MS);
	pfd = (struct pollfd){ .fd = p.brc->fd, .events = POLLIN };
	again = poll(&pfd, 1, QUIET_MS);
	errno = 0;
	r = ibv_get_cq_event(p.brc, &cq, &ctx);
	e = errno;
	if (!r)
		ibv_ack_cq_events(cq, 1);
	n = poll_n(p.br, wc, 3, EV_MS);
	return result(ev == 1 && again == 0 && r != 0 && e == EAGAIN && n == 3,
		      "3 completions after one arm: first %s; channel %s within %d ms after it; "
		      "second ibv_get_cq_event %s; %d receive CQEs", evs(ev),
		      again > 0 ? "readable again" : again == 0 ? "quiet" : "poll error", QUIET_MS,
		      r ? (e == EAGAIN ? "EAGAIN" : strerror(e)) : "returned a second event", n);
}

static int t_reported_not_refire(struct dev *d)
{
	struct pair p = { 0 };
	int ev1, ev2, ev3;

	if (pair_setup(d, &p, NULL, NULL) || arm(p.br, 0) || recv1(d, p.b, 1) ||
	    send_wait(d, &p, 2, 16, 0))
		return setup_failed();
	ev1 = wait_event(p.brc, EV_MS);
	/* The CQE that fired stays in the CQ; a new arm must not fire for it. */
	if (arm(p.br, 0))
		return setup_failed();
	ev2 = wait_event(p.brc, QUIET_MS);
	if (recv1(d, p.b, 3) || send_wait(d, &p, 4, 16, 0))
		return setup_failed();
	ev3 = wait_event(p.brc, EV_MS);
	return result(ev1 == 1 && ev2 == 0 && ev3 == 1,
		      "first completion: %s; re-arm without polling: %s within %d ms; "
		      "next completion: %s", evs(ev1), evs(ev2), QUIET_MS, evs(ev3));
}

static int t_fire_on_arm_new(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	int ev, n;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	drain(p.br);
	if (recv1(d, p.b, 1) || send_wait(d, &p, 2, 16, 0))
		return setup_failed();
	/* A new, unreported CQE sits in the CQ: the arm must fire at once. */
	if (arm(p.br, 0))
		return setup_failed();
	ev = wait_event(p.brc, EV_MS);
	n = poll_n(p.br, &wc, 1, EV_MS);
	return result(ev == 1 && n == 1,
		      "arm placed after an unreported completion: %s within %d ms (CQE %s)",
		      evs(ev), EV_MS, n ? wcs(&wc) : "missing");
}

struct race {
	struct dev *d;
	struct pair *p;
	int n;
	pthread_barrier_t bar;
	atomic_int stop;
	atomic_int err;
	char msg[200];
};

static uint32_t lcg(uint32_t *x)
{
	*x = *x * 1664525u + 1013904223u;
	return *x >> 8;
}

static void *race_sender(void *arg)
{
	struct race *r = arg;
	uint32_t x = 0x2545f491;
	struct ibv_wc wc;

	for (int i = 0; i < r->n; i++) {
		uint32_t v;
		int rc;

		pthread_barrier_wait(&r->bar);
		if (atomic_load(&r->stop))
			break;
		if (atomic_load(&r->err))
			continue;
		v = lcg(&x);
		if (v & 3)		/* a quarter of the rounds send at once */
			spin_us((v >> 2) % 201);
		rc = post_send1(r->d, r->p->a, i, IBV_WR_SEND, A_OFF + SCRATCH, 8, r->d->mr->lkey,
				IBV_SEND_SIGNALED, 0, 0);
		if (!rc && poll_n(r->p->as, &wc, 1, EV_MS) == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.wr_id == (uint64_t)i)
			continue;
		snprintf(r->msg, sizeof(r->msg), "sender, iteration %d: %s", i,
			 rc ? strerror(rc) : "no good send completion");
		atomic_store(&r->err, 1);
	}
	return NULL;
}

/*
 * The ND race, cases 1 and 2: the receive CQE may land between the empty
 * poll and the arm, or after the arm; either way the arm must fire. Every
 * fourth round the receiver also waits up to 300 us before arming, so case 1
 * (CQE first) happens often and not only by chance.
 */
static int t_race_poll_then_arm(struct dev *d)
{
	struct pair p = { 0 };
	struct race r = { .d = d, .p = &p, .n = race_iters };
	struct ibv_wc wc;
	pthread_t th;
	uint32_t x = 0x8badf00d;
	int i, ev, n, delayed = 0;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	pthread_barrier_init(&r.bar, NULL, 2);
	if (pthread_create(&th, NULL, race_sender, &r))
		return result(0, "pthread_create failed");
	for (i = 0; i < r.n; i++) {
		if (now() > t_budget) {
			atomic_store(&r.stop, 1);
			return result(0, "time budget spent after %d of %d iterations "
				      "(no lost wake-up so far)", i, r.n);
		}
		if (recv1(d, p.b, i))
			break;
		n = ibv_poll_cq(p.br, 1, &wc);
		if (n) {
			atomic_store(&r.stop, 1);
			return result(0, "iteration %d: poll before arming returned %d %s", i, n,
				      n > 0 ? wcs(&wc) : "");
		}
		pthread_barrier_wait(&r.bar);
		if ((i & 3) == 3) {
			spin_us(lcg(&x) % 301);
			delayed++;
		}
		if (arm(p.br, 0))
			break;
		ev = wait_event(p.brc, EV_MS);
		if (ev != 1) {
			atomic_store(&r.stop, 1);
			n = ibv_poll_cq(p.br, 1, &wc);
			if (n == 1 && wait_event(p.brc, 0) == 1)
				return result(0, "iteration %d: the event came later than %d ms",
					      i, EV_MS);
			if (n == 1)
				return result(0, "lost wake-up at iteration %d: %s sat in the CQ "
					      "%d ms after the arm without an event", i, wcs(&wc), EV_MS);
			if (atomic_load(&r.err))
				return result(0, "%s", r.msg);
			return result(0, "iteration %d: %s and no completion in %d ms", i, evs(ev),
				      EV_MS);
		}
		drain_events(p.brc);
		n = poll_n(p.br, &wc, 1, EV_MS);
		if (n != 1 || wc.wr_id != (uint64_t)i || wc.status != IBV_WC_SUCCESS) {
			atomic_store(&r.stop, 1);
			return result(0, "iteration %d: after the event, %s", i,
				      n == 1 ? wcs(&wc) : "no completion");
		}
		if (ibv_poll_cq(p.br, 1, &wc)) {
			atomic_store(&r.stop, 1);
			return result(0, "iteration %d: an extra completion %s", i, wcs(&wc));
		}
	}
	if (i < r.n) {
		atomic_store(&r.stop, 1);
		return result(0, "iteration %d: %s", i, why);
	}
	pthread_join(th, NULL);
	if (atomic_load(&r.err))
		return result(0, "%s", r.msg);
	return result(1, "%d iterations, no lost wake-up (%d with the receiver arming late)",
		      r.n, delayed);
}

struct waiter {
	int fd;
	int seen;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;
	struct pollfd pfd = { .fd = w->fd, .events = POLLIN };

	w->seen = poll(&pfd, 1, EV_MS) == 1 && (pfd.revents & POLLIN);
	return NULL;
}

static int t_all_waiters_released(struct dev *d)
{
	struct pair p = { 0 };
	struct waiter w[4];
	pthread_t th[4];
	int seen = 0, ev;

	if (pair_setup(d, &p, NULL, NULL) || arm(p.br, 0) || recv1(d, p.b, 1))
		return setup_failed();
	for (int i = 0; i < 4; i++) {
		w[i] = (struct waiter){ .fd = p.brc->fd };
		if (pthread_create(&th[i], NULL, waiter_fn, &w[i]))
			return result(0, "pthread_create failed");
	}
	usleep(100000);		/* let them block in poll() */
	if (send_wait(d, &p, 2, 16, 0))
		return setup_failed();
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		seen += w[i].seen;
	}
	ev = wait_event(p.brc, 0);
	return result(seen == 4 && ev == 1, "%d of 4 waiters saw POLLIN; main then got %s",
		      seen, evs(ev));
}

static int t_errors_wake_solicited(struct dev *d)
{
	struct pair p = { 0 }, q = { 0 };
	struct ibv_wc wc[8];
	int ev1, ev2, n, good = 0, ns;

	if (pair_setup(d, &p, NULL, NULL) || pair_setup(d, &q, NULL, NULL))
		return setup_failed();
	/* Receive flushes satisfy a SOLICITED arm. */
	for (int i = 0; i < 4; i++)
		if (recv1(d, p.b, 100 + i))
			return setup_failed();
	if (arm(p.br, 1) || qp_to_err(p.b))
		return setup_failed();
	ev1 = wait_event(p.brc, EV_MS);
	n = poll_n(p.br, wc, 4, EV_MS);
	for (int i = 0; i < n; i++)
		good += wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].opcode == IBV_WC_RECV &&
			wc[i].qp_num == p.b->qp_num && wc[i].wr_id == 100u + i;
	/* A send-side error satisfies a SOLICITED arm. */
	if (arm(q.as, 1))
		return setup_failed();
	if (post_send1(d, q.a, 7, IBV_WR_RDMA_WRITE, A_OFF, 64, d->mr->lkey, IBV_SEND_SIGNALED,
		       B_OFF, d->mr->rkey ^ BAD_KEY))
		return result(0, "ibv_post_send failed");
	ev2 = wait_event(q.asc, EV_MS);
	ns = poll_n(q.as, &wc[4], 1, EV_MS);
	return result(ev1 == 1 && n == 4 && good == 4 && ev2 == 1,
		      "receive flush under SOLICITED arm: %s, %d CQEs (%d FLUSH/RECV/qp B, first %s); "
		      "bad-rkey WRITE under SOLICITED arm: %s (%s)", evs(ev1), n, good,
		      n ? wcs(&wc[0]) : "-", evs(ev2), ns ? wcs(&wc[4]) : "no CQE");
}

struct a11 {
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;
	int total;
	atomic_int stop;
	atomic_int polled;		/* receive CQEs seen, in order */
	atomic_int failed;
	atomic_int arms, events;
	char msg[200];
};

static void *a11_poller(void *arg)
{
	struct a11 *s = arg;
	struct ibv_wc wc[16];
	int expect = 0;

	while (!atomic_load(&s->stop) && expect < s->total) {
		int n = ibv_poll_cq(s->cq, 16, wc);

		if (n < 0) {
			snprintf(s->msg, sizeof(s->msg), "ibv_poll_cq returned %d", n);
			atomic_store(&s->failed, 1);
			break;
		}
		for (int i = 0; i < n; i++, expect++)
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)expect) {
				snprintf(s->msg, sizeof(s->msg),
					 "receive %d: got wr_id %llu %s", expect,
					 (unsigned long long)wc[i].wr_id,
					 ibv_wc_status_str(wc[i].status));
				atomic_store(&s->failed, 1);
				return NULL;
			}
		atomic_store(&s->polled, expect);
		if (!n)
			sched_yield();
	}
	return NULL;
}

static void *a11_armer(void *arg)
{
	struct a11 *s = arg;

	while (!atomic_load(&s->stop)) {
		struct pollfd pfd = { .fd = s->ch->fd, .events = POLLIN };
		int rc = ibv_req_notify_cq(s->cq, 0);

		if (rc) {
			snprintf(s->msg, sizeof(s->msg), "ibv_req_notify_cq: %s",
				 strerror(errnum(rc)));
			atomic_store(&s->failed, 1);
			break;
		}
		atomic_fetch_add(&s->arms, 1);
		if (poll(&pfd, 1, 2) > 0)
			atomic_fetch_add(&s->events, drain_events(s->ch));
	}
	return NULL;
}

static int t_concurrent_poll_and_arm(struct dev *d)
{
	struct pair p = { 0 };
	struct a11 s = { .total = MSGS };
	pthread_t tp, ta;
	long rposted = 0, sent = 0, sdone = 0;
	long rwin, seen = 0;
	double end, last = now();
	char err[200] = "";

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	rwin = p.bcap.max_recv_wr < 64 ? p.bcap.max_recv_wr : 64;
	s.cq = p.br;
	s.ch = p.brc;
	if (pthread_create(&tp, NULL, a11_poller, &s) || pthread_create(&ta, NULL, a11_armer, &s))
		return result(0, "pthread_create failed");
	while (sdone < MSGS && !atomic_load(&s.failed) && !err[0]) {
		long polled = atomic_load(&s.polled);
		int busy = 0, posted, n;

		if (polled + sdone != seen) {	/* progress: receives or sends done */
			seen = polled + sdone;
			last = now();
		}
		if (now() > t_budget || now() - last > 2 * EV_MS / 1e3) {
			snprintf(err, sizeof(err), "%s (%ld sends done)",
				 now() > t_budget ? "time budget spent" : "no progress for 10 s",
				 sdone);
			break;
		}
		while (rposted < MSGS && rposted - polled < rwin) {
			if (recv1(d, p.b, rposted)) {
				snprintf(err, sizeof(err), "%.150s", why);
				break;
			}
			rposted++;
			busy = 1;
		}
		n = pump_sends(d, &p, rposted, &sent, &sdone, &posted, err, sizeof(err));
		busy |= posted || n > 0;
		if (!busy)
			usleep(100);
	}
	end = now() + EV_MS / 1e3;
	while (!err[0] && !atomic_load(&s.failed) && atomic_load(&s.polled) < MSGS && now() < end)
		usleep(1000);
	atomic_store(&s.stop, 1);
	pthread_join(tp, NULL);
	pthread_join(ta, NULL);
	if (err[0])
		return result(0, "%s; poller saw %d", err, atomic_load(&s.polled));
	if (atomic_load(&s.failed))
		return result(0, "%s", s.msg);
	return result(atomic_load(&s.polled) == MSGS,
		      "poller saw %d of %d receives in order, all SUCCESS; armer armed %d times, "
		      "got %d events", atomic_load(&s.polled), MSGS, atomic_load(&s.arms),
		      atomic_load(&s.events));
}

/* ------------------------------------------------- B: CQ contents, resize */

static int t_poll_count_semantics(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc[16];
	int n1, n2, ok = 0;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	for (int i = 0; i < 5; i++)
		if (recv1(d, p.b, i))
			return setup_failed();
	if (sends_wait(d, &p, 10, 5, 16, 0))
		return setup_failed();
	n1 = ibv_poll_cq(p.br, 8, wc);
	n2 = ibv_poll_cq(p.br, 8, wc + 8);
	for (int i = 0; i < n1 && i < 8; i++)
		ok += wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i;
	return result(n1 == 5 && n2 == 0 && ok == 5,
		      "poll(8) returned %d (%d SUCCESS in order), the next poll returned %d", n1, ok,
		      n2);
}

static int t_opcode_on_error_cqes(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_sge s[3] = {
		{ raddr(d, A_OFF), 256, d->mr->lkey },
		{ raddr(d, A_OFF + 4096), 256, d->mr->lkey },
		{ raddr(d, A_OFF + 8192), 256, d->mr->lkey },
	};
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_wc wc[3];
	static const enum ibv_wc_status est[3] = {
		IBV_WC_REM_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR };
	static const enum ibv_wc_opcode eop[3] = {
		IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_RDMA_WRITE };
	int rc, n, ok;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 3; i++) {
		wr[i].wr_id = 21 + i;
		wr[i].sg_list = &s[i];
		wr[i].num_sge = 1;
		wr[i].opcode = i == 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = raddr(d, B_OFF + i * 4096);
		wr[i].wr.rdma.rkey = d->mr->rkey;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	wr[0].wr.rdma.rkey ^= BAD_KEY;
	rc = errnum(ibv_post_send(p.a, wr, &bad));
	if (rc)
		return result(0, "ibv_post_send: %s", strerror(rc));
	n = poll_n(p.as, wc, 3, EV_MS);
	ok = n == 3;
	for (int i = 0; i < n; i++)
		ok &= wc[i].status == est[i] && wc[i].opcode == eop[i] && wc[i].wr_id == 21u + i;
	return result(ok, "%d CQEs: %s %s %s (want REM_ACCESS_ERR/RDMA_WRITE, "
		      "FLUSH/RDMA_READ, FLUSH/RDMA_WRITE)", n, n > 0 ? wcs(&wc[0]) : "",
		      n > 1 ? wcs(&wc[1]) : "", n > 2 ? wcs(&wc[2]) : "");
}

static int t_per_qp_order_shared_cq(struct dev *d)
{
	enum { NQ = 3, PER = 40, ROUND = 10, NSEND = (PER + 2) / 3 };
	struct pair p[NQ];
	struct ibv_cq *as, *ar, *bs, *br;
	struct ibv_wc wc[64];
	int last[NQ], rlast[NQ], got = 0, rgot = 0, n;
	char err[200] = "";

	memset(p, 0, sizeof(p));
	as = cq_new(d, CQ_DEPTH, NULL);
	ar = cq_new(d, CQ_DEPTH, NULL);
	bs = cq_new(d, CQ_DEPTH, NULL);
	br = cq_new(d, CQ_DEPTH, NULL);
	if (!as || !ar || !bs || !br)
		return setup_failed();
	for (int q = 0; q < NQ; q++) {
		p[q].as = as;
		p[q].ar = ar;
		p[q].bs = bs;
		p[q].br = br;
		if (pair_setup(d, &p[q], NULL, NULL))
			return setup_failed();
		for (int k = 0; k < NSEND; k++)
			if (recv1(d, p[q].b, (uint64_t)q << 32 | k))
				return setup_failed();
		last[q] = rlast[q] = -1;
	}
	for (int seq0 = 0; seq0 < PER && !err[0]; seq0 += ROUND) {
		for (int seq = seq0; seq < seq0 + ROUND; seq++)
			for (int q = 0; q < NQ; q++) {
				uint32_t o = q * 65536;
				uint64_t id = (uint64_t)q << 32 | seq;
				int rc;

				if (seq % 3 == 0)
					rc = post_send1(d, p[q].a, id, IBV_WR_SEND, A_OFF + SCRATCH,
							512, d->mr->lkey, IBV_SEND_SIGNALED, 0, 0);
				else if (seq % 3 == 1)
					rc = post_send1(d, p[q].a, id, IBV_WR_RDMA_WRITE, A_OFF + o,
							3000, d->mr->lkey, IBV_SEND_SIGNALED,
							B_OFF + o, d->mr->rkey);
				else
					rc = post_send1(d, p[q].a, id, IBV_WR_RDMA_READ,
							A_OFF + (1u << 20) + o, 3000, d->mr->lkey,
							IBV_SEND_SIGNALED, B_OFF + (1u << 20) + o,
							d->mr->rkey);
				if (rc && !err[0])
					snprintf(err, sizeof(err), "ibv_post_send qp %d seq %d: %s", q,
						 seq, strerror(rc));
			}
		n = poll_n(as, wc, NQ * ROUND, 2 * EV_MS);
		for (int i = 0; i < n; i++) {
			int q = -1, seq = (int)(wc[i].wr_id & 0xffffffff);

			for (int k = 0; k < NQ; k++)
				if (wc[i].qp_num == p[k].a->qp_num)
					q = k;
			if (!err[0] && (q < 0 || wc[i].status != IBV_WC_SUCCESS ||
					(int)(wc[i].wr_id >> 32) != q || seq <= last[q]))
				snprintf(err, sizeof(err), "send CQE %s after seq %d", wcs(&wc[i]),
					 q >= 0 ? last[q] : -2);
			if (q >= 0)
				last[q] = seq;
		}
		got += n;
		if (n < NQ * ROUND && !err[0])
			snprintf(err, sizeof(err), "only %d of %d send CQEs in round %d", n,
				 NQ * ROUND, seq0 / ROUND);
	}
	n = poll_n(br, wc, NQ * NSEND, EV_MS);
	for (int i = 0; i < n; i++) {
		int q = -1, k = (int)(wc[i].wr_id & 0xffffffff);

		for (int j = 0; j < NQ; j++)
			if (wc[i].qp_num == p[j].b->qp_num)
				q = j;
		if (!err[0] && (q < 0 || wc[i].status != IBV_WC_SUCCESS ||
				(int)(wc[i].wr_id >> 32) != q || k != rlast[q] + 1))
			snprintf(err, sizeof(err), "receive CQE %s out of order", wcs(&wc[i]));
		if (q >= 0)
			rlast[q] = k;
		rgot++;
	}
	if (err[0])
		return result(0, "%s", err);
	return result(got == NQ * PER && rgot == NQ * NSEND,
		      "%d of %d send CQEs, %d of %d receive CQEs, each QP in order on shared CQs",
		      got, NQ * PER, rgot, NQ * NSEND);
}

static int t_overrun_kills_cq_and_qps(struct dev *d)
{
	struct pair p1 = { 0 }, p2 = { 0 };
	struct ibv_cq *cq;
	struct ibv_async_event ae;
	struct ibv_wc wc[16];
	char seen[256] = "";
	int cqe, nsend, got_err = 0, s1, s2, polled, extra, rc, n;
	double end;

	cq = cq_new(d, 4, NULL);
	if (!cq)
		return setup_failed();
	if (set_nonblock(d->ctx->async_fd))
		return result(0, "async fd: %s", strerror(errno));
	cqe = cq->cqe;
	p1.as = p2.as = cq;
	if (pair_setup(d, &p1, NULL, NULL) || pair_setup(d, &p2, NULL, NULL))
		return setup_failed();
	nsend = cqe + 4;
	if ((uint32_t)(nsend + 1) / 2 + 1 > p1.acap.max_send_wr ||
	    (uint32_t)(nsend + 1) / 2 + 1 > p1.bcap.max_recv_wr)
		return result(0, "a CQ of 4 got %d entries, too many for this test", cqe);
	for (int i = 0; i < nsend / 2 + 2; i++)
		if (recv1(d, p1.b, i) || recv1(d, p2.b, i))
			return setup_failed();
	for (int i = 0; i < nsend; i++) {
		rc = post_send1(d, i & 1 ? p2.a : p1.a, i, IBV_WR_SEND, A_OFF + SCRATCH, 16,
				d->mr->lkey, IBV_SEND_SIGNALED, 0, 0);
		if (rc)
			return result(0, "ibv_post_send %d: %s", i, strerror(rc));
	}
	end = now() + EV_MS / 1e3;
	while (!got_err && now() < end) {
		struct pollfd pfd = { .fd = d->ctx->async_fd, .events = POLLIN };
		int left = (int)((end - now()) * 1000);

		if (poll(&pfd, 1, left > 0 ? left : 0) <= 0 || ibv_get_async_event(d->ctx, &ae))
			continue;
		if (ae.event_type == IBV_EVENT_CQ_ERR && ae.element.cq == cq)
			got_err = 1;
		if (strlen(seen) < sizeof(seen) - 40)
			snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s%s",
				 seen[0] ? ", " : "", ibv_event_type_str(ae.event_type));
		ibv_ack_async_event(&ae);
	}
	s1 = wait_state(p1.a, IBV_QPS_ERR, EV_MS);
	s2 = wait_state(p2.a, IBV_QPS_ERR, EV_MS);
	polled = 0;
	while ((n = ibv_poll_cq(cq, 16, wc)) > 0 && polled < 100000)
		polled += n;
	rc = post_send1(d, p1.a, 999, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
			IBV_SEND_SIGNALED, 0, 0);
	extra = collect(cq, wc, 16, QUIET_MS);
	return result(got_err && s1 == IBV_QPS_ERR && s2 == IBV_QPS_ERR && polled <= cqe && !extra,
		      "%d signaled SENDs into a CQ of %d: async events [%s]%s; QPs %s, %s; "
		      "%d CQEs polled; one more SEND (post %s): %d new CQEs", nsend, cqe,
		      seen[0] ? seen : "none", got_err ? "" : " (no CQ_ERR for this CQ)",
		      state_name(s1), state_name(s2), polled, rc ? strerror(rc) : "ok", extra);
}

static int t_resize_under_load(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc[32];
	long rposted = 0, rdone = 0, sent = 0, sdone = 0, next_resize = 16;
	int good = 0, refused = 0, small = 0, n;
	double last = now();
	char err[200] = "";

	p.br = cq_new(d, 256, &p.brc);
	if (!p.br || pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	/* At most 48 receive CQEs can be outstanding: fits even a 64-entry CQ. */
	while (rdone < MSGS && !err[0]) {
		int busy = 0, posted;

		if (now() > t_budget || now() - last > 2 * EV_MS / 1e3) {
			snprintf(err, sizeof(err), "%s", now() > t_budget ? "time budget spent" :
				 "no progress for 10 s");
			break;
		}
		while (rposted < MSGS && rposted - rdone < 48 && !err[0]) {
			if (recv1(d, p.b, rposted))
				snprintf(err, sizeof(err), "%.150s", why);
			rposted++;
			busy = 1;
		}
		pump_sends(d, &p, rposted, &sent, &sdone, &posted, err, sizeof(err));
		busy |= posted;
		n = ibv_poll_cq(p.br, 32, wc);
		for (int i = 0; i < n; i++, rdone++)
			if ((wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)rdone) &&
			    !err[0])
				snprintf(err, sizeof(err), "receive %ld: got %s", rdone, wcs(&wc[i]));
		busy |= n > 0;
		if (busy)
			last = now();
		if (rdone >= next_resize) {
			small = !small;
			if (ibv_resize_cq(p.br, small ? 64 : 512))
				refused++;
			else
				good++;
			next_resize += 16;
		}
		if (!busy)
			usleep(100);
	}
	if (!err[0]) {
		int left = (int)(sent - sdone);

		n = poll_n(p.as, wc, left, EV_MS);
		if (n != left)
			snprintf(err, sizeof(err), "%d send completions missing", left - n);
		for (int i = 0; i < n && !err[0]; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				snprintf(err, sizeof(err), "send completion %s", wcs(&wc[i]));
	}
	if (err[0])
		return result(0, "%s (%ld of %d received; resizes %d ok, %d refused)", err, rdone,
			      MSGS, good, refused);
	return result(rdone == MSGS && good >= 2,
		      "%ld of %d receives once each and in order while resizing 64/512: "
		      "%d resizes ok, %d refused", rdone, MSGS, good, refused);
}

static int t_resize_below_count_refused(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc[8];
	int rc, n, ok = 0;

	p.br = cq_new(d, 16, &p.brc);
	if (!p.br || pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	for (int i = 0; i < 8; i++)
		if (recv1(d, p.b, i))
			return setup_failed();
	if (sends_wait(d, &p, 10, 8, 16, 0))
		return setup_failed();
	rc = ibv_resize_cq(p.br, 4);
	n = poll_n(p.br, wc, 8, EV_MS);
	for (int i = 0; i < n; i++)
		ok += wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i;
	return result(rc != 0 && n == 8 && ok == 8,
		      "resize to 4 with 8 queued: %s; then %d CQEs (%d SUCCESS in order), cqe %d",
		      rc ? strerror(errnum(rc)) : "accepted", n, ok, p.br->cqe);
}

static int t_results_after_qp_destroyed(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	uint32_t qpn;
	int rc, n;

	if (pair_setup(d, &p, NULL, NULL) || recv1(d, p.b, 5) || send_wait(d, &p, 6, 16, 0))
		return setup_failed();
	qpn = p.b->qp_num;
	rc = ibv_destroy_qp(p.b);
	if (rc)
		return result(0, "ibv_destroy_qp: %s", strerror(errnum(rc)));
	p.b = NULL;
	n = poll_n(p.br, &wc, 1, EV_MS);
	return result(n == 1 && wc.status == IBV_WC_SUCCESS && wc.qp_num == qpn && wc.wr_id == 5,
		      "after destroying QP 0x%x: %s", qpn, n ? wcs(&wc) : "no completion");
}

/* ------------------------------------------------------- C: flush, errors */

static int t_flush_only_this_qp(struct dev *d)
{
	struct pair p1 = { 0 }, p2 = { 0 };
	struct ibv_cq *br;
	struct ibv_wc wc[16];
	int n, more, good = 0, n2;

	br = cq_new(d, CQ_DEPTH, NULL);
	if (!br)
		return setup_failed();
	p1.br = p2.br = br;
	if (pair_setup(d, &p1, NULL, NULL) || pair_setup(d, &p2, NULL, NULL))
		return setup_failed();
	for (int i = 0; i < 4; i++)
		if (recv1(d, p1.b, 100 + i) || recv1(d, p2.b, 200 + i))
			return setup_failed();
	if (qp_to_err(p1.b))
		return setup_failed();
	n = poll_n(br, wc, 4, EV_MS);
	more = collect(br, wc + n, 16 - n, QUIET_MS);
	for (int i = 0; i < n; i++)
		good += wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].qp_num == p1.b->qp_num;
	if (send_wait(d, &p2, 300, 16, 0))
		return result(0, "flushed %d (%d good), %d more; then B2: %s", n, good, more, why);
	n2 = poll_n(br, wc + 8, 1, EV_MS);
	return result(n == 4 && good == 4 && !more && n2 == 1 && wc[8].status == IBV_WC_SUCCESS &&
			      wc[8].qp_num == p2.b->qp_num && wc[8].wr_id == 200,
		      "B1 to ERR: %d CQEs (%d FLUSH of B1, first %s), %d more in %d ms; "
		      "B2 then received: %s", n, good, n ? wcs(&wc[0]) : "-", more, QUIET_MS,
		      n2 ? wcs(&wc[8]) : "nothing");
}

static int t_later_requests_flushed(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc[4];
	int n, s, rc, n2, ok;

	if (pair_setup(d, &p, NULL, NULL) || recv1(d, p.b, 1))
		return setup_failed();
	if (post_send1(d, p.a, 2, IBV_WR_RDMA_WRITE, A_OFF, 64, d->mr->lkey, IBV_SEND_SIGNALED,
		       B_OFF, d->mr->rkey ^ BAD_KEY))
		return result(0, "ibv_post_send failed");
	n = poll_n(p.as, wc, 1, EV_MS);
	s = wait_state(p.a, IBV_QPS_ERR, EV_MS);
	rc = post_send1(d, p.a, 3, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
			IBV_SEND_SIGNALED, 0, 0);
	if (!rc) {
		n2 = poll_n(p.as, &wc[1], 1, EV_MS);
		ok = n2 == 1 && wc[1].status == IBV_WC_WR_FLUSH_ERR && wc[1].wr_id == 3;
	} else {
		n2 = collect(p.as, &wc[1], 3, QUIET_MS);
		ok = n2 == 0;
	}
	ok &= n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR && s == IBV_QPS_ERR;
	return result(ok, "bad rkey: %s; QP %s; next SEND: post %s, %s",
		      n ? wcs(&wc[0]) : "no CQE", state_name(s), rc ? strerror(rc) : "accepted",
		      n2 ? wcs(&wc[1]) : "no CQE");
}

static int t_failing_request_keeps_status(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_sge s1 = { raddr(d, A_OFF), 64, d->mr->lkey ^ BAD_KEY };
	struct ibv_sge s2 = { raddr(d, A_OFF), 64, d->mr->lkey };
	struct ibv_send_wr w2 = { .wr_id = 32, .sg_list = &s2, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr w1 = { .wr_id = 31, .sg_list = &s1, .num_sge = 1, .next = &w2,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc[2];
	int rc, n;

	if (pair_setup(d, &p, NULL, NULL) || recv1(d, p.b, 1) || recv1(d, p.b, 2))
		return setup_failed();
	rc = errnum(ibv_post_send(p.a, &w1, &bad));
	if (rc)
		return result(0, "ibv_post_send: %s", strerror(rc));
	n = poll_n(p.as, wc, 2, EV_MS);
	return result(n == 2 && wc[0].wr_id == 31 && wc[0].status == IBV_WC_LOC_PROT_ERR &&
			      wc[1].wr_id == 32 && wc[1].status == IBV_WC_WR_FLUSH_ERR,
		      "bogus-lkey SEND then valid SEND: %s %s", n > 0 ? wcs(&wc[0]) : "no CQE",
		      n > 1 ? wcs(&wc[1]) : "no second CQE");
}

/* ------------------------------------------------------ D: post-time errors */

static int t_queue_full(struct dev *d)
{
	struct pair p = { 0 };
	struct feed f;
	struct ibv_wc wc[32];
	long k = 0, limit;
	int rc = 0, done = 0, good = 0, n, usable;
	double end;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	limit = (long)p.acap.max_send_wr + 8;
	while (k < limit) {
		rc = post_send1(d, p.a, k, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
				IBV_SEND_SIGNALED, 0, 0);
		if (rc)
			break;
		k++;
	}
	f = (struct feed){ .d = d, .qp = p.b, .cq = p.br, .cap = p.bcap.max_recv_wr };
	if (feed_to(&f, k, 10000))
		return result(0, "%ld posts then %s; feeding receives: %s", k,
			      rc ? strerror(rc) : "no failure", why);
	end = now() + 10;
	while (done < k && now() < end) {
		n = ibv_poll_cq(p.as, 32, wc);
		for (int i = 0; i < n; i++)
			good += wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)done + i;
		done += n > 0 ? n : 0;
		feed_reap(&f);
		if (n <= 0)
			usleep(500);
	}
	usable = !recv1(d, p.b, 100000) && !send_wait(d, &p, 100000, 16, 0);
	return result(rc == ENOMEM && k == (long)p.acap.max_send_wr && done == k && good == k &&
			      usable,
		      "post %ld failed with %s after %ld posts (cap.max_send_wr %u); "
		      "%d of %ld completed SUCCESS in order once receives were posted; "
		      "one more SEND %s", k + 1, rc ? strerror(rc) : "nothing", k,
		      p.acap.max_send_wr, good, k, usable ? "worked" : why);
}

static int t_too_many_sges(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_sge *sg;
	struct ibv_wc ws, wr;
	uint32_t ns, nr, m;
	int rs, rr, okrecv, ns_got, nr_got;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	ns = p.acap.max_send_sge + 1;
	nr = p.bcap.max_recv_sge + 1;
	m = ns > nr ? ns : nr;
	sg = calloc(m, sizeof(*sg));
	if (!sg)
		return result(0, "out of memory");
	for (uint32_t i = 0; i < m; i++)
		sg[i] = (struct ibv_sge){ raddr(d, A_OFF + i * 64), 8, d->mr->lkey };
	rs = post_send_sg(p.a, 1, IBV_WR_SEND, sg, (int)ns, IBV_SEND_SIGNALED, 0, 0);
	if (recv1(d, p.b, 10) || send_wait(d, &p, 11, 16, 0))
		return result(0, "%u SGEs on a send: %s; then a valid SEND: %s", ns,
			      rs ? strerror(rs) : "accepted", why);
	ns_got = poll_n(p.br, &ws, 1, EV_MS);
	for (uint32_t i = 0; i < m; i++)
		sg[i].addr = raddr(d, B_OFF + i * 64);
	rr = post_recv_sg(p.b, 20, sg, (int)nr);
	okrecv = !recv1(d, p.b, 21) && !send_wait(d, &p, 22, 16, 0);
	nr_got = poll_n(p.br, &wr, 1, EV_MS);
	free(sg);
	return result(rs == EINVAL && rr == EINVAL && ns_got == 1 && ws.wr_id == 10 &&
			      ws.status == IBV_WC_SUCCESS && okrecv && nr_got == 1 &&
			      wr.wr_id == 21 && wr.status == IBV_WC_SUCCESS,
		      "send with %u SGEs: %s, then valid SEND received %s; recv with %u SGEs: %s, "
		      "then valid recv %s", ns, rs ? strerror(rs) : "accepted",
		      ns_got ? wcs(&ws) : "nothing", nr, rr ? strerror(rr) : "accepted",
		      !okrecv ? why : nr_got ? wcs(&wr) : "got nothing");
}

static int t_oversized_request_not_run(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_sge sg[2] = {
		{ raddr(d, A_OFF), 0x50000000, d->mr->lkey },
		{ raddr(d, A_OFF), 0x50000000, d->mr->lkey },
	};
	struct ibv_wc ws, wr[4];
	int rc, ns = 0, nr, delivered;

	if (pair_setup(d, &p, NULL, NULL) || recv1(d, p.b, 5))
		return setup_failed();
	rc = post_send_sg(p.a, 6, IBV_WR_SEND, sg, 2, IBV_SEND_SIGNALED, 0, 0);
	if (!rc)
		ns = poll_n(p.as, &ws, 1, EV_MS);
	nr = collect(p.br, wr, 4, QUIET_MS);
	delivered = (nr < 4 ? nr : 4) - count_status(wr, nr < 4 ? nr : 4, IBV_WC_WR_FLUSH_ERR);
	if (rc)
		return result(rc == EINVAL && !delivered,
			      "2.5 GiB SEND refused at post time: %s; receiver saw %d CQEs", strerror(rc),
			      nr);
	if (ns != 1 || ws.status != IBV_WC_LOC_LEN_ERR || ws.wr_id != 6 || delivered)
		return result(0, "2.5 GiB SEND accepted at post time; completion %s (want "
			      "LOC_LEN_ERR); receiver: %d non-flush CQEs%s%s", ns ? wcs(&ws) : "none",
			      delivered, nr ? ", first " : "", nr ? wcs(&wr[0]) : "");
	/* H3: DATA_OVERRUN is a Read and Write status too; the remote memory
	 * the oversized WRITE names must stay untouched. */
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ };
	uint8_t *target = d->buf + B_OFF + SCRATCH;
	char more[160] = "";

	memset(target, 0xa5, 4096);
	for (int i = 0; i < 2; i++) {
		struct pair q = { 0 };
		struct ibv_wc w;
		int n = 0;

		if (pair_setup(d, &q, NULL, NULL))
			return setup_failed();
		rc = post_send_sg(q.a, 7 + i, ops[i], sg, 2, IBV_SEND_SIGNALED,
				  raddr(d, B_OFF + SCRATCH), d->mr->rkey);
		if (!rc)
			n = poll_n(q.as, &w, 1, EV_MS);
		snprintf(more + strlen(more), sizeof(more) - strlen(more), "; 2.5 GiB %s: %s",
			 i ? "READ" : "WRITE", rc ? strerror(rc) : n ? wcs(&w) : "no completion");
		if (rc ? rc != EINVAL : n != 1 || w.status != IBV_WC_LOC_LEN_ERR)
			return result(0, "SEND: LOC_LEN_ERR, nothing delivered%s (want LOC_LEN_ERR)",
				      more);
	}
	for (int i = 0; i < 4096; i++)
		if (target[i] != 0xa5)
			return result(0, "SEND: LOC_LEN_ERR%s; but the WRITE reached the target", more);
	return result(1, "2.5 GiB SEND: %s, receiver got nothing%s; target untouched", wcs(&ws),
		      more);
}

static int t_post_before_rts_refused(struct dev *d)
{
	struct qpopt oa = defopt;
	struct pair p = { 0 };
	struct ibv_wc ws[4], wr[4];
	int rc1, rc2, ns, nr;

	oa.init_only = 1;
	if (pair_setup(d, &p, &oa, NULL) || recv1(d, p.b, 50) || recv1(d, p.b, 51))
		return setup_failed();
	rc1 = post_send1(d, p.a, 1, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
			 IBV_SEND_SIGNALED, 0, 0);
	if (qp_rtr(d, p.a, p.b->qp_num, &p.oa) || qp_rts(p.a, &p.oa))
		return setup_failed();
	rc2 = post_send1(d, p.a, 2, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
			 IBV_SEND_SIGNALED, 0, 0);
	ns = collect(p.as, ws, 4, 2000);
	nr = collect(p.br, wr, 4, QUIET_MS);
	return result(rc1 != 0 && !rc2 && ns == 1 && ws[0].wr_id == 2 &&
			      ws[0].status == IBV_WC_SUCCESS && nr == 1,
		      "SEND in INIT: %s; after RTS: post %s, %d send CQEs in 2 s (first %s), "
		      "%d receives", rc1 ? strerror(rc1) : "accepted", rc2 ? strerror(rc2) : "ok",
		      ns, ns ? wcs(&ws[0]) : "-", nr);
}

static int t_unknown_send_flag_not_run(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc ws, wr[4];
	int rc, ns = 0, nr, ok;

	if (pair_setup(d, &p, NULL, NULL) || recv1(d, p.b, 60))
		return setup_failed();
	rc = post_send1(d, p.a, 61, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
			IBV_SEND_SIGNALED | (1u << 20), 0, 0);
	if (!rc)
		ns = poll_n(p.as, &ws, 1, EV_MS);
	nr = collect(p.br, wr, 4, QUIET_MS);
	ok = !count_status(wr, nr < 4 ? nr : 4, IBV_WC_SUCCESS);
	if (rc)
		return result(ok, "SEND with flag bit 20 refused at post time (%s); receiver: %d CQEs",
			      strerror(rc), nr);
	return result(ok && ns == 1 && ws.status != IBV_WC_SUCCESS,
		      "SEND with flag bit 20 accepted; completion %s (expected LOC_QP_OP_ERR); "
		      "receiver: %s", ns ? wcs(&ws) : "none", nr ? wcs(&wr[0]) : "nothing");
}

/* ---------------------------------------------------- E: operation flags */

static int post_retry(struct dev *d, struct ibv_qp *qp, uint64_t id, unsigned int flags)
{
	double end = now() + 1;
	int rc;

	while ((rc = post_send1(d, qp, id, IBV_WR_SEND, A_OFF + SCRATCH, 8, d->mr->lkey, flags,
				0, 0)) == ENOMEM && now() < end)
		usleep(1000);
	return rc;
}

static int t_unsignaled(struct dev *d)
{
	struct qpopt oa = defopt;
	struct pair p = { 0 };
	struct feed f;
	struct ibv_wc sig[8], wc[8];
	uint32_t per;
	long sends = 0;
	int nsig = 0, ok = 1, n, extra, ne;
	char err[200] = "";

	oa.sq_sig_all = 0;
	if (pair_setup(d, &p, &oa, NULL))
		return setup_failed();
	per = p.acap.max_send_wr;
	f = (struct feed){ .d = d, .qp = p.b, .cq = p.br, .cap = p.bcap.max_recv_wr };
	for (int round = 0; round < 3 && !err[0]; round++) {
		double end;

		for (uint32_t k = 0; k < per && !err[0]; k++) {
			int rc;

			if (feed_to(&f, sends + 1, EV_MS)) {
				snprintf(err, sizeof(err), "%.150s", why);
				break;
			}
			rc = post_retry(d, p.a, (uint64_t)round << 16 | k,
					k == per - 1 ? IBV_SEND_SIGNALED : 0);
			if (rc)
				snprintf(err, sizeof(err), "round %d post %u: %s", round, k,
					 strerror(rc));
			sends++;
		}
		end = now() + 10;
		while (!err[0] && nsig < round + 1 && now() < end) {
			n = ibv_poll_cq(p.as, 8, wc);
			for (int i = 0; i < n; i++, nsig++)
				if (nsig < 8)
					sig[nsig] = wc[i];
			feed_reap(&f);
			if (n <= 0)
				usleep(200);
		}
		if (!err[0] && nsig < round + 1)
			snprintf(err, sizeof(err), "round %d: no signaled completion in 10 s", round);
	}
	if (err[0])
		return result(0, "%s (%d send CQEs so far)", err, nsig);
	extra = collect(p.as, wc, 8, QUIET_MS);
	for (int i = 0; i < 3 && i < nsig; i++)
		ok &= sig[i].status == IBV_WC_SUCCESS &&
		      sig[i].wr_id == ((uint64_t)i << 16 | (per - 1));
	for (double end = now() + EV_MS / 1e3; f.done < sends && now() < end;)
		if (!feed_reap(&f))
			usleep(200);
	/* An unsignaled request that fails must still complete. */
	if (post_send1(d, p.a, 999, IBV_WR_RDMA_WRITE, A_OFF, 64, d->mr->lkey, 0, B_OFF,
		       d->mr->rkey ^ BAD_KEY))
		return result(0, "ibv_post_send (bad rkey) failed");
	ne = poll_n(p.as, wc, 1, EV_MS);
	ne += collect(p.as, wc + ne, 8 - ne, QUIET_MS);
	return result(ok && nsig == 3 && !extra && f.done == sends && !f.bad && ne == 1 &&
			      wc[0].status == IBV_WC_REM_ACCESS_ERR && wc[0].wr_id == 999,
		      "3 rounds of %u SENDs, 1 signaled each: %d send CQEs (+%d late), ids %s; "
		      "%ld of %ld received, %ld bad; unsignaled bad-rkey WRITE: %d CQEs, %s",
		      per, nsig, extra, ok ? "right" : "wrong", f.done, sends, f.bad, ne,
		      ne ? wcs(&wc[0]) : "none");
}

static int t_read_fence(struct dev *d)
{
	const uint32_t len = 256u << 10, R = B_OFF, L = A_OFF, M = A_OFF + (1u << 20);
	struct pair p = { 0 };
	struct ibv_sge sl = { raddr(d, L), len, d->mr->lkey }, sm = { raddr(d, M), len, d->mr->lkey };
	struct ibv_send_wr ww = { .wr_id = 2, .sg_list = &sm, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sl, .num_sge = 1, .next = &ww,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc[2];
	uint32_t lbad = 0, rbad = 0;
	int rc, n;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	for (uint32_t i = 0; i < len; i++) {
		uint8_t pv = (uint8_t)(i * 7 + (i >> 8) + 1);

		d->buf[R + i] = pv;
		d->buf[M + i] = (uint8_t)~pv;	/* Q differs from P in every byte */
		d->buf[L + i] = 0;
	}
	wr.wr.rdma.remote_addr = raddr(d, R);
	wr.wr.rdma.rkey = d->mr->rkey;
	ww.wr.rdma.remote_addr = raddr(d, R);
	ww.wr.rdma.rkey = d->mr->rkey;
	rc = errnum(ibv_post_send(p.a, &wr, &bad));
	if (rc)
		return result(0, "ibv_post_send: %s", strerror(rc));
	n = poll_n(p.as, wc, 2, EV_MS);
	for (uint32_t i = 0; i < len; i++) {
		uint8_t pv = (uint8_t)(i * 7 + (i >> 8) + 1), qv = (uint8_t)~pv;

		lbad += d->buf[L + i] != pv;
		rbad += d->buf[R + i] != qv;
	}
	return result(n == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS &&
			      !lbad && !rbad,
		      "256 KiB READ then fenced WRITE over its source: %s %s; %u bytes read wrong, "
		      "%u bytes written wrong", n > 0 ? wcs(&wc[0]) : "no CQE",
		      n > 1 ? wcs(&wc[1]) : "no CQE", lbad, rbad);
}

static int t_solicited_event(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc wc;
	int n, ev1, ev2;

	if (pair_setup(d, &p, NULL, NULL) || arm(p.br, 1) || recv1(d, p.b, 1) ||
	    send_wait(d, &p, 2, 16, 0))
		return setup_failed();
	n = poll_n(p.br, &wc, 1, EV_MS);
	ev1 = wait_event(p.brc, QUIET_MS);
	if (arm(p.br, 1) || recv1(d, p.b, 3) || send_wait(d, &p, 4, 16, IBV_SEND_SOLICITED))
		return setup_failed();
	ev2 = wait_event(p.brc, EV_MS);
	return result(n == 1 && ev1 == 0 && ev2 == 1,
		      "SOLICITED arm: unsolicited SEND (%s) gave %s within %d ms; solicited SEND "
		      "gave %s", n ? wcs(&wc) : "no CQE", evs(ev1), QUIET_MS, evs(ev2));
}

/*
 * S4: inline requests "do not need to limit the number of entries in the
 * scatter/gather list to the maxInitiatorRequestSge" and the token "may be
 * invalid". The application asks for 2 SGEs and as much inline room as the
 * device takes (512 bytes on rroce; 256 tried next); the provider enforces
 * the caps the kernel returns, which the WQE's inline room enlarges, so an
 * inline SEND may carry that many SGEs -- well past the 2 asked for.
 */
static int t_inline_many_sges(struct dev *d)
{
	static const uint32_t room[] = { 512, 256 };
	struct qpopt oa = defopt;
	struct pair p = { 0 };
	struct ibv_sge sg[64];
	struct ibv_wc ws, wr;
	uint8_t src[64], *dst;
	int rc, ns, nr, same, n, up = -1;

	oa.send_sge = 2;
	for (unsigned int i = 0; i < sizeof(room) / sizeof(room[0]) && up; i++) {
		oa.inline_data = room[i];
		up = pair_setup(d, &p, &oa, NULL);
	}
	if (up || recv1(d, p.b, 1))
		return setup_failed();
	n = p.acap.max_send_sge < 64 ? (int)p.acap.max_send_sge : 64;
	if (n <= 2 || (uint32_t)n > p.acap.max_inline_data)
		return result(0, "caps leave no room past the 2 SGEs asked for (max_send_sge %u, "
			      "max_inline_data %u)", p.acap.max_send_sge, p.acap.max_inline_data);
	dst = d->buf + B_OFF + SCRATCH;
	memset(dst, 0, 128);
	for (int i = 0; i < n; i++) {
		src[i] = (uint8_t)(i * 3 + 1);
		sg[i] = (struct ibv_sge){ (uintptr_t)&src[i], 1, 0 };
	}
	rc = post_send_sg(p.a, 2, IBV_WR_SEND, sg, n, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0);
	if (rc)
		return result(0, "%d one-byte inline SGEs refused: %s (caps: max_send_sge %u, "
			      "max_inline_data %u)", n, strerror(rc), p.acap.max_send_sge,
			      p.acap.max_inline_data);
	memset(src, 0xee, sizeof(src));	/* inline data was taken at post time */
	ns = poll_n(p.as, &ws, 1, EV_MS);
	nr = poll_n(p.br, &wr, 1, EV_MS);
	for (int i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 3 + 1);
	same = !memcmp(src, dst, n) && dst[n] == 0;
	return result(ns == 1 && ws.status == IBV_WC_SUCCESS && nr == 1 &&
			      wr.status == IBV_WC_SUCCESS && wr.byte_len == (uint32_t)n && same,
		      "%d one-byte inline SGEs, lkey 0, on a QP asking for 2 SGEs (caps: "
		      "max_send_sge %u, max_inline_data %u): send %s, receive %s byte_len %u, "
		      "data %s", n, p.acap.max_send_sge, p.acap.max_inline_data,
		      ns ? wcs(&ws) : "none", nr ? wcs(&wr) : "none", nr ? wr.byte_len : 0,
		      same ? "intact" : "wrong");
}

static int t_zero_byte_ops(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_sge dummy = { raddr(d, A_OFF), 0, d->mr->lkey };
	struct ibv_wc ws[3], wr;
	int rc, ns, nr;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	rc = post_recv_sg(p.b, 70, &dummy, 0);
	if (!rc)
		rc = post_send_sg(p.a, 71, IBV_WR_SEND, &dummy, 0, IBV_SEND_SIGNALED, 0, 0);
	if (!rc)
		rc = post_send_sg(p.a, 72, IBV_WR_RDMA_WRITE, &dummy, 0, IBV_SEND_SIGNALED,
				  raddr(d, B_OFF), d->mr->rkey);
	if (!rc)
		rc = post_send_sg(p.a, 73, IBV_WR_RDMA_READ, &dummy, 0, IBV_SEND_SIGNALED,
				  raddr(d, B_OFF), d->mr->rkey);
	if (rc)
		return result(0, "posting a zero-SGE request: %s", strerror(rc));
	ns = poll_n(p.as, ws, 3, EV_MS);
	nr = poll_n(p.br, &wr, 1, EV_MS);
	return result(ns == 3 && count_status(ws, 3, IBV_WC_SUCCESS) == 3 && ws[0].wr_id == 71 &&
			      ws[1].wr_id == 72 && ws[2].wr_id == 73 && nr == 1 &&
			      wr.status == IBV_WC_SUCCESS && wr.byte_len == 0,
		      "SEND %s, WRITE %s, READ %s; receive %s byte_len %u",
		      ns > 0 ? wcs(&ws[0]) : "none", ns > 1 ? wcs(&ws[1]) : "none",
		      ns > 2 ? wcs(&ws[2]) : "none", nr ? wcs(&wr) : "none", nr ? wr.byte_len : 0);
}

/* ------------------------------------------------------- H: status values */

static int t_recv_overflow_len_err(struct dev *d)
{
	struct pair p = { 0 };
	struct ibv_wc ws, wr;
	int rc, ns, nr;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	rc = post_recv1(d, p.b, 80, B_OFF + SCRATCH, 64, d->mr->lkey);
	if (!rc)
		rc = post_send1(d, p.a, 81, IBV_WR_SEND, A_OFF + SCRATCH, 128, d->mr->lkey,
				IBV_SEND_SIGNALED, 0, 0);
	if (rc)
		return result(0, "post: %s", strerror(rc));
	nr = poll_n(p.br, &wr, 1, EV_MS);
	ns = poll_n(p.as, &ws, 1, EV_MS);
	return result(nr == 1 && wr.status == IBV_WC_LOC_LEN_ERR && wr.opcode == IBV_WC_RECV &&
			      wr.wr_id == 80 && ns == 1 && ws.status != IBV_WC_SUCCESS,
		      "128 B into a 64 B receive: receiver %s (want LOC_LEN_ERR/RECV); sender %s "
		      "(expect REM_INV_REQ_ERR)", nr ? wcs(&wr) : "no CQE", ns ? wcs(&ws) : "no CQE");
}

/* One H2 case on a fresh pair; returns the status seen, or -1 for none. */
static int h2_case(struct dev *d, int which, char *out, size_t outlen)
{
	struct pair p = { 0 };
	uint32_t lk = d->mr->lkey, bad = lk ^ BAD_KEY;
	struct ibv_wc wc, wa;
	int rc = 0, n, na = 0;

	if (pair_setup(d, &p, NULL, NULL)) {
		snprintf(out, outlen, "setup: %.60s", why);
		return -1;
	}
	switch (which) {
	case 0:
		rc = recv1(d, p.b, 1) ? EIO :
		     post_send1(d, p.a, 2, IBV_WR_SEND, A_OFF, 64, bad, IBV_SEND_SIGNALED, 0, 0);
		break;
	case 1:
		rc = post_send1(d, p.a, 2, IBV_WR_RDMA_WRITE, A_OFF, 64, bad, IBV_SEND_SIGNALED,
				B_OFF, d->mr->rkey);
		break;
	case 2:
		rc = post_send1(d, p.a, 2, IBV_WR_RDMA_READ, A_OFF, 64, bad, IBV_SEND_SIGNALED,
				B_OFF, d->mr->rkey);
		break;
	default:
		rc = post_recv1(d, p.b, 1, B_OFF + SCRATCH, 64, bad);
		if (!rc)
			rc = post_send1(d, p.a, 2, IBV_WR_SEND, A_OFF + SCRATCH, 16, lk,
					IBV_SEND_SIGNALED, 0, 0);
		break;
	}
	if (rc) {
		snprintf(out, outlen, "post: %s", strerror(rc));
		pair_free(&p);
		return -1;
	}
	n = poll_n(which == 3 ? p.br : p.as, &wc, 1, EV_MS);
	if (which == 3)
		na = poll_n(p.as, &wa, 1, EV_MS);
	snprintf(out, outlen, "%s%s%s", n ? ibv_wc_status_str(wc.status) : "no CQE",
		 which == 3 ? ", sender " : "",
		 which == 3 ? (na ? ibv_wc_status_str(wa.status) : "no CQE") : "");
	pair_free(&p);
	return n ? (int)wc.status : -1;
}

static int t_bad_lkey_prot_err(struct dev *d)
{
	static const char *const name[4] = { "SEND", "WRITE", "READ", "RECV" };
	char out[4][96];
	int good = 0;

	for (int i = 0; i < 4; i++)
		good += h2_case(d, i, out[i], sizeof(out[i])) == IBV_WC_LOC_PROT_ERR;
	return result(good == 4, "bogus lkey: %s %s; %s %s; %s %s; %s %s (want LOC_PROT_ERR)",
		      name[0], out[0], name[1], out[1], name[2], out[2], name[3], out[3]);
}

static int t_remote_errors(struct dev *d)
{
	struct qpopt oa = defopt;
	struct pair p = { 0 }, q = { 0 };
	struct ibv_wc w1, w2;
	int rc, n1, n2 = 0;

	if (pair_setup(d, &p, NULL, NULL))
		return setup_failed();
	rc = post_send1(d, p.a, 1, IBV_WR_RDMA_READ, A_OFF, 4096, d->mr->lkey, IBV_SEND_SIGNALED,
			BUF_SIZE - 100, d->mr->rkey);
	if (rc)
		return result(0, "ibv_post_send: %s", strerror(rc));
	n1 = poll_n(p.as, &w1, 1, EV_MS);
	oa.timeout = 8;
	oa.retry_cnt = 1;
	if (pair_setup(d, &q, &oa, NULL) || qp_to_err(q.b))
		return setup_failed();
	rc = post_send1(d, q.a, 2, IBV_WR_SEND, A_OFF + SCRATCH, 16, d->mr->lkey,
			IBV_SEND_SIGNALED, 0, 0);
	if (!rc)
		n2 = poll_n(q.as, &w2, 1, 10000);
	return result(n1 == 1 && w1.status == IBV_WC_REM_ACCESS_ERR && !rc && n2 == 1 &&
			      w2.status == IBV_WC_RETRY_EXC_ERR,
		      "READ past the remote MR: %s (want REM_ACCESS_ERR); SEND to a QP in ERR: %s "
		      "(want RETRY_EXC_ERR)", n1 ? wcs(&w1) : "no CQE",
		      rc ? strerror(rc) : n2 ? wcs(&w2) : "no CQE in 10 s");
}

/* ------------------------------------------------------- memory windows */

/* Posts BIND_MW of type-2 window @mw over [@addr, @addr + @len) of @mr. */
static int bind2(struct ibv_qp *qp, uint64_t id, struct ibv_mw *mw, struct ibv_mr *mr,
		 uint64_t addr, uint64_t len, unsigned int access, uint32_t *rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = id, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
	}, *bad = NULL;

	*rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = *rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	return errnum(ibv_post_send(qp, &wr, &bad));
}

/* Posts LOCAL_INV (or, with @op, SEND_WITH_INV of 16 bytes) naming @rkey. */
static int post_inv(struct dev *d, struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op,
		    uint32_t rkey)
{
	struct ibv_sge sge = { raddr(d, A_OFF + SCRATCH), 16, d->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
		.sg_list = op == IBV_WR_SEND_WITH_INV ? &sge : NULL,
		.num_sge = op == IBV_WR_SEND_WITH_INV,
	}, *bad = NULL;

	wr.invalidate_rkey = rkey;
	return errnum(ibv_post_send(qp, &wr, &bad));
}

/* A Bind or Invalidate completion: only these (H5). */
static int mw_status_ok(const struct ibv_wc *w)
{
	return w->status == IBV_WC_SUCCESS || w->status == IBV_WC_WR_FLUSH_ERR ||
	       w->status == IBV_WC_LOC_QP_OP_ERR || w->status == IBV_WC_MW_BIND_ERR;
}

#define WIN_OFF	(A_OFF + (1u << 20))	/* the windows' MR: 64 KiB of A's half */
#define WIN_LEN	(1u << 16)

/* The MR windows are bound to: local write and MW_BIND, no remote right. */
static struct ibv_mr *win_mr(struct dev *d, unsigned int access)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, d->buf + WIN_OFF, WIN_LEN, access);

	if (!mr)
		seterr("ibv_reg_mr(MW_BIND): %s", strerror(errno));
	return mr;
}

/* Posts BIND_MW on @qp and returns its completion's status (-1: none). */
static int bind_status(struct dev *d, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw,
		       struct ibv_mr *mr, uint32_t off, uint32_t len, unsigned int access,
		       uint32_t *rkey, struct ibv_wc *w)
{
	if (bind2(qp, 7, mw, mr, raddr(d, off), len, access, rkey))
		return -1;
	if (poll_n(cq, w, 1, EV_MS) != 1)
		return -1;
	if (!mw_status_ok(w) || (w->status == IBV_WC_SUCCESS && w->opcode != IBV_WC_BIND_MW))
		return -2;
	return w->status;
}

/*
 * Frees what a window test made, windows first (rdma_rxe warns in its pool
 * cleanup when a process exits with windows still bound); returns @ok.
 */
static int mw_done(int ok, struct ibv_mw **mw, int nmw, struct ibv_mr **mr, int nmr,
		   struct pair *p, int np)
{
	for (int i = 0; i < nmw; i++)
		if (mw[i])
			ibv_dealloc_mw(mw[i]);
	for (int i = 0; i < np; i++)
		pair_free(&p[i]);
	for (int i = 0; i < nmr; i++)
		if (mr[i])
			ibv_dereg_mr(mr[i]);
	return ok;
}

/*
 * F1: a bind inside the region, granting remote write over an MR with
 * local write, makes a token the peer writes through, on the QP the window
 * is bound to only; a bind past the region, or granting write over an MR
 * without local write, completes with MW_BIND_ERR.
 */
static int t_bind_rules(struct dev *d)
{
	struct pair ps[4] = { 0 };
	struct ibv_wc w[4];
	struct ibv_mr *mrs[2] = { win_mr(d, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND),
				  win_mr(d, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND) };
	struct ibv_mr *mr = mrs[0], *nolw = mrs[1];
	struct ibv_mw *mw[3] = { ibv_alloc_mw(d->pd, IBV_MW_TYPE_2),
				 ibv_alloc_mw(d->pd, IBV_MW_TYPE_2),
				 ibv_alloc_mw(d->pd, IBV_MW_TYPE_2) };
	uint32_t rkey, rk2, rk3;
	int st[3], n[2] = { 0 }, rc;

	if (!mr || !nolw)
		return setup_failed();
	if (!mw[0] || !mw[1] || !mw[2])
		return result(0, "ibv_alloc_mw(type 2): %s", strerror(errno));
	if (pair_setup(d, &ps[0], NULL, NULL) || pair_setup(d, &ps[1], NULL, NULL) ||
	    pair_setup(d, &ps[2], NULL, NULL) || pair_setup(d, &ps[3], NULL, NULL))
		return setup_failed();
	/* 256 bytes in the middle of the MR, bound on ps[0].a; ps[0].b writes. */
	st[0] = bind_status(d, ps[0].a, ps[0].as, mw[0], mr, WIN_OFF + 256, 256, IBV_ACCESS_REMOTE_WRITE,
			    &rkey, &w[0]);
	memset(d->buf + B_OFF, 0xab, 256);
	rc = post_send1(d, ps[0].b, 2, IBV_WR_RDMA_WRITE, B_OFF, 256, d->mr->lkey, IBV_SEND_SIGNALED,
			WIN_OFF + 256, rkey);
	if (!rc)
		n[0] = poll_n(ps[0].bs, &w[1], 1, EV_MS);
	int landed = d->buf[WIN_OFF + 256] == 0xab && d->buf[WIN_OFF + 511] == 0xab &&
		     d->buf[WIN_OFF + 512] == 0;
	/* The same token through another QP pair: ps[1].b's WRITE arrives on ps[1].a. */
	rc = rc ? rc : post_send1(d, ps[1].b, 3, IBV_WR_RDMA_WRITE, B_OFF, 16, d->mr->lkey,
				  IBV_SEND_SIGNALED, WIN_OFF + 256, rkey);
	if (!rc)
		n[1] = poll_n(ps[1].bs, &w[2], 1, EV_MS);
	/* Past the MR's end, and write over an MR without local write. */
	st[1] = bind_status(d, ps[2].a, ps[2].as, mw[1], mr, WIN_OFF + WIN_LEN - 128, 256,
			    IBV_ACCESS_REMOTE_WRITE, &rk2, &w[3]);
	st[2] = bind_status(d, ps[3].a, ps[3].as, mw[2], nolw, WIN_OFF, 256, IBV_ACCESS_REMOTE_WRITE,
			    &rk3, &w[3]);
	int ok = result(st[0] == IBV_WC_SUCCESS && !rc && n[0] == 1 &&
			      w[1].status == IBV_WC_SUCCESS && landed && n[1] == 1 &&
			      w[2].status == IBV_WC_REM_ACCESS_ERR && st[1] == IBV_WC_MW_BIND_ERR &&
			      st[2] == IBV_WC_MW_BIND_ERR,
		      "bind %d, WRITE through it %s (data %s), from another QP %s; bind past the "
		      "MR %d, write over an MR without local write %d (want 0, SUCCESS, landed, "
		      "REM_ACCESS_ERR, %d, %d)",
		      st[0], n[0] ? wcs(&w[1]) : "no CQE", landed ? "landed" : "wrong",
		      n[1] ? wcs(&w[2]) : "no CQE", st[1], st[2], IBV_WC_MW_BIND_ERR,
		      IBV_WC_MW_BIND_ERR);
	return mw_done(ok, mw, 3, mrs, 2, ps, 4);
}

/*
 * F2: invalidating a type-2 window that was never bound fails; a window
 * invalidated by the peer's SEND with invalidate is gone (a later access
 * is a remote access error) and invalidating it again fails. Not for
 * rdma_rxe: the first case dereferences a NULL pointer there.
 */
static int t_invalidate_rules(struct dev *d)
{
	struct pair ps[3] = { 0 };
	struct ibv_wc w[5];
	struct ibv_mr *mr = win_mr(d, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw *mws[2] = { ibv_alloc_mw(d->pd, IBV_MW_TYPE_2),
				  ibv_alloc_mw(d->pd, IBV_MW_TYPE_2) };
	struct ibv_mw *fresh = mws[0], *mw = mws[1];
	uint32_t rkey;
	int rc, st, n[4] = { 0 };

	if (!mr)
		return setup_failed();
	if (!fresh || !mw)
		return result(0, "ibv_alloc_mw(type 2): %s", strerror(errno));
	if (pair_setup(d, &ps[0], NULL, NULL) || pair_setup(d, &ps[1], NULL, NULL) ||
	    pair_setup(d, &ps[2], NULL, NULL))
		return setup_failed();
	/* Never bound. */
	rc = post_inv(d, ps[0].a, 1, IBV_WR_LOCAL_INV, fresh->rkey);
	if (!rc)
		n[0] = poll_n(ps[0].as, &w[0], 1, EV_MS);
	/* Bound on ps[1].a; ps[1].b's SEND with invalidate frees it. */
	st = bind_status(d, ps[1].a, ps[1].as, mw, mr, WIN_OFF, 4096, IBV_ACCESS_REMOTE_WRITE, &rkey,
			 &w[4]);
	rc = rc ? rc : recv1(d, ps[1].a, 2);
	rc = rc ? rc : post_inv(d, ps[1].b, 3, IBV_WR_SEND_WITH_INV, rkey);
	if (!rc) {
		n[1] = poll_n(ps[1].bs, &w[1], 1, EV_MS);
		n[2] = poll_n(ps[1].ar, &w[2], 1, EV_MS);
	}
	/* A later WRITE through it, then LOCAL_INV again (on r, same PD). */
	rc = rc ? rc : post_send1(d, ps[1].b, 4, IBV_WR_RDMA_WRITE, B_OFF, 16, d->mr->lkey,
				  IBV_SEND_SIGNALED, WIN_OFF, rkey);
	if (!rc)
		n[3] = poll_n(ps[1].bs, &w[3], 1, EV_MS);
	int ok3 = n[3] == 1 && w[3].status == IBV_WC_REM_ACCESS_ERR;
	rc = rc ? rc : post_inv(d, ps[2].a, 5, IBV_WR_LOCAL_INV, rkey);
	int n4 = rc ? 0 : poll_n(ps[2].as, &w[4], 1, EV_MS);
	int ok = result(!rc && n[0] == 1 && w[0].status == IBV_WC_LOC_QP_OP_ERR &&
			      st == IBV_WC_SUCCESS && n[1] == 1 && w[1].status == IBV_WC_SUCCESS &&
			      n[2] == 1 && w[2].status == IBV_WC_SUCCESS &&
			      (w[2].wc_flags & IBV_WC_WITH_INV) && w[2].invalidated_rkey == rkey &&
			      ok3 && n4 == 1 && w[4].status == IBV_WC_LOC_QP_OP_ERR,
		      "never bound: %s (want LOC_QP_OP_ERR); bind %d, SEND_WITH_INV %s, its "
		      "receive %s%s; WRITE after %s (want REM_ACCESS_ERR); invalidate again %s "
		      "(want LOC_QP_OP_ERR)",
		      rc ? strerror(rc) : n[0] ? wcs(&w[0]) : "no CQE", st,
		      n[1] ? wcs(&w[1]) : "no CQE", n[2] ? wcs(&w[2]) : "no CQE",
		      n[2] && (w[2].wc_flags & IBV_WC_WITH_INV) ? " with invalidate" : "",
		      n[3] ? wcs(&w[3]) : "no CQE", n4 ? wcs(&w[4]) : "no CQE");
	return mw_done(ok, mws, 2, &mr, 1, ps, 3);
}

/*
 * H5: Bind and Invalidate complete only with SUCCESS, CANCELED (flushed),
 * INVALID_DEVICE_REQUEST (LOC_QP_OP_ERR / MW_BIND_ERR) or INTERNAL_ERROR:
 * a refused type-1 invalidate, a bind of an already bound type-2 window
 * and the requests flushed behind it.
 */
static int t_bind_invalidate_statuses(struct dev *d)
{
	struct pair ps[2] = { 0 };
	struct ibv_wc w[8];
	struct ibv_mr *mr = win_mr(d, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw *mws[2] = { ibv_alloc_mw(d->pd, IBV_MW_TYPE_1),
				  ibv_alloc_mw(d->pd, IBV_MW_TYPE_2) };
	struct ibv_mw *mw1 = mws[0], *mw2 = mws[1];
	struct ibv_mw_bind b1 = {
		.wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = raddr(d, WIN_OFF), .length = 4096,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE },
	};
	uint32_t k1, k2;
	int rc, got = 0, bad = 0, n;

	if (!mr)
		return setup_failed();
	if (!mw1 || !mw2)
		return result(0, "ibv_alloc_mw: %s", strerror(errno));
	if (pair_setup(d, &ps[0], NULL, NULL) || pair_setup(d, &ps[1], NULL, NULL))
		return setup_failed();
	/* Type 1: bound (success), never invalidated (refused). */
	rc = errnum(ibv_bind_mw(ps[0].a, mw1, &b1));
	rc = rc ? rc : post_inv(d, ps[0].a, 2, IBV_WR_LOCAL_INV, mw1->rkey);
	/* Type 2: bound, bound again (refused), then requests behind it. */
	rc = rc ? rc : bind2(ps[1].a, 3, mw2, mr, raddr(d, WIN_OFF), 4096, IBV_ACCESS_REMOTE_READ, &k2);
	rc = rc ? rc : bind2(ps[1].a, 4, mw2, mr, raddr(d, WIN_OFF), 4096, IBV_ACCESS_REMOTE_READ, &k1);
	rc = rc ? rc : post_inv(d, ps[1].a, 5, IBV_WR_LOCAL_INV, k2);
	if (!rc) {
		n = collect(ps[0].as, w, 2, EV_MS);
		n += collect(ps[1].as, w + n, 3, EV_MS);
		got = n;
		for (int i = 0; i < n; i++)
			bad += !mw_status_ok(&w[i]);
	}
	int ok = result(!rc && got == 5 && !bad && w[0].status == IBV_WC_SUCCESS &&
			      w[1].status != IBV_WC_SUCCESS && w[2].status == IBV_WC_SUCCESS &&
			      w[3].status == IBV_WC_MW_BIND_ERR,
		      "%s; %d completions, %d with a status Bind/Invalidate may not have: "
		      "type 1 bind %s, its invalidate %s; type 2 bind %s, again %s, invalidate %s",
		      rc ? strerror(rc) : "posted", got, bad, got > 0 ? wcs(&w[0]) : "-",
		      got > 1 ? wcs(&w[1]) : "-", got > 2 ? wcs(&w[2]) : "-",
		      got > 3 ? wcs(&w[3]) : "-", got > 4 ? wcs(&w[4]) : "-");
	return mw_done(ok, mws, 2, &mr, 1, ps, 2);
}

/* ------------------------------------------------------------ the runner */

struct test {
	const char *id, *name;
	int (*fn)(struct dev *d);
};

static const struct test tests[] = {
	{ "A1", "no_event_unarmed", t_no_event_unarmed },
	{ "A3", "arm_merge_any_wins", t_arm_merge_any_wins },
	{ "A4", "one_event_per_arm", t_one_event_per_arm },
	{ "A5", "reported_not_refire", t_reported_not_refire },
	{ "A7", "fire_on_arm_new", t_fire_on_arm_new },
	{ "A7", "race_poll_then_arm", t_race_poll_then_arm },
	{ "A8", "all_waiters_released", t_all_waiters_released },
	{ "A9", "errors_wake_solicited", t_errors_wake_solicited },
	{ "A11", "concurrent_poll_and_arm", t_concurrent_poll_and_arm },
	{ "B1", "poll_count_semantics", t_poll_count_semantics },
	{ "B2", "opcode_on_error_cqes", t_opcode_on_error_cqes },
	{ "B3", "per_qp_order_shared_cq", t_per_qp_order_shared_cq },
	{ "B4", "overrun_kills_cq_and_qps", t_overrun_kills_cq_and_qps },
	{ "B5", "resize_under_load", t_resize_under_load },
	{ "B6", "resize_below_count_refused", t_resize_below_count_refused },
	{ "B7", "results_after_qp_destroyed", t_results_after_qp_destroyed },
	{ "C1", "flush_only_this_qp", t_flush_only_this_qp },
	{ "C2", "later_requests_flushed", t_later_requests_flushed },
	{ "C3", "failing_request_keeps_status", t_failing_request_keeps_status },
	{ "D1", "queue_full", t_queue_full },
	{ "D2", "too_many_sges", t_too_many_sges },
	{ "D3", "oversized_request_not_run", t_oversized_request_not_run },
	{ "D4", "post_before_rts_refused", t_post_before_rts_refused },
	{ "D5", "unknown_send_flag_not_run", t_unknown_send_flag_not_run },
	{ "E1", "unsignaled", t_unsignaled },
	{ "E2", "read_fence", t_read_fence },
	{ "E3", "solicited_event", t_solicited_event },
	{ "E4", "inline_many_sges", t_inline_many_sges },
	{ "E5", "zero_byte_ops", t_zero_byte_ops },
	{ "H1", "recv_overflow_len_err", t_recv_overflow_len_err },
	{ "H2", "bad_lkey_prot_err", t_bad_lkey_prot_err },
	{ "H4", "remote_errors", t_remote_errors },
	{ "F1", "bind_rules", t_bind_rules },
	{ "F2", "invalidate_rules", t_invalidate_rules },
	{ "H5", "bind_invalidate_statuses", t_bind_invalidate_statuses },
};

#define NTESTS ((int)(sizeof(tests) / sizeof(tests[0])))

static void __attribute__((noreturn)) child_main(const struct test *t, int fd)
{
	struct dev d;
	int ok;

	t_budget = now() + BUDGET_S;
	if (dev_open(&d))
		ok = setup_failed();
	else
		ok = t->fn(&d);
	dprintf(fd, "%-4s %s %s: %s\n", ok ? "ok" : "FAIL", t->id, t->name, detail);
	_exit(ok ? 0 : 1);
}

/* Runs @t in a child; prints its line; returns 1 if it passed. */
static int run_one(const struct test *t)
{
	char line[sizeof(detail) + 128];
	int pfd[2], st = 0, timed_out = 0, reaped = 0;
	size_t len = 0;
	ssize_t r;
	double end;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (pipe(pfd)) {
		printf("FAIL %s %s: pipe: %s\n", t->id, t->name, strerror(errno));
		return 0;
	}
	pid = fork();
	if (pid < 0) {
		printf("FAIL %s %s: fork: %s\n", t->id, t->name, strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return 0;
	}
	if (!pid) {
		close(pfd[0]);
		dup2(STDERR_FILENO, STDOUT_FILENO);	/* provider chatter off the results */
		child_main(t, pfd[1]);
	}
	close(pfd[1]);
	end = now() + CHILD_TIMEOUT_S;
	while (!reaped) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid) {
			reaped = 1;
		} else if (w < 0 && errno != EINTR) {
			break;
		} else if (now() > end) {
			kill(pid, SIGKILL);
			timed_out = 1;
			/* Reap it, but do not hang on a child stuck in the kernel. */
			for (double e2 = now() + 10; now() < e2; usleep(20000))
				if (waitpid(pid, &st, WNOHANG) == pid)
					break;
			break;
		} else {
			usleep(20000);
		}
	}
	set_nonblock(pfd[0]);
	while (len < sizeof(line) - 1 && (r = read(pfd[0], line + len, sizeof(line) - 1 - len)) > 0)
		len += r;
	close(pfd[0]);
	line[len] = 0;
	line[strcspn(line, "\n")] = 0;
	if (timed_out) {
		printf("FAIL %s %s: timed out after %d s\n", t->id, t->name, CHILD_TIMEOUT_S);
		return 0;
	}
	if (!reaped) {
		printf("FAIL %s %s: waitpid: %s\n", t->id, t->name, strerror(errno));
		return 0;
	}
	if (WIFSIGNALED(st)) {
		printf("FAIL %s %s: crashed (signal %d)\n", t->id, t->name, WTERMSIG(st));
		return 0;
	}
	if (!line[0]) {
		printf("FAIL %s %s: exited with status %d and no result\n", t->id, t->name,
		       WEXITSTATUS(st));
		return 0;
	}
	if (WEXITSTATUS(st) == 0 && !strncmp(line, "ok ", 3)) {
		printf("%s\n", line);
		return 1;
	}
	if (!strncmp(line, "ok ", 3))
		printf("FAIL %s %s: exit status %d after \"%s\"\n", t->id, t->name,
		       WEXITSTATUS(st), line);
	else
		printf("%s\n", line);
	return 0;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s -d DEV [-g GID_INDEX] [-n RACE_ITERATIONS] "
		"[-t TEST_ID_SUBSTRING] [-x TEST_ID] [-l]\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *filter = NULL, *exclude = NULL;
	int list = 0, c, passed = 0, failed = 0;

	while ((c = getopt(argc, argv, "d:g:n:t:x:l")) != -1) {
		switch (c) {
		case 'd': dev_name = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'n': race_iters = atoi(optarg); break;
		case 't': filter = optarg; break;
		case 'x': exclude = optarg; break;
		case 'l': list = 1; break;
		default: usage(argv[0]);
		}
	}
	if (list) {
		for (int i = 0; i < NTESTS; i++)
			printf("%s %s\n", tests[i].id, tests[i].name);
		return 0;
	}
	if (!dev_name || race_iters < 1 || optind != argc)
		usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < NTESTS; i++) {
		if (filter && !strstr(tests[i].id, filter) && !strstr(tests[i].name, filter))
			continue;
		if (exclude && !strcmp(tests[i].id, exclude))
			continue;
		if (run_one(&tests[i]))
			passed++;
		else
			failed++;
	}
	if (!passed && !failed) {
		fprintf(stderr, "no test matches \"%s\"\n", filter ? filter : "");
		return 2;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
