/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp_tx.c - the udp wire's send side: datagrams framed from the
 * link's send ring, batched first transmissions (sendmmsg, GSO), small
 * packets packed into shared datagrams (PACK), fault injection,
 * retransmission and control datagrams, and the flow state the
 * reliability module reads (acknowledged, sent, times).  See shim_udp.c
 * for the whole wire.
 *
 * Packing.  A packet published to a peer that has nothing in flight goes
 * at once: a lone message never waits for company.  While datagrams to
 * the peer are in flight (sent, not yet acknowledged), small packets
 * wait in the send ring (the link joins the wire's defer list) until a
 * flush point: a datagram's worth waits (it goes as one PACK datagram),
 * a packet that cannot be packed is published (everything goes), or the
 * owner flushes (shim_udp_flush: the provider's every progress call, and
 * before a sleep).  The per-datagram cost of a kernel socket (a system
 * call each way, a few microseconds) is then paid once per batch instead
 * of once per message.
 */
#include <errno.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "shim_udp.h"

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
	if (!u->faulty) {
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

	if (!u)
		return;
	if (u->ndefer)
		shim_udp_flush_waiting(u);
	if (!u->held_len)
		return;
	pthread_mutex_lock(&u->lock);
	shim_udp_flush_held(u);
	pthread_mutex_unlock(&u->lock);
}

void shim_udp_cork(struct shim_ctx *ctx)
{
	if (ctx && ctx->udp)
		ctx->udp->cork = true;
}

void shim_udp_uncork(struct shim_ctx *ctx)
{
	struct shim_udp *u = ctx ? ctx->udp : NULL;

	if (!u || !u->cork)
		return;
	u->cork = false;
	if (u->ndefer)
		shim_udp_flush_waiting(u);
}

/* Our side of a header: who we are (ack 0, no destination nonce). */
static void shim_udp_hdr_self(struct shim_udp *u, struct shim_udp_hdr *uh, uint8_t type, uint32_t psn)
{
	const struct shim_ctx *ctx = u->ctx;

	memset(uh, 0, sizeof(*uh));
	uh->magic = SHIM_UDP_MAGIC;
	uh->version = SHIM_UDP_VERSION;
	uh->type = type;
	uh->jkey = ctx->rx.jkey;
	uh->psn = psn;
	uh->src_nonce = ctx->nonce;
	uh->src_host = ctx->dev->host_id;
	uh->src_lid = ctx->rx.lid;
	uh->src_ctx = ctx->rx.ctx;
	uh->src_unit = ctx->rx.unit;
	uh->src_mtu = (uint16_t)(u->mtu / SHIM_BLOCK);
	uh->src_ipv4 = u->ipv4;
	uh->src_port = u->port;
	/* before the crc, which covers it */
	uh->auth = (uint8_t)((unsigned)u->auth.mode | (u->pcrc ? SHIM_UDP_AUTH_PCRC : 0u));
	uh->src_eager = ctx->udp_eager_kib;
}

static void shim_udp_hdr_fill(struct shim_udp_link *l, struct shim_udp_hdr *uh,
			      uint8_t type, uint32_t psn)
{
	shim_udp_hdr_self(l->udp, uh, type, psn);
	uh->ack = l->pp.pub.udp_ack;
	l->pp.pub.udp_ack_sent = uh->ack;
	uh->dst_nonce = l->remote_nonce;
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
		/* l->ext, not ext_live: the watchdog frames too, and only the
		 * table's pointer is written under the lock it holds */
		const uint8_t *ext = l->ext ? l->ext[pos & p->hdrq_mask] : NULL;

		iov[2].iov_base = ext ? (void *)(uintptr_t)ext
				      : p->egr + (size_t)SHIM_RHF_EGRIDX(e->rhf) * SHIM_BLOCK;
		iov[2].iov_len = e->hdr.paylen;
		if (l->udp->pcrc)
			crc = shim_crc32c_wide(crc, iov[2].iov_base, iov[2].iov_len);
		*len += e->hdr.paylen;
		n = 3;
	}
	uh->crc = crc;
	shim_udp_auth_seal(&l->udp->auth, uh, &e->hdr, n == 3 ? iov[2].iov_base : NULL,
			   n == 3 ? iov[2].iov_len : 0);
	return n;
}

/* Transmit the staged packet at ring position pos. */
void shim_udp_xmit(struct shim_udp_link *l, uint32_t pos)
{
	struct shim_udp_hdr uh;
	struct iovec iov[3];
	uint32_t len;
	int n = shim_udp_frame(l, pos, &uh, iov, &len);

	shim_udp_send(l->udp, &l->to, iov, n);
	shim_udp_sent(l);
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
	shim_udp_sent(l);
}

/* ---------------------------------------------------------------------
 * Packing
 */
/* Bytes the staged packet e takes in a PACK datagram. */
static uint32_t shim_udp_frame_bytes(const struct shim_rhq_entry *e)
{
	return (uint32_t)(sizeof(struct shim_udp_frame) + sizeof(e->hdr)) +
	       ((e->rhf & SHIM_RHF_EGR) ? e->hdr.paylen : 0u);
}

/* Bytes after the udp header one datagram to the link's peer carries:
 * what a full DATA datagram's packet header and payload take. */
static uint32_t shim_udp_pack_cap(const struct shim_udp_link *l)
{
	return (uint32_t)sizeof(struct shim_pkt_hdr) + l->pp.pub.mtu;
}

/* How many staged packets from ring position pos (at most max) one PACK
 * datagram carries (TID packets never: their payload goes to a
 * registered buffer, and they are large). */
static uint32_t shim_udp_pack_count(const struct shim_udp_link *l, uint32_t pos, uint32_t max)
{
	const struct shim_peer *p = &l->pp.pub;
	uint32_t cap = shim_udp_pack_cap(l), bytes = 0, k = 0;

	if (max > SHIM_UDP_PACK_MAX)
		max = SHIM_UDP_PACK_MAX;
	for (; k < max; k++) {
		const struct shim_rhq_entry *e = &p->hdrq[(pos + k) & p->hdrq_mask];
		uint32_t b = shim_udp_frame_bytes(e);

		if ((e->rhf & SHIM_RHF_TID) || bytes + b > cap)
			break;
		bytes += b;
	}
	return k;
}

/* First transmission of the k (2..SHIM_UDP_PACK_MAX, fitting) staged
 * packets from ring position pos in one PACK datagram, built in u->pack:
 * the CRC as for DATA (the first SHIM_UDP_HDRS bytes, then the rest
 * unless the tag covers it), the tag over everything. */
static void shim_udp_xmit_pack(struct shim_udp_link *l, uint32_t pos, uint32_t k)
{
	struct shim_udp *u = l->udp;
	const struct shim_peer *p = &l->pp.pub;
	struct shim_udp_hdr *uh = (struct shim_udp_hdr *)(void *)u->pack;
	uint8_t *body = u->pack + sizeof(*uh);
	size_t len = 0, head;
	struct iovec iov;
	uint32_t crc;

	for (uint32_t i = 0; i < k; i++) {
		const struct shim_rhq_entry *e = &p->hdrq[(pos + i) & p->hdrq_mask];
		struct shim_udp_frame fr = {.rhf = e->rhf & SHIM_RHF_EGR, .len = 0};

		if (fr.rhf)
			fr.len = e->hdr.paylen;
		memcpy(body + len, &fr, sizeof(fr));
		len += sizeof(fr);
		memcpy(body + len, &e->hdr, sizeof(e->hdr));
		len += sizeof(e->hdr);
		if (fr.len) {
			memcpy(body + len, p->egr + (size_t)SHIM_RHF_EGRIDX(e->rhf) * SHIM_BLOCK,
			       fr.len);
			len += fr.len;
		}
	}
	shim_udp_hdr_fill(l, uh, SHIM_UDP_PACK, pos - l->base);
	uh->rhf = k;
	head = len < sizeof(struct shim_pkt_hdr) ? len : sizeof(struct shim_pkt_hdr);
	crc = shim_crc32c(0, uh, sizeof(*uh));
	crc = shim_crc32c(crc, body, head);
	if (u->pcrc)
		crc = shim_crc32c_wide(crc, body + head, len - head);
	uh->crc = crc;
	shim_udp_auth_seal(&u->auth, uh, NULL, body, len);
	iov.iov_base = u->pack;
	iov.iov_len = sizeof(*uh) + len;
	shim_udp_send(u, &l->to, &iov, 1);
	shim_udp_sent(l);
	u->st.tx_packed += k;
}

/* First transmission of the n staged packets from ring position pos, in
 * order: runs that share a datagram as PACK datagrams, the rest in
 * batches (or datagram by datagram with fault injection on). */
static void shim_udp_xmit_run(struct shim_udp_link *l, uint32_t pos, uint32_t n)
{
	struct shim_udp *u = l->udp;
	uint32_t i = 0;

	while (i < n) {
		uint32_t k = u->pack ? shim_udp_pack_count(l, pos + i, n - i) : 0, j;

		if (k >= 2) {
			shim_udp_xmit_pack(l, pos + i, k);
			i += k;
			continue;
		}
		for (j = i + 1; j < n && !(u->pack && shim_udp_pack_count(l, pos + j, 2) >= 2); j++)
			;
		if (j - i == 1 || !u->tx || u->faulty) {
			for (uint32_t m = i; m < j; m++)
				shim_udp_xmit(l, pos + m);
		} else {
			shim_udp_xmit_batch(l, pos + i, j - i);
		}
		i = j;
	}
}

static void shim_udp_advance(struct shim_udp_link *l, uint32_t n)
{
	__atomic_store_n(&l->sent, l->sent + n, __ATOMIC_RELEASE);
	l->wait_cnt = 0;
	l->wait_bytes = 0;
}

/* Whether the n packets published and not sent yet wait for company:
 * packing is on, datagrams to the peer are in flight, all of them can be
 * packed and less than a datagram's worth waits.  Counts what is new
 * since the last look (wait_cnt, wait_bytes).  *full: a datagram's worth
 * of packable packets waits (send one PACK, let the rest wait). */
static bool shim_udp_wait(struct shim_udp_link *l, uint32_t n, bool *full)
{
	struct shim_udp *u = l->udp;
	const struct shim_peer *p = &l->pp.pub;

	*full = false;
	if (!u->pack || l->flushing ||
	    l->sent == atomic_load_explicit(&p->ctl->hdr_head, memory_order_relaxed))
		return false;
	for (; l->wait_cnt < n; l->wait_cnt++) {
		const struct shim_rhq_entry *e = &p->hdrq[(l->sent + l->wait_cnt) & p->hdrq_mask];

		if (e->rhf & SHIM_RHF_TID)
			return false;
		l->wait_bytes += shim_udp_frame_bytes(e);
	}
	if (l->wait_bytes > shim_udp_pack_cap(l) || n >= SHIM_UDP_PACK_MAX) {
		*full = true;
		return false;
	}
	if (!l->waiting) {
		if (u->ndefer == SHIM_UDP_DEFER_MAX)
			return false;
		u->defer[u->ndefer++] = l;
		l->waiting = true;
	}
	return true;
}

/* The publish hook: transmit what was published since the last call, in
 * batches, small packets packed (see Packing above); with fault injection
 * on, datagram by datagram through it.  While held (shim_udp_hold),
 * publishes only accumulate. */
void shim_udp_kick(struct shim_peer_priv *pp)
{
	struct shim_udp_link *l = pp->link;
	struct shim_peer *p = &pp->pub;

	if (!l->udp || l->dead || l->hold)
		return;
	/* corked: the link waits on the defer list for the uncork (a full
	 * list: it goes now) */
	if (l->udp->cork && !l->flushing) {
		struct shim_udp *u = l->udp;

		if (l->waiting)
			return;
		if (u->ndefer < SHIM_UDP_DEFER_MAX) {
			u->defer[u->ndefer++] = l;
			l->waiting = true;
			return;
		}
	}
	for (;;) {
		uint32_t n = 0, k;
		bool full;

		while (n < SHIM_UDP_TX_BATCH &&
		       atomic_load_explicit(&p->hdrq[(l->sent + n) & p->hdrq_mask].seq,
					    memory_order_acquire) == l->sent + n + 1)
			n++;
		if (!n)
			return;
		if (shim_udp_wait(l, n, &full))
			return;
		if (full && (k = shim_udp_pack_count(l, l->sent, n)) >= 2) {
			/* a full datagram goes; what is left may wait */
			shim_udp_xmit_pack(l, l->sent, k);
			shim_udp_advance(l, k);
			continue;
		}
		shim_udp_xmit_run(l, l->sent, n);
		shim_udp_advance(l, n);
	}
}

void shim_udp_flush_waiting(struct shim_udp *u)
{
	uint32_t n = u->ndefer;

	u->ndefer = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct shim_udp_link *l = u->defer[i];

		l->waiting = false;
		l->flushing = true;
		shim_udp_kick(&l->pp);
		l->flushing = false;
	}
}

void shim_udp_unwait(struct shim_udp_link *l)
{
	struct shim_udp *u = l->udp;

	if (!u || !l->waiting)
		return;
	for (uint32_t i = 0; i < u->ndefer; i++)
		if (u->defer[i] == l) {
			u->defer[i] = u->defer[--u->ndefer];
			break;
		}
	l->waiting = false;
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

int shim_udp_resend_run(struct shim_peer *peer, uint32_t psn, uint32_t n)
{
	struct shim_udp_link *l;
	uint32_t head, first = 0, got = 0;

	static_assert(SHIM_UDP_RESEND_MAX <= SHIM_UDP_TX_BATCH, "a run is one batch");
	if (!peer || peer->wire != SHIM_WIRE_UDP || !n || n > SHIM_UDP_RESEND_MAX)
		return -EINVAL;
	l = ((struct shim_peer_priv *)peer)->link;
	if (!l->udp || l->dead)
		return -ENOENT;
	/* staged: [head, sent), one stretch, so its part of the run is one too */
	head = atomic_load_explicit(&peer->ctl->hdr_head, memory_order_relaxed);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t pos = l->base + psn + k;

		if ((uint32_t)(pos - head) >= (uint32_t)(l->sent - head)) {
			if (got)
				break;
			continue;
		}
		if (!got)
			first = pos;
		got++;
	}
	if (!got)
		return -ENOENT;
	/* a run goes as first transmissions do (GSO, one system call);
	 * with fault injection on, datagram by datagram through it */
	if (got > 1 && l->udp->tx && !l->udp->faulty) {
		shim_udp_xmit_batch(l, first, got);
	} else {
		for (uint32_t k = 0; k < got; k++)
			shim_udp_xmit(l, first + k);
	}
	return (int)got;
}

int shim_udp_resend(struct shim_peer *peer, uint32_t psn)
{
	int rc = shim_udp_resend_run(peer, psn, 1);

	return rc < 0 ? rc : 0;
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
	uh.rhf = mask; /* NACK: more missing; ACK: flags */
	uh.crc = shim_crc32c(0, &uh, sizeof(uh));
	shim_udp_auth_seal(&l->udp->auth, &uh, NULL, NULL, 0);
	iov.iov_base = &uh;
	iov.iov_len = sizeof(uh);
	shim_udp_send(l->udp, &l->to, &iov, 1);
	l->udp->st.tx_ctl++;
	shim_udp_sent(l);
	return 0;
}

void shim_udp_send_held(struct shim_udp *u, const struct sockaddr_in *to, uint32_t dst_nonce)
{
	struct shim_udp_hdr uh;
	struct iovec iov = {.iov_base = &uh, .iov_len = sizeof(uh)};

	shim_udp_hdr_self(u, &uh, SHIM_UDP_ACK, 0);
	uh.dst_nonce = dst_nonce;
	uh.rhf = SHIM_UDP_ACK_HELD;
	uh.crc = shim_crc32c(0, &uh, sizeof(uh));
	shim_udp_auth_seal(&u->auth, &uh, NULL, NULL, 0);
	shim_udp_send(u, to, &iov, 1);
	u->st.tx_ctl++;
}

int shim_udp_trim(struct shim_peer *peer, uint64_t now, uint64_t idle_ns)
{
	struct shim_udp_link *l;
	int done = 0;

	if (!peer || peer->wire != SHIM_WIRE_UDP)
		return 0;
	l = ((struct shim_peer_priv *)peer)->link;
	if (!l->udp || (l->trimmed && l->trim_sent == l->sent))
		return 0;
	/* idle: no data sent to it for idle_ns (it was all acknowledged
	 * then, below).  Its keepalives and acks do not count, nor do ours:
	 * a live but quiet pair keeps exchanging them forever. */
	if (l->idle_sent != l->sent) {
		l->idle_sent = l->sent;
		l->idle_since_ns = now;
		return 0;
	}
	if (shim_udp_since(now, l->idle_since_ns) < idle_ns)
		return 0;
	/* the watchdog reads the ring between head and sent */
	pthread_mutex_lock(&l->udp->lock);
	/* acknowledged up to sent, and nothing published after it (waiting
	 * for company, or held) */
	if (atomic_load_explicit(&peer->ctl->hdr_head, memory_order_relaxed) == l->sent &&
	    (uint32_t)atomic_load_explicit(&peer->ctl->tail, memory_order_relaxed) == l->sent &&
	    !madvise(l->mem, l->mem_len, MADV_DONTNEED)) {
		l->trimmed = true;
		l->trim_sent = l->sent;
		free(l->ext); /* all acknowledged: no slot is set */
		l->ext = NULL;
		l->udp->st.trims++;
		done = 1;
	}
	pthread_mutex_unlock(&l->udp->lock);
	return done;
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

		if (l->ext_live && l->ext[head & peer->hdrq_mask]) {
			l->ext[head & peer->hdrq_mask] = NULL;
			l->ext_live--;
		}
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

bool shim_udp_ext_set(struct shim_peer *peer, uint32_t pos, const void *pay)
{
	struct shim_udp_link *l;

	if (!peer || peer->wire != SHIM_WIRE_UDP || !pay)
		return false;
	l = ((struct shim_peer_priv *)peer)->link;
	if (!l->udp) /* its context closed: nothing is sent any more */
		return false;
	if (!l->ext) {
		const uint8_t **ext = calloc(SHIM_UDP_RING_CNT, sizeof(*ext));

		if (!ext)
			return false;
		pthread_mutex_lock(&l->udp->lock); /* the watchdog reads l->ext */
		l->ext = ext;
		pthread_mutex_unlock(&l->udp->lock);
	}
	/* not published yet: nobody reads this slot */
	l->ext[pos & peer->hdrq_mask] = pay;
	l->ext_live++;
	return true;
}

int shim_udp_released(const struct shim_peer *peer, uint32_t end, uint32_t epoch)
{
	const struct shim_udp_link *l;
	uint32_t head;

	if (!peer || peer->wire != SHIM_WIRE_UDP)
		return -EPIPE;
	l = ((const struct shim_peer_priv *)peer)->link;
	if (!l->udp || l->dead || peer->udp_epoch != epoch)
		return -EPIPE;
	head = atomic_load_explicit(&peer->ctl->hdr_head, memory_order_acquire);
	return (int32_t)(head - end) >= 0 ? 1 : 0;
}

void shim_udp_rto_hint(struct shim_peer *peer, uint64_t rto_ns)
{
	if (peer && peer->wire == SHIM_WIRE_UDP)
		atomic_store_explicit(&((struct shim_peer_priv *)peer)->link->rto_hint_ns, rto_ns,
				      memory_order_relaxed);
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

void shim_udp_times(const struct shim_peer *peer, uint64_t *rx_ns, uint32_t *tx_count)
{
	const struct shim_udp_link *l;

	if (!peer || peer->wire != SHIM_WIRE_UDP) {
		*rx_ns = 0;
		*tx_count = 0;
		return;
	}
	l = ((const struct shim_peer_priv *)peer)->link;
	*rx_ns = atomic_load_explicit(&l->rx_ns, memory_order_relaxed);
	*tx_count = atomic_load_explicit(&l->tx_count, memory_order_relaxed);
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
