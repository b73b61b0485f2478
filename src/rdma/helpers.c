// SPDX-License-Identifier: GPL-2.0
/*
 * rroce C helpers: wrappers for static inline functions Rust cannot call.
 */
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <linux/workqueue.h>
#include <linux/delay.h>
#include <linux/moduleparam.h>
#include <linux/cpumask.h>
#include <linux/cpu.h>
#include <linux/kthread.h>
#include <linux/llist.h>
#include <linux/sched.h>
#include <linux/skbuff.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/highmem.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/ip.h>
#include <linux/random.h>
#include <linux/uaccess.h>
#include <linux/if_vlan.h>
#include <net/ipv6.h>
#include <net/if_inet6.h>
#include <net/dst_cache.h>
#include <net/ip6_route.h>
#include <net/route.h>
#include <net/udp.h>
#include <net/ip6_checksum.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <linux/hmm.h>
#include <rdma/restrack.h>
#include <linux/crc32.h>
#include <rdma/rdma_netlink.h>
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

static ssize_t parent_show(struct device *device, struct device_attribute *attr, char *buf)
{
	struct ib_device *ibdev = rdma_device_to_ibdev(device);
	struct net_device *ndev = ib_device_get_netdev(ibdev, 1);
	ssize_t n;

	if (!ndev)
		return -ENODEV;
	n = sysfs_emit(buf, "%s\n", netdev_name(ndev));
	dev_put(ndev);
	return n;
}
static DEVICE_ATTR_RO(parent);

static struct attribute *rroce_attrs[] = {
	&dev_attr_parent.attr,
	NULL,
};

const struct attribute_group rroce_helper_attr_group = {
	.attrs = rroce_attrs,
};

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

void rroce_helper_ib_device_hold(struct ib_device *dev)
{
	get_device(&dev->dev);
}

void rroce_helper_ib_device_unhold(struct ib_device *dev)
{
	put_device(&dev->dev);
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

struct net_device *rroce_helper_init_net_loopback(void)
{
	return init_net.loopback_dev;
}

/* ---- RoCEv2 over UDP: sockets, packets, routes ---------------------------
 * The packet layout, ICRC and all transport logic are in Rust; these wrap the
 * static inlines of the networking headers, following rdma_rxe's rxe_net.c.
 */

struct sock *rroce_helper_udp_sock(struct net *net, bool ipv6, rroce_encap_rcv_fn rcv,
				   int *err)
{
	struct udp_port_cfg udp_cfg = {};
	struct udp_tunnel_sock_cfg tnl_cfg = {};
	struct socket *sock;

	if (ipv6) {
		udp_cfg.family = AF_INET6;
		udp_cfg.ipv6_v6only = 1;
	} else {
		udp_cfg.family = AF_INET;
	}
	udp_cfg.local_udp_port = htons(ROCE_V2_UDP_DPORT);
	*err = udp_sock_create(net, &udp_cfg, &sock);
	if (*err < 0)
		return NULL;
	tnl_cfg.encap_type = 1;
	tnl_cfg.encap_rcv = rcv;
	setup_udp_tunnel_sock(net, sock->sk, &tnl_cfg);
	return sock->sk;
}

void rroce_helper_udp_sock_release(struct sock *sk)
{
	udp_tunnel_sock_release(sk);
}

struct net *rroce_helper_dev_net(struct net_device *ndev)
{
	return dev_net(ndev);
}

void rroce_helper_synchronize_rcu(void)
{
	synchronize_rcu();
}

static bool rroce_rx_frags_mapped(const struct sk_buff *skb, u32 max)
{
	const struct skb_shared_info *sh = skb_shinfo(skb);
	u32 i;

	if (skb_has_frag_list(skb) || sh->nr_frags > max)
		return false;
	for (i = 0; i < sh->nr_frags; i++)
		if (!skb_frag_address_safe(&sh->frags[i]))
			return false;
	return true;
}

int rroce_helper_rx_skb(struct sk_buff *skb, u32 pull, u32 max_frags, struct net_device **ndev,
			u8 **l3, u32 *l3_len)
{
	if (!skb_frags_readable(skb))
		return -EIO;
	if (!pskb_may_pull(skb, min(pull, skb->len)))
		return -ENOMEM;
	if (skb_is_nonlinear(skb) && !rroce_rx_frags_mapped(skb, max_frags) && skb_linearize(skb))
		return -ENOMEM;
	*ndev = skb->dev;
	*l3 = skb_network_header(skb);
	*l3_len = skb_tail_pointer(skb) - skb_network_header(skb);
	return skb_shinfo(skb)->nr_frags;
}

void rroce_helper_rx_frags(struct sk_buff *skb, struct rroce_piece *pieces, u32 n)
{
	const struct skb_shared_info *sh = skb_shinfo(skb);
	u32 i;

	for (i = 0; i < n && i < sh->nr_frags; i++) {
		pieces[i].data = skb_frag_address(&sh->frags[i]);
		pieces[i].len = skb_frag_size(&sh->frags[i]);
	}
}

void rroce_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void rroce_helper_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

struct sk_buff *rroce_helper_tx_alloc(struct net_device *ndev, bool ipv6, u32 len, u32 room,
				      u8 **data)
{
	unsigned int hdr = ETH_HLEN + sizeof(struct udphdr) +
			   (ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	struct sk_buff *skb = alloc_skb(len + room + hdr + LL_RESERVED_SPACE(ndev), GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, hdr + LL_RESERVED_SPACE(ndev));
	/* No skb->dev (and no reference) while the packet waits on its QP:
	 * rroce_helper_tx_prepare() sets it from the netdev live then. */
	skb->protocol = ipv6 ? htons(ETH_P_IPV6) : htons(ETH_P_IP);
	*data = skb_put(skb, len);
	return skb;
}

/*
 * tx_zerocopy: a packet of an RC request whose payload (a page or more)
 * lies in a user MR carries that payload as page fragments of the MR's
 * pinned pages instead of a copy. Off by default: between two devices on
 * one host it gained on some rows and lost on others (Documentation/
 * benchmark.rst, "Payloads sent from the MR's pages").
 */
static bool tx_zerocopy;
module_param(tx_zerocopy, bool, 0644);
MODULE_PARM_DESC(tx_zerocopy,
		 "send RC request payloads from user MRs' pages without copying them (default: off)");

bool rroce_helper_tx_zerocopy(struct net_device *ndev)
{
	/* Fragments are read through their kernel address (the ICRC). */
	return !IS_ENABLED(CONFIG_HIGHMEM) && READ_ONCE(tx_zerocopy) &&
	       (READ_ONCE(ndev->features) & NETIF_F_SG);
}

int rroce_helper_skb_add_page(struct sk_buff *skb, struct page *page, u32 off, u32 len)
{
	struct skb_shared_info *sh = skb_shinfo(skb);
	int i = sh->nr_frags;

	/* One fragment stays free for the trailer. */
	if (i >= MAX_SKB_FRAGS - 1 || !len)
		return -EMSGSIZE;
	get_page(page);
	skb_fill_page_desc_noacc(skb, i, page, off, len);
	skb->len += len;
	skb->data_len += len;
	skb->truesize += len;
	/* The page is the user's, who may write it: whoever would change the
	 * packet in place copies it first. */
	sh->flags |= SKBFL_SHARED_FRAG;
	return 0;
}

int rroce_helper_skb_add_tail(struct sk_buff *skb, u32 len, u8 **data)
{
	struct skb_shared_info *sh = skb_shinfo(skb);
	int i = sh->nr_frags;
	struct page *page;
	void *p;

	if (i >= MAX_SKB_FRAGS || !len)
		return -EMSGSIZE;
	p = netdev_alloc_frag(len);
	if (!p)
		return -ENOMEM;
	memset(p, 0, len);
	page = virt_to_head_page(p);
	skb_fill_page_desc(skb, i, page, p - page_address(page), len);
	skb->len += len;
	skb->data_len += len;
	skb->truesize += SKB_DATA_ALIGN(len);
	*data = p;
	return 0;
}

u32 rroce_helper_nr_frags(struct sk_buff *skb)
{
	return skb_shinfo(skb)->nr_frags;
}

u32 rroce_helper_skb_len(struct sk_buff *skb)
{
	return skb->len;
}

void rroce_helper_run_chain(struct sk_buff *head, struct sk_buff *tail, struct sk_buff *pkt)
{
	if (tail)
		tail->next = pkt;
	else
		skb_shinfo(head)->frag_list = pkt;
	pkt->next = NULL;
	head->len += pkt->len;
	head->data_len += pkt->len;
	head->truesize += pkt->truesize;
}

struct sk_buff *rroce_helper_run_next(struct sk_buff *head, struct sk_buff *skb, u32 hdr_room,
				      u8 **hdr, u8 **data, u32 *len)
{
	skb = skb ? skb->next : skb_shinfo(head)->frag_list;
	*hdr = NULL;
	if (!skb)
		return NULL;
	*data = skb->data;
	*len = skb_headlen(skb);
	/* The packet's IP and UDP headers go in the @hdr_room bytes in front
	 * of it (where UDP GRO leaves them and skb_segment_list() expects
	 * them); the caller writes them. */
	if (hdr_room >= sizeof(struct udphdr) && skb_headroom(skb) >= hdr_room) {
		skb_set_network_header(skb, -(int)hdr_room);
		skb_set_transport_header(skb, -(int)sizeof(struct udphdr));
		*hdr = skb_network_header(skb);
	}
	return skb;
}

u32 rroce_helper_netdev_gso_max(struct net_device *ndev)
{
	if (!(READ_ONCE(ndev->features) & NETIF_F_GSO_UDP_L4) ||
	    READ_ONCE(ndev->gso_max_segs) < 32)
		return 0;
	/* Room for the IP and UDP headers within the IPv4 total length. */
	return min3(READ_ONCE(ndev->gso_max_size), READ_ONCE(ndev->gso_ipv4_max_size),
		    GSO_LEGACY_MAX_SIZE - 1 - sizeof(struct ipv6hdr) - sizeof(struct udphdr));
}

struct rroce_route {
	struct dst_cache cache;
};

struct rroce_route *rroce_helper_route_cache_new(void)
{
	struct rroce_route *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (r && dst_cache_init(&r->cache, GFP_KERNEL)) {
		kfree(r);
		r = NULL;
	}
	return r;
}

void rroce_helper_route_cache_free(struct rroce_route *r)
{
	if (!r)
		return;
	dst_cache_destroy(&r->cache);
	kfree(r);
}

void rroce_helper_route_cache_reset(struct rroce_route *r)
{
	if (r)
		dst_cache_reset(&r->cache);
}

static struct dst_entry *rroce_route4(struct net *net, struct net_device *ndev,
				      __be32 saddr, __be32 daddr, struct rroce_route *route)
{
	struct flowi4 fl = {};
	struct rtable *rt;

	if (route) {
		__be32 cached_saddr = 0;

		/* The per-CPU cache is taken with bottom halves off. */
		local_bh_disable();
		rt = dst_cache_get_ip4(&route->cache, &cached_saddr);
		local_bh_enable();
		if (rt && cached_saddr == saddr)
			return &rt->dst;
		if (rt)
			ip_rt_put(rt);
	}
	fl.flowi4_oif = ndev->ifindex;
	fl.saddr = saddr;
	fl.daddr = daddr;
	fl.flowi4_proto = IPPROTO_UDP;
	rt = ip_route_output_key(net, &fl);
	if (IS_ERR(rt))
		return NULL;
	if (route) {
		local_bh_disable();
		dst_cache_set_ip4(&route->cache, &rt->dst, saddr);
		local_bh_enable();
	}
	return &rt->dst;
}

static struct dst_entry *rroce_route6(struct net *net, struct net_device *ndev,
				      const struct in6_addr *saddr,
				      const struct in6_addr *daddr, struct rroce_route *route)
{
	struct flowi6 fl6 = {};
	struct dst_entry *dst;

	if (route) {
		struct in6_addr cached_saddr = {};

		local_bh_disable();
		dst = dst_cache_get_ip6(&route->cache, &cached_saddr);
		local_bh_enable();
		if (dst && ipv6_addr_equal(&cached_saddr, saddr))
			return dst;
		if (dst)
			dst_release(dst);
	}
	fl6.flowi6_oif = ndev->ifindex;
	fl6.saddr = *saddr;
	fl6.daddr = *daddr;
	fl6.flowi6_proto = IPPROTO_UDP;
	dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
	if (IS_ERR(dst))
		return NULL;
	if (dst->error) {
		dst_release(dst);
		return NULL;
	}
	if (route) {
		local_bh_disable();
		dst_cache_set_ip6(&route->cache, dst, saddr);
		local_bh_enable();
	}
	return dst;
}

int rroce_helper_tx_prepare(struct sk_buff *skb, struct net_device *ndev, bool ipv6,
			    const u8 *sgid, const u8 *dgid, u16 sport, u8 tclass, u8 ttl,
			    struct rroce_route *route, u32 gso_size, u32 gso_segs, u8 **l3,
			    u32 *l3_len)
{
	struct net *net = dev_net(ndev);
	struct dst_entry *dst;
	struct udphdr *udph;

	/* A run's first packet is the skb's linear data and page fragments
	 * (skb_pagelen), the others its frag list (before the route: nothing
	 * to give back yet). */
	if (gso_segs > 1 && (!skb_has_frag_list(skb) || skb_pagelen(skb) != gso_size))
		return -EINVAL;
	skb->dev = ndev;

	if (ipv6)
		dst = rroce_route6(net, skb->dev, (const struct in6_addr *)sgid,
				   (const struct in6_addr *)dgid, route);
	else
		dst = rroce_route4(net, skb->dev, *(const __be32 *)(sgid + 12),
				   *(const __be32 *)(dgid + 12), route);
	if (!dst)
		return -EHOSTUNREACH;

	__skb_push(skb, sizeof(*udph));
	skb_reset_transport_header(skb);
	udph = udp_hdr(skb);
	udph->dest = htons(ROCE_V2_UDP_DPORT);
	udph->source = htons(sport);
	udph->len = htons(skb->len);
	udph->check = 0;
	if (gso_segs > 1) {
		skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
		skb_shinfo(skb)->gso_size = gso_size;
		skb_shinfo(skb)->gso_segs = gso_segs;
		/* No UDP checksum, as for a single packet (the ICRC covers the
		 * packet); UNNECESSARY, not NONE: on output the same, and the
		 * segmentation's checks accept it. */
		skb->ip_summed = CHECKSUM_UNNECESSARY;
	}

	if (ipv6) {
		struct ipv6hdr *ip6h;

		memset(&(IPCB(skb)->opt), 0, sizeof(IPCB(skb)->opt));
		IPCB(skb)->flags &= ~(IPSKB_XFRM_TUNNEL_SIZE | IPSKB_XFRM_TRANSFORMED |
				      IPSKB_REROUTED);
		skb_dst_set(skb, dst);
		__skb_push(skb, sizeof(*ip6h));
		skb_reset_network_header(skb);
		ip6h = ipv6_hdr(skb);
		ip6_flow_hdr(ip6h, tclass, htonl(0));
		ip6h->nexthdr = IPPROTO_UDP;
		ip6h->hop_limit = ttl;
		memcpy(&ip6h->saddr, sgid, 16);
		memcpy(&ip6h->daddr, dgid, 16);
		ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
	} else {
		struct iphdr *iph;

		skb_scrub_packet(skb, false);
		skb_clear_hash(skb);
		skb_dst_set(skb, dst);
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		skb_push(skb, sizeof(struct iphdr));
		skb_reset_network_header(skb);
		iph = ip_hdr(skb);
		iph->version = IPVERSION;
		iph->ihl = sizeof(struct iphdr) >> 2;
		iph->tot_len = htons(skb->len);
		iph->frag_off = htons(IP_DF);
		iph->protocol = IPPROTO_UDP;
		iph->tos = tclass;
		memcpy(&iph->saddr, sgid + 12, 4);
		memcpy(&iph->daddr, dgid + 12, 4);
		iph->ttl = ttl;
		__ip_select_ident(net, iph, skb_shinfo(skb)->gso_segs ?: 1);
		/* ip_local_out() fills in the header checksum after the ICRC,
		 * which masks it; until then it reads as zero, not as whatever
		 * the headroom held (the ICRC and each GSO segment's headers
		 * are computed from a copy of this header). */
		iph->check = 0;
	}
	*l3 = skb_network_header(skb);
	*l3_len = skb_tail_pointer(skb) - skb_network_header(skb);
	return 0;
}

int rroce_helper_tx_send(struct sk_buff *skb)
{
	struct net *net = dev_net(skb_dst(skb)->dev);

	if (skb->protocol == htons(ETH_P_IP))
		return ip_local_out(net, NULL, skb);
	return ip6_local_out(net, NULL, skb);
}

/* ---- memory --------------------------------------------------------------*/

unsigned long rroce_helper_umem_pages(struct ib_umem *umem, struct page **pages,
				      unsigned long max)
{
	struct sg_page_iter iter;
	unsigned long n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&iter);
	}
	return n;
}

unsigned long rroce_helper_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

unsigned long rroce_helper_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

void rroce_helper_page_copy(struct page *page, unsigned int off, void *buf, unsigned int len,
			    bool to_page)
{
	void *va = kmap_local_page(page);

	if (to_page)
		memcpy(va + off, buf, len);
	else
		memcpy(buf, va + off, len);
	kunmap_local(va);
}

/* ---- timers ---------------------------------------------------------------*/

struct rroce_timer {
	struct timer_list timer;
	rroce_timer_fn fn;
	void *ctx;
};

static void rroce_timer_cb(struct timer_list *t)
{
	struct rroce_timer *rt = container_of(t, struct rroce_timer, timer);

	rt->fn(rt->ctx);
}

struct rroce_timer *rroce_helper_timer_new(rroce_timer_fn fn, void *ctx)
{
	struct rroce_timer *rt = kzalloc(sizeof(*rt), GFP_KERNEL);

	if (!rt)
		return NULL;
	rt->fn = fn;
	rt->ctx = ctx;
	timer_setup(&rt->timer, rroce_timer_cb, 0);
	return rt;
}

void rroce_helper_timer_arm_us(struct rroce_timer *rt, unsigned long usecs)
{
	mod_timer(&rt->timer, jiffies + max(usecs_to_jiffies(usecs), 1UL));
}

u32 rroce_helper_jiffies_ms(void)
{
	return jiffies_to_msecs(jiffies);
}

bool rroce_helper_timer_pending(struct rroce_timer *rt)
{
	return timer_pending(&rt->timer);
}

void rroce_helper_timer_cancel(struct rroce_timer *rt)
{
	timer_delete(&rt->timer);
}

void rroce_helper_timer_shutdown(struct rroce_timer *rt)
{
	if (rt)
		timer_shutdown_sync(&rt->timer);
}

void rroce_helper_timer_free(struct rroce_timer *rt)
{
	kfree(rt);
}

bool rroce_helper_queue_work(struct work_struct *work)
{
	return queue_work(system_highpri_wq, work);
}

/*
 * A connected QP's packets leave from one CPU while its requests are
 * unacknowledged: a virtual link (veth, loopback) queues each packet on
 * the backlog of the CPU that sent it, so packets of one QP sent from two
 * CPUs can reach the peer out of order, and every reordering costs a
 * sequence NAK and a go-back-N retransmission.
 */
static bool tx_keep_cpu = true;
module_param(tx_keep_cpu, bool, 0644);
MODULE_PARM_DESC(tx_keep_cpu,
		 "send a QP's packets from one CPU while its requests are in flight (default: on)");

/*
 * The CPU a QP whose packets last left from @home sends from now, if not
 * this one (-1: send here). @home is U32_MAX when the QP has sent nothing.
 */
int rroce_helper_tx_elsewhere(u32 home)
{
	if (!READ_ONCE(tx_keep_cpu) || home >= nr_cpu_ids ||
	    home == raw_smp_processor_id() || !cpu_online(home))
		return -1;
	return home;
}

bool rroce_helper_queue_work_on(u32 cpu, struct work_struct *work)
{
	return queue_work_on(cpu, system_highpri_wq, work);
}

bool rroce_helper_cancel_work_sync(struct work_struct *work)
{
	return cancel_work_sync(work);
}

/* Whether sending now would run with bottom halves or interrupts off (the
 * receive side of a veth then only queues, up to netdev_max_backlog). */
bool rroce_helper_in_atomic_bh(void)
{
	return in_softirq() || in_hardirq() || irqs_disabled();
}

void rroce_helper_preempt_disable(void)
{
	preempt_disable();
}

void rroce_helper_preempt_enable(void)
{
	preempt_enable();
}

/* Sending through the IP stack enables bottom halves, which must not
 * happen with interrupts off (a caller holding an irqsave lock, such as
 * the MAD layer around ib_post_send). */
bool rroce_helper_irqs_off(void)
{
	return in_hardirq() || irqs_disabled();
}

/* Random bits for MR key bytes. */
u32 rroce_helper_random_u32(void)
{
	return get_random_u32();
}

/* Copies between a kernel buffer and a kernel address a DMA MR names,
 * without faulting: -EFAULT if the address is not mapped kernel memory, 0
 * on success. Reads go through copy_from_kernel_nofault(); modules have no
 * copy_to_kernel_nofault(), so writes go only to the linear map (what a
 * kernel buffer's DMA address is on rroce), checked page by page.
 */
int rroce_helper_copy_kernel_nofault(void *buf, unsigned long addr, size_t len, bool to_addr)
{
	unsigned long p, last;

	if (!to_addr)
		return copy_from_kernel_nofault(buf, (const void *)addr, len) ? -EFAULT : 0;
	if (!len)
		return 0;
	if (check_add_overflow(addr, len - 1, &last))
		return -EFAULT;
	for (p = addr & PAGE_MASK;; p += PAGE_SIZE) {
		if (p < PAGE_OFFSET || p >= (unsigned long)high_memory ||
		    !virt_addr_valid((void *)p))
			return -EFAULT;
		if (p >= (last & PAGE_MASK))
			break;
	}
	memcpy((void *)addr, buf, len);
	return 0;
}

/* Whether a received packet's netdev is a loopback device (a packet to a
 * local address), and the real device under a VLAN device (or NULL).
 */
bool rroce_helper_netdev_is_loopback(struct net_device *ndev)
{
	return ndev->flags & IFF_LOOPBACK;
}

struct net_device *rroce_helper_vlan_real_dev(struct net_device *ndev)
{
	return is_vlan_dev(ndev) ? vlan_dev_real_dev(ndev) : NULL;
}

#if IS_ENABLED(CONFIG_KUNIT)
/*
 * Test builds only (the module built without KUnit has no such parameter):
 * how long dealloc_driver sleeps at its end, so that tests/vm can unload the
 * module while the RDMA core is still inside that callback for a device whose
 * unregistration it queued (a netdev went away). Unload must wait for it.
 */
static unsigned int test_dealloc_delay_ms;
module_param(test_dealloc_delay_ms, uint, 0644);
MODULE_PARM_DESC(test_dealloc_delay_ms, "test builds: sleep this long at the end of dealloc_driver");

void rroce_helper_test_dealloc_delay(void)
{
	unsigned int ms = READ_ONCE(test_dealloc_delay_ms);

	if (!ms)
		return;
	pr_info("rroce: test: dealloc_driver sleeps %u ms\n", ms);
	msleep(ms);
	pr_info("rroce: test: dealloc_driver slept %u ms\n", ms);
}

int rroce_helper_test_sg_map(struct ib_device *dev, struct scatterlist *sg, void *buf,
			     unsigned int len)
{
	sg_init_one(sg, buf, len);
	return ib_dma_map_sg(dev, sg, 1, DMA_BIDIRECTIONAL) == 1 ? 0 : -EIO;
}

void rroce_helper_test_sg_unmap(struct ib_device *dev, struct scatterlist *sg)
{
	ib_dma_unmap_sg(dev, sg, 1, DMA_BIDIRECTIONAL);
}

struct sk_buff *rroce_helper_test_rx_skb(const u8 *pkt, u32 len, u32 l3_len, u32 linear,
					 u32 frag, bool frag_list)
{
	struct sk_buff *skb, *list;
	u32 at;

	if (linear < l3_len || linear > len || !frag)
		return NULL;
	skb = alloc_skb(linear, GFP_KERNEL);
	if (!skb)
		return NULL;
	skb_put_data(skb, pkt, linear);
	skb_reset_network_header(skb);
	skb->dev = init_net.loopback_dev;
	if (frag_list && linear < len) {
		list = alloc_skb(len - linear, GFP_KERNEL);
		if (!list)
			goto fail;
		skb_put_data(list, pkt + linear, len - linear);
		skb_shinfo(skb)->frag_list = list;
		skb->len += list->len;
		skb->data_len += list->len;
		skb->truesize += list->truesize;
		linear = len;
	}
	for (at = linear; at < len; at += frag) {
		u32 n = min(frag, len - at);
		struct page *page;

		if (skb_shinfo(skb)->nr_frags >= MAX_SKB_FRAGS)
			goto fail;
		page = alloc_page(GFP_KERNEL);
		if (!page)
			goto fail;
		/* Off the start of the page, as a NIC's buffer may be. */
		memcpy(page_address(page) + 64, pkt + at, n);
		skb_add_rx_frag(skb, skb_shinfo(skb)->nr_frags, page, 64, n, PAGE_SIZE);
	}
	/* Data at the UDP header, as a tunnel's encap_rcv gets it. */
	__skb_pull(skb, l3_len);
	skb_reset_transport_header(skb);
	return skb;
fail:
	kfree_skb(skb);
	return NULL;
}

int rroce_helper_test_run_on(int cpu)
{
	if (cpu < 0)
		return set_cpus_allowed_ptr(current, cpu_possible_mask);
	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	return set_cpus_allowed_ptr(current, cpumask_of(cpu));
}
#endif

/* ---- multicast ------------------------------------------------------------*/

int rroce_helper_mc_mac(struct net_device *ndev, const u8 *gid, bool add)
{
	unsigned char mac[ETH_ALEN];

	if (ipv6_addr_v4mapped((const struct in6_addr *)gid))
		ip_eth_mc_map(*(const __be32 *)(gid + 12), mac);
	else
		ipv6_eth_mc_map((const struct in6_addr *)gid, mac);
	return add ? dev_mc_add(ndev, mac) : dev_mc_del(ndev, mac);
}

/* ---- on-demand paging ------------------------------------------------------
 *
 * An ODP MR's pages are the process's, not pinned: the RDMA core faults them
 * in (hmm_range_fault) and its MMU interval notifier tells us when they go.
 * rroce's transport copies in any context (softirq, under the QP lock), so
 * it never faults: it copies only pages published in @ready (@ready_w for
 * writing) and otherwise gets -EAGAIN, and the QP's work item faults them
 * in (rroce_helper_odp_fault, process context) for the next try.
 *
 * @lock orders the two: a copy holds it while it reads the pages, the
 * notifier takes it to unpublish pages before they go, a fault takes it to
 * publish what it mapped (under the core's umem_mutex, after its sequence
 * check).
 */
bool rroce_helper_odp_enabled(void)
{
	return IS_ENABLED(CONFIG_INFINIBAND_ON_DEMAND_PAGING);
}

#if IS_ENABLED(CONFIG_INFINIBAND_ON_DEMAND_PAGING)
struct rroce_odp {
	struct ib_umem_odp *umem;
	spinlock_t lock;
	unsigned long start;	/* ib_umem_start(): page 0 */
	unsigned long npages;	/* PAGE_SIZE pages */
	unsigned long *ready;
	unsigned long *ready_w;
};

/* Publishes what umem->map.pfn_list says of pages [first, first + n). */
static void rroce_odp_publish(struct rroce_odp *o, unsigned long first, unsigned long n)
{
	unsigned long flags, i;

	spin_lock_irqsave(&o->lock, flags);
	for (i = first; i < first + n && i < o->npages; i++) {
		unsigned long pfn = READ_ONCE(o->umem->map.pfn_list[i]);

		if (pfn & HMM_PFN_VALID) {
			__set_bit(i, o->ready);
			if (pfn & HMM_PFN_WRITE)
				__set_bit(i, o->ready_w);
		}
	}
	spin_unlock_irqrestore(&o->lock, flags);
}

static bool rroce_odp_invalidate(struct mmu_interval_notifier *mni,
				 const struct mmu_notifier_range *range, unsigned long cur_seq)
{
	struct ib_umem_odp *umem = container_of(mni, struct ib_umem_odp, notifier);
	struct rroce_odp *o = umem->private;
	unsigned long start, end, flags;

	if (!mmu_notifier_range_blockable(range))
		return false;
	mutex_lock(&umem->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	start = max(ib_umem_start(umem), range->start);
	end = min(ib_umem_end(umem), range->end);
	if (start < end) {
		if (o) {
			unsigned long first = (start - o->start) >> PAGE_SHIFT;
			unsigned long last = (end - 1 - o->start) >> PAGE_SHIFT;

			spin_lock_irqsave(&o->lock, flags);
			bitmap_clear(o->ready, first, last - first + 1);
			bitmap_clear(o->ready_w, first, last - first + 1);
			spin_unlock_irqrestore(&o->lock, flags);
		}
		ib_umem_odp_unmap_dma_pages(umem, start, end);
	}
	mutex_unlock(&umem->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops rroce_odp_ops = {
	.invalidate = rroce_odp_invalidate,
};

struct rroce_odp *rroce_helper_odp_get(struct ib_device *dev, unsigned long start,
				       size_t len, int access)
{
	struct rroce_odp *o = kzalloc(sizeof(*o), GFP_KERNEL);
	struct ib_umem_odp *umem;
	int np;

	if (!o)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&o->lock);
	umem = ib_umem_odp_get(dev, start, len, access, &rroce_odp_ops);
	if (IS_ERR(umem)) {
		kfree(o);
		return ERR_CAST(umem);
	}
	o->umem = umem;
	o->start = ib_umem_start(umem);
	o->npages = (ib_umem_end(umem) - o->start) >> PAGE_SHIFT;
	o->ready = bitmap_zalloc(o->npages, GFP_KERNEL);
	o->ready_w = bitmap_zalloc(o->npages, GFP_KERNEL);
	if (!o->ready || !o->ready_w) {
		bitmap_free(o->ready);
		bitmap_free(o->ready_w);
		ib_umem_release(&umem->umem);
		kfree(o);
		return ERR_PTR(-ENOMEM);
	}
	mutex_lock(&umem->umem_mutex);
	umem->private = o;
	mutex_unlock(&umem->umem_mutex);
	/* What is already present is published now (no fault), as rxe. */
	np = ib_umem_odp_map_dma_and_lock(umem, start, len, 0, false);
	if (np >= 0) {
		rroce_odp_publish(o, 0, o->npages);
		mutex_unlock(&umem->umem_mutex);
	}
	return o;
}

void rroce_helper_odp_release(struct rroce_odp *o)
{
	/* Removes the notifier: no invalidation runs after this. */
	ib_umem_release(&o->umem->umem);
	bitmap_free(o->ready);
	bitmap_free(o->ready_w);
	kfree(o);
}

int rroce_helper_odp_fault(struct rroce_odp *o, u64 addr, u64 len, bool write)
{
	struct ib_umem_odp *umem = o->umem;
	int np;

	if (!len)
		return 0;
	if (write && !umem->umem.writable)
		return -EPERM;
	np = ib_umem_odp_map_dma_and_lock(umem, addr, len, write ? HMM_PFN_WRITE : 0, true);
	if (np < 0)
		return np;
	rroce_odp_publish(o, (ALIGN_DOWN(addr, PAGE_SIZE) - o->start) >> PAGE_SHIFT,
			  (ALIGN(addr + len, PAGE_SIZE) - ALIGN_DOWN(addr, PAGE_SIZE)) >> PAGE_SHIFT);
	mutex_unlock(&umem->umem_mutex);
	return 0;
}

int rroce_helper_odp_copy(struct rroce_odp *o, u64 addr, void *buf, size_t len, bool to_mem)
{
	unsigned long first, last, i, flags;
	unsigned long *need = to_mem ? o->ready_w : o->ready;
	size_t done = 0;

	if (!len)
		return 0;
	if (addr < o->start || addr + len < addr ||
	    addr + len > o->start + (o->npages << PAGE_SHIFT))
		return -EFAULT;
	first = (addr - o->start) >> PAGE_SHIFT;
	last = (addr + len - 1 - o->start) >> PAGE_SHIFT;
	spin_lock_irqsave(&o->lock, flags);
	for (i = first; i <= last; i++) {
		if (!test_bit(i, need)) {
			spin_unlock_irqrestore(&o->lock, flags);
			return -EAGAIN;
		}
	}
	for (i = first; i <= last; i++) {
		struct page *page = hmm_pfn_to_page(READ_ONCE(o->umem->map.pfn_list[i]));
		size_t off = (addr + done) & ~PAGE_MASK;
		size_t n = min_t(size_t, PAGE_SIZE - off, len - done);
		u8 *va = kmap_local_page(page);

		if (to_mem)
			memcpy(va + off, (u8 *)buf + done, n);
		else
			memcpy((u8 *)buf + done, va + off, n);
		kunmap_local(va);
		done += n;
	}
	spin_unlock_irqrestore(&o->lock, flags);
	return 0;
}
#else /* !CONFIG_INFINIBAND_ON_DEMAND_PAGING: the device offers no ODP */
struct rroce_odp *rroce_helper_odp_get(struct ib_device *dev, unsigned long start,
				       size_t len, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

void rroce_helper_odp_release(struct rroce_odp *o)
{
}

int rroce_helper_odp_fault(struct rroce_odp *o, u64 addr, u64 len, bool write)
{
	return -EOPNOTSUPP;
}

int rroce_helper_odp_copy(struct rroce_odp *o, u64 addr, void *buf, size_t len, bool to_mem)
{
	return -EFAULT;
}
#endif

int rroce_helper_put_driver_u32s(struct sk_buff *msg, const char *const *names,
				 const u32 *values, size_t n)
{
	struct nlattr *table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	size_t i;

	if (!table)
		return -EMSGSIZE;
	for (i = 0; i < n; i++) {
		if (rdma_nl_put_driver_u32(msg, names[i], values[i])) {
			nla_nest_cancel(msg, table);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(msg, table);
	return 0;
}

u32 rroce_helper_crc32_le(u32 crc, const void *p, size_t len)
{
	return crc32_le(crc, p, len);
}

bool rroce_helper_crc32_le_fast(void)
{
	return crc32_optimizations() & CRC32_LE_OPTIMIZATION;
}

/*
 * Receive hand-over (net/rxq.rs, engine/handover.rs): a real-time kthread
 * worker per CPU that was online when the module's first UDP socket pair
 * was made, each draining its own queue of received packets with bottom
 * halves disabled, as the softirq that received them would have. A
 * real-time thread (the lowest FIFO priority) runs as soon as it is woken,
 * also on a CPU where a process busy-polls a mapped CQ and never enters
 * the kernel (a normal-priority one waits for the tick there).
 *
 * A CPU taken offline keeps its worker, which the scheduler then runs
 * elsewhere (it is handed nothing while offline); a CPU brought online
 * later has none: it hands packets over to the next CPU that has one, but
 * is handed none itself.
 *
 * The threads run at the lowest real-time priority: while a stream keeps
 * one busy, normal tasks on its CPU get only what the real-time throttle
 * (sched_rt_runtime_us) leaves them, as with softirq work under load
 * before ksoftirqd takes it over.
 */
static bool rx_handover = true;
module_param(rx_handover, bool, 0644);
MODULE_PARM_DESC(rx_handover,
		 "process large received packets on another CPU's receive thread (default: on)");

/*
 * rx_handover_reads weighs a READ request by the responses it asks for, so
 * that a large READ is answered on another CPU than the one its responses
 * return to (src/engine/handover.rs, weight()).
 */
static bool rx_handover_reads = true;
module_param(rx_handover_reads, bool, 0644);
MODULE_PARM_DESC(rx_handover_reads,
		 "hand a large READ request to another CPU's receive thread, as its responses' size (default: on)");

bool rroce_helper_rx_handover_reads(void)
{
	return READ_ONCE(rx_handover_reads);
}

/*
 * tx_ack_at_tail asks for one ACK per requester pass, on its last request
 * packet, instead of one per message (src/engine/rc/window.rs,
 * ask_at_tail()).
 */
static bool tx_ack_at_tail = true;
module_param(tx_ack_at_tail, bool, 0644);
MODULE_PARM_DESC(tx_ack_at_tail,
		 "RC: ask for one ACK per batch of messages sent together, not one per message (default: on)");

bool rroce_helper_tx_ack_at_tail(void)
{
	return READ_ONCE(tx_ack_at_tail);
}

/* At most this many packets wait on one CPU's thread (netdev_max_backlog's
 * default); more are dropped, and counted on their device, as the backlog
 * does. */
#define RROCE_RXQ_MAX 1000
/* Packets processed between two chances for softirqs and other threads. */
#define RROCE_RXQ_BATCH 64

struct rroce_rxq {
	struct kthread_worker *worker;
	struct kthread_work work;
	/* Packets queued here, newest first (skb->ll_node): lock-free, since
	 * every CPU's softirq queues here and the thread takes them all at
	 * once. The packet that finds the list empty queues the work; until
	 * the work takes the list, later packets find it non-empty and that
	 * work still to run. */
	struct llist_head rx;
	/* Packets on @rx: at most RROCE_RXQ_MAX. */
	atomic_t rx_len;
	/* jiffies when a request was last queued here. */
	unsigned long last_request;
	/* QPs whose transmit runs here (rroce_helper_rxq_kick()). */
	struct llist_head tx;
};

/* What a queued packet carries in its control block. */
struct rroce_rxq_cb {
	void *dev;
	void *qp;
	u32 role;
};

static DEFINE_MUTEX(rroce_rxq_lock);
/* nr_cpu_ids entries while started (written under rroce_rxq_lock, read
 * without it in softirq: an RCU-protected pointer). */
static struct rroce_rxq __rcu *rroce_rxqs;
static rroce_rxq_fn rroce_rxq_process;
static rroce_txq_fn rroce_rxq_transmit;

/* Takes every packet queued on @rq, oldest first. */
static struct llist_node *rroce_rxq_take(struct rroce_rxq *rq)
{
	struct llist_node *first = llist_del_all(&rq->rx);
	struct llist_node *n;
	int taken = 0;

	if (!first)
		return NULL;
	llist_for_each(n, first)
		taken++;
	atomic_sub(taken, &rq->rx_len);
	return llist_reverse_order(first);
}

/* Processes the packets from @first on, bottom halves disabled, with a
 * chance for softirqs and other threads every RROCE_RXQ_BATCH. */
static void rroce_rxq_drain(struct llist_node *first)
{
	struct sk_buff *skb, *next;
	unsigned int n = 0;

	local_bh_disable();
	llist_for_each_entry_safe(skb, next, first, ll_node) {
		struct rroce_rxq_cb *cb = (struct rroce_rxq_cb *)skb->cb;

		/* ll_node shares skb->next: a packet leaves the list clean. */
		skb->next = NULL;

		rroce_rxq_process(skb, cb->dev, cb->qp, cb->role);
		if (++n % RROCE_RXQ_BATCH == 0) {
			local_bh_enable();
			cond_resched();
			local_bh_disable();
		}
	}
	local_bh_enable();
}

/* One round: what is queued now, no more. A packet queued meanwhile queues
 * the work again, behind anything queued on the worker before it (a
 * flush, say), so a flush never waits for a stream to pause. */
static void rroce_rxq_work(struct kthread_work *work)
{
	struct rroce_rxq *rq = container_of(work, struct rroce_rxq, work);
	struct llist_node *tx, *next;

	rroce_rxq_drain(rroce_rxq_take(rq));
	/* Then the transmits kicked here, in the order they were kicked; one
	 * may kick itself here again while it runs (next is read first). */
	tx = llist_reverse_order(llist_del_all(&rq->tx));
	for (; tx; tx = next) {
		next = tx->next;
		rroce_rxq_transmit(tx);
		cond_resched();
	}
}

int rroce_helper_rxq_start(rroce_rxq_fn fn, rroce_txq_fn tx)
{
	struct rroce_rxq *qs;
	int cpu, started = 0;

	BUILD_BUG_ON(sizeof(struct rroce_rxq_cb) > sizeof_field(struct sk_buff, cb));
	mutex_lock(&rroce_rxq_lock);
	if (rcu_access_pointer(rroce_rxqs)) {
		mutex_unlock(&rroce_rxq_lock);
		return 0;
	}
	qs = kcalloc(nr_cpu_ids, sizeof(*qs), GFP_KERNEL);
	if (!qs) {
		mutex_unlock(&rroce_rxq_lock);
		return -ENOMEM;
	}
	rroce_rxq_process = fn;
	rroce_rxq_transmit = tx;
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct kthread_worker *w = kthread_create_worker_on_cpu(cpu, 0, "rroce_rx/%u");

		if (IS_ERR(w))
			continue;
		init_llist_head(&qs[cpu].rx);
		atomic_set(&qs[cpu].rx_len, 0);
		init_llist_head(&qs[cpu].tx);
		kthread_init_work(&qs[cpu].work, rroce_rxq_work);
		sched_set_fifo_low(w->task);
		wake_up_process(w->task);
		qs[cpu].worker = w;
		started++;
	}
	cpus_read_unlock();
	if (!started) {
		kfree(qs);
		mutex_unlock(&rroce_rxq_lock);
		return -ENOMEM;
	}
	rcu_assign_pointer(rroce_rxqs, qs);
	mutex_unlock(&rroce_rxq_lock);
	return 0;
}

void rroce_helper_rxq_stop(void)
{
	struct rroce_rxq *qs;
	int cpu;

	mutex_lock(&rroce_rxq_lock);
	qs = rcu_dereference_protected(rroce_rxqs, lockdep_is_held(&rroce_rxq_lock));
	if (!qs) {
		mutex_unlock(&rroce_rxq_lock);
		return;
	}
	RCU_INIT_POINTER(rroce_rxqs, NULL);
	/* No softirq still queues on the old array. */
	synchronize_rcu();
	for_each_possible_cpu(cpu) {
		if (!qs[cpu].worker)
			continue;
		/* Flushes (every queued packet is processed), then stops. */
		kthread_destroy_worker(qs[cpu].worker);
		/* Nothing can be left (nobody queues any more); were anything,
		 * it holds references that must go the usual way. */
		if (WARN_ON_ONCE(!llist_empty(&qs[cpu].rx)))
			rroce_rxq_drain(rroce_rxq_take(&qs[cpu]));
		/* Every QP is gone before the last socket pair. */
		WARN_ON_ONCE(!llist_empty(&qs[cpu].tx));
	}
	kfree(qs);
	mutex_unlock(&rroce_rxq_lock);
}

void rroce_helper_rxq_flush(void)
{
	struct rroce_rxq *qs;
	int cpu;

	mutex_lock(&rroce_rxq_lock);
	qs = rcu_dereference_protected(rroce_rxqs, lockdep_is_held(&rroce_rxq_lock));
	if (qs)
		for_each_possible_cpu(cpu)
			if (qs[cpu].worker)
				kthread_flush_worker(qs[cpu].worker);
	mutex_unlock(&rroce_rxq_lock);
}

bool rroce_helper_rxq_kick(u32 cpu, struct llist_node *node)
{
	struct rroce_rxq *qs;
	bool queued = false;

	rcu_read_lock();
	qs = rcu_dereference(rroce_rxqs);
	if (qs && cpu < nr_cpu_ids && qs[cpu].worker) {
		llist_add(node, &qs[cpu].tx);
		kthread_queue_work(qs[cpu].worker, &qs[cpu].work);
		queued = true;
	}
	rcu_read_unlock();
	return queued;
}

/*
 * The next online CPU after @cpu with a receive thread, or -1; at most one
 * round of them (@cpu may be going offline and out of the mask). Inside an
 * RCU read-side section that read @qs.
 */
static int rxq_next(struct rroce_rxq *qs, unsigned int cpu)
{
	unsigned int next = cpu, i;

	for (i = 0; i < nr_cpu_ids; i++) {
		next = cpumask_next_wrap(next, cpu_online_mask);
		if (next >= nr_cpu_ids || next == cpu)
			break;
		if (qs[next].worker)
			return next;
	}
	return -1;
}

/*
 * A process's doorbell that posts again without having polled a completion
 * since its last one, after a small message, streams small messages: with
 * tx_stream on it hands its QP's transmit to the next CPU's receive thread
 * instead of running the whole round trip inline (Documentation/benchmark.rst,
 * "Small messages").
 */
static bool tx_stream = true;
module_param(tx_stream, bool, 0644);
MODULE_PARM_DESC(tx_stream,
		 "send a stream of small messages from the next CPU's receive thread (default: on)");

/* The CPU a small stream's doorbell hands its transmit to, or -1. */
int rroce_helper_tx_stream_cpu(void)
{
	struct rroce_rxq *qs;
	unsigned int cpu;
	int other = -1;

	if (!READ_ONCE(tx_stream))
		return -1;
	/* Only a hint: the poster may move meanwhile. */
	cpu = raw_smp_processor_id();
	rcu_read_lock();
	qs = rcu_dereference(rroce_rxqs);
	if (qs)
		other = rxq_next(qs, cpu);
	rcu_read_unlock();
	return other;
}

/*
 * rx_ack_home hands a small response (an ACK) to a requester whose transmit
 * waits for it (its send window or READ/atomic limit full), arriving on a
 * CPU whose receive thread took a request within the last tick, to the
 * other CPU's thread, where the requester's consumer most likely polls
 * (src/engine/handover.rs, place(), rule 5). Off: such an ACK is
 * processed where it arrives.
 */
static bool rx_ack_home = true;
module_param(rx_ack_home, bool, 0644);
MODULE_PARM_DESC(rx_ack_home,
		 "hand an ACK its requester waits for, arriving beside the responder's receive thread, to the other CPU (default: on)");

void rroce_helper_rxq_where(u32 *here, int *other, bool *here_takes_requests)
{
	struct rroce_rxq *qs;
	unsigned int cpu = smp_processor_id();

	*here = cpu;
	*other = -1;
	*here_takes_requests = false;
	rcu_read_lock();
	qs = rcu_dereference(rroce_rxqs);
	if (!qs)
		goto out;
	if (qs[cpu].worker && READ_ONCE(rx_ack_home))
		*here_takes_requests =
			time_before_eq(jiffies, READ_ONCE(qs[cpu].last_request) + 1);
	if (!READ_ONCE(rx_handover))
		goto out;
	*other = rxq_next(qs, cpu);
out:
	rcu_read_unlock();
}

bool rroce_helper_rxq_queue(u32 cpu, struct sk_buff *skb, void *dev, void *qp, u32 role)
{
	struct rroce_rxq_cb *cb = (struct rroce_rxq_cb *)skb->cb;
	struct rroce_rxq *qs, *rq;
	bool queued = false;

	rcu_read_lock();
	qs = rcu_dereference(rroce_rxqs);
	if (!qs || cpu >= nr_cpu_ids)
		goto out;
	rq = &qs[cpu];
	if (!rq->worker)
		goto out;
	if (atomic_inc_return(&rq->rx_len) > RROCE_RXQ_MAX) {
		atomic_dec(&rq->rx_len);
		goto out;
	}
	/* The route is the receive path's (perhaps not even referenced) and
	 * the netdev may go before the thread runs: the thread needs
	 * neither. */
	skb_dst_drop(skb);
	skb->dev = NULL;
	cb->dev = dev;
	cb->qp = qp;
	cb->role = role;
	if (role == 0)
		WRITE_ONCE(rq->last_request, jiffies);
	/* Only the packet that finds the list empty queues the work: the
	 * worker's lock, taken with interrupts off, once per batch instead of
	 * once per packet. */
	if (llist_add(&skb->ll_node, &rq->rx))
		kthread_queue_work(rq->worker, &rq->work);
	queued = true;
out:
	rcu_read_unlock();
	return queued;
}
