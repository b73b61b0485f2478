// SPDX-License-Identifier: GPL-2.0
/*
 * rroce C helpers: wrappers for static inline functions Rust cannot call.
 */
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include "helpers.h"

int rroce_helper_copy_to_udata(struct ib_udata *udata, void *src, size_t len)
{
	return ib_copy_to_udata(udata, src, len);
}

int rroce_helper_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

void rroce_helper_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

void rroce_helper_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

struct net_device *rroce_helper_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

int rroce_helper_port_state(struct net_device *ndev)
{
	return ib_get_curr_port_state(ndev);
}

int rroce_helper_netdev_is_up(struct net_device *ndev)
{
	return !!(READ_ONCE(ndev->flags) & IFF_UP);
}

struct net *rroce_helper_init_net(void)
{
	return &init_net;
}

unsigned int rroce_helper_num_possible_cpus(void)
{
	return num_possible_cpus();
}

int rroce_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

void rroce_helper_flush_unregistrations(void)
{
	/* ib_unregister_device_queued() runs on system_unbound_wq. */
	flush_workqueue(system_unbound_wq);
}
