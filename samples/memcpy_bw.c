// SPDX-License-Identifier: GPL-2.0
/*
 * memcpy_bw: the memory copy bandwidth of this machine, the ceiling no
 * software RDMA device can pass (every byte it moves is copied at least
 * once). Copies a 64 MiB buffer for about a second and prints MB/s
 * (10^6 bytes per second, as perftest).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	size_t n = 64u << 20;
	char *a = malloc(n), *b = malloc(n);
	double t0, t;
	long iters = 0;

	if (!a || !b)
		return 1;
	memset(a, 1, n);
	memset(b, 2, n);
	t0 = now();
	do {
		memcpy(iters & 1 ? a : b, iters & 1 ? b : a, n);
		iters++;
		t = now() - t0;
	} while (t < 1.0);
	printf("%.1f\n", iters * (double)n / t / 1e6);
	return a[n / 2] == 7; /* keep the copies */
}
