/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rndv_peer.c - what the rendezvous protocol (opx_rndv.c) holds and
 * whom it talks to: the send and receive slots (their generations, init
 * and fini, take and release, the slots of FI_DELIVERY_COMPLETE eager
 * sends), control packets (DONE, CTS, CTW, WDONE) with their queue for a
 * peer out of credits, the peer that answers a sender (opx_rndv_reply_peer,
 * opx_rndv_src_peer, used by one-sided communication too), the watch for
 * peers that died (opx_rndv_check_peers), and Cross Memory Attach copies
 * with a peer's verified process (opx_rndv_cma_peer) with the check of the
 * RTS iovec they read from (opx_rndv_rts_ok).  The protocol, its states
 * and its checks are described in opx_rndv.c.
 *
 * Calls go one way: opx_rndv.c calls this file (opx_rndv.h), and this
 * file calls nothing in opx_rndv.c.  That is why a slot's release and
 * the failing of a dead peer's sends and receives live here: the watch
 * needs nothing from the protocol's steps.
 */
#include <stdlib.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "opx_complete.h"
#include "opx_rndv.h"
#include "opx_ux.h"
#include "shim_dma.h"

/* ---------------------------------------------------------------------
 * Slots: generations, take and release.
 */
/* A fresh random generation, different from old.  getrandom() fills a
 * batch, so a rendezvous costs a syscall only once every 64. */
static uint32_t opx_rndv_gen(struct opx_ep *ep, uint32_t old)
{
	const size_t n = sizeof(ep->rndv_st.rndv_gens) / sizeof(ep->rndv_st.rndv_gens[0]);
	uint32_t g;

	if (!ep->rndv_st.rndv_gen_left) {
		if (getrandom(ep->rndv_st.rndv_gens, sizeof(ep->rndv_st.rndv_gens), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(ep->rndv_st.rndv_gens)) {
			/* no entropy yet (early boot): still unpredictable enough
			 * to tell a stale cookie, not a guessed one */
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			for (size_t i = 0; i < n; i++)
				ep->rndv_st.rndv_gens[i] = (uint32_t)(ts.tv_nsec * 2654435761u) ^
						   (uint32_t)(i * 40503u) ^ (uint32_t)getpid();
		}
		ep->rndv_st.rndv_gen_left = (uint32_t)n;
	}
	g = ep->rndv_st.rndv_gens[--ep->rndv_st.rndv_gen_left];
	return g == old ? g + 1 : g;
}

int opx_rndv_init(struct opx_ep *ep)
{
	ep->rndv = calloc(OPX_RNDV_SLOTS, sizeof(*ep->rndv));
	ep->rndv_st.rndv_rx = calloc(OPX_RNDV_SLOTS, sizeof(*ep->rndv_st.rndv_rx));
	if (!ep->rndv || !ep->rndv_st.rndv_rx) {
		free(ep->rndv);
		free(ep->rndv_st.rndv_rx);
		return -FI_ENOMEM;
	}
	for (size_t i = OPX_RNDV_SLOTS; i-- > 0;) {
		ep->rndv[i].gen = opx_rndv_gen(ep, 0);
		ep->rndv_st.rndv_rx[i].gen = opx_rndv_gen(ep, 0);
		ep->rndv[i].next_free = ep->rndv_st.rndv_free;
		ep->rndv_st.rndv_free = &ep->rndv[i];
		ep->rndv_st.rndv_rx[i].next_free = ep->rndv_st.rndv_rx_free;
		ep->rndv_st.rndv_rx_free = &ep->rndv_st.rndv_rx[i];
		opx_list_init(&ep->rndv[i].link);
	}
	opx_list_init(&ep->rndv_st.ctl_pend);
	opx_list_init(&ep->rndv_st.sdma_wait);
	opx_list_init(&ep->rndv_st.cts_defer);
	ep->rndv_st.cma_ok = opx_env.rndv_cma;
	return 0;
}

/* The slot back on the free list under a new generation, its peer
 * released. */
static void opx_rndv_tx_free(struct opx_ep *ep, struct opx_rndv_tx *t)
{
	shim_peer_close(t->peer);
	t->peer = NULL;
	t->busy = false;
	t->gen = opx_rndv_gen(ep, t->gen);
	t->next_free = ep->rndv_st.rndv_free;
	ep->rndv_st.rndv_free = t;
	ep->rndv_st.rndv_busy--;
}

void opx_rndv_tx_release(struct opx_ep *ep, struct opx_rndv_tx *t, int err)
{
	opx_complete_tx(ep, t->context, t->flags, t->len, err);
	opx_list_remove(&t->link);
	opx_rndv_tx_free(ep, t);
}

int opx_rndv_dc_get(struct opx_ep *ep, struct shim_peer *peer, void *context, uint64_t flags,
		    size_t len, fi_addr_t dest, uint64_t *cookie)
{
	struct opx_rndv_tx *t = ep->rndv_st.rndv_free;

	if (!t)
		return -EAGAIN;
	ep->rndv_st.rndv_free = t->next_free;
	ep->rndv_st.rndv_busy++;
	t->iov_count = 0; /* nothing to push: DONE is the only answer */
	t->sdma_left = 0;
	t->cts_ntid = 0;
	t->cts_next = 0;
	t->err = 0;
	t->busy = true;
	t->context = context;
	t->flags = flags;
	t->len = len;
	t->dest = dest;
	t->peer = shim_peer_get(peer); /* released with the slot, like a rendezvous send */
	t->dones_left = 1;
	t->ctw_seen = false;
	*cookie = opx_rndv_cookie(t->gen, (size_t)(t - ep->rndv));
	return 0;
}

void opx_rndv_dc_put(struct opx_ep *ep, uint64_t cookie)
{
	opx_rndv_tx_free(ep, &ep->rndv[(uint32_t)cookie]);
}

/* Take the free receive slot x for a matched rendezvous message that
 * still needs data from its sender (split copy or pushed data). */
void opx_rndv_rx_take(struct opx_ep *ep, struct opx_rndv_rx *x, struct opx_rx_req *req,
		      size_t off, size_t cap, const struct opx_ux *ux, size_t expect,
		      struct shim_peer *peer)
{
	ep->rndv_st.rndv_rx_free = x->next_free;
	ep->rndv_st.rndv_rx_busy++;
	x->busy = true;
	x->peer = shim_peer_get(peer);
	x->err = 0;
	x->req = req;
	x->off = off;
	x->cap = cap;
	x->total = ux->len;
	x->expect = expect;
	x->placed = 0;
	x->tag = ux->tag;
	x->data = ux->data;
	x->pflags = ux->pflags;
	x->src = ux->src;
	x->tx_cookie = ux->cookie;
	x->half = 0;
}

void opx_rndv_rx_free(struct opx_ep *ep, struct opx_rndv_rx *x)
{
	for (uint32_t i = 0; i < x->ntid; i++)
		shim_tid_release(ep->shim, x->tid[i]);
	shim_peer_close(x->peer);
	x->peer = NULL;
	ep->rndv_st.rndv_rx_busy--;
	x->busy = false;
	x->gen = opx_rndv_gen(ep, x->gen);
	x->next_free = ep->rndv_st.rndv_rx_free;
	ep->rndv_st.rndv_rx_free = x;
}

/* ---------------------------------------------------------------------
 * Control packets.
 */
#define OPX_CTL_PAYLOAD_MAX 96

struct opx_ctl_pend {
	struct opx_list link;
	struct shim_peer *peer;
	uint8_t op;
	union opx_proto_pw w;
	uint32_t paylen;
	uint8_t payload[OPX_CTL_PAYLOAD_MAX];
};

static int opx_rndv_ctl_try(struct opx_ep *ep, struct shim_peer *peer, uint8_t op,
			    const union opx_proto_pw *w, const void *payload, uint32_t paylen)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	int rc = shim_pio_reserve(peer, 1, paylen, &r);

	if (rc)
		return rc;
	if (paylen)
		memcpy(r.egr, payload, paylen);
	e = shim_pio_entry(peer, &r, 0);
	opx_ep_hdr_init(&e->hdr, ep, peer, op, 0, paylen, 0, 0, 0);
	opx_proto_pw_set(&e->hdr, w);
	shim_pio_publish(peer, &r, 0, paylen ? shim_rhf_egr(peer, &r, 0) : 0);
	return 0;
}

void opx_rndv_ctl_send(struct opx_ep *ep, struct shim_peer *peer, uint8_t op,
		       const union opx_proto_pw *w, const void *payload, uint32_t paylen)
{
	struct opx_ctl_pend *p;

	if (opx_list_empty(&ep->rndv_st.ctl_pend) && !opx_rndv_ctl_try(ep, peer, op, w, payload, paylen))
		return;
	p = malloc(sizeof(*p));
	if (!p) {
		OPX_WARN(FI_LOG_EP_DATA, "out of memory queuing a control packet\n");
		return;
	}
	p->peer = shim_peer_get(peer); /* the peer may leave the AV meanwhile */
	p->op = op;
	p->w = *w;
	p->paylen = paylen;
	if (paylen)
		memcpy(p->payload, payload, paylen);
	opx_list_insert_tail(&ep->rndv_st.ctl_pend, &p->link);
}

void opx_rndv_ctl_done(struct opx_ep *ep, struct shim_peer *peer, uint64_t cookie,
		       uint32_t status)
{
	opx_rndv_ctl_send(ep, peer, OPX_OP_DONE,
			  &(union opx_proto_pw){.done = {.cookie = cookie, .status = status}}, NULL,
			  0);
}

void opx_rndv_ctl_retry(struct opx_ep *ep)
{
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(&ep->rndv_st.ctl_pend, it, tmp)
	{
		struct opx_ctl_pend *p = OPX_CONTAINER_OF(it, struct opx_ctl_pend, link);
		if (opx_rndv_ctl_try(ep, p->peer, p->op, &p->w, p->payload, p->paylen) == -EAGAIN)
			break;
		opx_list_remove(&p->link);
		shim_peer_close(p->peer);
		free(p);
	}
}

void opx_rndv_ack(struct opx_ep *ep, const struct shim_addr *to, fi_addr_t src, uint64_t cookie)
{
	struct shim_peer *peer = opx_rndv_reply_peer(ep, to, src);

	if (peer)
		opx_rndv_ctl_done(ep, peer, cookie, 0);
}

/* FI_DISCARD of a rendezvous message: the sender completes normally. */
void opx_rndv_discard(struct opx_ep *ep, struct opx_ux *ux)
{
	opx_rndv_ack(ep, &ux->rts.src, ux->src, ux->cookie);
}

/* ---------------------------------------------------------------------
 * Peers: whom to answer, and the watch for those that died.
 */
/* Senders not in the AV are answered through a cache of peers, one slot
 * per (lid, ctx): the contexts of one host are numbered from 0, so up to
 * OPX_ANON_PEERS of them never share a slot (a one-sided target of Open
 * MPI's osc rdma hears from every rank of the job this way). */
static size_t opx_rndv_anon_slot(uint16_t lid, uint16_t ctx)
{
	return ((size_t)ctx + (size_t)lid * 37u) % OPX_ANON_PEERS;
}

/* The peer to answer a sender: its AV entry, or an anonymous mapping when
 * the sender is not in our AV (FI_SOURCE-less receives still work). */
struct shim_peer *opx_rndv_reply_peer(struct opx_ep *ep, const struct shim_addr *to, fi_addr_t src)
{
	size_t slot = opx_rndv_anon_slot(to->lid, to->ctx);
	struct shim_peer *p = NULL;

	/* src names a scalable peer as a whole: its entry's peer is its
	 * receive context 0, not necessarily the context that sent */
	if (src != FI_ADDR_NOTAVAIL && !opx_ep_src_is_anon(src) &&
	    !opx_ep_peer_locked(ep, src, &p) && p->addr.nonce == to->nonce &&
	    p->addr.ctx == to->ctx)
		return p;
	p = ep->peers.anon[slot];
	if (p && p->addr.lid == to->lid && p->addr.ctx == to->ctx && p->addr.nonce == to->nonce &&
	    p->addr.host_id == to->host_id)
		return p;
	if (shim_peer_open_via(ep->domain->fabric->dev, ep->shim, to, &p))
		return NULL;
	if (ep->peers.anon[slot])
		shim_peer_close(ep->peers.anon[slot]);
	ep->peers.anon[slot] = p;
	return p;
}

/* The peer to answer a packet whose sender (slid, sctx) carried no
 * address of its own (one-sided requests): the AV's, else one found from
 * the shim's records, never from the packet: a udp flow that spoke as
 * that (lid, ctx), or the context of this host that has it.  A one-sided
 * target need not have its initiators in its AV (Open MPI's osc rdma
 * inserts only the peers a rank initiates to).  A cached peer at that
 * (lid, ctx) may be a dead process's whose context number was reused, so
 * it is taken only while alive, which costs a system call (the owner's
 * lock, shim_peer_alive): about half of an 8-byte atomic's round trip
 * under Open MPI.  Unless the packet carries its sender's context nonce
 * (nonce, 0: none; one-sided requests do, in hdr.psn) and it is the
 * cached peer's: then the cached peer is the sender itself. */
struct shim_peer *opx_rndv_src_peer(struct opx_ep *ep, uint16_t slid, uint16_t sctx, uint32_t nonce,
				    fi_addr_t src)
{
	struct shim_peer *p;
	struct shim_addr a;

	if (!opx_ep_src_is_anon(src) && src != FI_ADDR_NOTAVAIL &&
	    !opx_ep_peer_locked(ep, src, &p) && p->lid == slid && p->ctx == sctx)
		return p;
	p = ep->peers.anon[opx_rndv_anon_slot(slid, sctx)];
	if (p && p->lid == slid && p->ctx == sctx &&
	    ((nonce && p->addr.nonce == nonce) || shim_peer_alive(p)))
		return p;
	if (opx_av_src_addr(ep->domain->fabric->dev, ep->shim, slid, sctx, &a))
		return NULL;
	return opx_rndv_reply_peer(ep, &a, FI_ADDR_NOTAVAIL);
}

/* Receives directed at a sender that is gone complete in error (a
 * wildcard receive may wait for anyone, as with every provider).  Only
 * called when the receive queue is idle, so no packet of that sender is
 * still waiting to be matched. */
static void opx_rndv_check_recvs(struct opx_ep *ep, struct opx_list *q, bool tagged)
{
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(q, it, tmp)
	{
		struct opx_rx_req *req = OPX_CONTAINER_OF(it, struct opx_rx_req, link);

		if (req->src == FI_ADDR_UNSPEC || (req->flags & FI_MULTI_RECV) ||
		    !opx_av_peer_dead_locked(ep->av, req->src, ep->rndv_st.watch_round))
			continue;
		opx_list_remove(&req->link);
		opx_complete_rx(ep, req, 0, req->len, 0, req->tag, 0, tagged ? OPX_PF_TAGGED : 0,
				req->src, FI_ECONNREFUSED);
	}
}

/* A peer that died never answers: fail the rendezvous sends waiting on a
 * dead receiver, the pushed receives waiting on a dead sender, control
 * packets queued for a dead peer and receives directed at one, instead
 * of leaving them (and the application) waiting forever.  Called from the
 * idle path of progress and paced to every OPX_WATCH_NS, so it costs
 * nothing while traffic flows. */
#define OPX_WATCH_NS 50000000ull
void opx_rndv_check_peers(struct opx_ep *ep)
{
	struct opx_list *it, *tmp;
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (now < ep->rndv_st.watch_next_ns)
		return;
	ep->rndv_st.watch_next_ns = now + OPX_WATCH_NS;
	for (size_t i = 0; i < OPX_RNDV_SLOTS && ep->rndv_st.rndv_busy; i++) {
		struct opx_rndv_tx *t = &ep->rndv[i];

		if (!t->busy || t->sdma_left || shim_peer_alive(t->peer))
			continue;
		OPX_WARN(FI_LOG_EP_DATA, "receiver of a %zu-byte send is gone\n", t->len);
		opx_rndv_tx_release(ep, t, FI_ECONNREFUSED);
	}
	for (size_t i = 0; i < OPX_RNDV_SLOTS && ep->rndv_st.rndv_rx_busy; i++) {
		struct opx_rndv_rx *x = &ep->rndv_st.rndv_rx[i];

		if (!x->busy || shim_peer_alive(x->peer))
			continue;
		OPX_WARN(FI_LOG_EP_DATA, "sender of a %zu-byte message is gone\n", x->total);
		opx_complete_rx(ep, x->req, x->off, x->cap, x->total, x->tag, x->data, x->pflags,
				x->src, FI_EIO);
		opx_rndv_rx_free(ep, x);
	}
	opx_list_foreach_safe(&ep->rndv_st.ctl_pend, it, tmp)
	{
		struct opx_ctl_pend *p = OPX_CONTAINER_OF(it, struct opx_ctl_pend, link);

		if (shim_peer_alive(p->peer))
			continue;
		opx_list_remove(&p->link);
		shim_peer_close(p->peer);
		free(p);
	}
	if (ep->match.posted_cnt) {
		if (++ep->rndv_st.watch_round == 0)
			ep->rndv_st.watch_round = 1;
		opx_rndv_check_recvs(ep, &ep->match.posted_tag, true);
		opx_rndv_check_recvs(ep, &ep->match.posted_msg, false);
	}
}

/* ---------------------------------------------------------------------
 * Cross Memory Attach.
 */
/* One Cross Memory Attach copy of len bytes between our liov and the
 * process pid's riov (write: ours to theirs), resuming partial transfers. */
static ssize_t opx_rndv_cma_copy(pid_t pid, struct iovec *liov, size_t lcnt, struct iovec *riov,
				 size_t rcnt, size_t len, bool write)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write ? process_vm_writev(pid, liov, lcnt, riov, rcnt, 0)
				  : process_vm_readv(pid, liov, lcnt, riov, rcnt, 0);
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
		/* partial (a huge transfer): advance both iovecs past n bytes */
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

bool opx_rndv_rts_ok(const struct shim_pkt_hdr *h, const struct opx_rts_payload *rts)
{
	uint64_t sum = 0;

	if (rts->iov_count > OPX_IOV_LIMIT)
		return false;
	/* the context to answer and to pull from is the one that sent it */
	if (rts->src.lid != h->slid || rts->src.ctx != h->sctx)
		return false;
	for (uint32_t i = 0; i < rts->iov_count; i++) {
		if (rts->iov_len[i] > opx_proto_pw(h).rts.len)
			return false; /* also keeps the sum below from wrapping */
		sum += rts->iov_len[i];
	}
	return sum == opx_proto_pw(h).rts.len;
}

/* A CMA copy with the peer's owner (opx_ep.h): the process is the one the
 * shim verified when it mapped the peer, checked again after the copy (its
 * pid may have been recycled meanwhile).  A read needs only that check
 * after (alive then means alive throughout); a write into the peer is
 * also checked before, so a recycled pid is caught before we write.
 * -ESRCH: no such process.  Each check is a syscall: pulls are the
 * rendezvous fast path. */
ssize_t opx_rndv_cma_peer(struct shim_peer *peer, struct iovec *liov, size_t lcnt,
			  struct iovec *riov, size_t rcnt, size_t len, bool write)
{
	pid_t pid, again;
	ssize_t n;

	if (write ? shim_peer_cma_pid(peer, &pid) : shim_peer_cma_pid_recorded(peer, &pid))
		return -ESRCH;
	n = opx_rndv_cma_copy(pid, liov, lcnt, riov, rcnt, len, write);
	if (n >= 0 && (shim_peer_cma_pid(peer, &again) || again != pid))
		return -ESRCH;
	return n;
}

/* ---------------------------------------------------------------------
 * Teardown.
 */
void opx_rndv_fini(struct opx_ep *ep)
{
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(&ep->rndv_st.ctl_pend, it, tmp)
	{
		struct opx_ctl_pend *p = OPX_CONTAINER_OF(it, struct opx_ctl_pend, link);

		opx_list_remove(it);
		shim_peer_close(p->peer);
		free(p);
	}
	opx_list_foreach_safe(&ep->rndv_st.cts_defer, it, tmp)
	{
		opx_list_remove(it);
		opx_ux_put(ep, OPX_CONTAINER_OF(it, struct opx_ux, link));
	}
	if (ep->rndv_st.sdma)
		shim_sdma_close(ep->rndv_st.sdma);
	ep->rndv_st.sdma = NULL;
	/* references of rendezvous that never finished */
	for (size_t i = 0; ep->rndv && i < OPX_RNDV_SLOTS; i++) {
		if (ep->rndv[i].busy)
			shim_peer_close(ep->rndv[i].peer);
		if (ep->rndv_st.rndv_rx[i].busy)
			shim_peer_close(ep->rndv_st.rndv_rx[i].peer);
	}
	for (size_t i = 0; i < OPX_ANON_PEERS; i++) {
		if (ep->peers.anon[i])
			shim_peer_close(ep->peers.anon[i]);
		ep->peers.anon[i] = NULL;
	}
	free(ep->rndv);
	free(ep->rndv_st.rndv_rx);
	ep->rndv = NULL;
	ep->rndv_st.rndv_rx = NULL;
	ep->rndv_st.rndv_free = NULL;
	ep->rndv_st.rndv_rx_free = NULL;
}
