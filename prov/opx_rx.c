/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rx.c - receive progress: drain the receive context's header queue,
 * validate each packet, dispatch on its opcode, return credits.
 *
 * Validation happens before any field is used: error bits, opcode range,
 * job key, destination, flags, payload length against the MTU and the
 * eager ring.  A bad packet is dropped and counted, never acted on.
 *
 * A packet that cannot be absorbed now (the unexpected-message memory
 * bound is reached) stays at the head of the queue: its credits are not
 * returned, so senders see -FI_EAGAIN until the application posts
 * receives.  Memory stays bounded and nothing is lost.
 */
#include <stdlib.h>
#include <sys/uio.h>

#include "opx_ep.h"

#define OPX_PROGRESS_BATCH 64

typedef int (*opx_rx_handler)(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay);

static void opx_rx_drop(struct opx_ep *ep, const char *why)
{
	ep->rx_dropped++;
	atomic_fetch_add_explicit(&ep->rx->ctl->rx_dropped, 1, memory_order_relaxed);
	OPX_DBG(FI_LOG_EP_DATA, "dropped packet: %s\n", why);
	(void)why;
}

static inline int opx_rx_eager(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	fi_addr_t src = opx_ep_src(ep, h->slid, h->sctx);
	struct opx_rx_req *req = opx_match_posted(ep, tagged, h->tag, src);
	struct opx_ux *ux;
	size_t cap, off;

	if (req) {
		off = opx_req_claim(ep, req, h->paylen, &cap);
		opx_iov_copy_to(req->iov, req->iov_count, off, pay, h->paylen);
		opx_rx_complete(ep, req, off, cap, h->paylen, h->tag, h->data, h->flags, src, 0);
		return 0;
	}
	ux = opx_ux_get(ep, h->paylen);
	if (!ux)
		return -FI_EAGAIN;
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	ux->rcvd = h->paylen;
	memcpy(ux->buf, pay, h->paylen);
	opx_list_insert_tail(tagged ? &ep->ux_tag : &ep->ux_msg, &ux->link);
	return 0;
}

/* Abandon a reassembly that a new first packet interrupts (a sender that
 * died mid-message); its receive completes in error. */
static void opx_mp_abort(struct opx_ep *ep)
{
	struct opx_mp_state *mp = &ep->mp;

	if (mp->req)
		opx_rx_complete(ep, mp->req, mp->req_off, mp->req_cap, mp->total, mp->tag, mp->data,
				mp->pflags, mp->src, FI_EIO);
	if (mp->ux) {
		if (mp->ux->waiting)
			opx_rx_complete(ep, mp->ux->waiting, mp->ux->waiting_off,
					mp->ux->waiting_cap, mp->total, mp->tag, mp->data,
					mp->pflags, mp->src, FI_EIO);
		opx_list_remove(&mp->ux->link); /* no-op once matched */
		opx_ux_put(ep, mp->ux);
	}
	memset(mp, 0, sizeof(*mp));
}

static int opx_rx_mp_first(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct opx_mp_state *mp = &ep->mp;
	uint64_t total = h->p.u64[0];
	bool tagged = h->flags & OPX_PF_TAGGED;
	fi_addr_t src;
	struct opx_rx_req *req;

	if (total <= h->paylen || total > opx_env.max_msg_size || h->paylen != ep->rx->mtu) {
		opx_rx_drop(ep, "bad multi-packet length");
		return 0;
	}
	src = opx_ep_src(ep, h->slid, h->sctx);
	req = opx_match_posted(ep, tagged, h->tag, src);
	if (!req) {
		struct opx_ux *ux = opx_ux_get(ep, total);
		if (!ux)
			return -FI_EAGAIN;
		if (mp->active)
			opx_mp_abort(ep);
		ux->tag = h->tag;
		ux->data = h->data;
		ux->src = src;
		ux->pflags = h->flags;
		ux->rcvd = h->paylen;
		memcpy(ux->buf, pay, h->paylen);
		opx_list_insert_tail(tagged ? &ep->ux_tag : &ep->ux_msg, &ux->link);
		mp->ux = ux;
		mp->req = NULL;
	} else {
		if (mp->active)
			opx_mp_abort(ep);
		mp->req = req;
		mp->req_off = opx_req_claim(ep, req, total, &mp->req_cap);
		opx_iov_copy_to(req->iov, req->iov_count, mp->req_off, pay,
				h->paylen < mp->req_cap ? h->paylen : mp->req_cap);
		mp->ux = NULL;
	}
	mp->active = true;
	mp->slid = h->slid;
	mp->sctx = h->sctx;
	mp->msgid = h->msgid;
	mp->total = total;
	mp->off = h->paylen;
	mp->tag = h->tag;
	mp->data = h->data;
	mp->pflags = h->flags;
	mp->src = src;
	return 0;
}

static void opx_mp_finish(struct opx_ep *ep)
{
	struct opx_mp_state *mp = &ep->mp;
	struct opx_ux *ux = mp->ux;

	if (mp->req) {
		opx_rx_complete(ep, mp->req, mp->req_off, mp->req_cap, mp->total, mp->tag, mp->data,
				mp->pflags, mp->src, 0);
	} else if (ux) {
		ux->rcvd = ux->len;
		if (ux->discard) {
			opx_ux_put(ep, ux);
		} else if (ux->waiting) {
			struct opx_rx_req *req = ux->waiting;
			size_t cap = ux->waiting_cap;
			opx_iov_copy_to(req->iov, req->iov_count, ux->waiting_off, ux->buf,
					ux->len < cap ? ux->len : cap);
			opx_rx_complete(ep, req, ux->waiting_off, cap, ux->len, ux->tag, ux->data,
					ux->pflags, ux->src, 0);
			opx_ux_put(ep, ux);
		}
	}
	memset(mp, 0, sizeof(*mp));
}

static int opx_rx_mp_next(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct opx_mp_state *mp = &ep->mp;
	uint64_t off = h->p.u64[0];

	if (!mp->active || h->slid != mp->slid || h->sctx != mp->sctx || h->msgid != mp->msgid ||
	    off != mp->off || off + h->paylen > mp->total || !h->paylen) {
		opx_rx_drop(ep, "multi-packet continuation out of sequence");
		return 0;
	}
	if (mp->req) {
		if (off < mp->req_cap) {
			size_t n = mp->req_cap - off;
			opx_iov_copy_to(mp->req->iov, mp->req->iov_count, mp->req_off + off, pay,
					h->paylen < n ? h->paylen : n);
		}
	} else if (mp->ux) {
		/* ux->rcvd stays below ux->len until opx_mp_finish(): that is
		 * what marks the message incomplete for a matching receive */
		memcpy(mp->ux->buf + off, pay, h->paylen);
	}
	mp->off = off + h->paylen;
	if (mp->off == mp->total)
		opx_mp_finish(ep);
	return 0;
}

static bool opx_rts_valid(const struct shim_pkt_hdr *h)
{
	const struct opx_rts_payload *r;

	if (h->paylen != sizeof(*r))
		return false;
	return h->p.u64[0] <= opx_env.max_msg_size;
}

static int opx_rx_rts(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	struct opx_rx_req *req;
	struct opx_ux *ux;
	fi_addr_t src;

	if (!opx_rts_valid(h)) {
		opx_rx_drop(ep, "bad rendezvous request");
		return 0;
	}
	ux = opx_ux_get(ep, 0);
	if (!ux)
		return -FI_EAGAIN;
	src = opx_ep_src(ep, h->slid, h->sctx);
	memcpy(&ux->rts, pay, sizeof(ux->rts));
	if (ux->rts.iov_count > OPX_IOV_LIMIT) {
		opx_ux_put(ep, ux);
		opx_rx_drop(ep, "bad rendezvous iov count");
		return 0;
	}
	ux->rndv = true;
	ux->len = h->p.u64[0];
	ux->rcvd = ux->len;
	ux->cookie = h->p.u64[1];
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	req = opx_match_posted(ep, tagged, h->tag, src);
	if (req) {
		opx_ux_deliver(ep, req, ux);
		return 0;
	}
	opx_list_insert_tail(tagged ? &ep->ux_tag : &ep->ux_msg, &ux->link);
	return 0;
}

static int opx_rx_done(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	(void)pay;
	opx_rndv_done(ep, h->p.u64[0], h->p.u32[2]);
	return 0;
}

static const opx_rx_handler opx_rx_table[OPX_OP_MAX] = {
	[OPX_OP_EAGER] = opx_rx_eager,	  [OPX_OP_MP_FIRST] = opx_rx_mp_first,
	[OPX_OP_MP_NEXT] = opx_rx_mp_next, [OPX_OP_RTS] = opx_rx_rts,
	[OPX_OP_DONE] = opx_rx_done,
};

/* Returns -FI_EAGAIN when the packet must stay queued. */
static inline int opx_rx_packet(struct opx_ep *ep, const struct shim_rhq_entry *e)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	struct shim_rx *rx = ep->rx;
	const uint8_t *pay;

	if (__builtin_expect((e->rhf & (SHIM_RHF_ERR_MASK << SHIM_RHF_ERR_SHIFT)) ||
				     h->opcode == 0 || h->opcode >= OPX_OP_MAX ||
				     h->jkey != ep->jkey || h->dlid != rx->lid ||
				     h->dctx != rx->ctx || (h->flags & ~OPX_PF_MASK) ||
				     h->paylen > rx->mtu,
			     0)) {
		opx_rx_drop(ep, "bad header");
		return 0;
	}
	pay = shim_rx_payload(rx, e);
	if (__builtin_expect(!pay, 0)) {
		opx_rx_drop(ep, "payload outside the eager ring");
		return 0;
	}
	if (h->opcode == OPX_OP_EAGER)
		return opx_rx_eager(ep, h, pay);
	return opx_rx_table[h->opcode](ep, h, pay);
}

static void opx_ctl_retry(struct opx_ep *ep);

void opx_ep_progress_locked(struct opx_ep *ep)
{
	struct shim_rx *rx = ep->rx;
	int n;

	if (!ep->enabled)
		return;
	if (__builtin_expect(!opx_list_empty(&ep->ctl_pend), 0))
		opx_ctl_retry(ep);
	for (n = 0; n < OPX_PROGRESS_BATCH; n++) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);
		if (!e)
			break;
		if (opx_rx_packet(ep, e))
			break;
		shim_rx_release(rx, e);
	}
	/* Idle polling must not starve other ranks sharing a core. */
	if (n) {
		ep->idle = 0;
	} else if (++ep->idle >= (uint32_t)opx_env.spin_count) {
		ep->idle = 0;
		if (ep->rndv_busy)
			opx_rndv_check_peers(ep);
		sched_yield();
	}
}

/* ---------------------------------------------------------------------
 * Rendezvous, target side: pull the data once with Cross Memory Attach.
 */
static ssize_t opx_cma_read(pid_t pid, struct iovec *liov, size_t lcnt, struct iovec *riov,
			    size_t rcnt, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = process_vm_readv(pid, liov, lcnt, riov, rcnt, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
		if (done >= len)
			break;
		/* partial: advance both iovecs past n bytes */
		struct iovec *v[2] = {liov, riov};
		size_t *c[2] = {&lcnt, &rcnt};
		for (int k = 0; k < 2; k++) {
			size_t skip = (size_t)n;
			while (*c[k] && skip >= v[k]->iov_len) {
				skip -= v[k]->iov_len;
				v[k]++;
				(*c[k])--;
			}
			if (*c[k]) {
				v[k]->iov_base = (uint8_t *)v[k]->iov_base + skip;
				v[k]->iov_len -= skip;
			}
		}
		liov = v[0];
		riov = v[1];
	}
	return (ssize_t)done;
}

void opx_rndv_pull(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		   struct opx_ux *ux)
{
	struct iovec liov[OPX_IOV_LIMIT], riov[OPX_IOV_LIMIT];
	size_t len = ux->len < cap ? ux->len : cap;
	size_t lcnt = opx_iov_slice(req->iov, req->iov_count, off, len, liov);
	size_t rcnt = 0, want = len;
	uint32_t status = 0;
	int err = 0;

	for (uint32_t i = 0; i < ux->rts.iov_count && want; i++) {
		size_t n = ux->rts.iov_len[i] < want ? ux->rts.iov_len[i] : want;
		if (!n)
			continue;
		riov[rcnt].iov_base = (void *)(uintptr_t)ux->rts.iov_base[i];
		riov[rcnt].iov_len = n;
		rcnt++;
		want -= n;
	}
	if (len) {
		ssize_t n = opx_cma_read((pid_t)ux->rts.pid, liov, lcnt, riov, rcnt, len);
		if (n < 0) {
			OPX_WARN(FI_LOG_EP_DATA, "cross memory attach read from pid %u failed: %s\n",
				 ux->rts.pid, strerror((int)-n));
			err = FI_EIO;
			status = FI_EIO;
		}
	}
	opx_rx_complete(ep, req, off, cap, ux->len, ux->tag, ux->data, ux->pflags, ux->src, err);
	opx_ep_send_done(ep, &ux->rts.src, ux->src, ux->cookie, status);
}

static struct shim_peer *opx_anon_peer(struct opx_ep *ep, const struct shim_addr *to)
{
	struct shim_peer *p;

	for (size_t i = 0; i < OPX_ANON_PEERS; i++) {
		p = ep->anon[i];
		if (p && p->addr.lid == to->lid && p->addr.ctx == to->ctx &&
		    p->addr.nonce == to->nonce && p->addr.host_id == to->host_id)
			return p;
	}
	if (shim_peer_open(ep->domain->fabric->dev, to, &p))
		return NULL;
	size_t slot = ep->anon_next++ % OPX_ANON_PEERS;
	if (ep->anon[slot])
		shim_peer_close(ep->anon[slot]);
	ep->anon[slot] = p;
	return p;
}

static int opx_send_ctl(struct opx_ep *ep, struct shim_peer *peer, uint64_t cookie, uint32_t status)
{
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	int rc = shim_pio_reserve(peer, 1, 0, &r);

	if (rc)
		return rc;
	e = shim_pio_entry(peer, &r, 0);
	opx_hdr_init(&e->hdr, ep, peer, OPX_OP_DONE, 0, 0, 0, 0, 0);
	e->hdr.p.u64[0] = cookie;
	e->hdr.p.u32[2] = status;
	e->hdr.p.u32[3] = 0;
	shim_pio_publish(peer, &r, 0, 0);
	return 0;
}

void opx_ep_send_done(struct opx_ep *ep, const struct shim_addr *to, fi_addr_t src,
		      uint64_t cookie, uint32_t status)
{
	struct shim_peer *peer = NULL;
	struct opx_ctl_pend *p;

	if (src == FI_ADDR_NOTAVAIL || opx_av_peer_locked(ep->av, src, &peer) ||
	    peer->addr.nonce != to->nonce)
		peer = opx_anon_peer(ep, to);
	if (!peer) {
		OPX_WARN(FI_LOG_EP_DATA, "cannot answer rendezvous: sender context gone\n");
		return;
	}
	if (opx_list_empty(&ep->ctl_pend) && !opx_send_ctl(ep, peer, cookie, status))
		return;
	p = malloc(sizeof(*p));
	if (!p) {
		OPX_WARN(FI_LOG_EP_DATA, "out of memory queuing a rendezvous answer\n");
		return;
	}
	p->peer = peer;
	p->cookie = cookie;
	p->status = status;
	opx_list_insert_tail(&ep->ctl_pend, &p->link);
}

static void opx_ctl_retry(struct opx_ep *ep)
{
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(&ep->ctl_pend, it, tmp)
	{
		struct opx_ctl_pend *p = OPX_CONTAINER_OF(it, struct opx_ctl_pend, link);
		int rc = opx_send_ctl(ep, p->peer, p->cookie, p->status);
		if (rc == -EAGAIN)
			break;
		opx_list_remove(&p->link);
		free(p);
	}
}

void opx_rx_cleanup(struct opx_ep *ep)
{
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(&ep->ctl_pend, it, tmp)
	{
		opx_list_remove(it);
		free(OPX_CONTAINER_OF(it, struct opx_ctl_pend, link));
	}
	for (size_t i = 0; i < OPX_ANON_PEERS; i++) {
		if (ep->anon[i])
			shim_peer_close(ep->anon[i]);
		ep->anon[i] = NULL;
	}
}
