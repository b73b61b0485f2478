/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small helpers shared by the userspace samples and the conformance suite
 * (tests/conformance/), all on the stock libibverbs.
 */
#ifndef RROCE_SAMPLES_UTIL_H
#define RROCE_SAMPLES_UTIL_H

#include <string.h>
#include <infiniband/verbs.h>

/* Opens the RDMA device called @name (the first one if @name is NULL);
 * NULL if there is none. */
static inline struct ibv_context *rroce_open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name)) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

#endif /* RROCE_SAMPLES_UTIL_H */
