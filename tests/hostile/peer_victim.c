// SPDX-License-Identifier: GPL-2.0
/*
 * peer_victim: live RC connections for the hostile-peer injector
 * (tests/vm/roce_inject.py live, run by tests/vm/t64-hostile-peer.sh).
 *
 * One process opens the victim device (-a, address -A) and the honest
 * peer's device (-b, address -B) and connects one RC QP pair per injector
 * case, with known PSNs, both in RTS. It writes what a peer on the wire
 * would need to aim at each victim QP (QPNs, PSNs, rkeys, buffer
 * addresses) to the state file (-s), prints READY and waits for a line on
 * stdin while the injector sends. Then it checks, per pair:
 *
 *   - nothing the injector sent was delivered: no completion on any CQ,
 *     both QPs still in RTS, the victim's guard region still zero
 *     (the "probe" pair instead must have received the injector's valid
 *     SEND and WRITE: that proves the injector's packets are well formed);
 *   - honest traffic on the same QPs, both ways: SEND, RDMA WRITE, RDMA
 *     READ and a FetchAdd, every completion SUCCESS with the right data.
 *
 * Pairs whose victim QP is meant to be NAKed into the error state ("nak*")
 * only report their state. Prints "CHECK ok NAME" / "CHECK fail NAME: why"
 * lines and "INFO ..." lines; exits 0 only if every check passed.
 *
 *   peer_victim -a DEV -A IPV6 -b DEV -B IPV6 -s STATE_FILE
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rroce_util.h"

/* Each pair owns a SLICE of both MRs: */
#define SLICE (64u << 10)
#define OFF_RECV 0u		/* two 8 KiB receive buffers */
#define OFF_WRT (16u << 10)	/* RDMA WRITE target */
#define OFF_RD (32u << 10)	/* RDMA READ source */
#define OFF_GUARD (48u << 10)	/* zero until the honest traffic; sends come from here */
#define PROBE_RECV_ID 0xbeefu
#define PROBE_SEND_LEN 64u
#define PROBE_WRITE_LEN 32u

struct pair_def {
	const char *name;
	int honest;		/* run honest traffic after the injection */
	uint8_t max_dest_rd;	/* the victim's max_dest_rd_atomic */
};

/* The injector knows these names (roce_inject.py CASES). */
static const struct pair_def defs[] = {
	{ "probe", 0, 16 },	{ "control", 1, 16 }, { "spoof_src", 1, 16 },
	{ "spoof_dst", 1, 16 }, { "bad_pkey", 1, 16 }, { "dup_read", 1, 16 },
	{ "dup_atomic", 1, 16 }, { "oos_middle", 1, 16 }, { "pad_lies", 1, 16 },
	{ "nak_over_mtu", 0, 16 }, { "unexp_resp", 1, 16 }, { "wrong_type", 1, 16 },
	{ "nak_huge_read", 0, 16 }, { "nak_rd_atomic", 0, 0 }, { "nak_send_inv", 0, 16 },
	{ "nak_seq_middle", 0, 16 }, { "nak_short_first", 0, 16 },
	{ "nak_write_over_mtu", 0, 16 },
};
#define NPAIRS (sizeof(defs) / sizeof(defs[0]))
#define MR_SIZE (NPAIRS * SLICE)

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gid_index;
	union ibv_gid gid;
};

struct end {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	uint32_t rq_psn, sq_psn;
};

struct pair {
	const struct pair_def *def;
	struct end v, p;	/* victim, honest peer */
	uint8_t *vbuf, *pbuf;	/* the pair's slices */
};

static struct dev V, P;
static struct pair pairs[NPAIRS];
static int failures;

static void check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("CHECK ok %s\n", name);
	} else {
		printf("CHECK fail %s: ", name);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
		failures++;
	}
	fflush(stdout);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pattern(uint8_t *p, size_t n, unsigned int mul, unsigned int add)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * mul + add);
}

static int dev_open(struct dev *d, const char *name, const char *addr)
{
	struct ibv_port_attr pa;
	struct in6_addr want;

	if (inet_pton(AF_INET6, addr, &want) != 1)
		return -1;
	d->ctx = rroce_open_dev(name);
	if (!d->ctx || ibv_query_port(d->ctx, 1, &pa))
		return -1;
	d->gid_index = -1;
	for (int i = 0; i < pa.gid_tbl_len && d->gid_index < 0; i++)
		if (!ibv_query_gid(d->ctx, 1, i, &d->gid) && !memcmp(&d->gid, &want, 16))
			d->gid_index = i;
	d->pd = ibv_alloc_pd(d->ctx);
	d->buf = aligned_alloc(4096, MR_SIZE);
	if (d->gid_index < 0 || !d->pd || !d->buf)
		return -1;
	memset(d->buf, 0, MR_SIZE);
	d->mr = ibv_reg_mr(d->pd, d->buf, MR_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	return d->mr ? 0 : -1;
}

static int end_create(struct end *e, struct dev *d)
{
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	e->scq = ibv_create_cq(d->ctx, 32, NULL, NULL, 0);
	e->rcq = ibv_create_cq(d->ctx, 32, NULL, NULL, 0);
	if (!e->scq || !e->rcq)
		return -1;
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	e->qp = ibv_create_qp(d->pd, &ia);
	return e->qp ? 0 : -1;
}

/* RESET -> INIT -> RTR -> RTS towards @rqpn at @peer's GID. */
static int end_connect(struct end *e, struct dev *self, struct dev *peer, uint32_t rqpn,
		       uint8_t max_dest_rd)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE,
	};

	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = rqpn;
	a.rq_psn = e->rq_psn;
	a.max_dest_rd_atomic = max_dest_rd;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = self->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = e->sq_psn;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					      IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post_recv(struct end *e, struct dev *d, uint8_t *at, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)at, len, d->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static int pair_setup(struct pair *pr, unsigned int i)
{
	pr->def = &defs[i];
	pr->vbuf = V.buf + i * SLICE;
	pr->pbuf = P.buf + i * SLICE;
	/* Known PSNs, different per pair; "control" wraps through 0. */
	pr->v.rq_psn = pr->p.sq_psn = (0xfffff0u + i * 0x10101u) & 0xffffff;
	pr->v.sq_psn = pr->p.rq_psn = (0x7ffff8u + i * 0x20202u) & 0xffffff;
	if (end_create(&pr->v, &V) || end_create(&pr->p, &P))
		return -1;
	if (end_connect(&pr->v, &V, &P, pr->p.qp->qp_num, pr->def->max_dest_rd) ||
	    end_connect(&pr->p, &P, &V, pr->v.qp->qp_num, 16))
		return -1;
	if (!strcmp(pr->def->name, "probe")) {
		/* What the injector's probe READ must get back. */
		pattern(pr->vbuf + OFF_RD, 4096, 13, 5);
		return post_recv(&pr->v, &V, pr->vbuf + OFF_RECV, 256, PROBE_RECV_ID);
	}
	/* Receives posted ahead: a SEND the victim wrongly accepts lands. */
	for (unsigned int k = 0; k < 2; k++)
		if (post_recv(&pr->v, &V, pr->vbuf + OFF_RECV + k * 8192, 8192, 100 + k) ||
		    post_recv(&pr->p, &P, pr->pbuf + OFF_RECV + k * 8192, 8192, 200 + k))
			return -1;
	return 0;
}

static void write_state(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		perror(path);
		exit(2);
	}
	fprintf(f, "mr v_rkey=0x%x v_va=0x%llx p_rkey=0x%x p_va=0x%llx slice=%u off_recv=%u "
		   "off_wrt=%u off_rd=%u off_guard=%u probe_send_len=%u probe_write_len=%u\n",
		V.mr->rkey, (unsigned long long)(uintptr_t)V.buf, P.mr->rkey,
		(unsigned long long)(uintptr_t)P.buf, SLICE, OFF_RECV, OFF_WRT, OFF_RD, OFF_GUARD,
		PROBE_SEND_LEN, PROBE_WRITE_LEN);
	for (unsigned int i = 0; i < NPAIRS; i++) {
		struct pair *pr = &pairs[i];

		/* v_epsn: the PSN the victim's responder expects next;
		 * v_sq_psn: the PSN its requester sends next. */
		fprintf(f, "pair name=%s index=%u vqpn=0x%x pqpn=0x%x v_epsn=0x%x v_sq_psn=0x%x "
			   "p_epsn=0x%x p_sq_psn=0x%x v_slice=0x%llx p_slice=0x%llx "
			   "v_max_dest_rd_atomic=%u\n",
			pr->def->name, i, pr->v.qp->qp_num, pr->p.qp->qp_num, pr->v.rq_psn,
			pr->v.sq_psn, pr->p.rq_psn, pr->p.sq_psn,
			(unsigned long long)(uintptr_t)pr->vbuf,
			(unsigned long long)(uintptr_t)pr->pbuf, pr->def->max_dest_rd);
	}
	fclose(f);
}

static const char *state_name(struct ibv_qp *qp)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS",
					     "SQD",   "SQE",  "ERR" };
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return "?";
	return a.qp_state <= IBV_QPS_ERR ? names[a.qp_state] : "?";
}

/* One completion from @cq within 5 s; 0 if none came. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = now() + 5;

	while (now() < end) {
		int r = ibv_poll_cq(cq, 1, wc);

		if (r)
			return r > 0;
		usleep(200);
	}
	return 0;
}

/* Completions waiting on @cq, described into @why; the count. */
static int drain(struct ibv_cq *cq, const char *cq_name, char *why, size_t n)
{
	struct ibv_wc wc;
	int count = 0;

	while (ibv_poll_cq(cq, 1, &wc) == 1) {
		size_t l = strlen(why);

		snprintf(why + l, n - l, "%s%s: wr_id %llu %s opcode %d len %u", l ? "; " : "",
			 cq_name, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			 wc.opcode, wc.byte_len);
		count++;
	}
	return count;
}

static void name_of(char *out, size_t n, struct pair *pr, const char *what)
{
	snprintf(out, n, "hostile_peer.%s.%s", pr->def->name, what);
}

/* Nothing the injector sent reached the pair; or, for "probe", exactly
 * its valid SEND and WRITE did. */
static void check_quiet(struct pair *pr)
{
	char name[128], why[1024] = "";
	int spurious;

	if (!strcmp(pr->def->name, "probe")) {
		struct ibv_wc wc;
		uint8_t want[PROBE_SEND_LEN];
		int got = ibv_poll_cq(pr->v.rcq, 1, &wc) == 1;

		pattern(want, sizeof(want), 7, 3);
		name_of(name, sizeof(name), pr, "injected_send_delivered");
		check(got && wc.status == IBV_WC_SUCCESS && wc.wr_id == PROBE_RECV_ID &&
			      wc.byte_len == PROBE_SEND_LEN &&
			      !memcmp(pr->vbuf + OFF_RECV, want, sizeof(want)),
		      name, "%s (status %s, byte_len %u)",
		      got ? "wrong completion or data" : "no receive completion",
		      got ? ibv_wc_status_str(wc.status) : "-", got ? wc.byte_len : 0);
		pattern(want, PROBE_WRITE_LEN, 11, 1);
		name_of(name, sizeof(name), pr, "injected_write_placed");
		check(!memcmp(pr->vbuf + OFF_WRT, want, PROBE_WRITE_LEN), name,
		      "the WRITE's data is not at the target");
		return;
	}
	spurious = drain(pr->v.scq, "victim send CQ", why, sizeof(why)) +
		   drain(pr->v.rcq, "victim recv CQ", why, sizeof(why)) +
		   drain(pr->p.scq, "peer send CQ", why, sizeof(why)) +
		   drain(pr->p.rcq, "peer recv CQ", why, sizeof(why));
	if (!pr->def->honest) {
		printf("INFO %s: victim QP %s, peer QP %s, completions: %s\n", pr->def->name,
		       state_name(pr->v.qp), state_name(pr->p.qp), spurious ? why : "none");
		return;
	}
	const char *vs = state_name(pr->v.qp), *ps = state_name(pr->p.qp);
	int zero = 1;

	for (unsigned int i = OFF_GUARD; i < SLICE; i++)
		zero &= pr->vbuf[i] == 0;
	name_of(name, sizeof(name), pr, "nothing_delivered");
	check(!spurious && !strcmp(vs, "RTS") && !strcmp(ps, "RTS") && zero, name,
	      "%d completion(s) [%s], victim QP %s, peer QP %s, guard region %s", spurious, why,
	      vs, ps, zero ? "intact" : "WRITTEN");
}

static int post_send(struct end *e, struct dev *d, enum ibv_wr_opcode op, uint8_t *local,
		     uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	struct ibv_sge sge = { (uintptr_t)local, len, d->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(e->qp, &wr, &bad);
}

/* Waits for the requester's completion of @op: 0, or -1 with @why. */
static int wait_send(struct end *e, enum ibv_wr_opcode op, const char *what, char *why,
		     size_t n)
{
	struct ibv_wc wc;

	if (!poll_one(e->scq, &wc)) {
		snprintf(why, n, "%s: no requester completion", what);
		return -1;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != op) {
		snprintf(why, n, "%s: requester completion %s (wr_id %llu)", what,
			 ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
		return -1;
	}
	return 0;
}

/*
 * Honest traffic from @s (on device @sd, slice @sb) to @r (@rd, @rb):
 * SEND 3000 bytes, WRITE 5000, READ 5000, FetchAdd; data checked.
 */
static int one_way(struct end *s, struct dev *sd, uint8_t *sb, struct end *r, struct dev *rd,
		   uint8_t *rb, unsigned int seed, char *why, size_t n)
{
	struct ibv_wc wc;
	uint64_t rva = (uintptr_t)rb;

	pattern(sb + OFF_GUARD, 3000, 3, seed);
	if (post_send(s, sd, IBV_WR_SEND, sb + OFF_GUARD, 3000, 0, 0, 0) ||
	    wait_send(s, IBV_WR_SEND, "SEND", why, n))
		return -1;
	if (!poll_one(r->rcq, &wc) || wc.status != IBV_WC_SUCCESS || wc.byte_len != 3000 ||
	    memcmp(rb + OFF_RECV, sb + OFF_GUARD, 3000)) {
		snprintf(why, n, "SEND: receive completion or data wrong");
		return -1;
	}
	pattern(sb + OFF_GUARD, 5000, 5, seed + 1);
	if (post_send(s, sd, IBV_WR_RDMA_WRITE, sb + OFF_GUARD, 5000, rva + OFF_WRT,
		      rd->mr->rkey, 0) ||
	    wait_send(s, IBV_WR_RDMA_WRITE, "WRITE", why, n))
		return -1;
	if (memcmp(rb + OFF_WRT, sb + OFF_GUARD, 5000)) {
		snprintf(why, n, "WRITE: data not placed");
		return -1;
	}
	pattern(rb + OFF_RD, 5000, 9, seed + 2);
	memset(sb + OFF_GUARD, 0, 5000);
	if (post_send(s, sd, IBV_WR_RDMA_READ, sb + OFF_GUARD, 5000, rva + OFF_RD, rd->mr->rkey,
		      0) ||
	    wait_send(s, IBV_WR_RDMA_READ, "READ", why, n))
		return -1;
	if (memcmp(rb + OFF_RD, sb + OFF_GUARD, 5000)) {
		snprintf(why, n, "READ: data wrong");
		return -1;
	}
	uint64_t *target = (uint64_t *)(rb + OFF_WRT + 8192), *res = (uint64_t *)(sb + OFF_GUARD);

	*target = 1000 + seed;
	*res = 0;
	if (post_send(s, sd, IBV_WR_ATOMIC_FETCH_AND_ADD, (uint8_t *)res, 8, (uintptr_t)target,
		      rd->mr->rkey, 23) ||
	    wait_send(s, IBV_WR_ATOMIC_FETCH_AND_ADD, "FetchAdd", why, n))
		return -1;
	if (*res != 1000 + seed || *target != 1023 + seed) {
		snprintf(why, n, "FetchAdd: old %llu, now %llu", (unsigned long long)*res,
			 (unsigned long long)*target);
		return -1;
	}
	return 0;
}

static void honest(struct pair *pr, unsigned int i)
{
	char name[128], why[256] = "";
	int bad;

	if (!pr->def->honest)
		return;
	bad = one_way(&pr->p, &P, pr->pbuf, &pr->v, &V, pr->vbuf, i * 4, why, sizeof(why));
	if (!bad) {
		bad = one_way(&pr->v, &V, pr->vbuf, &pr->p, &P, pr->pbuf, i * 4 + 64, why,
			      sizeof(why));
		if (bad) {
			size_t l = strlen(why);

			snprintf(why + l, sizeof(why) - l, " (victim to peer)");
		}
	} else {
		size_t l = strlen(why);

		snprintf(why + l, sizeof(why) - l, " (peer to victim)");
	}
	name_of(name, sizeof(name), pr, "honest_traffic");
	check(!bad, name, "%s", why);
}

int main(int argc, char **argv)
{
	const char *dev_a = NULL, *dev_b = NULL, *addr_a = NULL, *addr_b = NULL, *state = NULL;
	char line[64];
	int c;

	while ((c = getopt(argc, argv, "a:A:b:B:s:")) != -1) {
		switch (c) {
		case 'a': dev_a = optarg; break;
		case 'A': addr_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 'B': addr_b = optarg; break;
		case 's': state = optarg; break;
		default: return 2;
		}
	}
	if (!dev_a || !dev_b || !addr_a || !addr_b || !state) {
		fprintf(stderr, "usage: %s -a DEV -A IPV6 -b DEV -B IPV6 -s STATE\n", argv[0]);
		return 2;
	}
	if (dev_open(&V, dev_a, addr_a) || dev_open(&P, dev_b, addr_b)) {
		fprintf(stderr, "cannot open %s/%s with addresses %s/%s\n", dev_a, dev_b, addr_a,
			addr_b);
		return 2;
	}
	for (unsigned int i = 0; i < NPAIRS; i++)
		if (pair_setup(&pairs[i], i)) {
			fprintf(stderr, "pair %s: setup failed: %s\n", defs[i].name,
				strerror(errno));
			return 2;
		}
	write_state(state);
	printf("READY\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		fprintf(stderr, "stdin closed; checking anyway\n");
	for (unsigned int i = 0; i < NPAIRS; i++)
		check_quiet(&pairs[i]);
	for (unsigned int i = 0; i < NPAIRS; i++)
		honest(&pairs[i], i);
	printf("victim: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
