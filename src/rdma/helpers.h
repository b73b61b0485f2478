/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for what Rust cannot call: static inline functions and macros of
 * the RDMA core and networking headers. Each is a one-line wrapper; all logic
 * stays in Rust.
 */
#ifndef RROCE_HELPERS_H
#define RROCE_HELPERS_H

struct ib_device;
struct vm_operations_struct;
struct ib_udata;
struct ib_ucontext;
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

struct vm_area_struct;
struct rdma_user_mmap_entry;
struct uverbs_attr_bundle;

/* vmalloc_user(): zeroed, page-aligned, VM_USERMAP memory for mmap. */
void *rroce_helper_vmalloc_user(unsigned long size);
void rroce_helper_vfree(const void *addr);
int rroce_helper_remap_vmalloc(struct vm_area_struct *vma, void *addr);
unsigned long rroce_helper_vma_len(struct vm_area_struct *vma);
/* The driver udata of a uverbs call, or NULL for kernel callers. */
struct ib_udata *rroce_helper_attrs_udata(struct uverbs_attr_bundle *attrs);
/* The ucontext of a uverbs call (rdma_udata_to_drv_context), or NULL. */
struct ib_ucontext *rroce_helper_udata_ucontext(struct ib_udata *udata);
u64 rroce_helper_mmap_offset(struct rdma_user_mmap_entry *entry);

struct work_struct;
typedef void (*rroce_work_fn)(struct work_struct *work);

/* INIT_WORK() for a work item embedded in rroce's (pinned) state. */
void rroce_helper_init_work(struct work_struct *work, rroce_work_fn fn);
/* Queue on the CPU completion vector @vector names; true if newly queued. */
bool rroce_helper_queue_work_on_vector(unsigned int vector, struct work_struct *work);
/* The CPU that completion vector @vector names. */
unsigned int rroce_helper_vector_cpu(unsigned int vector);
bool rroce_helper_flush_work(struct work_struct *work);
unsigned int rroce_helper_smp_processor_id(void);

#endif
