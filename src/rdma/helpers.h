/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for what Rust cannot call: static inline functions and macros of
 * the RDMA core and networking headers. Each is a one-line wrapper; all logic
 * stays in Rust.
 */
#ifndef RROCE_HELPERS_H
#define RROCE_HELPERS_H

struct ib_device;
struct ib_udata;
struct net_device;

int rroce_helper_copy_to_udata(struct ib_udata *udata, void *src, size_t len);
int rroce_helper_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
void rroce_helper_dev_put(struct net_device *ndev);
void rroce_helper_dev_hold(struct net_device *ndev);
struct net_device *rroce_helper_notifier_info_to_dev(void *info);
/* ib_get_curr_port_state(): IB_PORT_ACTIVE when running with carrier. */
int rroce_helper_port_state(struct net_device *ndev);
/* Whether the netdev is administratively up (IFF_UP). */
int rroce_helper_netdev_is_up(struct net_device *ndev);
struct net *rroce_helper_init_net(void);
unsigned int rroce_helper_num_possible_cpus(void);
/* ib_device_try_get(): take a reference unless the device is unregistering. */
int rroce_helper_ib_device_try_get(struct ib_device *dev);
/* Wait for ib_unregister_device_queued() work to finish. */
void rroce_helper_flush_unregistrations(void);

#endif
