/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp.c - the udp wire: peers on other hosts (other network
 * namespaces) reached through one UDP socket per receive context.
 *
 * Send side.  A udp peer looks to the provider exactly like a shm peer:
 * a ring of header entries and eager blocks it reserves and publishes
 * into with the inline PIO primitives of shim_ring.h.  The ring is private
 * memory (the link's send buffer) whose control block says "sleeping",
 * so every publish calls shim_peer_wake(), which transmits what was
 * published (shim_udp_kick).  Entries stay in the ring until the
 * receiver acknowledges them: the ring is the replay memory, its
 * positions (relative to the flow's start) are the packet sequence
 * numbers, and a full ring is the provider's ordinary "no credits"
 * (-FI_EAGAIN), so replay memory is bounded by construction.  Rendezvous
 * data packets carry absolute offsets and are placed in any order; the
 * packets of a multi-packet eager message are handed to the receive ring
 * together, once all have arrived (shim_udp_deliver_n).
 *
 * Receive side.  shim_udp_recv() takes one datagram (recvmsg) or, once
 * datagrams come back to back, a batch (recvmmsg): an empty recvmmsg
 * costs twice an empty recvmsg, and a polling receiver mostly finds
 * nothing.  It validates each before anything else looks at it: length,
 * magic and version, then the MAC (shim_udp_auth.c: nothing else of a
 * datagram without the job's secret is read, answered or remembered),
 * CRC32C (headers, then the three-lane variant over the payload), the
 * sender's address as the header names it against the one the kernel
 * reports, job key, destination session, a source session that is not a
 * previous life of the sender, and within a session the identity its
 * flow already has.
 * What fails is dropped and counted (shim_udp_stats).  Sequencing,
 * acknowledgement and replay are the provider's (prov/opx_rel.c), which
 * hands in-order packets back to shim_udp_deliver(): into the context's
 * own receive ring, or for expected-receive data straight into the
 * registered buffer at its offset.
 *
 * Flows ("links") are keyed by the remote socket address.  A link is
 * created by the first datagram from a new source, or by the provider
 * opening a peer on another host, through the socket of the context the
 * provider names (the endpoint bound to the address vector; without one,
 * the first context that bound a socket, dev->udp_home).  The context
 * owns its links; the provider's references keep a link's memory alive
 * after its context closed (it is then dead: nothing is sent).
 *
 * Files: shim_udp.h (the state), shim_udp_tx.c (the send side),
 * shim_udp_rx.c (the receive side: validation, the flow of a datagram's
 * source, delivery into the receive ring, the drop counters),
 * shim_udp_wd.c (the watchdog, and the first look at a datagram that the
 * receive side and the watchdog share: its length in a UDP_GRO run, its
 * tag), this one (interface and socket set-up, links).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"
#include "shim_udp.h"

/* The interface's IPv4 and MTU: by name, or the first that is up and
 * not loopback, else loopback. */
static int shim_udp_iface(const char *name, uint32_t *ipv4, uint32_t *mtu)
{
	struct ifaddrs *ifa, *it, *pick = NULL, *lo = NULL;
	struct ifreq ifr;
	int fd, ret = 0;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (it = ifa; it; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP))
			continue;
		if (name && name[0]) {
			if (!strcmp(it->ifa_name, name)) {
				pick = it;
				break;
			}
			continue;
		}
		if (it->ifa_flags & IFF_LOOPBACK) {
			if (!lo)
				lo = it;
		} else if (!pick) {
			pick = it;
		}
	}
	if (!pick)
		pick = (name && name[0]) ? NULL : lo;
	if (!pick) {
		freeifaddrs(ifa);
		return -ENODEV;
	}
	*ipv4 = ((const struct sockaddr_in *)pick->ifa_addr)->sin_addr.s_addr;
	*mtu = 1500;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", pick->ifa_name);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
			*mtu = (uint32_t)ifr.ifr_mtu;
		close(fd);
	}
	freeifaddrs(ifa);
	return ret;
}

/* ---------------------------------------------------------------------
 * Links
 */
static void shim_udp_link_free(struct shim_udp_link *l)
{
	munmap(l->mem, l->mem_len);
	free(l->ext);
	free(l->pp.pub.ctl);
	free(l);
}

/* Forget everything sent to the previous life of the peer: its packets
 * would never be acknowledged by the new one. */
void shim_udp_link_reset(struct shim_udp_link *l, uint32_t nonce)
{
	struct shim_peer *p = &l->pp.pub;
	uint64_t tail = atomic_load_explicit(&p->ctl->tail, memory_order_relaxed);

	pthread_mutex_lock(&l->udp->lock); /* the watchdog reads base and sent */
	l->old_nonce = l->remote_nonce;
	l->remote_nonce = nonce;
	l->dead = false;
	/* the new life says who it is (or the address vector does) */
	l->learned.lid = 0;
	/* every reservation is published (the provider holds the domain
	 * lock around both), so the tail is where the new flow starts */
	l->base = (uint32_t)tail;
	l->sent = (uint32_t)tail;
	l->wait_cnt = 0;
	l->wait_bytes = 0;
	if (l->ext_live) /* nothing of it is sent again */
		memset(l->ext, 0, SHIM_UDP_RING_CNT * sizeof(*l->ext));
	l->ext_live = 0;
	atomic_store_explicit(&p->ctl->hdr_head, (uint32_t)tail, memory_order_release);
	atomic_store_explicit(&p->ctl->egr_head, (uint32_t)(tail >> 32), memory_order_release);
	p->hdr_credit_head = (uint32_t)tail;
	p->egr_credit_head = (uint32_t)(tail >> 32);
	p->udp_ack = 0;
	p->udp_epoch++;
	/* the new life tells its datagram size again */
	p->mtu = l->udp->mtu < SHIM_UDP_SAFE_MTU ? l->udp->mtu : SHIM_UDP_SAFE_MTU;
	p->ctl->mtu = p->mtu;
	atomic_store_explicit(&l->rx_ns, shim_udp_now(), memory_order_relaxed);
	pthread_mutex_unlock(&l->udp->lock);
}

struct shim_udp_link *shim_udp_link_new(struct shim_udp *u, uint32_t ip, uint16_t port)
{
	const size_t ctl_sz = SHIM_CTL_PAD;
	const size_t hdrq_sz = (size_t)SHIM_UDP_RING_CNT * sizeof(struct shim_rhq_entry);
	/* The send ring's control block lives apart from its queues, in
	 * ordinary memory: an idle link gives the queues' pages back
	 * (shim_udp_trim) and keeps its positions.  Its offsets describe
	 * the segment it would be; only this file uses them. */
	uint32_t h = shim_udp_hash(ip, port);
	struct shim_udp_link *l;
	struct shim_rcv_ctl *ctl;
	struct shim_peer *p;

	l = calloc(1, sizeof(*l));
	ctl = aligned_alloc(SHIM_BLOCK, sizeof(*ctl));
	if (!l || !ctl) {
		free(l);
		free(ctl);
		return NULL;
	}
	memset(ctl, 0, sizeof(*ctl));
	l->mem_len = hdrq_sz + u->ring_bytes;
	l->mem = mmap(NULL, l->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (l->mem == MAP_FAILED) {
		free(ctl);
		free(l);
		return NULL;
	}
	l->udp = u;
	l->to.sin_family = AF_INET;
	l->to.sin_addr.s_addr = ip;
	l->to.sin_port = port;
	l->pp.dev = u->ctx->dev;
	l->pp.seg_fd = -1;
	l->pp.owner_pidfd = -1;
	l->pp.claim_idx = -1;
	l->pp.link = l;
	l->pp.wire = &shim_udp_wire;
	ctl->magic = SHIM_CTL_MAGIC;
	ctl->abi_version = SHIM_ABI_VERSION;
	ctl->hdrq_cnt = SHIM_UDP_RING_CNT;
	ctl->egr_blocks = u->ring_bytes / SHIM_BLOCK;
	/* until the peer tells its own (shim_udp_source) */
	ctl->mtu = u->mtu < SHIM_UDP_SAFE_MTU ? u->mtu : SHIM_UDP_SAFE_MTU;
	ctl->hdrq_off = ctl_sz;
	ctl->egr_off = ctl_sz + hdrq_sz;
	ctl->seg_size = ctl_sz + l->mem_len;
	ctl->jkey = u->ctx->rx.jkey;
	/* what the peer takes eagerly, as its datagrams say (src_eager);
	 * 0 until it was heard: the sender's own limit */
	ctl->rx_eager_max = 0;
	atomic_store(&ctl->ready, 1);
	atomic_store(&ctl->sleeping, 1); /* every publish calls the wake hook */
	p = &l->pp.pub;
	p->ctl = ctl;
	p->hdrq = l->mem;
	p->egr = (uint8_t *)l->mem + hdrq_sz;
	p->hdrq_cnt = ctl->hdrq_cnt;
	p->egr_blocks = ctl->egr_blocks;
	p->hdrq_mask = ctl->hdrq_cnt - 1;
	p->egr_mask = ctl->egr_blocks - 1;
	p->mtu = ctl->mtu;
	p->jkey = ctl->jkey;
	p->map_len = l->mem_len;
	p->wire = SHIM_WIRE_UDP;
	/* the intent stores of shim_pio_reserve need somewhere to go */
	p->claim = calloc(1, sizeof(struct shim_claim));
	if (!p->claim) {
		shim_udp_link_free(l);
		return NULL;
	}
	atomic_init(&p->refcnt, 0);
	l->learned.ipv4 = ip;
	l->learned.udp_port = port;
	atomic_init(&l->rx_ns, shim_udp_now()); /* silence is counted from here */
	atomic_init(&l->tx_count, 0);
	pthread_mutex_lock(&u->lock);
	l->next = u->hash[h];
	u->hash[h] = l;
	l->all_next = u->links;
	u->links = l;
	u->nlinks++;
	pthread_mutex_unlock(&u->lock);
	shim_udp_watchdog_start(u);
	return l;
}

/* The link's memory goes when neither the context nor the provider
 * refers to it any more. */
static void shim_udp_link_unref(struct shim_udp_link *l)
{
	if (l->udp || atomic_load(&l->pp.pub.refcnt) > 0)
		return;
	free(l->pp.pub.claim);
	shim_udp_link_free(l);
}

int shim_udp_forget(struct shim_peer *peer)
{
	struct shim_udp_link *l, **pl;
	struct shim_udp *u;

	if (!peer || peer->wire != SHIM_WIRE_UDP)
		return -EINVAL;
	l = ((struct shim_peer_priv *)peer)->link;
	u = l->udp;
	if (!u)
		return -EBUSY; /* the context closed: the last reference frees it */
	if (!l->dead || atomic_load(&peer->refcnt) > 0 || peer->rel)
		return -EBUSY;
	/* the watchdog walks the links under the lock */
	pthread_mutex_lock(&u->lock);
	for (pl = &u->hash[shim_udp_hash(l->to.sin_addr.s_addr, l->to.sin_port)]; *pl;
	     pl = &(*pl)->next)
		if (*pl == l) {
			*pl = l->next;
			break;
		}
	for (pl = &u->links; *pl; pl = &(*pl)->all_next)
		if (*pl == l) {
			*pl = l->all_next;
			break;
		}
	u->nlinks--;
	u->st.links_freed++;
	pthread_mutex_unlock(&u->lock);
	shim_udp_unwait(l);
	free(peer->claim);
	shim_udp_link_free(l);
	return 0;
}

/* A udp peer's wire operations (shim_peer.c calls them): the link's
 * reference, its liveness by the reliability timeout, and a publish that
 * transmits (shim_udp_tx.c). */
const struct shim_wire_ops shim_udp_wire = {
	.name = "udp",
	.put = shim_udp_peer_put,
	.alive = shim_udp_peer_alive,
	.wake = shim_udp_kick,
};

void shim_udp_peer_put(struct shim_peer_priv *pp)
{
	shim_udp_link_unref(pp->link);
}

int shim_udp_peer_open(struct shim_dev *dev, struct shim_ctx *home, const struct shim_addr *addr,
		       struct shim_peer **peerp)
{
	struct shim_udp_link *l;

	(void)dev;
	if (!home || !home->udp)
		return -EHOSTUNREACH;
	if (!addr->ipv4 || !addr->udp_port)
		return -EHOSTUNREACH; /* no udp address: not reachable from here */
	l = shim_udp_link_find(home->udp, addr->ipv4, addr->udp_port);
	if (!l) {
		if (home->udp->nlinks >= home->udp->max_links)
			return -ENOSPC;
		l = shim_udp_link_new(home->udp, addr->ipv4, addr->udp_port);
		if (!l)
			return -ENOMEM;
	}
	/* An address naming another life of whoever is at that port starts
	 * the flow again (0: not known yet, the first exchange tells). */
	if (addr->nonce && l->remote_nonce && addr->nonce != l->remote_nonce)
		shim_udp_link_reset(l, addr->nonce);
	else if (addr->nonce && !l->remote_nonce)
		l->remote_nonce = addr->nonce;
	if (addr->lid && !l->learned.lid) {
		l->learned = *addr;
		l->pp.pub.lid = addr->lid;
		l->pp.pub.ctx = addr->ctx;
	}
	l->pp.pub.addr = *addr;
	atomic_fetch_add(&l->pp.pub.refcnt, 1);
	*peerp = &l->pp.pub;
	return 0;
}

struct shim_peer *shim_udp_next(struct shim_ctx *ctx, struct shim_peer *prev)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;
	struct shim_udp_link *l;

	if (!u)
		return NULL;
	l = prev ? ((struct shim_peer_priv *)prev)->link->all_next : u->links;
	return l ? &l->pp.pub : NULL;
}

/* ---------------------------------------------------------------------
 * Open and close
 */
int shim_udp_probe(const struct shim_dev *dev, uint32_t *ipv4)
{
	uint32_t ip = 0, mtu = 0;
	int rc;

	if (!dev)
		return -EINVAL;
	if (dev->params.wire == SHIM_WIRE_SHM)
		return -ENODEV;
	rc = shim_udp_iface(dev->params.iface, &ip, &mtu);
	if (rc)
		return rc;
	if (ipv4)
		*ipv4 = ip;
	return 0;
}

int shim_udp_open(struct shim_ctx *ctx, uint32_t ipv4, uint16_t port)
{
	struct shim_dev *dev;
	struct sockaddr_in sin;
	struct shim_udp *u;
	uint32_t if_ip = 0, if_mtu = 1500, mtu;
	socklen_t sl = sizeof(sin);
	int rc, buf = SHIM_UDP_RCVBUF, got;
	socklen_t bl;

	if (!ctx)
		return -EINVAL;
	dev = ctx->dev;
	if (ctx->udp)
		return -EALREADY;
	if (dev->params.wire == SHIM_WIRE_SHM)
		return -ENODEV;
	rc = shim_udp_iface(dev->params.iface, &if_ip, &if_mtu);
	if (rc)
		return rc;
	if (!ipv4)
		ipv4 = if_ip;
	mtu = if_mtu > SHIM_UDP_OVERHEAD + SHIM_BLOCK ? if_mtu - (uint32_t)SHIM_UDP_OVERHEAD : SHIM_BLOCK;
	mtu &= ~(SHIM_BLOCK - 1);
	if (mtu > ctx->rx.mtu)
		mtu = ctx->rx.mtu;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->ctx = ctx;
	u->mtu = mtu;
	u->keepalive_ns = SHIM_UDP_KEEPALIVE_NS;
	{
		/* recursive: the watchdog sends (fault injection takes it) while
		 * it holds it for the rings */
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&u->lock, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	u->ipv4 = ipv4;
	u->rng = dev->params.fault.seed ? dev->params.fault.seed : 0x9e3779b97f4a7c15ull;
	u->faulty = (dev->params.fault.drop | dev->params.fault.dup | dev->params.fault.reorder |
		     dev->params.fault.corrupt) != 0;
	/* Injected corruption flips a byte before the kernel computes the
	 * UDP checksum, so only our own CRC can catch it. */
	u->pcrc = (!dev->params.udp_no_crc || dev->params.fault.corrupt) &&
		  dev->params.auth != SHIM_AUTH_FULL;
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0) {
		rc = -errno;
		goto err;
	}
	/* UDP_GRO: a run of one sender's datagrams of one size (its GSO
	 * send kept whole below the socket, or what the interface
	 * coalesced) comes as one buffer, one receive and one copy instead
	 * of one each; shim_udp_recv cuts it up again.  Such a buffer is up
	 * to 64 KiB, so every receive buffer is. */
	if (!dev->params.udp_no_gro) {
		int one = 1;

		u->gro = setsockopt(u->fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	}
	u->rbuf_sz = sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr) + ctx->rx.mtu + 64;
	if (u->gro && u->rbuf_sz < SHIM_UDP_GRO_BYTES)
		u->rbuf_sz = SHIM_UDP_GRO_BYTES;
	u->rbuf = malloc(u->rbuf_sz * SHIM_UDP_BATCH);
	for (uint32_t i = 0; u->rbuf && i < SHIM_UDP_BATCH; i++) {
		u->iovs[i].iov_base = u->rbuf + (size_t)i * u->rbuf_sz;
		u->iovs[i].iov_len = u->rbuf_sz;
		memset(&u->msgs[i].msg_hdr, 0, sizeof(u->msgs[i].msg_hdr));
		u->msgs[i].msg_hdr.msg_iov = &u->iovs[i];
		u->msgs[i].msg_hdr.msg_iovlen = 1;
		u->msgs[i].msg_hdr.msg_name = &u->from[i];
		u->msgs[i].msg_hdr.msg_namelen = sizeof(u->from[i]);
	}
	u->scratch = malloc(u->rbuf_sz);
	u->held = malloc(u->rbuf_sz);
	u->wd_buf = malloc(u->rbuf_sz);
	u->max_links = dev->params.max_links ? dev->params.max_links : SHIM_UDP_MAX_LINKS;
	rc = shim_udp_auth_init(&u->auth, dev->params.auth, dev->params.auth_key);
	if (rc)
		goto err;
	u->tx = malloc(sizeof(*u->tx)); /* NULL: datagram by datagram */
	if (!dev->params.udp_no_pack) /* NULL: no packing */
		u->pack = malloc(SHIM_UDP_HDRS + mtu);
	u->gso = true;
	if (!u->rbuf || !u->scratch || !u->held || !u->wd_buf) {
		rc = -ENOMEM;
		goto err;
	}
	/* A receive queue that overflows loses whole bursts (each costs a
	 * timeout): ask for SHIM_UDP_RCVBUF, beyond net.core.rmem_max where
	 * we may (CAP_NET_ADMIN), and size each link's send ring, which
	 * bounds what is in flight towards a peer, to what a queue of the
	 * size we got holds (the kernel counts about twice a datagram's
	 * bytes, and reports twice what it grants); peers are assumed to be
	 * configured alike.  What is published is sent at once, or (small
	 * packets while others are in flight, shim_udp_kick) at the owner's
	 * next progress call; the watchdog only sends again. */
	if (setsockopt(u->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		(void)setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	(void)setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	bl = sizeof(got);
	if (getsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &got, &bl) < 0 || got <= 0)
		got = 212992;
	u->ring_bytes = SHIM_UDP_RING_BYTES;
	while (u->ring_bytes > SHIM_UDP_RING_MIN && u->ring_bytes > (uint32_t)got / 4u)
		u->ring_bytes /= 2;
	/* The chosen interface's address only, not every address of the
	 * host: the name advertises it, every datagram says it (the
	 * receiver checks it against the address the kernel reports), and
	 * nothing reaches the socket through another interface or loopback
	 * unless that is the one chosen. */
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = ipv4;
	sin.sin_port = port;
	if (bind(u->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(u->fd, (struct sockaddr *)&sin, &sl) < 0) {
		rc = -errno;
		goto err;
	}
	u->port = sin.sin_port;
	/* Sleeping waits on both the wake-up socket and this one; this one
	 * joins the set only while a sleep is armed (shim_udp_wait_arm). */
	ctx->wait_fd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->wait_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN};

		if (epoll_ctl(ctx->wait_fd, EPOLL_CTL_ADD, ctx->sock_fd, &ev) < 0) {
			rc = -errno;
			close(ctx->wait_fd);
			ctx->wait_fd = -1;
			goto err;
		}
	}
	ctx->udp = u;
	if (!dev->udp_home)
		dev->udp_home = ctx;
	return 0;
err:
	if (u->fd >= 0)
		close(u->fd);
	shim_udp_auth_fini(&u->auth);
	free(u->rbuf);
	free(u->scratch);
	free(u->held);
	free(u->wd_buf);
	free(u->tx);
	free(u->pack);
	free(u);
	return rc;
}

int shim_udp_wait_arm(struct shim_ctx *ctx)
{
	struct shim_udp *u = ctx->udp;
	struct epoll_event ev = {.events = EPOLLIN};

	if (!u || u->in_wait || ctx->wait_fd < 0)
		return 0;
	/* nothing waits for company while we sleep */
	if (u->ndefer)
		shim_udp_flush_waiting(u);
	/* datagrams of a run taken from the socket, not yet handed out:
	 * nothing would wake us for them */
	if (shim_udp_rx_pending(u))
		return -EAGAIN;
	/* a datagram already queued makes the set ready at once: no
	 * wake-up is lost between the last poll and this */
	if (epoll_ctl(ctx->wait_fd, EPOLL_CTL_ADD, u->fd, &ev) < 0)
		return -errno;
	u->in_wait = true;
	return 0;
}

void shim_udp_wait_disarm(struct shim_ctx *ctx)
{
	struct shim_udp *u = ctx->udp;

	if (!u || !u->in_wait)
		return;
	(void)epoll_ctl(ctx->wait_fd, EPOLL_CTL_DEL, u->fd, NULL);
	u->in_wait = false;
}

void shim_udp_watch(struct shim_ctx *ctx, uint64_t keepalive_ns)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;

	if (!u)
		return;
	if (keepalive_ns && keepalive_ns < SHIM_UDP_KEEPALIVE_NS)
		u->keepalive_ns = keepalive_ns;
	u->wd_watched = true;
	shim_udp_watchdog_start(u); /* the owner's call, like a link's creation */
}

bool shim_udp_rx_empty(const struct shim_ctx *ctx)
{
	return ctx && ctx->udp && ctx->udp->rx_empty && !shim_udp_rx_pending(ctx->udp);
}

bool shim_udp_on(const struct shim_ctx *ctx)
{
	return ctx && ctx->udp;
}

void shim_udp_advertise(struct shim_ctx *ctx, uint32_t eager_max)
{
	uint32_t kib = eager_max >> 10;

	if (ctx)
		ctx->udp_eager_kib = (uint8_t)(kib > UINT8_MAX ? UINT8_MAX : kib);
}

void shim_udp_close(struct shim_ctx *ctx)
{
	struct shim_udp *u = ctx->udp;

	if (!u)
		return;
	shim_udp_watchdog_stop(u);
	shim_udp_flush(ctx);
	if (ctx->dev->udp_home == ctx)
		ctx->dev->udp_home = NULL;
	for (uint32_t h = 0; h < SHIM_UDP_HASH; h++) {
		struct shim_udp_link *l = u->hash[h], *next;

		for (; l; l = next) {
			next = l->next;
			shim_udp_fail(&l->pp.pub);
			l->udp = NULL;
			shim_udp_link_unref(l);
		}
	}
	if (u->self)
		shim_shm_peer_free(u->self);
	close(u->fd);
	if (ctx->wait_fd >= 0)
		close(ctx->wait_fd);
	ctx->wait_fd = -1;
	free(u->rbuf);
	free(u->scratch);
	free(u->held);
	free(u->wd_buf);
	free(u->tx);
	free(u->pack);
	shim_udp_auth_fini(&u->auth);
	pthread_mutex_destroy(&u->lock);
	free(u);
	ctx->udp = NULL;
}

void shim_udp_addr_fill(const struct shim_ctx *ctx, struct shim_addr *addr)
{
	if (ctx->udp) {
		addr->ipv4 = ctx->udp->ipv4;
		addr->udp_port = ctx->udp->port;
	}
}
