// SPDX-License-Identifier: GPL-2.0
/*
 * hostile_f3: a READ must never return bytes of another protection domain
 * after its MR is deregistered and its rkey handed to a new MR.
 *
 *   hostile_f3 -a DEV -b DEV [-g GID_INDEX] [-s MIB] [-q QPS] [-m REGS] [-W WORDS]
 *
 * Device B holds MR1 (PD1, every byte 0x11). QPS QPs on device A (32) each
 * post one RDMA READ of MIB MiB (16) from MR1 at a 256-byte path MTU: a long
 * stream of response packets (the send window lets one READ of this size
 * out per QP at a time, hence many QPs). As soon as the first bytes land, MR1 is
 * deregistered, its buffer is filled with 0x22 and up to REGS MRs are
 * registered in a second PD, PD2, on B (and on A), steering the next key
 * onto MR1's old rkey the way rroce hands keys out today: index << 8 |
 * a global 8-bit counter, indices taken word by word from a table of
 * WORDS 64-bit words (257). When the next key is predicted to be MR1's,
 * the registration is a PD2 MR over the whole (now 0x22) buffer.
 *
 * Checks: no 0x22 byte reaches the requester's buffer. Printed: how many
 * registrations reused the old rkey, how long after the dereg, and the
 * READ completion statuses. The bytes a responder puts on the wire are
 * checked by the VM script (a capture filter for 0x22 payloads), since a
 * requester drops responses after a gap.
 */
#define _GNU_SOURCE
#include <getopt.h>

#include "hostile.h"

static const char *dev_a, *dev_b;
static int gid_index = 1, nreads = 32, max_regs = 600, words = 257;
static size_t size = 16u << 20;

struct reg {
	struct ibv_mr *mr;
	int big;
};

int main(int argc, char **argv)
{
	struct hu_side A, B;
	int c;

	while ((c = getopt(argc, argv, "a:b:g:s:q:m:W:")) != -1) {
		switch (c) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 's': size = (size_t)atoi(optarg) << 20; break;
		case 'q': nreads = atoi(optarg); break;
		case 'm': max_regs = atoi(optarg); break;
		case 'W': words = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!dev_a || !dev_b || nreads < 1 || nreads > 100 || words < 1)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	hu_watchdog(240);
	hu_phase = "setup";
	INFO("hostile_f3: %d QPs each READ %zu MiB from %s into %s, GID %d, uid %d", nreads, size >> 20,
	     dev_b, dev_a, gid_index, (int)getuid());
	if (hu_open(&A, dev_a, gid_index, size, 256) || hu_open(&B, dev_b, gid_index, 4096, 256)) {
		printf("  FAIL cannot open %s/%s (%s)\n", dev_a, dev_b, strerror(errno));
		return 1;
	}
	/* B's own small MR (hu_open) stays; MR1 is the victim. */
	uint8_t *vbuf = aligned_alloc(4096, size), *tiny_a = aligned_alloc(4096, 4096),
		*tiny_b = aligned_alloc(4096, 4096);
	struct ibv_pd *pd2 = ibv_alloc_pd(B.ctx), *pda2 = ibv_alloc_pd(A.ctx);

	if (!vbuf || !tiny_a || !tiny_b || !pd2 || !pda2)
		return 1;
	memset(vbuf, 0x11, size);
	struct ibv_mr *mr1 = ibv_reg_mr(B.pd, vbuf, size,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	static struct ibv_qp *qa[100], *qb[100];
	struct hu_conn cn = { IBV_MTU_256, 4, 17, 7, 7 };

	if (!mr1) {
		CHECK(0, "register MR1 (%s)", strerror(errno));
		return hu_summary();
	}
	for (int i = 0; i < nreads; i++) {
		qa[i] = hu_rc_qp(A.pd, A.scq, A.rcq, 8, 0);
		qb[i] = hu_rc_qp(B.pd, B.scq, B.rcq, 8, 0);
		if (!qa[i] || !qb[i] || hu_connect(qa[i], &A, &B, qb[i], cn) ||
		    hu_connect(qb[i], &B, &A, qa[i], cn)) {
			CHECK(0, "set up QP pair %d (%s)", i, strerror(errno));
			return hu_summary();
		}
	}
	const uint32_t k1 = mr1->rkey;
	const uint32_t w1 = (k1 >> 8) / 64;

	INFO("MR1: rkey %#x (index %u, key byte %#x), %zu MiB of 0x11 at %p", k1, k1 >> 8, k1 & 0xff,
	     size >> 20, (void *)vbuf);
	memset(A.buf, 0, size);
	hu_phase = "post the READs";
	for (int i = 0; i < nreads; i++)
		if (hu_post_send(qa[i], i, IBV_WR_RDMA_READ, A.buf, size, A.mr->lkey, (uintptr_t)vbuf, k1)) {
			CHECK(0, "post READ %d", i);
			return hu_summary();
		}
	double t0 = hu_now();

	while (!*(volatile uint8_t *)A.buf && hu_now() - t0 < 20)
		;
	/* Let the other QPs' requests reach the responder too. */
	usleep(100000);
	double t_started = hu_now() - t0;

	hu_phase = "dereg MR1";
	double td = hu_now();
	int drc = ibv_dereg_mr(mr1);

	memset(vbuf, 0x22, size);
	INFO("first READ bytes after %.3f s; MR1 deregistered (%d) in %.3f s", t_started, drc,
	     hu_now() - td);

	/* Steer the key allocator back onto MR1's rkey. */
	hu_phase = "re-register";
	static struct reg regs[4096];
	int nregs = 0, reused = 0, first_reuse = -1, bigs = 0, failed = 0;
	double t_reuse = 0;
	uint32_t last_b = k1, last_any = k1;
	struct ibv_mr *keeper = NULL;

	for (int i = 0; i < max_regs && nregs < 4096 && !keeper; i++) {
		uint32_t next_word = ((last_b >> 8) / 64 + 1) % (uint32_t)words;
		uint32_t next_salt = (last_any + 1) & 0xff;
		struct ibv_mr *m;
		int on_b = 1, big = 0;

		if (next_word == w1 && next_salt != (k1 & 0xff)) {
			m = ibv_reg_mr(pda2, tiny_a, 4096, IBV_ACCESS_LOCAL_WRITE);
			on_b = 0;
		} else if (next_word == w1) {
			m = ibv_reg_mr(pd2, vbuf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
			big = 1;
			bigs++;
		} else {
			m = ibv_reg_mr(pd2, tiny_b, 4096, IBV_ACCESS_LOCAL_WRITE);
		}
		if (!m) {
			failed++;
			continue;
		}
		last_any = m->rkey;
		if (on_b)
			last_b = m->rkey;
		if (m->rkey == k1 && on_b) {
			reused++;
			if (first_reuse < 0) {
				first_reuse = i + 1;
				t_reuse = hu_now() - td;
			}
		}
		if (big && m->rkey == k1) {
			keeper = m;
		} else if (big) {
			ibv_dereg_mr(m);
		} else {
			regs[nregs++] = (struct reg){ m, 0 };
		}
	}
	if (first_reuse > 0)
		INFO("the old rkey %#x came back at registration %d, %.3f s after the dereg%s", k1,
		     first_reuse, t_reuse, keeper ? " (a PD2 MR over the 0x22 buffer)" : "");
	INFO("re-registrations: %d (%d over the whole buffer, %d failed); reused the old rkey: %d",
	     nregs + bigs, bigs, failed, reused);

	hu_phase = "wait for the READs";
	struct ibv_wc wc[128];
	int got = hu_poll(A.scq, wc, nreads, 90), ok = 0, hist[32] = { 0 };

	for (int i = 0; i < got; i++) {
		ok += wc[i].status == IBV_WC_SUCCESS;
		hist[wc[i].status & 31]++;
	}
	for (int s = 0; s < 32; s++)
		if (hist[s])
			INFO("READ completions %-24s %d", ibv_wc_status_str(s), hist[s]);
	size_t n11 = 0, n22 = 0, first22 = (size_t)-1;

	for (size_t i = 0; i < size; i++) {
		n11 += A.buf[i] == 0x11;
		if (A.buf[i] == 0x22) {
			if (!n22)
				first22 = i;
			n22++;
		}
	}
	INFO("requester buffer: %zu bytes 0x11, %zu bytes 0x22, %zu untouched", n11, n22,
	     size - n11 - n22);
	if (ok == nreads)
		INFO("every READ completed successfully: they finished before the dereg took effect; "
		     "the run proves nothing (raise -q or -s)");
	CHECK(got == nreads, "every READ completed (%d of %d)", got, nreads);
	CHECK(n22 == 0, "no byte of PD2's MR (0x22) reached the requester (%zu did, first at %zu)",
	      n22, first22);
	printf("f3: rkey reused %d times in %d re-registrations\n", reused, nregs + bigs);

	hu_phase = "cleanup";
	if (keeper)
		ibv_dereg_mr(keeper);
	for (int i = 0; i < nregs; i++)
		ibv_dereg_mr(regs[i].mr);
	for (int i = 0; i < nreads; i++) {
		ibv_destroy_qp(qa[i]);
		ibv_destroy_qp(qb[i]);
	}
	ibv_dealloc_pd(pd2);
	ibv_dealloc_pd(pda2);
	hu_close(&A);
	hu_close(&B);
	return hu_summary();
usage:
	fprintf(stderr, "usage: %s -a DEV -b DEV [-g GID] [-s MIB] [-q QPS(1..100)] [-m REGS] "
			"[-W WORDS]\n", argv[0]);
	return 2;
}
