// SPDX-License-Identifier: GPL-2.0
/*
 * rroce C helpers: wrappers for static inline functions Rust cannot call.
 */
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <linux/workqueue.h>
#include <linux/cpumask.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
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

void *rroce_helper_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void rroce_helper_vfree(const void *addr)
{
	vfree(addr);
}

int rroce_helper_remap_vmalloc(struct vm_area_struct *vma, void *addr)
{
	return remap_vmalloc_range(vma, addr, 0);
}

unsigned long rroce_helper_vma_len(struct vm_area_struct *vma)
{
	return vma->vm_end - vma->vm_start;
}




struct ib_udata *rroce_helper_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

u64 rroce_helper_mmap_offset(struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

struct ib_ucontext *rroce_helper_udata_ucontext(struct ib_udata *udata)
{
	return udata ? container_of(udata, struct uverbs_attr_bundle, driver_udata)->context :
		       NULL;
}

void rroce_helper_init_work(struct work_struct *work, rroce_work_fn fn)
{
	INIT_WORK(work, fn);
}

unsigned int rroce_helper_vector_cpu(unsigned int vector)
{
	return cpumask_local_spread(vector, NUMA_NO_NODE);
}

bool rroce_helper_queue_work_on_vector(unsigned int vector, struct work_struct *work)
{
	return queue_work_on(rroce_helper_vector_cpu(vector), system_highpri_wq, work);
}

bool rroce_helper_flush_work(struct work_struct *work)
{
	return flush_work(work);
}

unsigned int rroce_helper_smp_processor_id(void)
{
	return raw_smp_processor_id();
}
