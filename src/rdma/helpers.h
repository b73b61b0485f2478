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
struct llist_node;

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
/* get_device()/put_device() on the ib_device's struct device: keeps the
 * memory, not the registration. */
void rroce_helper_ib_device_hold(struct ib_device *dev);
void rroce_helper_ib_device_unhold(struct ib_device *dev);

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
/* init_net's loopback netdev (lives as long as the kernel). */
struct net_device *rroce_helper_init_net_loopback(void);

struct socket;
struct sock;
struct sk_buff;
struct net;
struct ib_umem;
struct page;
typedef int (*rroce_encap_rcv_fn)(struct sock *sk, struct sk_buff *skb);

/* A UDP tunnel socket on port 4791 in @net whose packets go to @rcv. */
struct sock *rroce_helper_udp_sock(struct net *net, bool ipv6, rroce_encap_rcv_fn rcv,
				   int *err);
void rroce_helper_udp_sock_release(struct sock *sk);
struct net *rroce_helper_dev_net(struct net_device *ndev);
void rroce_helper_synchronize_rcu(void);
/* One piece of a received packet. */
struct rroce_piece {
	u8 *data;
	u32 len;
};

/* A received skb (data at its UDP header), read in place: pulls the UDP
 * header and @pull - 8 bytes after it (or all the packet, if shorter) into
 * its linear part, whose bytes from the network header to the tail it
 * returns in @l3/@l3_len, with the netdev; returns the number of page
 * fragments that follow (0: the packet is linear; see
 * rroce_helper_rx_frags()), or -errno (-ENOMEM; -EIO for fragments the
 * host cannot read). An skb with more than @max_frags fragments, with a
 * frag list or with a fragment that has no kernel address (highmem) is
 * linearized. (A UDP GSO packet reaches a tunnel socket cut into one skb
 * per segment: the stack segments any that is not a tunnel's.) */
int rroce_helper_rx_skb(struct sk_buff *skb, u32 pull, u32 max_frags, struct net_device **ndev,
			u8 **l3, u32 *l3_len);
/* The first @n page fragments of @skb, after rroce_helper_rx_skb() said it
 * has them (or, sending, rroce_helper_nr_frags()), as pieces (each mapped,
 * readable while the skb is). */
void rroce_helper_rx_frags(struct sk_buff *skb, struct rroce_piece *pieces, u32 n);
void rroce_helper_kfree_skb(struct sk_buff *skb);
void rroce_helper_consume_skb(struct sk_buff *skb);
/* An skb with room for @ndev's link header and the IP and UDP headers in
 * front of @len bytes, and at least @room bytes of tailroom after them;
 * skb->dev stays NULL until rroce_helper_tx_prepare(). */
struct sk_buff *rroce_helper_tx_alloc(struct net_device *ndev, bool ipv6, u32 len, u32 room,
				      u8 **data);
/* Whether payloads go out of @ndev as page fragments of the MR's pages
 * (module parameter tx_zerocopy, and @ndev takes fragments). */
bool rroce_helper_tx_zerocopy(struct net_device *ndev);
/* Appends @len bytes of @page from @off to @skb as its next page fragment,
 * with a reference of its own; -EMSGSIZE if only the trailer's fragment
 * is left (or @len is 0). */
int rroce_helper_skb_add_page(struct sk_buff *skb, struct page *page, u32 off, u32 len);
/* Appends @len zeroed bytes of its own to @skb as its last page fragment,
 * at @data; -EMSGSIZE without a fragment left, -ENOMEM. */
int rroce_helper_skb_add_tail(struct sk_buff *skb, u32 len, u8 **data);
/* The page fragments of @skb. */
u32 rroce_helper_nr_frags(struct sk_buff *skb);
/* The bytes @skb holds (linear, page fragments and frag list). */
u32 rroce_helper_skb_len(struct sk_buff *skb);
/* Appends @pkt, a new packet from rroce_helper_tx_alloc(), to the frag list
 * of @head, another, after @tail (NULL: @pkt is the first one there). */
void rroce_helper_run_chain(struct sk_buff *head, struct sk_buff *tail, struct sk_buff *pkt);
/* The skb after @skb in a frag list (NULL at the end); @skb NULL: the first
 * in @head's. Its packet's linear bytes are the @len at the returned @data
 * (all of it, unless it has page fragments too). With
 * @hdr_room (the IP and UDP headers' length) and that much headroom, its
 * network and transport headers are set in the headroom, @hdr pointing at
 * the @hdr_room bytes for the caller to write; otherwise @hdr is NULL. */
struct sk_buff *rroce_helper_run_next(struct sk_buff *head, struct sk_buff *skb, u32 hdr_room,
				      u8 **hdr, u8 **data, u32 *len);
/* The most bytes of UDP payload one UDP GSO packet out of @ndev may carry
 * (0 if @ndev does not take SKB_GSO_UDP_L4). */
u32 rroce_helper_netdev_gso_max(struct net_device *ndev);
/* A connected QP's cached route (a struct dst_cache): looked up once, then
 * reused until the routing tables change (dst_check) or the QP's path does
 * (rroce_helper_route_cache_reset()). */
struct rroce_route;
struct rroce_route *rroce_helper_route_cache_new(void);
void rroce_helper_route_cache_free(struct rroce_route *r);
void rroce_helper_route_cache_reset(struct rroce_route *r);
/* Route out of @ndev (live for the call: the caller holds the RCU read lock
 * it found it under), through @route if not NULL, then push the UDP and IP
 * headers (as rdma_rxe's prepare4/6). Not with interrupts off. With
 * @gso_segs > 1 the skb is a UDP GSO packet of @gso_segs segments, its
 * first packet (@gso_size bytes) its own data (linear, and any page
 * fragments rroce_helper_skb_add_page() gave it) and the others each an skb of its
 * frag list (rroce_helper_run_chain()), so that segmentation unlinks them
 * without copying (SKB_GSO_FRAGLIST; the caller writes each one's IP and
 * UDP headers in its headroom, rroce_helper_run_next()), and an IPv4
 * header reserves one identification per
 * segment, counting up from the one it carries. @l3 and @l3_len: the
 * linear data from the network header. */
int rroce_helper_tx_prepare(struct sk_buff *skb, struct net_device *ndev, bool ipv6,
			    const u8 *sgid, const u8 *dgid, u16 sport, u8 tclass, u8 ttl,
			    struct rroce_route *route, u32 gso_size, u32 gso_segs, u8 **l3,
			    u32 *l3_len);
/* ip_local_out()/ip6_local_out(); consumes the skb. */
int rroce_helper_tx_send(struct sk_buff *skb);
/* Adds (or removes) the Ethernet multicast address of multicast GID @gid
 * (IPv4-mapped or IPv6) to @ndev's filter. */
int rroce_helper_mc_mac(struct net_device *ndev, const u8 *gid, bool add);

unsigned long rroce_helper_umem_pages(struct ib_umem *umem, struct page **pages,
				      unsigned long max);
unsigned long rroce_helper_umem_num_pages(struct ib_umem *umem);
unsigned long rroce_helper_umem_offset(struct ib_umem *umem);
/* memcpy to or from @page at @off through kmap_local_page(). */
void rroce_helper_page_copy(struct page *page, unsigned int off, void *buf, unsigned int len,
			    bool to_page);

struct rroce_timer;
typedef void (*rroce_timer_fn)(void *ctx);
struct rroce_timer *rroce_helper_timer_new(rroce_timer_fn fn, void *ctx);
void rroce_helper_timer_arm_us(struct rroce_timer *rt, unsigned long usecs);
/* preempt_disable() and preempt_enable(). */
void rroce_helper_preempt_disable(void);
void rroce_helper_preempt_enable(void);
/* The tick count in milliseconds (wrapping): diagnostics' timestamps. */
u32 rroce_helper_jiffies_ms(void);
/* Armed and not yet expired: a callback running now was overtaken by a
 * later mod_timer(). */
bool rroce_helper_timer_pending(struct rroce_timer *rt);
void rroce_helper_timer_cancel(struct rroce_timer *rt);
/* timer_shutdown_sync(): the callback has finished and later arms do
 * nothing; NULL is ignored. */
void rroce_helper_timer_shutdown(struct rroce_timer *rt);
/* Frees a timer shut down before; NULL is ignored. */
void rroce_helper_timer_free(struct rroce_timer *rt);
bool rroce_helper_queue_work(struct work_struct *work);
int rroce_helper_tx_elsewhere(u32 home);
int rroce_helper_tx_stream_cpu(void);
bool rroce_helper_rx_handover_reads(void);
bool rroce_helper_tx_ack_at_tail(void);
bool rroce_helper_queue_work_on(u32 cpu, struct work_struct *work);
bool rroce_helper_cancel_work_sync(struct work_struct *work);
bool rroce_helper_in_atomic_bh(void);
bool rroce_helper_irqs_off(void);

u32 rroce_helper_random_u32(void);
int rroce_helper_copy_kernel_nofault(void *buf, unsigned long addr, size_t len, bool to_addr);
bool rroce_helper_netdev_is_loopback(struct net_device *ndev);
struct net_device *rroce_helper_vlan_real_dev(struct net_device *ndev);

/* The device's sysfs attributes beyond the core's: `parent`, the netdev's
 * name, which rxe has and scripts read. */
extern const struct attribute_group rroce_helper_attr_group;

struct scatterlist;
/* KUnit only: a one-entry scatterlist over a kernel buffer, DMA-mapped for
 * @dev as a ULP maps what it registers (ib_dma_map_sg), and its unmapping. */
int rroce_helper_test_sg_map(struct ib_device *dev, struct scatterlist *sg, void *buf,
			     unsigned int len);
void rroce_helper_test_sg_unmap(struct ib_device *dev, struct scatterlist *sg);
/* A received skb, as a tunnel's encap_rcv gets it (data at the UDP header,
 * after the @l3_len bytes of IP header), holding the @len bytes of @pkt:
 * the first @linear in its linear part, the rest in page fragments of at
 * most @frag bytes each, or (@frag_list) in one skb of its frag list. */
struct sk_buff *rroce_helper_test_rx_skb(const u8 *pkt, u32 len, u32 l3_len, u32 linear,
					 u32 frag, bool frag_list);
/* KUnit builds only: sleeps for the module parameter test_dealloc_delay_ms
 * (0, the default: returns at once), logging before and after, so a test
 * can hold a device's dealloc_driver open while the module unloads. */
void rroce_helper_test_dealloc_delay(void);
/* KUnit only: binds the calling thread to @cpu (which must be online), or
 * lets it run anywhere again (@cpu < 0); 0 or an errno. */
int rroce_helper_test_run_on(int cpu);

/* On-demand paging (see helpers.c). */
struct rroce_odp;
/* Whether the kernel has it (CONFIG_INFINIBAND_ON_DEMAND_PAGING). */
bool rroce_helper_odp_enabled(void);
/* An ODP umem over [start, start + len) of the calling process, with the
 * pages already present published; ERR_PTR on failure. */
struct rroce_odp *rroce_helper_odp_get(struct ib_device *dev, unsigned long start,
				       size_t len, int access);
void rroce_helper_odp_release(struct rroce_odp *o);
/* Faults [addr, addr + len) in (for writing with @write) and publishes it;
 * process context, sleeps. */
int rroce_helper_odp_fault(struct rroce_odp *o, u64 addr, u64 len, bool write);
/* Copies between @buf and [addr, addr + len) if every page is published:
 * 0, -EAGAIN (fault it in first) or -EFAULT (outside); any context. */
int rroce_helper_odp_copy(struct rroce_odp *o, u64 addr, void *buf, size_t len, bool to_mem);

/* Restrack: @n named u32 values as the driver table (RDMA_NLDEV_ATTR_DRIVER)
 * of the entry @msg holds; 0 or -EMSGSIZE (nothing added). */
int rroce_helper_put_driver_u32s(struct sk_buff *msg, const char *const *names,
				 const u32 *values, size_t n);

/* The kernel's crc32_le(), and whether it is arch-optimised. */
u32 rroce_helper_crc32_le(u32 crc, const void *p, size_t len);
bool rroce_helper_crc32_le_fast(void);

/* Receive hand-over (see helpers.c and net/rxq.rs): a real-time kthread
 * worker per online CPU, each with a queue of received packets that it
 * hands, one by one and with bottom halves disabled, to the function given
 * to rroce_helper_rxq_start() together with the three values queued with
 * the packet. */
typedef void (*rroce_rxq_fn)(struct sk_buff *skb, void *dev, void *qp, u32 role);
/* Starts the workers (once: the module's first UDP socket pair); 0 or a
 * negative errno (then nothing is handed over). Process context. */
/* What a receive thread calls for a QP whose transmit was kicked to it
 * (rroce_helper_rxq_kick()), with the node the QP was kicked with. */
typedef void (*rroce_txq_fn)(struct llist_node *node);
int rroce_helper_rxq_start(rroce_rxq_fn fn, rroce_txq_fn tx);
/* Runs @node's transmit on @cpu's receive thread, after the packets queued
 * there; false (nothing done) if @cpu has none. @node must not be queued
 * already. */
bool rroce_helper_rxq_kick(u32 cpu, struct llist_node *node);
/* Stops them after processing every queued packet; no packet may be
 * queued any more (the receive callbacks are gone). Process context. */
void rroce_helper_rxq_stop(void);
/* Waits until every packet queued before the call has been processed.
 * Process context. */
void rroce_helper_rxq_flush(void);
/* Softirq context: this CPU, the CPU whose thread takes this CPU's
 * hand-overs (-1: none, or the hand-over is turned off: module parameter
 * rx_handover), and whether this CPU's own thread took a request (role 0)
 * within the last tick. */
void rroce_helper_rxq_where(u32 *here, int *other, bool *here_takes_requests);
/* Queues @skb (owned) with @dev, @qp and @role for @cpu's thread: true if
 * queued (the thread now owns it and the values), false (nothing taken)
 * without such a thread or with its queue full. Softirq context. */
bool rroce_helper_rxq_queue(u32 cpu, struct sk_buff *skb, void *dev, void *qp, u32 role);

#endif /* RROCE_HELPERS_H */
