// SPDX-License-Identifier: GPL-2.0
/*
 * hostile_user: a local process that attacks rroce through its own uverbs
 * mappings, as any unprivileged user with /dev/infiniband/uverbs* may.
 *
 *   hostile_user CASE -a DEV -b DEV [-g GID_INDEX] [-n ROUNDS] [-t SECS] [-s SEED]
 *
 * CASE is one of:
 *   f2       a thread keeps the mapped RQ producer at consumer - 1 (or
 *            writes wild SQ producer / CQ consumer values) while the main
 *            thread moves the QP to ERR, destroys it, rings the doorbell,
 *            resizes the CQ, or a peer's bad request fails the QP. Every
 *            verb must return while the attacker is still writing: one
 *            that returns only after the attacker gave up (-t SECS, 6 by
 *            default) means the kernel looped over an index it re-read from
 *            user memory (with interrupts off: a lockup).
 *   garbage  random and crafted bytes in send and receive WQEs written
 *            straight into the rings (wild num_sge, lengths, addresses,
 *            keys, opcodes, flags), then the doorbell (an empty
 *            ibv_post_send, or a valid one behind them) or an incoming
 *            SEND: every bad WQE completes with an error status, exactly
 *            once, and nothing else appears in the CQs.
 *   cqidx    the CQ consumer index runs ahead, behind or wild during
 *            traffic; afterwards everything is destroyed normally and a
 *            fresh CQ and QP pair on the same device work.
 *   midway   resize the CQ repeatedly and move the QP to ERR in the middle
 *            of traffic, then destroy a QP with work in flight: no
 *            completion lost or duplicated, all flushed after ERR.
 *   abrupt   forked children set up traffic and _exit() or are SIGKILLed
 *            in the middle of it; each dies promptly, the device keeps
 *            working for the parent.
 *
 * -a and -b name the two devices (the QPs of a pair connect A <-> B over
 * GID_INDEX, default 1). Prints "ok"/"FAIL"/"info" lines and exits 0 only
 * if every check passed. Every wait is bounded and a watchdog (alarm)
 * turns a verb that never returns into a failure naming the phase.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/wait.h>

#include "hostile.h"

static const char *dev_a, *dev_b;
static int gid_index = 1, rounds = 120;
static double attack_secs = 6;

/* ---- the attacker thread ------------------------------------------------ */

enum atk_mode {
	ATK_PROD_BEHIND,	/* producer = consumer - 1: "the ring is full", forever */
	ATK_PROD_WILD,		/* producer: consumer - 1, + 1, random, unmasked */
	ATK_CONS_AHEAD,		/* CQ consumer past the producer */
	ATK_CONS_BEHIND,	/* CQ consumer moving backwards */
	ATK_CONS_WILD,		/* CQ consumer: random (masked: librxe may still poll) */
	ATK_CONS_RAW,		/* CQ consumer: random, unmasked (nobody polls) */
};

struct attacker {
	_Atomic(struct hu_ring *) ring;
	enum atk_mode mode;
	double until;
	atomic_int stop, running;
	atomic_long writes;
	atomic_long advances;	/* producer modes: how far the kernel moved its consumer index */
	atomic_long moves;	/* how many times the attacker saw that index move */
	int cpu;
	pthread_t th;
};

static void *attack_fn(void *p)
{
	struct attacker *a = p;
	uint64_t x = 0x1234567 ^ (uint64_t)a->mode;
	uint32_t back = 0, lastc = atomic_load(hu_cons(atomic_load(&a->ring)));

	if (a->cpu >= 0)
		hu_pin(a->cpu);
	while (!a->stop && hu_now() < a->until) {
		struct hu_ring *r = atomic_load(&a->ring);

		for (int k = 0; k < 512; k++) {
			uint32_t c, pr, v;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			switch (a->mode) {
			case ATK_PROD_BEHIND:
				c = atomic_load_explicit(hu_cons(r), memory_order_acquire);
				if (c != lastc) {
					a->advances += (c - lastc) & r->mask;
					a->moves++;
				}
				lastc = c;
				atomic_store_explicit(hu_prod(r), (c - 1) & r->mask,
						      memory_order_release);
				break;
			case ATK_PROD_WILD:
				c = atomic_load_explicit(hu_cons(r), memory_order_acquire);
				switch (x % 6) {
				case 0: v = (c - 1) & r->mask; break;
				case 1: v = (c + 1) & r->mask; break;
				case 2: v = (uint32_t)(x >> 20) & r->mask; break;
				case 3: v = (uint32_t)(x >> 16); break;
				case 4: v = 0xffffffffu; break;
				default: v = r->mask + 1; break;
				}
				atomic_store_explicit(hu_prod(r), v, memory_order_release);
				break;
			case ATK_CONS_AHEAD:
				pr = atomic_load_explicit(hu_prod(r), memory_order_acquire);
				atomic_store_explicit(hu_cons(r), (pr + 1 + (x & 7)) & r->mask,
						      memory_order_release);
				break;
			case ATK_CONS_BEHIND:
				back = (back - 1 - (uint32_t)(x & 3)) & r->mask;
				atomic_store_explicit(hu_cons(r), back, memory_order_release);
				break;
			case ATK_CONS_WILD:
				v = (uint32_t)(x >> 40) & r->mask;
				atomic_store_explicit(hu_cons(r), v, memory_order_release);
				break;
			case ATK_CONS_RAW:
				v = (x & 1) ? (uint32_t)(x >> 32) : (uint32_t)(x >> 40) & r->mask;
				atomic_store_explicit(hu_cons(r), v, memory_order_release);
				break;
			}
			a->writes++;
		}
	}
	a->running = 0;
	return NULL;
}

static struct attacker atk;
static int atk_cpu = 1;	/* the attacker's CPU; the main thread's is the other */

static void attack_start(struct hu_ring *r, enum atk_mode mode, double secs)
{
	static struct hu_ring copy[64];
	static int next;
	struct hu_ring *slot = &copy[next++ % 64];

	*slot = *r;
	atomic_store(&atk.ring, slot);
	atk.mode = mode;
	atk.until = hu_now() + secs;
	atk.stop = 0;
	atk.running = 1;
	atk.writes = 0;
	atk.advances = 0;
	atk.moves = 0;
	atk.cpu = hu_ncpus() > 1 ? atk_cpu : -1;
	hu_guard(r);
	pthread_create(&atk.th, NULL, attack_fn, &atk);
	usleep(200000);
}

/* Points the running attacker at a ring librxe mapped anew (resize). */
static void attack_retarget(struct hu_ring *r)
{
	static struct hu_ring copy[64];
	static int next;
	struct hu_ring *slot = &copy[next++ % 64];

	*slot = *r;
	hu_guard(r);
	atomic_store(&atk.ring, slot);
}

static void attack_stop(void)
{
	atk.stop = 1;
	pthread_join(atk.th, NULL);
}

/* ---- case f2 ------------------------------------------------------------ */

static struct hu_side A, B;

/*
 * The RQs attacked in f2 are as large as rroce allows: a flush that runs
 * out of entries while the attacker is descheduled for a moment ends by
 * itself, and a large ring keeps it busy long enough for the attacker to
 * come back.
 */
#define F2_RQ_DEPTH RROCE_MAX_QP_WR

/* A QP in INIT on A, with @n receives posted; its RQ ring in *rq. */
static struct ibv_qp *init_qp_with_recvs(struct hu_ring *rq, int n)
{
	struct hu_map before[256];
	struct hu_ring r[2];
	int nb = hu_maps(before, 256);
	struct ibv_qp *qp = hu_rc_qp2(A.pd, A.scq, A.rcq, 16, F2_RQ_DEPTH, 0);

	if (!qp || hu_new_rings(before, nb, r, 2) != 2 || hu_to_init(qp))
		return NULL;
	*rq = r[0];
	for (int i = 0; i < n; i++)
		hu_post_recv(qp, 900 + i, A.buf, 64, A.mr->lkey);
	return qp;
}

/* Empties @cq; returns how many completions it held. */
static int drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[64];
	int n, total = 0;

	while ((n = ibv_poll_cq(cq, 64, wc)) > 0)
		total += n;
	return total;
}

/* A connected pair A <-> B; the rings of the new QPs in ra[2], rb[2]. */
static int pair2(struct ibv_qp **qa, struct ibv_qp **qb, struct hu_ring *ra, struct hu_ring *rb,
		 int depth, int rdepth, int sig_all, struct hu_conn c)
{
	struct hu_map before[256];
	int nb = hu_maps(before, 256);
	struct hu_ring tmp[2];

	*qa = hu_rc_qp2(A.pd, A.scq, A.rcq, depth, rdepth, sig_all);
	if (!*qa || hu_new_rings(before, nb, ra ? ra : tmp, 2) != 2)
		return -1;
	nb = hu_maps(before, 256);
	*qb = hu_rc_qp2(B.pd, B.scq, B.rcq, depth, rdepth, sig_all);
	if (!*qb || hu_new_rings(before, nb, rb ? rb : tmp, 2) != 2)
		return -1;
	return hu_connect(*qa, &A, &B, *qb, c) || hu_connect(*qb, &B, &A, *qa, c);
}

static int pair(struct ibv_qp **qa, struct ibv_qp **qb, struct hu_ring *ra, struct hu_ring *rb,
		int depth, int sig_all, struct hu_conn c)
{
	return pair2(qa, qb, ra, rb, depth, depth, sig_all, c);
}

static int ncpu_note(void)
{
	int n = hu_ncpus();

	if (n < 2)
		INFO("only %d CPU: the attacker cannot run beside the kernel; f2 checks are weak", n);
	else
		hu_pin(0);
	return n;
}

/*
 * The verb returned while the attacker was still at it, and (for an RQ, with
 * @max_adv) the kernel consumed at most @max_adv entries meanwhile: a flush
 * bounded by one snapshot consumes at most a ring's worth; one that
 * re-reads the producer goes on for as long as the attacker writes, in
 * the verb or in whatever context it deferred the work to.
 */
#define F2_VERDICT(name, d, alive, max_adv)                                                  \
	CHECK((alive) && (d) < attack_secs / 2 && ((max_adv) == 0 || atk.advances <= (max_adv)), \
	      "f2 %s: returned in %.3f s with the attacker %s (%ld index writes); the kernel " \
	      "consumed %ld entries in %ld steps (at most %ld allowed)", name, d,              \
	      (alive) ? "still writing" : "ALREADY STOPPED: the kernel looped until it gave up", \
	      (long)atk.writes, (long)atk.advances, (long)atk.moves, (long)(max_adv))

/*
 * @flip swaps the CPUs of the attacker and the main thread; the receive CQ
 * is as large as rroce allows, so that a flush of one ring's worth does not
 * overrun it (an overrun queues work that may run on the attacker's CPU).
 */
static void f2_rq(int destroy, int flip)
{
	struct hu_ring rq;
	const char *name = destroy ? "RQ producer = consumer-1 vs destroy_qp"
			   : flip ? "RQ producer = consumer-1 vs modify_qp(ERR), CPUs swapped"
				  : "RQ producer = consumer-1 vs modify_qp(ERR)";
	struct ibv_cq *small = A.rcq;

	hu_phase = name;
	A.rcq = ibv_create_cq(A.ctx, RROCE_MAX_CQE, NULL, NULL, 0);
	struct ibv_qp *qp = A.rcq ? init_qp_with_recvs(&rq, 8) : NULL;

	if (flip && hu_ncpus() > 1) {
		hu_pin(1);
		atk_cpu = 0;
	}
	if (!qp) {
		CHECK(0, "f2: set up a QP in INIT with receives");
		return;
	}
	attack_start(&rq, ATK_PROD_BEHIND, attack_secs);
	double t0 = hu_now();
	int rc = destroy ? ibv_destroy_qp(qp) : hu_set_state(qp, IBV_QPS_ERR);
	double d = hu_now() - t0;
	int alive = atk.running;

	attack_stop();
	F2_VERDICT(name, d, alive, 2 * (long)(rq.mask + 1));
	CHECK(rc == 0, "f2 %s: the verb succeeded (%d)", destroy ? "destroy_qp" : "modify_qp(ERR)",
	      rc);
	if (!destroy)
		ibv_destroy_qp(qp);
	INFO("f2 %s: %d flush completions in the receive CQ", destroy ? "destroy" : "ERR",
	     drain(A.rcq));
	drain(A.scq);
	ibv_destroy_cq(A.rcq);
	A.rcq = small;
	if (flip && hu_ncpus() > 1)
		hu_pin(0);
	atk_cpu = 1;
}

static void f2_rq_err(void)
{
	f2_rq(0, 0);
}

static void f2_rq_err_flipped(void)
{
	f2_rq(0, 1);
}

static void f2_rq_destroy(void)
{
	f2_rq(1, 0);
}

/* The responder's RQ is attacked while a bad RDMA WRITE fails its QP in softirq. */
static void f2_rq_peer(void)
{
	struct ibv_qp *qa, *qb;
	struct hu_ring rb[2];

	hu_phase = "f2 RQ producer = consumer-1 vs a peer's bad request";
	if (pair2(&qa, &qb, NULL, rb, 16, F2_RQ_DEPTH, 0, HU_CONN_DEFAULT)) {
		CHECK(0, "f2: connect a QP pair");
		return;
	}
	attack_start(&rb[0], ATK_PROD_BEHIND, attack_secs);
	double t0 = hu_now();

	hu_post_send(qa, 1, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, (uintptr_t)B.buf,
		     B.mr->rkey ^ 0x77700);
	int st = -1;

	while (hu_now() - t0 < attack_secs && (st = hu_qp_state(qb)) != IBV_QPS_ERR)
		usleep(1000);
	double d = hu_now() - t0;
	int alive = atk.running;

	attack_stop();
	F2_VERDICT("RQ producer = consumer-1 vs a peer's bad WRITE (responder flush)", d, alive,
		   2 * (long)(rb[0].mask + 1));
	CHECK(st == IBV_QPS_ERR, "f2: the responder QP reached ERR (%d)", st);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	drain(A.scq);
	drain(B.rcq);
}

/* Wild SQ producer values while the doorbell rings, then ERR and destroy. */
static void f2_sq_wild(void)
{
	struct ibv_qp *qa, *qb;
	struct hu_ring ra[2];

	hu_phase = "f2 wild SQ producer vs doorbells";
	if (pair(&qa, &qb, ra, NULL, 256, 0, HU_CONN_DEFAULT)) {
		CHECK(0, "f2: connect a QP pair");
		return;
	}
	attack_start(&ra[1], ATK_PROD_WILD, attack_secs);
	double maxd = 0, end = hu_now() + attack_secs / 4;
	int calls = 0;

	while (hu_now() < end) {
		double t0 = hu_now();

		/* Only the raw doorbell: librxe itself would trip over the raw values. */
		hu_doorbell(qa);
		double d = hu_now() - t0;

		maxd = d > maxd ? d : maxd;
		calls++;
		drain(A.scq);
	}
	double t0 = hu_now();

	hu_set_state(qa, IBV_QPS_ERR);
	hu_doorbell(qa);
	double d = hu_now() - t0;

	maxd = d > maxd ? d : maxd;
	int alive = atk.running;

	t0 = hu_now();
	int rc = ibv_destroy_qp(qa);

	d = hu_now() - t0;
	maxd = d > maxd ? d : maxd;
	alive &= atk.running;
	attack_stop();
	INFO("f2 wild SQ producer: %d doorbell rounds, slowest verb %.3f s", calls, maxd);
	F2_VERDICT("wild SQ producer vs doorbell, ERR, destroy", maxd, alive, 0);
	CHECK(rc == 0, "f2: destroy_qp under a wild SQ producer succeeded (%d)", rc);
	ibv_destroy_qp(qb);
	drain(A.scq);
	drain(B.rcq);
}

/* A UD SQ kept full of valid sends: one doorbell must not run forever. */
static void f2_ud_doorbell(void)
{
	struct hu_map before[256];
	struct hu_ring r[2];
	int nb = hu_maps(before, 256);
	struct ibv_qp_init_attr ia = {
		.send_cq = A.scq, .recv_cq = A.rcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 256, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	hu_phase = "f2 UD SQ producer = consumer-1 vs one doorbell";
	struct ibv_qp *qp = ibv_create_qp(A.pd, &ia);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = B.gid, .sgid_index = A.gid_index,
					   .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(A.pd, &aa);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };

	if (!qp || !ah || hu_new_rings(before, nb, r, 2) != 2 ||
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) ||
	    hu_set_state(qp, IBV_QPS_RTR)) {
		CHECK(0, "f2: set up a UD QP and an AH");
		return;
	}
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 1 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
		CHECK(0, "f2: UD QP to RTS");
		return;
	}
	/* One valid unsignaled datagram to a QPN nobody has; its WQE becomes the template. */
	struct ibv_sge sge = { (uintptr_t)A.buf, 16, A.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xfffff0;
	wr.wr.ud.remote_qkey = 0x11111111;
	uint32_t p0 = atomic_load(hu_prod(&r[1]));

	ibv_post_send(qp, &wr, &bad);
	usleep(100000);
	for (uint32_t i = 0; i <= r[1].mask; i++)
		if (i != p0)
			memcpy(hu_slot(&r[1], i), hu_slot(&r[1], p0), (size_t)1 << r[1].log2);
	attack_start(&r[1], ATK_PROD_BEHIND, attack_secs);
	double t0 = hu_now();

	hu_doorbell(qp);
	double d = hu_now() - t0;
	int alive = atk.running;

	attack_stop();
	F2_VERDICT("UD SQ held full of valid sends vs one doorbell", d, alive, 0);
	hu_set_state(qp, IBV_QPS_ERR);
	hu_doorbell(qp);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	drain(A.scq);
}

/* Wild CQ consumer values while the CQ is resized under traffic. */
static void f2_cq_resize(void)
{
	struct hu_map before[256];
	struct hu_ring r[1];
	int nb = hu_maps(before, 256);
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 256, NULL, NULL, 0);
	int nr = hu_new_rings(before, nb, r, 1);
	struct ibv_qp *qa = hu_rc_qp(A.pd, cq, A.rcq, 64, 1), *qb = hu_rc_qp(B.pd, B.scq, B.rcq, 64, 1);

	hu_phase = "f2 wild CQ consumer vs resize_cq";
	if (!cq || nr != 1 || !qa || !qb ||
	    hu_connect(qa, &A, &B, qb, HU_CONN_DEFAULT) || hu_connect(qb, &B, &A, qa, HU_CONN_DEFAULT)) {
		CHECK(0, "f2: set up a CQ and a QP pair");
		return;
	}
	attack_start(&r[0], ATK_CONS_RAW, attack_secs);
	double maxd = 0, end = hu_now() + attack_secs / 4;
	int resizes = 0, ok = 0;

	while (hu_now() < end) {
		double t0 = hu_now();

		hu_post_send(qa, 8, IBV_WR_RDMA_WRITE, A.buf, 4096, A.mr->lkey, (uintptr_t)B.buf,
			     B.mr->rkey);
		nb = hu_maps(before, 256);
		ok += !ibv_resize_cq(cq, resizes & 1 ? 256 : 1024);
		if (hu_new_rings(before, nb, r, 1) == 1)
			attack_retarget(&r[0]);
		resizes++;
		double d = hu_now() - t0;

		maxd = d > maxd ? d : maxd;
	}
	int alive = atk.running;

	attack_stop();
	INFO("f2 wild CQ consumer: %d resizes (%d succeeded), slowest %.3f s", resizes, ok, maxd);
	F2_VERDICT("wild CQ consumer vs resize_cq and traffic", maxd, alive, 0);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	CHECK(ibv_destroy_cq(cq) == 0, "f2: destroy_cq after a wild consumer succeeded");
	drain(B.rcq);
}

/* Fresh CQs for the next f2 case: the last one may have overrun them. */
static void renew_cqs(void)
{
	struct ibv_cq **cqs[] = { &A.scq, &A.rcq, &B.scq, &B.rcq };

	hu_phase = "f2: renew the CQs";
	for (int i = 0; i < 4; i++) {
		struct ibv_context *ctx = i < 2 ? A.ctx : B.ctx;

		ibv_destroy_cq(*cqs[i]);
		*cqs[i] = ibv_create_cq(ctx, 512, NULL, NULL, 0);
	}
}

static void case_f2(void)
{
	void (*const cases[])(void) = { f2_rq_err,	f2_rq_err_flipped, f2_rq_destroy,
					 f2_sq_wild,	f2_ud_doorbell,	   f2_cq_resize,
					 f2_rq_peer };

	ncpu_note();
	hu_watchdog(20 * attack_secs + 60);
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cases[i]();
		renew_cqs();
	}
}

/* ---- case garbage ------------------------------------------------------- */

static const char *const send_kinds[] = {
	"num_sge beyond max",	"bad lkey",	   "address outside the MR",
	"lengths over 2^31",	"bad opcode",	   "unknown send flag",
	"inline longer than max", "bad rkey/remote address", "bad atomic",
	"random bytes",
};

/* Bytes of a bad send WQE of @kind in @slot (element size @esz). */
static void bad_send_wqe(uint8_t *slot, size_t esz, int kind, uint64_t id)
{
	struct rroce_send_wqe *w = (struct rroce_send_wqe *)slot;
	uint32_t max_sge = (esz - sizeof(*w)) / sizeof(struct rroce_sge);

	for (size_t i = 0; i < esz; i += 8) {
		uint64_t r = hu_rand();

		memcpy(slot + i, &r, esz - i < 8 ? esz - i : 8);
	}
	if (kind != 9) {
		memset(&w->wr, 0, sizeof(w->wr));
		w->wr.opcode = IBV_WR_SEND;
		w->wr.send_flags = IBV_SEND_SIGNALED;
		w->dma.num_sge = 1;
		w->dma.sge[0] = (struct rroce_sge){ (uintptr_t)A.buf, 64, A.mr->lkey };
		w->dma.length = 64;
	}
	w->wr.wr_id = id;
	switch (kind) {
	case 0:
		w->dma.num_sge = hu_rand() & 1 ? 0xffffffffu : max_sge + 1 + hu_rand() % 100000;
		break;
	case 1:
		w->dma.sge[0].lkey = A.mr->lkey ^ (1 + hu_rand() % 0xffffff);
		w->wr.opcode = hu_rand() & 1 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		w->wr.wr.rdma.remote_addr = (uintptr_t)B.buf;
		w->wr.wr.rdma.rkey = B.mr->rkey;
		break;
	case 2: {
		static const uint64_t addrs[] = { 0, 4096, 0xfffffffffffffff0ull,
						  0x8000000000000000ull };
		int j = hu_rand() % 5;

		if (j < 4)
			w->dma.sge[0].addr = addrs[j];
		else
			w->dma.sge[0].addr = (uintptr_t)A.buf + A.len - 10;
		w->dma.sge[0].length = hu_rand() & 1 ? 0xffffffffu : 100;
		break;
	}
	case 3:
		w->dma.num_sge = max_sge < 4 ? max_sge : 4;
		for (uint32_t i = 0; i < w->dma.num_sge; i++)
			w->dma.sge[i] = (struct rroce_sge){ (uintptr_t)A.buf, 0x7fffffffu + i,
							    A.mr->lkey };
		break;
	case 4: {
		static const uint32_t ops[] = { 7, 8, 10, 11, 12, 13, 14, 15, 16, 0xff, 0xffffffff };

		w->wr.opcode = ops[hu_rand() % (sizeof(ops) / sizeof(ops[0]))];
		w->wr.ex.invalidate_rkey = (uint32_t)hu_rand();
		break;
	}
	case 5:
		w->wr.send_flags = IBV_SEND_SIGNALED | (1u << (5 + hu_rand() % 27));
		break;
	case 6:
		w->wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		w->dma.length = hu_rand() & 1 ? 0xffffffffu : (uint32_t)esz + 1 + hu_rand() % 100000;
		break;
	case 7:
		w->wr.opcode = hu_rand() & 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		w->wr.wr.rdma.rkey = B.mr->rkey ^ (1 + hu_rand() % 0xffffff);
		w->wr.wr.rdma.remote_addr = hu_rand() & 1 ? hu_rand() : (uintptr_t)B.buf;
		break;
	case 8:
		w->wr.opcode = hu_rand() & 1 ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
		w->wr.wr.atomic.rkey = B.mr->rkey;
		w->wr.wr.atomic.remote_addr = (uintptr_t)B.buf + 8;
		switch (hu_rand() % 3) {
		case 0: w->wr.wr.atomic.remote_addr += 3; break;		 /* misaligned */
		case 1: w->dma.sge[0].length = 4; break;			 /* result too short */
		default: w->wr.send_flags |= IBV_SEND_INLINE; break;		 /* inline atomic */
		}
		break;
	default:
		/* Random bytes; one defect forced so that success is always wrong. */
		if (w->wr.send_flags & IBV_SEND_INLINE)
			w->dma.length = 0x80000000u | (uint32_t)hu_rand();
		else
			w->dma.num_sge = max_sge + 1 + hu_rand() % 1000;
		break;
	}
}

static const char *const recv_kinds[] = { "num_sge beyond max", "bad lkey",
					  "address outside the MR", "no room (num_sge 0)",
					  "random bytes" };

static void bad_recv_wqe(uint8_t *slot, size_t esz, int kind, uint64_t id)
{
	struct rroce_recv_wqe *w = (struct rroce_recv_wqe *)slot;
	uint32_t max_sge = (esz - sizeof(*w)) / sizeof(struct rroce_sge);

	for (size_t i = 0; i < esz; i += 8) {
		uint64_t r = hu_rand();

		memcpy(slot + i, &r, esz - i < 8 ? esz - i : 8);
	}
	w->wr_id = id;
	if (kind != 4) {
		w->dma.num_sge = 1;
		w->dma.length = 4096;
		w->dma.sge[0] = (struct rroce_sge){ (uintptr_t)B.buf, 4096, B.mr->lkey };
	}
	switch (kind) {
	case 0: w->dma.num_sge = max_sge + 1 + hu_rand() % 0xffff; break;
	case 1: w->dma.sge[0].lkey = B.mr->lkey ^ (1 + hu_rand() % 0xffffff); break;
	case 2: w->dma.sge[0].addr = (uintptr_t)B.buf + B.len - 8; break;
	case 3: w->dma.num_sge = 0; w->dma.length = 0; break;
	default: w->dma.num_sge = max_sge + 1 + (uint32_t)(hu_rand() % 0xffffff); break;
	}
}

struct expect {
	uint64_t id;
	int bad;	/* a garbage WQE: must complete in error */
	int kind;	/* index into send_kinds/recv_kinds */
	int recv;
	int seen;
};

/* Matches completions against @ex; fails on unknown, duplicate or bad-success. */
static int account(struct ibv_wc *wc, int n, struct expect *ex, int nex, int *bad_success)
{
	int fine = 1;

	for (int i = 0; i < n; i++) {
		int found = 0;

		for (int j = 0; j < nex; j++) {
			if (ex[j].id != wc[i].wr_id)
				continue;
			found = 1;
			if (ex[j].seen++) {
				printf("  FAIL garbage: wr_id %#" PRIx64 " completed twice\n", ex[j].id);
				fine = 0;
			}
			if (ex[j].bad && wc[i].status == IBV_WC_SUCCESS) {
				printf("  FAIL garbage: bad %s WQE (%s) completed successfully\n",
				       ex[j].recv ? "receive" : "send",
				       ex[j].recv ? recv_kinds[ex[j].kind] : send_kinds[ex[j].kind]);
				(*bad_success)++;
				fine = 0;
			}
		}
		if (!found) {
			printf("  FAIL garbage: completion with a wr_id nobody posted (%#" PRIx64
			       ", %s)\n", (uint64_t)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
			fine = 0;
		}
	}
	return fine;
}

static void case_garbage(void)
{
	int bad_success = 0, missing = 0, stray = 0, nbad = 0, rounds_ok = 0;
	int status_hist[32] = { 0 };

	hu_watchdog(30 + rounds * 15);
	for (int r = 0; r < rounds; r++) {
		struct ibv_qp *qa, *qb;
		struct hu_ring ra[2], rb[2];
		struct expect ex[8];
		int nex = 0, recv_round = r % 3 == 2;
		struct hu_conn c = HU_CONN_DEFAULT;

		hu_phase = "garbage: set up a pair";
		c.timeout = 12;
		c.retry = 1;
		c.rnr_retry = 1;
		if (pair(&qa, &qb, ra, rb, 16, 1, c)) {
			CHECK(0, "garbage: connect a QP pair (round %d)", r);
			return;
		}
		hu_phase = "garbage: post";
		if (!recv_round) {
			for (int i = 0; i < 4; i++)
				hu_post_recv(qb, 0x7700 + i, B.buf, 4096, B.mr->lkey);
			struct hu_ring *sq = &ra[1];
			uint32_t p = atomic_load(hu_prod(sq)) & sq->mask;
			int k = 1 + hu_rand() % 3;

			for (int i = 0; i < k; i++, p = (p + 1) & sq->mask) {
				int kind = hu_rand() % 10;
				uint64_t id = (uint64_t)r << 8 | i;

				bad_send_wqe(hu_slot(sq, p), (size_t)1 << sq->log2, kind, id);
				ex[nex++] = (struct expect){ id, 1, kind, 0, 0 };
			}
			atomic_store_explicit(hu_prod(sq), p, memory_order_release);
			if (r & 1) {
				uint64_t id = (uint64_t)r << 8 | 0x80;

				hu_post_send(qa, id, IBV_WR_SEND, A.buf, 16, A.mr->lkey, 0, 0);
				ex[nex++] = (struct expect){ id, 0, 0, 0, 0 };
			} else {
				hu_doorbell(qa);
			}
			nbad += k;
		} else {
			struct hu_ring *rq = &rb[0];
			uint32_t p = atomic_load(hu_prod(rq)) & rq->mask;
			int kind = hu_rand() % 5;
			uint64_t id = (uint64_t)r << 8 | 0x40;

			bad_recv_wqe(hu_slot(rq, p), (size_t)1 << rq->log2, kind, id);
			atomic_store_explicit(hu_prod(rq), (p + 1) & rq->mask, memory_order_release);
			ex[nex++] = (struct expect){ id, 1, kind, 1, 0 };
			uint64_t sid = (uint64_t)r << 8 | 0x81;

			hu_post_send(qa, sid, IBV_WR_SEND, A.buf, 64, A.mr->lkey, 0, 0);
			ex[nex++] = (struct expect){ sid, 0, 0, 0, 0 };
			nbad++;
		}
		hu_phase = "garbage: poll";
		int must = nex;

		if (!recv_round)
			for (int i = 0; i < 4; i++)
				ex[nex++] = (struct expect){ 0x7700 + i, 0, 0, 1, 0 };
		struct ibv_wc wc[64];
		int fine = 1;
		double end = hu_now() + 10;

		for (;;) {
			int pending = 0;

			for (int j = 0; j < must; j++)
				pending += !ex[j].seen;
			if (!pending || hu_now() > end)
				break;
			int n = ibv_poll_cq(A.scq, 16, wc);

			if (n < 0)
				break;
			int m = ibv_poll_cq(B.rcq, 16, wc + n);

			n += m > 0 ? m : 0;
			for (int i = 0; i < n; i++)
				status_hist[wc[i].status & 31]++;
			fine &= account(wc, n, ex, nex, &bad_success);
			if (!n)
				usleep(500);
		}
		for (int j = 0; j < must; j++)
			if (!ex[j].seen) {
				printf("  FAIL garbage: %s %s WQE (%s) never completed\n",
				       ex[j].bad ? "bad" : "valid", ex[j].recv ? "receive" : "send",
				       !ex[j].bad ? "-" : ex[j].recv ? recv_kinds[ex[j].kind]
								    : send_kinds[ex[j].kind]);
				missing++;
				fine = 0;
			}
		hu_phase = "garbage: destroy";
		if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb)) {
			printf("  FAIL garbage: destroy_qp failed in round %d\n", r);
			fine = 0;
		}
		/* What the flush left: only this round's receives, once each. */
		int n = ibv_poll_cq(A.scq, 64, wc);
		int m = ibv_poll_cq(B.rcq, 64, wc + (n > 0 ? n : 0));

		n = (n > 0 ? n : 0) + (m > 0 ? m : 0);
		if (!account(wc, n, ex, nex, &bad_success)) {
			stray++;
			fine = 0;
		}
		drain(A.rcq);
		drain(B.scq);
		rounds_ok += fine;
	}
	INFO("garbage: %d rounds, %d bad WQEs; completion statuses seen:", rounds, nbad);
	for (int s = 0; s < 32; s++)
		if (status_hist[s])
			INFO("    %-28s %d", ibv_wc_status_str(s), status_hist[s]);
	CHECK(bad_success == 0, "garbage: no bad WQE completed successfully (%d did)", bad_success);
	CHECK(missing == 0, "garbage: every bad WQE completed (%d never did)", missing);
	CHECK(stray == 0, "garbage: no stray completions after destroy (%d)", stray);
	CHECK(rounds_ok == rounds, "garbage: %d of %d rounds clean", rounds_ok, rounds);
}

/* ---- case cqidx, midway, abrupt ----------------------------------------- */

/* A fresh CQ and pair on the same contexts moves 4 KiB intact. */
static int still_works(const char *what)
{
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 64, NULL, NULL, 0);
	struct ibv_qp *qa = cq ? hu_rc_qp(A.pd, cq, cq, 16, 0) : NULL;
	struct ibv_qp *qb = hu_rc_qp(B.pd, B.scq, B.rcq, 16, 0);
	struct ibv_wc ws, wr;
	int ok = 0;

	hu_phase = "device still works";
	drain(B.rcq);
	if (qa && qb && !hu_connect(qa, &A, &B, qb, HU_CONN_DEFAULT) &&
	    !hu_connect(qb, &B, &A, qa, HU_CONN_DEFAULT)) {
		for (int i = 0; i < 4096; i++)
			A.buf[i] = (uint8_t)(i * 7 + 3);
		memset(B.buf, 0, 4096);
		hu_post_recv(qb, 1, B.buf, 4096, B.mr->lkey);
		hu_post_send(qa, 2, IBV_WR_SEND, A.buf, 4096, A.mr->lkey, 0, 0);
		ok = hu_poll(cq, &ws, 1, 10) == 1 && ws.status == IBV_WC_SUCCESS &&
		     hu_poll(B.rcq, &wr, 1, 10) == 1 && wr.status == IBV_WC_SUCCESS &&
		     !memcmp(A.buf, B.buf, 4096);
	}
	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
	if (cq)
		ibv_destroy_cq(cq);
	CHECK(ok, "%s: a fresh CQ and QP pair on the same device move 4 KiB intact", what);
	return ok;
}

static void case_cqidx(void)
{
	/* The process polls its CQ meanwhile, except with unmasked values. */
	static const struct { enum atk_mode m; const char *name; int poll; } modes[] = {
		{ ATK_CONS_AHEAD, "ahead of the producer", 1 },
		{ ATK_CONS_BEHIND, "moving backwards", 1 },
		{ ATK_CONS_WILD, "random", 1 },
		{ ATK_CONS_RAW, "unmasked", 0 },
	};

	hu_watchdog(300);
	for (unsigned int m = 0; m < 4; m++) {
		struct hu_map before[256];
		struct hu_ring r[1];
		int nb = hu_maps(before, 256);
		struct ibv_cq *cq = ibv_create_cq(A.ctx, 128, NULL, NULL, 0);
		int nr = hu_new_rings(before, nb, r, 1);
		struct ibv_qp *qa = hu_rc_qp(A.pd, cq, cq, 64, 1), *qb = hu_rc_qp(B.pd, B.scq, B.rcq, 64, 1);

		hu_phase = "cqidx: traffic under a bad CQ consumer";
		if (!cq || nr != 1 || !qa || !qb ||
		    hu_connect(qa, &A, &B, qb, HU_CONN_DEFAULT) ||
		    hu_connect(qb, &B, &A, qa, HU_CONN_DEFAULT)) {
			CHECK(0, "cqidx: set up a CQ and a QP pair");
			return;
		}
		for (int i = 0; i < 64; i++)
			hu_post_recv(qb, i, B.buf, 65536, B.mr->lkey);
		attack_start(&r[0], modes[m].m, 3);
		double end = hu_now() + 2.5;
		long posted = 0;

		while (hu_now() < end) {
			struct ibv_wc wc[32];

			for (int i = 0; i < 8; i++, posted++)
				hu_post_send(qa, posted, posted % 3 == 0 ? IBV_WR_RDMA_READ :
							 posted % 3 == 1 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
					     A.buf, 8192, A.mr->lkey, (uintptr_t)B.buf, B.mr->rkey);
			if (modes[m].poll)
				ibv_poll_cq(cq, 32, wc);
			drain(B.rcq);
			usleep(2000);
		}
		attack_stop();
		hu_phase = "cqidx: destroy";
		int st = hu_qp_state(qa);
		int rc = ibv_destroy_qp(qa) | ibv_destroy_qp(qb);

		rc |= ibv_destroy_cq(cq);
		INFO("cqidx %s: %ld requests posted, QP state afterwards %d", modes[m].name, posted,
		     st);
		CHECK(rc == 0, "cqidx: consumer %s: QPs and CQ destroyed normally", modes[m].name);
		drain(B.rcq);
		drain(B.scq);
		still_works("cqidx");
	}
}

static void case_midway(void)
{
	static uint8_t seen[1 << 16];
	struct ibv_qp *qa, *qb;
	struct ibv_wc wc[64];

	hu_watchdog(300);
	for (int variant = 0; variant < 2; variant++) {
		const char *vname = variant ? "destroy mid-traffic" : "resize + ERR mid-traffic";

		hu_phase = vname;
		memset(seen, 0, sizeof(seen));
		if (pair(&qa, &qb, NULL, NULL, 128, 1, HU_CONN_DEFAULT)) {
			CHECK(0, "midway: connect a QP pair");
			return;
		}
		for (int i = 0; i < 128; i++)
			hu_post_recv(qb, 0x10000 + i, B.buf, 262144, B.mr->lkey);
		long posted = 0, done = 0, dup = 0, stray = 0, bad_after_err = 0, resized = 0, iter = 0;
		int in_err = 0;
		/*
		 * Progress, not time, ends the phases: twelve resizes, then ERR,
		 * then every completion. The deadline only catches a hang (a
		 * KASAN guest posts fewer than 100 requests in 4 s).
		 */
		double end = hu_now() + 90;

		while (hu_now() < end && posted < 60000) {
			while (posted - done < 48 && !in_err) {
				static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_RDMA_WRITE,
									  IBV_WR_RDMA_READ };
				uint32_t len = 1 + hu_rand() % 200000;

				if (hu_post_send(qa, posted, ops[posted % 3], A.buf, len, A.mr->lkey,
						 (uintptr_t)B.buf, B.mr->rkey))
					break;
				posted++;
			}
			int n = ibv_poll_cq(A.scq, 64, wc);

			for (int i = 0; i < n; i++) {
				uint64_t id = wc[i].wr_id;

				if (id >= (uint64_t)posted || id >= sizeof(seen))
					stray++;
				else if (seen[id]++)
					dup++;
				if (in_err == 2 && wc[i].status != IBV_WC_SUCCESS &&
				    wc[i].status != IBV_WC_WR_FLUSH_ERR)
					bad_after_err++;
				done++;
			}
			int m = ibv_poll_cq(B.rcq, 64, wc);

			for (int i = 0; i < m; i++)
				hu_post_recv(qb, 0x10000, B.buf, 262144, B.mr->lkey);
			if (!variant && !in_err && posted > 100 && ++iter % 5 == 0 && resized < 12) {
				hu_phase = "midway: resize_cq under traffic";
				resized += !ibv_resize_cq(A.scq, resized & 1 ? 512 : 2048);
				hu_phase = vname;
			}
			if (!in_err && resized >= 12) {
				hu_phase = "midway: modify_qp(ERR) under traffic";
				hu_set_state(qa, IBV_QPS_ERR);
				in_err = 2;
				hu_phase = vname;
				end = hu_now() + 15;
			}
			if (variant && posted > 300)
				break;
			if (in_err && done >= posted)
				break;
		}
		if (!variant) {
			INFO("midway: %ld posted, %ld completed, %ld resizes", posted, done, resized);
			CHECK(resized >= 12, "midway: resize_cq succeeded in the middle of traffic (%ld)",
			      resized);
			CHECK(done == posted && !dup && !stray,
			      "midway: no completion lost (%ld of %ld), duplicated (%ld) or invented (%ld) "
			      "across resizes and ERR", done, posted, dup, stray);
			CHECK(!bad_after_err, "midway: after ERR only success or flush (%ld others)",
			      bad_after_err);
		}
		hu_phase = "midway: destroy with work in flight";
		int rc = ibv_destroy_qp(qa);

		rc |= ibv_destroy_qp(qb);
		if (variant)
			CHECK(rc == 0, "midway: destroy_qp with %ld requests in flight succeeded",
			      posted - done);
		drain(A.scq);
		drain(B.rcq);
	}
	still_works("midway");
}

/* A child: sets up traffic, says ready, and keeps it going until killed or told to exit. */
static void abrupt_child(int wfd, int self_exit_ms)
{
	struct hu_side a, b;
	struct ibv_qp *qa, *qb;

	alarm(60);
	if (hu_open(&a, dev_a, gid_index, 16 << 20, 256) || hu_open(&b, dev_b, gid_index, 16 << 20, 256))
		_exit(10);
	qa = hu_rc_qp(a.pd, a.scq, a.rcq, 128, 1);
	qb = hu_rc_qp(b.pd, b.scq, b.rcq, 128, 1);
	if (!qa || !qb || hu_connect(qa, &a, &b, qb, HU_CONN_DEFAULT) ||
	    hu_connect(qb, &b, &a, qa, HU_CONN_DEFAULT))
		_exit(11);
	for (int i = 0; i < 128; i++)
		hu_post_recv(qb, i, b.buf, 1 << 20, b.mr->lkey);
	double t0 = hu_now();
	int told = 0;

	for (long n = 0;; n++) {
		struct ibv_wc wc[32];

		hu_post_send(qa, n, n % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, a.buf, 8 << 20,
			     a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey);
		hu_post_send(qa, n, IBV_WR_SEND, a.buf, 1 << 20, a.mr->lkey, 0, 0);
		ibv_poll_cq(a.scq, 32, wc);
		ibv_poll_cq(b.rcq, 32, wc);
		if (!told) {
			told = 1;
			if (write(wfd, "r", 1) != 1)
				_exit(12);
		}
		if (self_exit_ms >= 0 && (hu_now() - t0) * 1000 > self_exit_ms)
			_exit(0);
		usleep(1000);
	}
}

static void case_abrupt(void)
{
	int n = rounds < 12 ? rounds : 12, ok = 0;

	hu_watchdog(60 + n * 40);
	for (int i = 0; i < n; i++) {
		int p[2];

		hu_phase = "abrupt: fork";
		if (pipe(p))
			break;
		int self_exit = i % 2 ? -1 : (int)(hu_rand() % 300);
		pid_t pid = fork();

		if (pid == 0) {
			close(p[0]);
			abrupt_child(p[1], self_exit);
		}
		close(p[1]);
		char c;
		int ready = read(p[0], &c, 1) == 1;

		close(p[0]);
		if (self_exit < 0) {
			usleep(hu_rand() % 300000);
			kill(pid, SIGKILL);
		}
		hu_phase = "abrupt: wait for the child";
		int status = 0;
		double t0 = hu_now();
		pid_t w = 0;

		while ((w = waitpid(pid, &status, WNOHANG)) == 0 && hu_now() - t0 < 30)
			usleep(10000);
		int died_ok = w == pid && (self_exit < 0 ? WIFSIGNALED(status) &&
							   WTERMSIG(status) == SIGKILL
							 : WIFEXITED(status) && !WEXITSTATUS(status));

		if (!died_ok) {
			printf("  FAIL abrupt: child %d (%s) %s (status %#x, ready %d)\n", i,
			       self_exit < 0 ? "SIGKILL" : "_exit", w == pid ? "ended wrongly" :
			       "still alive after 30 s", status, ready);
			if (w == 0) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
			}
		}
		ok += died_ok && ready;
	}
	CHECK(ok == n, "abrupt: %d of %d children died promptly mid-traffic (_exit or SIGKILL)", ok, n);
	if (hu_open(&A, dev_a, gid_index, 1 << 20, 256) || hu_open(&B, dev_b, gid_index, 1 << 20, 256)) {
		CHECK(0, "abrupt: reopen %s/%s afterwards", dev_a, dev_b);
		return;
	}
	still_works("abrupt");
}

int main(int argc, char **argv)
{
	const char *cs = argc > 1 ? argv[1] : "";
	int c;

	while ((c = getopt(argc - 1, argv + 1, "a:b:g:n:t:s:")) != -1) {
		switch (c) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'n': rounds = atoi(optarg); break;
		case 't': attack_secs = atof(optarg); break;
		case 's': hu_rng_state = strtoull(optarg, NULL, 0) | 1; break;
		default: goto usage;
		}
	}
	if (!dev_a || !dev_b)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	INFO("hostile_user %s on %s/%s, GID %d, uid %d, seed %#" PRIx64, cs, dev_a, dev_b,
	     gid_index, (int)getuid(), hu_rng_state);
	if (!strcmp(cs, "abrupt")) {
		case_abrupt();
		return hu_summary();
	}
	if (hu_open(&A, dev_a, gid_index, 1 << 20, 512) || hu_open(&B, dev_b, gid_index, 1 << 20, 512)) {
		printf("  FAIL cannot open %s/%s with GID index %d (%s)\n", dev_a, dev_b, gid_index,
		       strerror(errno));
		return 1;
	}
	if (!strcmp(cs, "f2"))
		case_f2();
	else if (!strcmp(cs, "garbage"))
		case_garbage();
	else if (!strcmp(cs, "cqidx"))
		case_cqidx();
	else if (!strcmp(cs, "midway"))
		case_midway();
	else
		goto usage;
	return hu_summary();
usage:
	fprintf(stderr, "usage: %s f2|garbage|cqidx|midway|abrupt -a DEV -b DEV [-g GID] [-n N] "
			"[-t SECS] [-s SEED]\n", argv[0]);
	return 2;
}
