/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp.c - the udp wire: peers on other hosts (other network
 * namespaces) reached through one UDP socket per receive context.
 *
 * Send side.  A udp peer looks to the provider exactly like a shm peer:
 * a ring of header entries and eager blocks it reserves and publishes
 * into with the inline PIO primitives of shim_abi.h.  The ring is private
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
 * Receive side.  shim_udp_recv() takes a batch of datagrams (recvmmsg)
 * and validates each before anything else looks at it: length, magic
 * and version, CRC32C (headers, then the three-lane variant over the
 * payload), job key, destination session, a source session that is not
 * a previous life of the sender.
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
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
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

#define SHIM_UDP_BATCH 16u
/* Bytes of a DATA datagram before its payload. */
#define SHIM_UDP_HDRS (sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr))
#define SHIM_UDP_HASH 256u
/* The send ring of one flow: replay memory for up to this many packets
 * and bytes in flight towards one peer (fewer bytes when the receive
 * queue we got is small, see shim_udp_open). */
#define SHIM_UDP_RING_CNT 1024u
#define SHIM_UDP_RING_BYTES (1u << 20)
/* Packets one transmit call hands the kernel at most (one sendmmsg);
 * consecutive datagrams of one size travel as one UDP_SEGMENT (GSO) send
 * of at most SHIM_UDP_GSO_BYTES, cut into datagrams below the socket. */
#define SHIM_UDP_TX_BATCH 64u
/* Receive queue asked for (shim_udp_open), and the smallest send ring
 * whatever the queue we got. */
#define SHIM_UDP_RCVBUF (16 << 20)
#define SHIM_UDP_RING_MIN (128u << 10)
#define SHIM_UDP_GSO_BYTES 65000u
#define SHIM_UDP_GSO_SEGS 64u

/* Scratch of one batched transmission: a header per packet, its pieces,
 * and one message per run of same-sized datagrams. */
struct shim_udp_tx {
	struct shim_udp_hdr uh[SHIM_UDP_TX_BATCH];
	uint32_t len[SHIM_UDP_TX_BATCH];
	struct iovec iov[3 * SHIM_UDP_TX_BATCH];
	struct mmsghdr msg[SHIM_UDP_TX_BATCH];
	uint32_t segs[SHIM_UDP_TX_BATCH]; /* datagrams in each message */
	uint32_t pos[SHIM_UDP_TX_BATCH];  /* ring position of each message's first */
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} cm[SHIM_UDP_TX_BATCH];
};

struct shim_udp_link {
	struct shim_peer_priv pp;   /* first: what the provider holds */
	struct shim_udp *udp;       /* home wire; NULL once the context closed */
	struct shim_udp_link *next; /* hash chain */
	struct sockaddr_in to;
	uint32_t remote_nonce;      /* 0 until known */
	uint32_t old_nonce;         /* the previous life's: its stragglers are dropped */
	struct shim_addr learned;   /* lid 0 until the peer spoke */
	uint32_t base;              /* ring position of psn 0 */
	uint32_t sent;              /* ring position of the next first transmission */
	bool dead;
	bool hold;                  /* shim_udp_hold: publishes wait for shim_udp_unhold */
	void *mem;
	size_t mem_len;
	_Atomic uint64_t rx_ns;     /* CLOCK_MONOTONIC of the last datagram from it */
	_Atomic uint64_t tx_ns;     /* ... and to it (keepalives fill silences) */
	/* watchdog only */
	uint32_t wd_acked;          /* send-ring head at its last look */
	uint32_t wd_next;           /* next position to send again */
	uint64_t wd_ns;             /* when that head last moved */
	uint64_t wd_rto_ns;
};

struct shim_udp {
	struct shim_ctx *ctx;
	int fd;
	uint32_t ipv4;              /* advertised, network order */
	uint16_t port;              /* network order */
	uint32_t mtu;               /* payload bytes per datagram */
	struct shim_udp_link *hash[SHIM_UDP_HASH];
	struct shim_peer *self;     /* producer handle on our own ring */
	uint64_t rng;               /* fault injection */
	uint8_t *held;              /* reorder: one datagram held back */
	size_t held_len;
	struct sockaddr_in held_to;
	uint8_t *scratch;           /* linearised datagram (faults) */
	bool gso;                   /* UDP_SEGMENT accepted (cleared on the first refusal) */
	uint32_t ring_bytes;        /* eager bytes of each link's send ring (shim_udp_open) */
	struct shim_udp_tx *tx;     /* first transmissions (shim_udp_kick) */
	uint8_t *rbuf;              /* SHIM_UDP_BATCH receive buffers */
	size_t rbuf_sz;
	struct mmsghdr msgs[SHIM_UDP_BATCH];
	struct iovec iovs[SHIM_UDP_BATCH];
	struct sockaddr_in from[SHIM_UDP_BATCH];
	struct shim_udp_stats st;
	/* The watchdog (see shim_udp_watchdog): a thread started with the
	 * first flow.  lock orders it against the send-ring release, link
	 * creation and fault injection state. */
	pthread_mutex_t lock;
	pthread_t wd_thread;
	bool wd_running;
	pid_t wd_pid;            /* the process the thread runs in (fork) */
	int wd_pipe[2];
	struct shim_udp *wd_next; /* shim_udp_wd_list */
	_Atomic uint64_t app_ns; /* the owner's last receive poll */
};

/* ---------------------------------------------------------------------
 * Helpers
 */
static uint32_t shim_udp_hash(uint32_t ip, uint16_t port)
{
	return ((ip * 2654435761u) ^ ((uint32_t)port * 40503u)) % SHIM_UDP_HASH;
}

static uint64_t shim_udp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t shim_udp_rand(struct shim_udp *u)
{
	/* xorshift64*: reproducible from the seed */
	u->rng ^= u->rng >> 12;
	u->rng ^= u->rng << 25;
	u->rng ^= u->rng >> 27;
	return u->rng * 2685821657736338717ull;
}

static bool shim_udp_chance(struct shim_udp *u, uint32_t ppm)
{
	return ppm && (uint32_t)(shim_udp_rand(u) % 1000000u) < ppm;
}

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
 * Transmit
 */
static void shim_udp_sendraw(struct shim_udp *u, const struct sockaddr_in *to,
			     const struct iovec *iov, int n)
{
	struct msghdr mh = {
		.msg_name = (void *)to,
		.msg_namelen = sizeof(*to),
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)n,
	};

	/* A full socket buffer is a loss like any other: replay covers it. */
	if (sendmsg(u->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
			u->st.tx_errors++;
		return;
	}
	u->st.tx_datagrams++;
}

static size_t shim_udp_linear(uint8_t *dst, const struct iovec *iov, int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		memcpy(dst + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len;
}

static void shim_udp_send_faulty(struct shim_udp *u, const struct sockaddr_in *to,
				 struct iovec *iov, int n);
static void shim_udp_flush_held(struct shim_udp *u);

/* Send one datagram through fault injection. */
static void shim_udp_send(struct shim_udp *u, const struct sockaddr_in *to, struct iovec *iov,
			  int n)
{
	const struct shim_fault *f = &u->ctx->dev->params.fault;

	if (!(f->drop | f->dup | f->reorder | f->corrupt)) {
		shim_udp_sendraw(u, to, iov, n);
		return;
	}
	/* the decisions' state is shared with the watchdog */
	pthread_mutex_lock(&u->lock);
	shim_udp_send_faulty(u, to, iov, n);
	pthread_mutex_unlock(&u->lock);
}

static void shim_udp_send_faulty(struct shim_udp *u, const struct sockaddr_in *to,
				 struct iovec *iov, int n)
{
	const struct shim_fault *f = &u->ctx->dev->params.fault;
	struct iovec one;
	size_t len;

	if (shim_udp_chance(u, f->drop)) {
		u->st.fault_drop++;
		return;
	}
	len = shim_udp_linear(u->scratch, iov, n);
	if (shim_udp_chance(u, f->corrupt)) {
		u->scratch[shim_udp_rand(u) % len] ^= (uint8_t)(1u + shim_udp_rand(u) % 255u);
		u->st.fault_corrupt++;
	}
	one.iov_base = u->scratch;
	one.iov_len = len;
	if (!u->held_len && shim_udp_chance(u, f->reorder)) {
		memcpy(u->held, u->scratch, len);
		u->held_len = len;
		u->held_to = *to;
		u->st.fault_reorder++;
		return;
	}
	shim_udp_sendraw(u, to, &one, 1);
	if (shim_udp_chance(u, f->dup)) {
		shim_udp_sendraw(u, to, &one, 1);
		u->st.fault_dup++;
	}
	shim_udp_flush_held(u);
}

static void shim_udp_flush_held(struct shim_udp *u)
{
	struct iovec one;

	if (!u->held_len)
		return;
	one.iov_base = u->held;
	one.iov_len = u->held_len;
	u->held_len = 0;
	shim_udp_sendraw(u, &u->held_to, &one, 1);
}

void shim_udp_flush(struct shim_ctx *ctx)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;

	if (!u || !u->held_len)
		return;
	pthread_mutex_lock(&u->lock);
	shim_udp_flush_held(u);
	pthread_mutex_unlock(&u->lock);
}

static void shim_udp_hdr_fill(struct shim_udp_link *l, struct shim_udp_hdr *uh,
			      uint8_t type, uint32_t psn)
{
	const struct shim_ctx *ctx = l->udp->ctx;

	memset(uh, 0, sizeof(*uh));
	uh->magic = SHIM_UDP_MAGIC;
	uh->version = SHIM_UDP_VERSION;
	uh->type = type;
	uh->jkey = ctx->rx.jkey;
	uh->psn = psn;
	uh->ack = l->pp.pub.udp_ack;
	l->pp.pub.udp_ack_sent = uh->ack;
	uh->src_nonce = ctx->nonce;
	uh->dst_nonce = l->remote_nonce;
	uh->src_host = ctx->dev->host_id;
	uh->src_lid = ctx->rx.lid;
	uh->src_ctx = ctx->rx.ctx;
	uh->src_unit = ctx->rx.unit;
}

/* The datagram of the staged packet at ring position pos: its header
 * (CRC as struct shim_udp_hdr says) and 2 or 3 pieces; returns the
 * count. */
static int shim_udp_frame(struct shim_udp_link *l, uint32_t pos, struct shim_udp_hdr *uh,
			  struct iovec *iov, uint32_t *len)
{
	const struct shim_peer *p = &l->pp.pub;
	const struct shim_rhq_entry *e = &p->hdrq[pos & p->hdrq_mask];
	int n = 2;
	uint32_t crc;

	shim_udp_hdr_fill(l, uh, SHIM_UDP_DATA, pos - l->base);
	uh->rhf = e->rhf & (SHIM_RHF_EGR | SHIM_RHF_TID);
	iov[0].iov_base = uh;
	iov[0].iov_len = sizeof(*uh);
	iov[1].iov_base = (void *)&e->hdr;
	iov[1].iov_len = sizeof(e->hdr);
	crc = shim_crc32c(0, uh, sizeof(*uh));
	crc = shim_crc32c(crc, &e->hdr, sizeof(e->hdr));
	*len = sizeof(*uh) + sizeof(e->hdr);
	if (e->rhf & SHIM_RHF_EGR) {
		iov[2].iov_base = p->egr + (size_t)SHIM_RHF_EGRIDX(e->rhf) * SHIM_BLOCK;
		iov[2].iov_len = e->hdr.paylen;
		crc = shim_crc32c_wide(crc, iov[2].iov_base, iov[2].iov_len);
		*len += e->hdr.paylen;
		n = 3;
	}
	uh->crc = crc;
	return n;
}

/* Transmit the staged packet at ring position pos. */
static void shim_udp_xmit(struct shim_udp_link *l, uint32_t pos)
{
	struct shim_udp_hdr uh;
	struct iovec iov[3];
	uint32_t len;
	int n = shim_udp_frame(l, pos, &uh, iov, &len);

	shim_udp_send(l->udp, &l->to, iov, n);
	atomic_store_explicit(&l->tx_ns, shim_udp_now(), memory_order_relaxed);
}

/* Hand t's nmsg messages to the kernel in one call.  A full socket
 * buffer is a loss like any other (replay covers it).  A socket that
 * refuses GSO (no checksum offload on the route) loses it for good and
 * the rest of the batch goes again datagram by datagram. */
static void shim_udp_sendmm(struct shim_udp_link *l, struct shim_udp_tx *t, uint32_t nmsg)
{
	struct shim_udp *u = l->udp;
	uint32_t done = 0;

	while (done < nmsg) {
		int k = sendmmsg(u->fd, &t->msg[done], nmsg - done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k > 0) {
			for (int i = 0; i < k; i++)
				u->st.tx_datagrams += t->segs[done + (uint32_t)i];
			done += (uint32_t)k;
			continue;
		}
		if ((errno == EIO || errno == EINVAL) && t->msg[done].msg_hdr.msg_controllen) {
			u->gso = false;
			for (uint32_t m = done; m < nmsg; m++)
				for (uint32_t d = 0; d < t->segs[m]; d++)
					shim_udp_xmit(l, t->pos[m] + d);
			return;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
			u->st.tx_errors++;
		return;
	}
}

/* First transmission of the n (<= SHIM_UDP_TX_BATCH) packets from ring
 * position pos, in one system call: one message per datagram, or with
 * GSO one per run of same-sized datagrams (the last of a run may be
 * shorter), which the kernel cuts below the socket. */
static void shim_udp_xmit_batch(struct shim_udp_link *l, uint32_t pos, uint32_t n)
{
	struct shim_udp *u = l->udp;
	struct shim_udp_tx *t = u->tx;
	uint32_t nmsg = 0, niov = 0, i = 0;

	while (i < n) {
		struct msghdr *mh = &t->msg[nmsg].msg_hdr;
		uint32_t size, total, segs = 1;

		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &l->to;
		mh->msg_namelen = sizeof(l->to);
		mh->msg_iov = &t->iov[niov];
		t->pos[nmsg] = pos + i;
		niov += (uint32_t)shim_udp_frame(l, pos + i, &t->uh[i], &t->iov[niov], &t->len[i]);
		size = total = t->len[i++];
		while (u->gso && i < n && t->len[i - 1] == size && segs < SHIM_UDP_GSO_SEGS) {
			int k = shim_udp_frame(l, pos + i, &t->uh[i], &t->iov[niov], &t->len[i]);

			if (t->len[i] > size || total + t->len[i] > SHIM_UDP_GSO_BYTES)
				break; /* framed again as the next message's first */
			niov += (uint32_t)k;
			total += t->len[i++];
			segs++;
		}
		mh->msg_iovlen = (size_t)(&t->iov[niov] - mh->msg_iov);
		if (segs > 1) {
			struct cmsghdr *cm;

			mh->msg_control = t->cm[nmsg].buf;
			mh->msg_controllen = sizeof(t->cm[nmsg].buf);
			cm = CMSG_FIRSTHDR(mh);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			*(uint16_t *)(void *)CMSG_DATA(cm) = (uint16_t)size;
		}
		t->segs[nmsg++] = segs;
	}
	shim_udp_sendmm(l, t, nmsg);
	atomic_store_explicit(&l->tx_ns, shim_udp_now(), memory_order_relaxed);
}

/* The publish hook: transmit what was published since the last call, in
 * batches; with fault injection on, datagram by datagram through it.
 * While held (shim_udp_hold), publishes only accumulate. */
void shim_udp_kick(struct shim_peer_priv *pp)
{
	struct shim_udp_link *l = pp->link;
	struct shim_peer *p = &pp->pub;
	const struct shim_fault *f;

	if (!l->udp || l->dead || l->hold)
		return;
	f = &l->udp->ctx->dev->params.fault;
	for (;;) {
		uint32_t n = 0;

		while (n < SHIM_UDP_TX_BATCH &&
		       atomic_load_explicit(&p->hdrq[(l->sent + n) & p->hdrq_mask].seq,
					    memory_order_acquire) == l->sent + n + 1)
			n++;
		if (!n)
			return;
		if (n == 1 || !l->udp->tx || (f->drop | f->dup | f->reorder | f->corrupt)) {
			for (uint32_t i = 0; i < n; i++)
				shim_udp_xmit(l, l->sent + i);
		} else {
			shim_udp_xmit_batch(l, l->sent, n);
		}
		__atomic_store_n(&l->sent, l->sent + n, __ATOMIC_RELEASE);
	}
}

void shim_udp_hold(struct shim_peer_priv *pp)
{
	pp->link->hold = true;
}

void shim_udp_unhold(struct shim_peer_priv *pp)
{
	pp->link->hold = false;
	shim_udp_kick(pp);
}

int shim_udp_resend(struct shim_peer *peer, uint32_t psn)
{
	struct shim_udp_link *l;
	uint32_t pos, head;

	if (!peer || peer->wire != SHIM_WIRE_UDP)
		return -EINVAL;
	l = ((struct shim_peer_priv *)peer)->link;
	if (!l->udp || l->dead)
		return -ENOENT;
	pos = l->base + psn;
	head = atomic_load_explicit(&peer->ctl->hdr_head, memory_order_relaxed);
	if ((uint32_t)(pos - head) >= (uint32_t)(l->sent - head))
		return -ENOENT;
	shim_udp_xmit(l, pos);
	return 0;
}

int shim_udp_send_ctl(struct shim_peer *peer, uint8_t type, uint32_t psn, uint32_t mask)
{
	struct shim_udp_link *l;
	struct shim_udp_hdr uh;
	struct iovec iov;

	if (!peer || peer->wire != SHIM_WIRE_UDP || (type != SHIM_UDP_ACK && type != SHIM_UDP_NACK))
		return -EINVAL;
	l = ((struct shim_peer_priv *)peer)->link;
	if (!l->udp)
		return -ENOENT;
	shim_udp_hdr_fill(l, &uh, type, psn);
	uh.rhf = type == SHIM_UDP_NACK ? mask : 0;
	uh.crc = shim_crc32c(0, &uh, sizeof(uh));
	iov.iov_base = &uh;
	iov.iov_len = sizeof(uh);
	shim_udp_send(l->udp, &l->to, &iov, 1);
	atomic_store_explicit(&l->tx_ns, shim_udp_now(), memory_order_relaxed);
	return 0;
}

void shim_udp_release(struct shim_peer *peer, uint32_t ack)
{
	struct shim_udp_link *l;
	struct shim_rcv_ctl *ctl;
	uint32_t head, egr_head, upto;

	if (!peer || peer->wire != SHIM_WIRE_UDP)
		return;
	l = ((struct shim_peer_priv *)peer)->link;
	if (l->dead || !l->udp)
		return;
	ctl = peer->ctl;
	head = atomic_load_explicit(&ctl->hdr_head, memory_order_relaxed);
	egr_head = atomic_load_explicit(&ctl->egr_head, memory_order_relaxed);
	upto = l->base + ack;
	/* only what was sent can be acknowledged: anything else is stale */
	if ((uint32_t)(upto - head) > (uint32_t)(l->sent - head) || upto == head)
		return;
	/* the watchdog may be sending one of these again right now */
	pthread_mutex_lock(&l->udp->lock);
	for (; head != upto; head++) {
		const struct shim_rhq_entry *e = &peer->hdrq[head & peer->hdrq_mask];

		if (e->rhf & SHIM_RHF_EGR) {
			uint32_t idx = SHIM_RHF_EGRIDX(e->rhf);
			uint32_t start = egr_head;

			if (idx != (start & peer->egr_mask)) /* skipped to lap start */
				start = (start + peer->egr_blocks) & ~peer->egr_mask;
			egr_head = start + shim_egr_blocks_for(e->hdr.paylen);
		}
	}
	atomic_store_explicit(&ctl->egr_head, egr_head, memory_order_release);
	atomic_store_explicit(&ctl->hdr_head, head, memory_order_release);
	pthread_mutex_unlock(&l->udp->lock);
}

void shim_udp_tx_state(const struct shim_peer *peer, uint32_t *acked, uint32_t *sent)
{
	const struct shim_udp_link *l;

	if (!peer || peer->wire != SHIM_WIRE_UDP) {
		*acked = *sent = 0;
		return;
	}
	l = ((const struct shim_peer_priv *)peer)->link;
	*acked = atomic_load_explicit(&peer->ctl->hdr_head, memory_order_relaxed) - l->base;
	*sent = l->sent - l->base;
}

void shim_udp_times(const struct shim_peer *peer, uint64_t *rx_ns, uint64_t *tx_ns)
{
	const struct shim_udp_link *l;

	if (!peer || peer->wire != SHIM_WIRE_UDP) {
		*rx_ns = *tx_ns = 0;
		return;
	}
	l = ((const struct shim_peer_priv *)peer)->link;
	*rx_ns = atomic_load_explicit(&l->rx_ns, memory_order_relaxed);
	*tx_ns = atomic_load_explicit(&l->tx_ns, memory_order_relaxed);
}

void shim_udp_fail(struct shim_peer *peer)
{
	uint64_t tail;

	if (!peer || peer->wire != SHIM_WIRE_UDP)
		return;
	((struct shim_peer_priv *)peer)->link->dead = true;
	/* No credits from now on: a send finds the ring full, and the
	 * provider's stall check finds the peer dead (shim_peer_alive). */
	tail = atomic_load_explicit(&peer->ctl->tail, memory_order_relaxed);
	atomic_store_explicit(&peer->ctl->hdr_head, (uint32_t)tail - peer->hdrq_cnt,
			      memory_order_release);
}

bool shim_udp_peer_alive(const struct shim_peer_priv *pp)
{
	return pp->link->udp && !pp->link->dead;
}

int shim_udp_peer_addr(const struct shim_peer *peer, struct shim_addr *addr)
{
	if (!peer || !addr || peer->wire != SHIM_WIRE_UDP)
		return -EINVAL;
	*addr = ((const struct shim_peer_priv *)peer)->link->learned;
	return 0;
}

/* ---------------------------------------------------------------------
 * Links
 */
static void shim_udp_link_free(struct shim_udp_link *l)
{
	munmap(l->mem, l->mem_len);
	free(l);
}

/* Forget everything sent to the previous life of the peer: its packets
 * would never be acknowledged by the new one. */
static void shim_udp_link_reset(struct shim_udp_link *l, uint32_t nonce)
{
	struct shim_peer *p = &l->pp.pub;
	uint64_t tail = atomic_load_explicit(&p->ctl->tail, memory_order_relaxed);

	pthread_mutex_lock(&l->udp->lock); /* the watchdog reads base and sent */
	l->old_nonce = l->remote_nonce;
	l->remote_nonce = nonce;
	l->dead = false;
	/* every reservation is published (the provider holds the domain
	 * lock around both), so the tail is where the new flow starts */
	l->base = (uint32_t)tail;
	l->sent = (uint32_t)tail;
	atomic_store_explicit(&p->ctl->hdr_head, (uint32_t)tail, memory_order_release);
	atomic_store_explicit(&p->ctl->egr_head, (uint32_t)(tail >> 32), memory_order_release);
	p->hdr_credit_head = (uint32_t)tail;
	p->egr_credit_head = (uint32_t)(tail >> 32);
	p->udp_ack = 0;
	p->udp_epoch++;
	atomic_store_explicit(&l->rx_ns, shim_udp_now(), memory_order_relaxed);
	pthread_mutex_unlock(&l->udp->lock);
}

static struct shim_udp_link *shim_udp_link_find(struct shim_udp *u, uint32_t ip, uint16_t port)
{
	for (struct shim_udp_link *l = u->hash[shim_udp_hash(ip, port)]; l; l = l->next)
		if (l->to.sin_addr.s_addr == ip && l->to.sin_port == port)
			return l;
	return NULL;
}

/*
 * The watchdog.  Reliability is the provider's and runs when the
 * application progresses; but an application may stop progressing right
 * after its last send (blocked on something else: a barrier over another
 * network, a sleep, a computation), and a datagram of that send lost on
 * the wire would then never be sent again while the peer waits for it.
 * So once a context has udp flows, a thread looks every
 * SHIM_UDP_WD_TICK_MS, and only when the owner has not polled the socket
 * for SHIM_UDP_WD_IDLE_NS: it goes round each flow's unacknowledged
 * packets sending them again, a burst per tick (the acks that would say
 * which arrived wait unread), then backs off, and, when
 * datagrams wait unread in the socket (a peer sending again what it
 * already sent), repeats each flow's cumulative ack so that peer stops;
 * and on a flow it has sent nothing on for a second it sends an ack as a
 * keepalive, so peers tell a process that computes from one that died.
 * It reads the send rings under u->lock, which shim_udp_release() takes
 * before freeing entries; it never receives and never touches provider
 * state.
 */
#define SHIM_UDP_WD_TICK_MS 2
#define SHIM_UDP_WD_IDLE_NS 4000000ull
#define SHIM_UDP_WD_RTO_NS 4000000ull
#define SHIM_UDP_WD_RTO_MAX_NS 256000000ull
#define SHIM_UDP_WD_BURST 64u

static void shim_udp_watchdog_tick(struct shim_udp *u, bool unread)
{
	uint64_t now = shim_udp_now(), app = atomic_load_explicit(&u->app_ns, memory_order_relaxed);

	/* app 0: the owner never polled (a shim-level user, tests): not ours */
	if (!app || now - app < SHIM_UDP_WD_IDLE_NS)
		return;
	pthread_mutex_lock(&u->lock);
	for (uint32_t h = 0; h < SHIM_UDP_HASH; h++) {
		for (struct shim_udp_link *l = u->hash[h]; l; l = l->next) {
			struct shim_peer *p = &l->pp.pub;
			uint32_t head = atomic_load_explicit(&p->ctl->hdr_head, memory_order_acquire);
			uint32_t sent = __atomic_load_n(&l->sent, __ATOMIC_ACQUIRE);

			if (l->dead || !l->udp)
				continue;
			/* an ack repeated for a peer resending, or a keepalive:
			 * this process lives even while it does not progress */
			if ((unread && p->udp_ack) ||
			    now - atomic_load_explicit(&l->tx_ns, memory_order_relaxed) >
				    SHIM_UDP_KEEPALIVE_NS)
				shim_udp_send_ctl(p, SHIM_UDP_ACK, 0, 0);
			if (head == sent || head != l->wd_acked) {
				l->wd_acked = head;
				l->wd_next = head;
				l->wd_ns = now;
				l->wd_rto_ns = SHIM_UDP_WD_RTO_NS;
				continue;
			}
			if (now - l->wd_ns < l->wd_rto_ns)
				continue;
			/* The acks that would say what arrived wait unread in
			 * the socket: go round everything unacknowledged, a
			 * burst per tick, then wait a doubled timeout. */
			if ((uint32_t)(l->wd_next - head) >= (uint32_t)(sent - head))
				l->wd_next = head;
			for (uint32_t n = 0; l->wd_next != sent && n < SHIM_UDP_WD_BURST; n++)
				shim_udp_xmit(l, l->wd_next++);
			if (l->wd_next == sent) {
				l->wd_next = head;
				l->wd_ns = now;
				if (l->wd_rto_ns < SHIM_UDP_WD_RTO_MAX_NS)
					l->wd_rto_ns *= 2;
			}
		}
	}
	pthread_mutex_unlock(&u->lock);
}

static void *shim_udp_watchdog(void *arg)
{
	struct shim_udp *u = arg;
	struct pollfd pf[2] = {{.fd = u->wd_pipe[0], .events = POLLIN},
			       {.fd = u->fd, .events = POLLIN}};

	for (;;) {
		pf[0].revents = pf[1].revents = 0;
		(void)poll(pf, 1, SHIM_UDP_WD_TICK_MS);
		if (pf[0].revents)
			break;
		/* unread datagrams: only a look, the owner reads them */
		(void)poll(&pf[1], 1, 0);
		shim_udp_watchdog_tick(u, pf[1].revents & POLLIN);
	}
	return NULL;
}

/*
 * Every running watchdog of the process, so that they stop before the
 * code they run goes away.  An application may exit with endpoints open
 * (an error path, an MPI abort): libfabric's destructor then dlcloses
 * the provider while the threads still poll, and each woke up in
 * unmapped code (SIGSEGV at exit, turning exit(0) into a crash).  The
 * library's destructor (shim_udp_unload) stops them first.
 */
static pthread_mutex_t shim_udp_wd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_udp *shim_udp_wd_list;

static void shim_udp_watchdog_start(struct shim_udp *u)
{
	if (u->wd_running || pipe2(u->wd_pipe, O_CLOEXEC) < 0)
		return;
	if (pthread_create(&u->wd_thread, NULL, shim_udp_watchdog, u)) {
		close(u->wd_pipe[0]);
		close(u->wd_pipe[1]);
		return;
	}
	u->wd_running = true;
	u->wd_pid = getpid();
	pthread_mutex_lock(&shim_udp_wd_lock);
	u->wd_next = shim_udp_wd_list;
	shim_udp_wd_list = u;
	pthread_mutex_unlock(&shim_udp_wd_lock);
}

/* Stop and join the thread; in a child forked after it started there is
 * no thread to join, and the pipe is still the parent's: writing to it
 * would stop the parent's watchdog, so the child only lets go of it. */
static void shim_udp_watchdog_halt(struct shim_udp *u)
{
	const char b = 1;

	if (u->wd_pid == getpid()) {
		(void)!write(u->wd_pipe[1], &b, 1);
		pthread_join(u->wd_thread, NULL);
	}
	close(u->wd_pipe[0]);
	close(u->wd_pipe[1]);
	u->wd_running = false;
}

static void shim_udp_watchdog_stop(struct shim_udp *u)
{
	struct shim_udp **pp;

	if (!u->wd_running)
		return;
	pthread_mutex_lock(&shim_udp_wd_lock);
	for (pp = &shim_udp_wd_list; *pp; pp = &(*pp)->wd_next) {
		if (*pp == u) {
			*pp = u->wd_next;
			break;
		}
	}
	pthread_mutex_unlock(&shim_udp_wd_lock);
	shim_udp_watchdog_halt(u);
}

/* The library is unloaded (dlclose, or exit with contexts still open):
 * the threads go first.  The contexts stay as they are; nothing may use
 * them once their code is gone. */
__attribute__((destructor)) static void shim_udp_fini(void)
{
	shim_udp_unload();
}

void shim_udp_unload(void)
{
	pthread_mutex_lock(&shim_udp_wd_lock);
	while (shim_udp_wd_list) {
		struct shim_udp *u = shim_udp_wd_list;

		shim_udp_wd_list = u->wd_next;
		shim_udp_watchdog_halt(u);
	}
	pthread_mutex_unlock(&shim_udp_wd_lock);
}

static struct shim_udp_link *shim_udp_link_new(struct shim_udp *u, uint32_t ip, uint16_t port)
{
	const size_t ctl_sz = SHIM_CTL_PAD;
	const size_t hdrq_sz = (size_t)SHIM_UDP_RING_CNT * sizeof(struct shim_rhq_entry);
	uint32_t h = shim_udp_hash(ip, port);
	struct shim_udp_link *l;
	struct shim_rcv_ctl *ctl;
	struct shim_peer *p;

	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->mem_len = ctl_sz + hdrq_sz + u->ring_bytes;
	l->mem = mmap(NULL, l->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (l->mem == MAP_FAILED) {
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
	ctl = l->mem;
	ctl->magic = SHIM_CTL_MAGIC;
	ctl->abi_version = SHIM_ABI_VERSION;
	ctl->hdrq_cnt = SHIM_UDP_RING_CNT;
	ctl->egr_blocks = u->ring_bytes / SHIM_BLOCK;
	ctl->mtu = u->mtu;
	ctl->hdrq_off = ctl_sz;
	ctl->egr_off = ctl_sz + hdrq_sz;
	ctl->seg_size = l->mem_len;
	ctl->jkey = u->ctx->rx.jkey;
	/* 0: the sender's own eager limit; the receiver's reliability module
	 * delivers a multi-packet message in one piece (shim_udp_deliver_n) */
	ctl->rx_eager_max = 0;
	atomic_store(&ctl->ready, 1);
	atomic_store(&ctl->sleeping, 1); /* every publish calls the wake hook */
	p = &l->pp.pub;
	p->ctl = ctl;
	p->hdrq = (void *)((uint8_t *)l->mem + ctl->hdrq_off);
	p->egr = (uint8_t *)l->mem + ctl->egr_off;
	p->hdrq_cnt = ctl->hdrq_cnt;
	p->egr_blocks = ctl->egr_blocks;
	p->hdrq_mask = ctl->hdrq_cnt - 1;
	p->egr_mask = ctl->egr_blocks - 1;
	p->mtu = u->mtu;
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
	atomic_init(&l->tx_ns, 0);
	pthread_mutex_lock(&u->lock);
	l->next = u->hash[h];
	u->hash[h] = l;
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
	uint32_t h = 0;

	if (!u)
		return NULL;
	if (prev) {
		struct shim_udp_link *l = ((struct shim_peer_priv *)prev)->link;

		if (l->next)
			return &l->next->pp.pub;
		h = shim_udp_hash(l->to.sin_addr.s_addr, l->to.sin_port) + 1;
	}
	for (; h < SHIM_UDP_HASH; h++)
		if (u->hash[h])
			return &u->hash[h]->pp.pub;
	return NULL;
}

/* ---------------------------------------------------------------------
 * Receive
 */
static bool shim_udp_valid(struct shim_udp *u, uint8_t *d, size_t n, struct shim_udp_pkt *pkt)
{
	struct shim_udp_hdr *uh = &pkt->uh;
	uint32_t crc, want;
	size_t hl;

	if (n < sizeof(*uh)) {
		u->st.drop_len++;
		return false;
	}
	memcpy(uh, d, sizeof(*uh));
	if (uh->magic != SHIM_UDP_MAGIC || uh->version != SHIM_UDP_VERSION || uh->type < SHIM_UDP_DATA ||
	    uh->type > SHIM_UDP_NACK) {
		u->st.drop_magic++;
		return false;
	}
	want = uh->crc;
	((struct shim_udp_hdr *)d)->crc = 0;
	hl = n < SHIM_UDP_HDRS ? n : SHIM_UDP_HDRS;
	crc = shim_crc32c(0, d, hl);
	if (n > hl)
		crc = shim_crc32c_wide(crc, d + hl, n - hl);
	if (crc != want) {
		u->st.drop_crc++;
		return false;
	}
	if (uh->jkey != u->ctx->rx.jkey) {
		u->st.drop_jkey++;
		return false;
	}
	if ((uh->dst_nonce && uh->dst_nonce != u->ctx->nonce) || !uh->src_nonce) {
		u->st.drop_dest++;
		return false;
	}
	pkt->pay = NULL;
	if (uh->type != SHIM_UDP_DATA) {
		if (n != sizeof(*uh)) {
			u->st.drop_len++;
			return false;
		}
		return true;
	}
	if (n < sizeof(*uh) + sizeof(struct shim_pkt_hdr) || (uh->rhf & ~(SHIM_RHF_EGR | SHIM_RHF_TID))) {
		u->st.drop_len++;
		return false;
	}
	memset(&pkt->e, 0, sizeof(pkt->e));
	memcpy(&pkt->e.hdr, d + sizeof(*uh), sizeof(pkt->e.hdr));
	pkt->e.rhf = uh->rhf;
	if (uh->rhf & SHIM_RHF_EGR) {
		size_t pay = n - sizeof(*uh) - sizeof(struct shim_pkt_hdr);

		if (!pay || pkt->e.hdr.paylen != pay || pay > u->ctx->rx.mtu) {
			u->st.drop_len++;
			return false;
		}
		pkt->pay = d + sizeof(*uh) + sizeof(struct shim_pkt_hdr);
	} else if (n != sizeof(*uh) + sizeof(struct shim_pkt_hdr) ||
		   pkt->e.hdr.paylen > ((uh->rhf & SHIM_RHF_TID) ? 0 : SHIM_INLINE_MAX)) {
		u->st.drop_len++;
		return false;
	}
	return true;
}

/* The flow of a validated datagram's source: found, learned, restarted
 * or created.  NULL: drop (a previous life's straggler, no memory). */
static struct shim_udp_link *shim_udp_source(struct shim_udp *u, const struct sockaddr_in *from,
					     const struct shim_udp_hdr *uh)
{
	struct shim_udp_link *l = shim_udp_link_find(u, from->sin_addr.s_addr, from->sin_port);

	if (!l) {
		l = shim_udp_link_new(u, from->sin_addr.s_addr, from->sin_port);
		if (!l) {
			u->st.drop_nomem++;
			return NULL;
		}
	}
	if (l->remote_nonce != uh->src_nonce) {
		if (uh->src_nonce == l->old_nonce) {
			u->st.drop_dest++;
			return NULL;
		}
		if (l->remote_nonce)
			shim_udp_link_reset(l, uh->src_nonce);
		else
			l->remote_nonce = uh->src_nonce;
	}
	atomic_store_explicit(&l->rx_ns, shim_udp_now(), memory_order_relaxed);
	if (l->learned.nonce != uh->src_nonce || !l->learned.lid) {
		l->learned.host_id = uh->src_host;
		l->learned.ipv4 = from->sin_addr.s_addr;
		l->learned.udp_port = from->sin_port;
		l->learned.lid = uh->src_lid;
		l->learned.ctx = uh->src_ctx;
		l->learned.unit = uh->src_unit;
		l->learned.nonce = uh->src_nonce;
		l->learned.uid = (uint32_t)geteuid();
		l->pp.pub.lid = uh->src_lid;
		l->pp.pub.ctx = uh->src_ctx;
	}
	return l;
}

int shim_udp_recv(struct shim_ctx *ctx, struct shim_udp_pkt *pkts, int max)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;
	int n, got = 0;

	if (!u || !pkts || max <= 0)
		return 0;
	if (max > (int)SHIM_UDP_BATCH)
		max = (int)SHIM_UDP_BATCH;
	for (int i = 0; i < max; i++) {
		u->iovs[i].iov_base = u->rbuf + (size_t)i * u->rbuf_sz;
		u->iovs[i].iov_len = u->rbuf_sz;
		memset(&u->msgs[i].msg_hdr, 0, sizeof(u->msgs[i].msg_hdr));
		u->msgs[i].msg_hdr.msg_iov = &u->iovs[i];
		u->msgs[i].msg_hdr.msg_iovlen = 1;
		u->msgs[i].msg_hdr.msg_name = &u->from[i];
		u->msgs[i].msg_hdr.msg_namelen = sizeof(u->from[i]);
	}
	if (u->wd_running)
		atomic_store_explicit(&u->app_ns, shim_udp_now(), memory_order_relaxed);
	n = recvmmsg(u->fd, u->msgs, (unsigned int)max, MSG_DONTWAIT, NULL);
	for (int i = 0; i < n; i++) {
		struct shim_udp_pkt *pkt = &pkts[got];
		struct shim_udp_link *l;

		u->st.rx_datagrams++;
		if ((u->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ||
		    u->msgs[i].msg_hdr.msg_namelen != sizeof(struct sockaddr_in)) {
			u->st.drop_len++;
			continue;
		}
		if (!shim_udp_valid(u, u->iovs[i].iov_base, u->msgs[i].msg_len, pkt))
			continue;
		l = shim_udp_source(u, &u->from[i], &pkt->uh);
		if (!l)
			continue;
		pkt->peer = &l->pp.pub;
		got++;
	}
	return got;
}

/* A producer handle on our own receive ring, opened on first use. */
static int shim_udp_self(struct shim_udp *u)
{
	struct shim_addr me;
	int rc;

	if (u->self)
		return 0;
	shim_ctx_addr(u->ctx, &me);
	rc = shim_peer_open_shm(u->ctx->dev, &me, &u->self);
	return rc == -EAGAIN ? -EAGAIN : rc ? -EINVAL : 0;
}

static int shim_udp_reserve_self(struct shim_udp *u, uint32_t egr, struct shim_pio_resv *r)
{
	int rc = shim_pio_reserve(u->self, 1, egr, r);

	return rc == -EAGAIN ? -EAGAIN : rc ? -EINVAL : 0;
}

int shim_udp_deliver(struct shim_ctx *ctx, const struct shim_udp_pkt *pkt)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	uint32_t rhf = 0, egr = 0;
	int rc;

	if (!u || !pkt || pkt->uh.type != SHIM_UDP_DATA)
		return -EINVAL;
	rc = shim_udp_self(u);
	if (rc)
		return rc;
	if (pkt->e.rhf & SHIM_RHF_TID) {
		/* expected receive: straight into the registered buffer; a
		 * header-only entry tells the provider it is there */
		if (!(pkt->e.rhf & SHIM_RHF_EGR) || !pkt->pay)
			return -EINVAL;
		rc = shim_udp_reserve_self(u, 0, &r);
		if (rc)
			return rc;
		rc = shim_tid_place_wire(ctx, pkt->e.hdr.p.u32[0], pkt->e.hdr.p.u64[1], pkt->pay,
					 pkt->e.hdr.paylen);
		rhf = rc ? SHIM_RHF_ERR_LEN : SHIM_RHF_TID | SHIM_RHF_PLACED;
	} else {
		if (pkt->e.rhf & SHIM_RHF_EGR)
			egr = pkt->e.hdr.paylen;
		rc = shim_udp_reserve_self(u, egr, &r);
		if (rc)
			return rc;
		if (egr) {
			memcpy(r.egr, pkt->pay, egr);
			rhf = shim_rhf_egr(u->self, &r, 0);
		}
	}
	e = shim_pio_entry(u->self, &r, 0);
	e->hdr = pkt->e.hdr;
	/* the socket and the session said it is ours */
	e->hdr.dlid = ctx->rx.lid;
	e->hdr.dctx = ctx->rx.ctx;
	shim_pio_publish(u->self, &r, 0, rhf);
	return 0;
}

int shim_udp_deliver_n(struct shim_ctx *ctx, const struct shim_udp_pkt *const *pkts, uint32_t n)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;
	struct shim_pio_resv r;
	uint64_t bytes = 0;
	uint32_t off = 0;
	int rc;

	if (!u || !pkts || !n)
		return -EINVAL;
	rc = shim_udp_self(u);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		const struct shim_udp_pkt *p = pkts[i];

		if (p->uh.type != SHIM_UDP_DATA || p->e.rhf != SHIM_RHF_EGR || !p->pay)
			return -EINVAL;
		bytes += (p->e.hdr.paylen + SHIM_BLOCK - 1) & ~(uint64_t)(SHIM_BLOCK - 1);
	}
	if (bytes > UINT32_MAX)
		return -EINVAL;
	rc = shim_pio_reserve(u->self, n, (uint32_t)bytes, &r);
	if (rc)
		return rc == -EAGAIN ? -EAGAIN : -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		struct shim_rhq_entry *e = shim_pio_entry(u->self, &r, i);

		memcpy(r.egr + off, pkts[i]->pay, pkts[i]->e.hdr.paylen);
		e->hdr = pkts[i]->e.hdr;
		e->hdr.dlid = ctx->rx.lid;
		e->hdr.dctx = ctx->rx.ctx;
		shim_pio_publish(u->self, &r, i, shim_rhf_egr(u->self, &r, off));
		off += (pkts[i]->e.hdr.paylen + SHIM_BLOCK - 1) & ~(SHIM_BLOCK - 1);
	}
	return 0;
}

void shim_udp_stats(const struct shim_ctx *ctx, struct shim_udp_stats *st)
{
	if (!st)
		return;
	if (ctx && ctx->udp)
		*st = ctx->udp->st;
	else
		memset(st, 0, sizeof(*st));
}

/* ---------------------------------------------------------------------
 * Open and close
 */
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
	u->rbuf_sz = sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr) + ctx->rx.mtu + 64;
	u->rbuf = malloc(u->rbuf_sz * SHIM_UDP_BATCH);
	u->scratch = malloc(u->rbuf_sz);
	u->held = malloc(u->rbuf_sz);
	u->tx = malloc(sizeof(*u->tx)); /* NULL: datagram by datagram */
	u->gso = true;
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!u->rbuf || !u->scratch || !u->held || u->fd < 0) {
		rc = u->fd < 0 ? -errno : -ENOMEM;
		goto err;
	}
	/* A receive queue that overflows loses whole bursts (each costs a
	 * timeout): ask for SHIM_UDP_RCVBUF, beyond net.core.rmem_max where
	 * we may (CAP_NET_ADMIN), and size each link's send ring, which
	 * bounds what is in flight towards a peer, to what a queue of the
	 * size we got holds (the kernel counts about twice a datagram's
	 * bytes, and reports twice what it grants); peers are assumed to be
	 * configured alike.  Everything published is sent at once, so
	 * nothing waits for this process to progress (the watchdog only
	 * sends again). */
	if (setsockopt(u->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		(void)setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	(void)setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	bl = sizeof(got);
	if (getsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &got, &bl) < 0 || got <= 0)
		got = 212992;
	u->ring_bytes = SHIM_UDP_RING_BYTES;
	while (u->ring_bytes > SHIM_UDP_RING_MIN && u->ring_bytes > (uint32_t)got / 4u)
		u->ring_bytes /= 2;
	/* Every address of the host (the name says which one to use): a
	 * peer that reached us through loopback is answered from there. */
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	sin.sin_port = port;
	if (bind(u->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(u->fd, (struct sockaddr *)&sin, &sl) < 0) {
		rc = -errno;
		goto err;
	}
	u->port = sin.sin_port;
	/* Sleeping waits on both the wake-up socket and this one. */
	ctx->wait_fd = epoll_create1(EPOLL_CLOEXEC);
	if (ctx->wait_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN};

		if (epoll_ctl(ctx->wait_fd, EPOLL_CTL_ADD, ctx->sock_fd, &ev) < 0 ||
		    epoll_ctl(ctx->wait_fd, EPOLL_CTL_ADD, u->fd, &ev) < 0) {
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
	free(u->rbuf);
	free(u->scratch);
	free(u->held);
	free(u->tx);
	free(u);
	return rc;
}

bool shim_udp_on(const struct shim_ctx *ctx)
{
	return ctx && ctx->udp;
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
		shim_peer_close(u->self);
	close(u->fd);
	if (ctx->wait_fd >= 0)
		close(ctx->wait_fd);
	ctx->wait_fd = -1;
	free(u->rbuf);
	free(u->scratch);
	free(u->held);
	free(u->tx);
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
