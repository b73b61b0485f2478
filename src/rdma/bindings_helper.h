/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Headers rroce needs bindings for that the kernel crate does not cover: the
 * RDMA core (ib_verbs, umem, rdma_netlink link ops, GID cache) and UDP
 * tunnels. scripts/gen-bindings.sh runs bindgen over this file with the
 * kernel's own clang flags and an allowlist.
 */
#include <linux/netdevice.h>
#include <linux/inetdevice.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <net/udp_tunnel.h>
#include "helpers.h"
