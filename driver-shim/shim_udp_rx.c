/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp_rx.c - the udp wire's receive side: datagrams taken from the
 * socket (recvmsg, then recvmmsg while they come back to back), validated
 * (length, magic, the tag, CRC32C, sender, job key, sessions) with drops
 * counted and the first of each kind reported, the flow of each source
 * found, learned, restarted or created, and in-order packets the provider
 * hands back delivered into the context's own receive ring or a
 * registered buffer (shim_udp_deliver, shim_udp_deliver_n); the drop
 * counters (shim_udp_stats).  Calls into shim_udp.c (links) and
 * shim_udp_wd.c (the tag check, a GRO run's lengths), never the other
 * way.  See shim_udp.c for the whole wire.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shim_udp.h"

/* ---------------------------------------------------------------------
 * Receive
 */
/* Drop reasons a user hears about once per context (the counters say
 * how often): bits of u->warned. */
enum {
	SHIM_UDP_WARN_MAC = 1u << 0,
	SHIM_UDP_WARN_IDENT = 1u << 1,
	SHIM_UDP_WARN_JKEY = 1u << 2,
	SHIM_UDP_WARN_QUOTA = 1u << 3,
	SHIM_UDP_WARN_MODE = 1u << 4,
};

static void shim_udp_drop(struct shim_udp *u, uint64_t *counter, uint32_t bit,
			  const struct sockaddr_in *from, const char *why)
{
	void (*warn)(const char *) = u->ctx->dev->params.warn;
	char msg[256], ip[INET_ADDRSTRLEN];

	(*counter)++;
	if (u->warned & bit)
		return;
	u->warned |= bit;
	if (!warn)
		return;
	if (!inet_ntop(AF_INET, &from->sin_addr, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	snprintf(msg, sizeof(msg),
		 "udp wire: dropped a datagram from %s:%u: %s (first of its kind; all are "
		 "counted in FI_OPX_STATS)",
		 ip, (unsigned)ntohs(from->sin_port), why);
	warn(msg);
}

/* A tagged PACK datagram's packets, each checked as a DATA datagram's
 * would be (its length against its header, only EGR, the sender named
 * in both headers), up to the datagram's last byte. */
static bool shim_udp_pack_valid(struct shim_udp *u, const uint8_t *d, size_t n,
				const struct sockaddr_in *from, const struct shim_udp_hdr *uh)
{
	size_t off = sizeof(*uh);

	if (uh->rhf < 2 || uh->rhf > SHIM_UDP_PACK_MAX) {
		u->st.drop_len++;
		return false;
	}
	for (uint32_t k = 0; k < uh->rhf; k++) {
		struct shim_udp_frame fr;
		struct shim_pkt_hdr ph;

		if (n - off < sizeof(fr) + sizeof(ph)) {
			u->st.drop_len++;
			return false;
		}
		memcpy(&fr, d + off, sizeof(fr));
		memcpy(&ph, d + off + sizeof(fr), sizeof(ph));
		off += sizeof(fr) + sizeof(ph);
		if ((fr.rhf & ~SHIM_RHF_EGR) ||
		    (fr.rhf ? !fr.len || fr.len != ph.paylen || fr.len > u->ctx->rx.mtu ||
				      fr.len > n - off
			    : fr.len || ph.paylen > SHIM_INLINE_MAX)) {
			u->st.drop_len++;
			return false;
		}
		if (ph.slid != uh->src_lid || ph.sctx != uh->src_ctx) {
			shim_udp_drop(u, &u->st.drop_ident, SHIM_UDP_WARN_IDENT, from,
				      "its packet header names another sender than its datagram");
			return false;
		}
		off += fr.len;
	}
	if (off != n) {
		u->st.drop_len++;
		return false;
	}
	return true;
}

static bool shim_udp_valid(struct shim_udp *u, uint8_t *d, size_t n, const struct sockaddr_in *from,
			   struct shim_udp_pkt *pkt)
{
	struct shim_udp_hdr *uh = &pkt->uh, *dh = (struct shim_udp_hdr *)d;
	uint32_t crc, want;
	size_t hl;

	if (n < sizeof(*uh)) {
		u->st.drop_len++;
		return false;
	}
	memcpy(uh, d, sizeof(*uh));
	if (uh->magic != SHIM_UDP_MAGIC || uh->version != SHIM_UDP_VERSION || uh->type < SHIM_UDP_DATA ||
	    uh->type > SHIM_UDP_PACK) {
		u->st.drop_magic++;
		return false;
	}
	if (uh->type == SHIM_UDP_DATA) {
		if (n < SHIM_UDP_HDRS) {
			u->st.drop_len++;
			return false;
		}
		/* copied once: the tag and everything after read this copy */
		memset(&pkt->e, 0, sizeof(pkt->e));
		memcpy(&pkt->e.hdr, d + sizeof(*uh), sizeof(pkt->e.hdr));
	}
	/* Nothing but the length and the magic is believed before the tag:
	 * a datagram without the job's secret gets no further look, no
	 * reply and no state. */
	if ((uh->auth & ~SHIM_UDP_AUTH_PCRC) != (unsigned)u->auth.mode) {
		shim_udp_drop(u, &u->st.drop_mac, SHIM_UDP_WARN_MODE, from,
			      "another FI_OPX_AUTH mode (every process of a job must use the same)");
		return false;
	}
	if (!shim_udp_authentic(u, uh, &pkt->e.hdr, d, n)) {
		shim_udp_drop(u, &u->st.drop_mac, SHIM_UDP_WARN_MAC, from,
			      "not authenticated with this job's secret (FI_OPX_AUTH_KEY, the "
			      "launcher's job secret, the user's key file)");
		return false;
	}
	want = uh->crc;
	dh->crc = 0;
	memset(dh->mac, 0, sizeof(dh->mac));
	hl = n < SHIM_UDP_HDRS ? n : SHIM_UDP_HDRS;
	crc = shim_crc32c(0, d, hl);
	if (n > hl && (uh->auth & SHIM_UDP_AUTH_PCRC)) /* the sender's choice */
		crc = shim_crc32c_wide(crc, d + hl, n - hl);
	if (crc != want) {
		u->st.drop_crc++;
		return false;
	}
	/* The sender is the address the kernel says it came from; the
	 * header (covered by the tag) must name the same. */
	if (uh->src_ipv4 != from->sin_addr.s_addr || uh->src_port != from->sin_port) {
		shim_udp_drop(u, &u->st.drop_ident, SHIM_UDP_WARN_IDENT, from,
			      "its header names another sender than the address it came from");
		return false;
	}
	if (uh->jkey != u->ctx->rx.jkey) {
		shim_udp_drop(u, &u->st.drop_jkey, SHIM_UDP_WARN_JKEY, from,
			      "another job's key (FI_OPX_JKEY, FI_OPX_UUID, the launcher's job id)");
		return false;
	}
	if ((uh->dst_nonce && uh->dst_nonce != u->ctx->nonce) || !uh->src_nonce) {
		u->st.drop_dest++;
		return false;
	}
	pkt->pay = NULL;
	if (uh->type == SHIM_UDP_PACK)
		return shim_udp_pack_valid(u, d, n, from, uh);
	if (uh->type != SHIM_UDP_DATA) {
		if (n != sizeof(*uh)) {
			u->st.drop_len++;
			return false;
		}
		return true;
	}
	if (uh->rhf & ~(SHIM_RHF_EGR | SHIM_RHF_TID)) {
		u->st.drop_len++;
		return false;
	}
	pkt->e.rhf = uh->rhf;
	/* the packet's own source fields say the same as the datagram's */
	if (pkt->e.hdr.slid != uh->src_lid || pkt->e.hdr.sctx != uh->src_ctx) {
		shim_udp_drop(u, &u->st.drop_ident, SHIM_UDP_WARN_IDENT, from,
			      "its packet header names another sender than its datagram");
		return false;
	}
	if (uh->rhf & SHIM_RHF_EGR) {
		size_t pay = n - SHIM_UDP_HDRS;

		if (!pay || pkt->e.hdr.paylen != pay || pay > u->ctx->rx.mtu) {
			u->st.drop_len++;
			return false;
		}
		pkt->pay = d + SHIM_UDP_HDRS;
	} else if (n != SHIM_UDP_HDRS ||
		   pkt->e.hdr.paylen > ((uh->rhf & SHIM_RHF_TID) ? 0 : SHIM_INLINE_MAX)) {
		u->st.drop_len++;
		return false;
	}
	return true;
}

/* The largest payload the peer says it can receive: the link grows to it
 * (never beyond our own).  It only grows: packets staged at the smaller
 * size stay valid, which a shrink would not give. */
static void shim_udp_link_mtu(struct shim_udp_link *l, uint16_t blocks)
{
	struct shim_peer *p = &l->pp.pub;
	uint32_t m = (uint32_t)blocks * SHIM_BLOCK;

	if (m > l->udp->mtu)
		m = l->udp->mtu;
	if (m > p->mtu) {
		p->mtu = m;
		p->ctl->mtu = m;
	}
}

/* The flow of a validated datagram's source: found, learned, restarted
 * or created.  NULL: drop (a previous life's straggler, no memory). */
static struct shim_udp_link *shim_udp_source(struct shim_udp *u, const struct sockaddr_in *from,
					     const struct shim_udp_hdr *uh, uint64_t now)
{
	struct shim_udp_link *l = shim_udp_link_find(u, from->sin_addr.s_addr, from->sin_port);
	bool new_session = false;

	if (!l) {
		if (u->nlinks >= u->max_links) {
			shim_udp_drop(u, &u->st.drop_quota, SHIM_UDP_WARN_QUOTA, from,
				      "this endpoint already has as many peers as it may keep");
			return NULL;
		}
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
		new_session = true;
	}
	/* Within one session the peer at this address keeps the identity it
	 * (or the address vector) gave first: a datagram naming another
	 * lid/ctx is not believed. */
	if (!new_session && l->learned.lid &&
	    (l->learned.lid != uh->src_lid || l->learned.ctx != uh->src_ctx)) {
		shim_udp_drop(u, &u->st.drop_ident, SHIM_UDP_WARN_IDENT, from,
			      "it names another endpoint than its address had");
		return NULL;
	}
	atomic_store_explicit(&l->rx_ns, now, memory_order_relaxed);
	shim_udp_link_mtu(l, uh->src_mtu);
	/* 1 for 0 KiB: heard, one packet (0 is "not heard yet") */
	l->pp.pub.ctl->rx_eager_max = uh->src_eager ? (uint32_t)uh->src_eager << 10 : 1;
	if (new_session || l->learned.nonce != uh->src_nonce || !l->learned.lid) {
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

/* One receive call: up to max datagrams (with UDP_GRO, buffers that may
 * each hold a run of them) into msgs[]; how many, or -1. */
static int shim_udp_take(struct shim_udp *u, int max)
{
	int n;

	/* the kernel wrote only the address lengths of what it filled last
	 * time (the rest was set up at open): an empty poll costs no setup */
	for (int i = 0; i < u->rx_filled; i++)
		u->msgs[i].msg_hdr.msg_namelen = sizeof(u->from[i]);
	if (u->rx_batch) {
		n = recvmmsg(u->fd, u->msgs, (unsigned int)max, MSG_DONTWAIT, NULL);
		u->rx_batch = n > 1;
		u->rx_empty = n < max; /* fewer than asked for: nothing left */
	} else {
		/* recvfrom, not recvmsg: no message header to copy in, the
		 * cheapest poll (106 against 156 ns empty, here); MSG_TRUNC
		 * makes it return a datagram's real length */
		struct msghdr *mh = &u->msgs[0].msg_hdr;
		socklen_t alen = sizeof(u->from[0]);
		ssize_t len = recvfrom(u->fd, u->iovs[0].iov_base, u->iovs[0].iov_len,
				       MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&u->from[0], &alen);

		u->rx_empty = len < 0;
		if (len < 0) {
			n = -1;
			u->rx_hits = 0;
		} else {
			n = 1;
			mh->msg_namelen = alen;
			mh->msg_flags = (size_t)len > u->iovs[0].iov_len ? MSG_TRUNC : 0;
			u->msgs[0].msg_len = (unsigned int)len;
			if (++u->rx_hits >= SHIM_UDP_BATCH_AFTER && max > 1) {
				u->rx_batch = true;
				u->rx_hits = 0;
			}
		}
	}
	u->rx_filled = n > 0 ? n : 0;
	u->rx_msg = 0;
	u->rx_off = 0;
	return n;
}

/* The next datagram of what the last receive call took: its bytes in
 * *d and *len, the buffer's index in *i.  false: all handed out. */
static bool shim_udp_next_seg(struct shim_udp *u, uint8_t **d, size_t *len, int *i)
{
	while (u->rx_msg < u->rx_filled) {
		struct mmsghdr *m = &u->msgs[u->rx_msg];
		uint8_t *buf = u->iovs[u->rx_msg].iov_base;
		size_t n = m->msg_len;

		if (u->rx_off == 0) {
			if ((m->msg_hdr.msg_flags & MSG_TRUNC) ||
			    m->msg_hdr.msg_namelen != sizeof(struct sockaddr_in)) {
				u->st.rx_datagrams++;
				u->st.drop_len++;
				u->rx_msg++;
				continue;
			}
			/* a run (UDP_GRO): as many datagrams as the first's
			 * length makes; without GRO a buffer is one */
			u->rx_seg = u->gro ? shim_udp_seg_len(buf, n) : n;
			if (!u->rx_seg)
				u->rx_seg = n ? n : 1;
		}
		*i = u->rx_msg;
		*d = buf + u->rx_off;
		*len = n - u->rx_off < u->rx_seg ? n - u->rx_off : u->rx_seg;
		u->rx_off += *len;
		if (u->rx_off >= n) {
			u->rx_msg++;
			u->rx_off = 0;
		}
		u->st.rx_datagrams++;
		return true;
	}
	return false;
}

/* Hand out up to max packets of the PACK datagram being handed out (it
 * was validated whole: shim_udp_pack_valid), as the DATA packets they
 * are; how many.  Its flow is looked up again: a call may come after the
 * provider forgot it (then the rest is dropped). */
static int shim_udp_pack_next(struct shim_udp *u, struct shim_udp_pkt *pkts, int max,
			      uint64_t now)
{
	struct shim_udp_link *l =
		shim_udp_link_find(u, u->pk_from.sin_addr.s_addr, u->pk_from.sin_port);
	int got = 0;

	if (!l || l->remote_nonce != u->pk_uh.src_nonce) {
		u->pk_left = 0;
		return 0;
	}
	for (; got < max && u->pk_left; got++) {
		struct shim_udp_pkt *pkt = &pkts[got];
		struct shim_udp_frame fr;

		memcpy(&fr, u->pk_d + u->pk_off, sizeof(fr));
		pkt->uh = u->pk_uh;
		pkt->uh.type = SHIM_UDP_DATA;
		pkt->uh.psn = u->pk_uh.psn + u->pk_idx;
		pkt->uh.rhf = fr.rhf;
		memset(&pkt->e, 0, sizeof(pkt->e));
		memcpy(&pkt->e.hdr, u->pk_d + u->pk_off + sizeof(fr), sizeof(pkt->e.hdr));
		pkt->e.rhf = fr.rhf;
		u->pk_off += sizeof(fr) + sizeof(pkt->e.hdr);
		pkt->pay = fr.len ? u->pk_d + u->pk_off : NULL;
		u->pk_off += fr.len;
		pkt->peer = &l->pp.pub;
		pkt->rx_ns = now;
		pkt->dgram_first = !u->pk_idx;
		u->pk_idx++;
		u->pk_left--;
		u->st.rx_packed++;
	}
	return got;
}

int shim_udp_recv(struct shim_ctx *ctx, struct shim_udp_pkt *pkts, int max)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;
	uint64_t now = 0;
	uint8_t *d;
	size_t len;
	int i, got = 0;

	if (!u || !pkts || max <= 0)
		return 0;
	if (max > (int)SHIM_UDP_BATCH)
		max = (int)SHIM_UDP_BATCH;
	if (u->wd_running)
		atomic_store_explicit(&u->app_polls,
				      atomic_load_explicit(&u->app_polls, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	/* what the last call left of a run first: the buffers it points
	 * into are not received into again before it is all handed out */
	if (!u->pk_left && u->rx_msg >= u->rx_filled && shim_udp_take(u, max) <= 0)
		return 0;
	now = shim_udp_now(); /* one clock read for the batch */
	while (got < max) {
		struct shim_udp_pkt *pkt = &pkts[got];
		struct shim_udp_link *l;

		if (u->pk_left) {
			got += shim_udp_pack_next(u, pkts + got, max - got, now);
			continue;
		}
		if (!shim_udp_next_seg(u, &d, &len, &i))
			break;
		if (!shim_udp_valid(u, d, len, &u->from[i], pkt))
			continue;
		l = shim_udp_source(u, &u->from[i], &pkt->uh, now);
		if (!l)
			continue;
		if (pkt->uh.type == SHIM_UDP_PACK) {
			u->pk_d = d;
			u->pk_off = sizeof(pkt->uh);
			u->pk_left = pkt->uh.rhf;
			u->pk_idx = 0;
			u->pk_uh = pkt->uh;
			u->pk_from = u->from[i];
			continue;
		}
		pkt->peer = &l->pp.pub;
		pkt->rx_ns = now;
		pkt->dgram_first = true;
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
	shim_ctx_addr_shm(u->ctx, &me);
	rc = shim_shm_peer_open(u->ctx->dev, &me, &u->self);
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
		rc = shim_tid_place_wire(ctx, pkt->e.hdr.p.tid.handle, pkt->e.hdr.p.tid.offset, pkt->pay,
					 pkt->e.hdr.paylen, pkt->e.hdr.slid, pkt->e.hdr.sctx);
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
	if (shim_pio_publish_entry(u->self, &r, 0, rhf))
		shim_shm_peer_wake(u->self);
	return 0;
}

int shim_udp_deliver_n(struct shim_ctx *ctx, const struct shim_udp_pkt *const *pkts, uint32_t n)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;
	struct shim_pio_resv r;
	uint64_t bytes = 0;
	uint32_t off = 0;
	bool wake = false;
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
		wake |= shim_pio_publish_entry(u->self, &r, i, shim_rhf_egr(u->self, &r, off));
		off += (pkts[i]->e.hdr.paylen + SHIM_BLOCK - 1) & ~(SHIM_BLOCK - 1);
	}
	if (wake)
		shim_shm_peer_wake(u->self); /* once for the batch */
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
