/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_sdma.c - the SDMA engine of the software SuperNIC (shm wire).
 *
 * A request (header template + iovec) is cut into packets of at most the
 * peer's MTU; each packet is pushed into the peer's receive context with
 * the PIO primitives of shim_ring.h and flagged SHIM_RHF_TID so that the
 * receiver places its payload straight into a registered buffer.
 *
 * Like hfi1's sdma.c, every descriptor follows an explicit state machine
 * (below) and the engine owns no thread: shim_sdma_progress() runs it,
 * bounded to SHIM_SDMA_BUDGET packets per call so a large request never
 * stalls the caller's progress loop.
 *
 * Ordering.  Descriptors are processed in strict FIFO order: the engine
 * works on the oldest unfinished descriptor only and moves on when it is
 * done.  That keeps every peer's packets in submit order and makes
 * completions come out in submit order too, at the price of head-of-line
 * blocking across peers while the head waits for credits.  That cannot
 * deadlock: a receiver returns credits by draining its own queue, which
 * never depends on any sender's SDMA engine.
 *
 * Zero copy on the udp wire.  A udp peer's "receive context" is the
 * link's send ring, its replay memory, so a packet copied there is
 * copied twice before it leaves (ring, then socket).  Instead a packet
 * whose payload lies in one piece of the caller's iovec only reserves
 * its ring slot (and the eager blocks, which bound the bytes in flight)
 * and points the slot at the caller's memory (shim_udp_ext_set): the
 * kernel copies it straight from there, first time and every
 * retransmission.  The caller's memory must then stay as it is until the
 * peer has the data, so such a request's completion waits, after its
 * last packet was published, until the peer acknowledged that packet
 * (or its link died or restarted: -EPIPE; shim_udp_released).  The
 * engine meanwhile goes on with the next descriptors; completions still
 * come out in submit order (finished below started).  This is hfi1's
 * SDMA as it is: the adapter reads the user's pages, and the request is
 * done when the hardware says so, not when a copy was made.
 *
 * Rings.  The descriptor ring and the completion ring have the same
 * power-of-two size; a descriptor is free again only after its completion
 * was reaped, so the completion ring can never overflow.  Counters are
 * free-running 32-bit positions (differences are exact across wrap).
 *
 * Lock needed: the owning endpoint's lock for every call; nothing here is
 * shared with other processes except through the peer's receive context.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim_internal.h"
#include "shim_sdma.h"

/* Packets published per shim_sdma_progress() call. */
#define SHIM_SDMA_BUDGET 64u
/* While waiting for credits, check that the peer's owner still lives
 * every this many refused reservations: the check reads /proc, far too
 * slow for every poll, yet a dead peer must not hang the request. */
#define SHIM_SDMA_ALIVE_EVERY 1024u
/* Largest descriptor ring accepted. */
#define SHIM_SDMA_RING_MAX 65536u

struct shim_sdma_cpl {
	uint64_t cookie;
	int status;
	uint32_t desc; /* ring index of the descriptor to free at reap */
};

struct shim_sdma {
	struct shim_ctx *ctx;
	struct shim_sdma_desc *desc;
	struct shim_sdma_cpl *cpl;
	uint32_t size;      /* entries in both rings, power of two */
	uint32_t mask;
	uint32_t submitted; /* descriptors ever submitted */
	uint32_t started;   /* descriptors ever finished by the engine (FIFO head) */
	uint32_t finished;  /* ... whose completion was queued (zero copy waits) */
	uint32_t reaped;    /* completions ever reaped */
	uint32_t cpl_tail;  /* completions ever produced */
};

/* ---------------------------------------------------------------------
 * State machine.
 *
 *   state \ event   E0     E1     E2     E3     E4     E5     E6     E7
 *                  SUBMIT START  PKT    NOCRED CREDIT LAST   GONE   REAPED
 *   S0 FREE         S1     -      -      -      -      -      -      -
 *   S1 QUEUED       -      S2     -      -      -      -      S5     -
 *   S2 RUNNING      -      -      S2     S3     -      S4     S5     -
 *   S3 WAIT_CREDIT  -      -      -      S3     S2     -      S5     -
 *   S4 DONE         -      -      -      -      -      -      -      S0
 *   S5 ERROR        -      -      -      -      -      -      -      S0
 *
 * Why each edge:
 *  - S0 -E0-> S1: submit fills a free descriptor; the engine has not
 *    looked at it yet (it may be behind other descriptors).
 *  - S1 -E1-> S2: the descriptor reached the head of the FIFO.
 *  - S1 -E6-> S5: a peer known unusable before the first packet.
 *  - S2 -E2-> S2: one packet published, more to go.
 *  - S2 -E5-> S4: the last packet (or none, for a zero-length request)
 *    published: the completion is queued (zero copy: once the peer
 *    acknowledged the last packet).
 *  - S2 -E3-> S3: the peer's queue is full; wait for the receiver to
 *    consume.  S3 -E3-> S3: a retry was refused again.
 *  - S3 -E4-> S2: a reservation succeeded, the transfer resumes.
 *  - S2/S3 -E6-> S5: the peer's owner died (or the peer cannot take our
 *    packets at all): report an error instead of waiting for ever.
 *  - S4/S5 -E7-> S0: the completion was reaped, the slot is reusable.
 * Everything else ("-") is a bug in the engine: shim_sdma_step() refuses
 * it with -EPROTO and parks the descriptor in S5 so the request still
 * completes (with an error) instead of hanging or corrupting the ring.
 */
#define X (-1)
static const int8_t shim_sdma_next[SHIM_SDMA_NSTATES][SHIM_SDMA_NEVENTS] = {
	/*                         E0  E1  E2  E3  E4  E5  E6  E7 */
	[SHIM_SDMA_S0_FREE] =        {1,  X,  X,  X,  X,  X,  X,  X},
	[SHIM_SDMA_S1_QUEUED] =      {X,  2,  X,  X,  X,  X,  5,  X},
	[SHIM_SDMA_S2_RUNNING] =     {X,  X,  2,  3,  X,  4,  5,  X},
	[SHIM_SDMA_S3_WAIT_CREDIT] = {X,  X,  X,  3,  2,  X,  5,  X},
	[SHIM_SDMA_S4_DONE] =        {X,  X,  X,  X,  X,  X,  X,  0},
	[SHIM_SDMA_S5_ERROR] =       {X,  X,  X,  X,  X,  X,  X,  0},
};
#undef X

int shim_sdma_step(struct shim_sdma_desc *desc, enum shim_sdma_event ev)
{
	unsigned int s, e;
	int next;

	if (!desc)
		return -EINVAL;
	s = (unsigned int)desc->state;
	e = (unsigned int)ev;
	next = (s < SHIM_SDMA_NSTATES && e < SHIM_SDMA_NEVENTS) ? shim_sdma_next[s][e] : -1;
	if (next < 0) {
		desc->state = SHIM_SDMA_S5_ERROR;
		desc->status = -EPROTO;
		return -EPROTO;
	}
	desc->state = (enum shim_sdma_state)next;
	return 0;
}

/* ---------------------------------------------------------------------
 * Engine
 */
int shim_sdma_open(struct shim_ctx *ctx, uint32_t ring_size, struct shim_sdma **engp)
{
	struct shim_sdma *eng;

	if (!ctx || !engp)
		return -EINVAL;
	if (!ring_size)
		ring_size = SHIM_SDMA_RING_DEFAULT;
	if (ring_size & (ring_size - 1) || ring_size > SHIM_SDMA_RING_MAX)
		return -EINVAL;
	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return -ENOMEM;
	eng->desc = calloc(ring_size, sizeof(*eng->desc));
	eng->cpl = calloc(ring_size, sizeof(*eng->cpl));
	if (!eng->desc || !eng->cpl) {
		free(eng->desc);
		free(eng->cpl);
		free(eng);
		return -ENOMEM;
	}
	eng->ctx = ctx;
	eng->size = ring_size;
	eng->mask = ring_size - 1;
	*engp = eng;
	return 0;
}

void shim_sdma_close(struct shim_sdma *eng)
{
	if (!eng)
		return;
	/* Requests not yet reaped are abandoned: packets already published
	 * stay in the peers' queues, the rest are never sent. */
	free(eng->desc);
	free(eng->cpl);
	free(eng);
}

static int shim_sdma_req_check(const struct shim_sdma_req *req)
{
	uint64_t sum = 0;

	if (req->iovcnt > SHIM_SDMA_IOV_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < req->iovcnt; i++) {
		if (!req->iov[i].iov_base && req->iov[i].iov_len)
			return -EINVAL;
		if (req->iov[i].iov_len > UINT64_MAX - sum)
			return -EINVAL;
		sum += req->iov[i].iov_len;
	}
	if (sum != req->len)
		return -EINVAL;
	/* every packet's offset tid_off + sent must be representable */
	if (req->tid_off > UINT64_MAX - req->len)
		return -EINVAL;
	return 0;
}

/* Queue the completion of the head descriptor (state S4 or S5). */
static void shim_sdma_complete(struct shim_sdma *eng, struct shim_sdma_desc *d, uint32_t pos)
{
	struct shim_sdma_cpl *c = &eng->cpl[eng->cpl_tail & eng->mask];

	c->cookie = d->req.cookie;
	c->status = d->status ? d->status : d->state == SHIM_SDMA_S4_DONE ? 0 : -EIO;
	c->desc = pos & eng->mask;
	eng->cpl_tail++;
}

int shim_sdma_submit(struct shim_sdma *eng, struct shim_peer *peer, const struct shim_sdma_req *req)
{
	struct shim_sdma_desc *d;
	int ret;

	if (!eng || !peer || !req)
		return -EINVAL;
	ret = shim_sdma_req_check(req);
	if (ret)
		return ret;
	if (eng->submitted - eng->reaped >= eng->size)
		return -EAGAIN; /* ring full: reap completions and retry */
	d = &eng->desc[eng->submitted & eng->mask];
	if (d->state != SHIM_SDMA_S0_FREE)
		return -EAGAIN; /* cannot happen while counters are consistent */
	memset(d, 0, sizeof(*d));
	d->peer = peer;
	d->req = *req;
	ret = shim_sdma_step(d, SHIM_SDMA_E0_SUBMIT);
	if (ret)
		return ret;
	eng->submitted++;
	/* A zero-length request at the head of the FIFO has nothing to wait
	 * for: complete it now so it is reapable without a progress call.
	 * Behind other requests it completes in order when reached. */
	if (!req->len && eng->started == eng->submitted - 1)
		shim_sdma_progress(eng);
	return 0;
}

/* Copy the next n bytes of the request's iovec into dst, advancing the
 * gather cursor.  The request was checked at submit, so the iovec holds
 * at least n more bytes. */
static void shim_sdma_gather(struct shim_sdma_desc *d, uint8_t *dst, uint32_t n)
{
	while (n && d->iov_idx < d->req.iovcnt) {
		const struct iovec *v = &d->req.iov[d->iov_idx];
		size_t left = v->iov_len - d->iov_off;
		size_t k = left < n ? left : n;

		memcpy(dst, (const uint8_t *)v->iov_base + d->iov_off, k);
		dst += k;
		n -= (uint32_t)k;
		d->iov_off += k;
		if (d->iov_off == v->iov_len) {
			d->iov_idx++;
			d->iov_off = 0;
		}
	}
}

/* The next n bytes of the request's iovec, when they lie in one entry
 * (then the cursor moves past them), else NULL. */
static const uint8_t *shim_sdma_piece(struct shim_sdma_desc *d, uint32_t n)
{
	const struct iovec *v;

	while (d->iov_idx < d->req.iovcnt && d->iov_off == d->req.iov[d->iov_idx].iov_len) {
		d->iov_idx++; /* empty entries */
		d->iov_off = 0;
	}
	if (d->iov_idx == d->req.iovcnt)
		return NULL;
	v = &d->req.iov[d->iov_idx];
	if (v->iov_len - d->iov_off < n)
		return NULL;
	d->iov_off += n;
	return (const uint8_t *)v->iov_base + d->iov_off - n;
}

/* A reservation was refused: stay in (or enter) S3 and, every so often,
 * check that someone will ever drain the peer. */
static void shim_sdma_no_credit(struct shim_sdma_desc *d)
{
	if (shim_sdma_step(d, SHIM_SDMA_E3_NO_CREDIT))
		return;
	if (++d->credit_polls % SHIM_SDMA_ALIVE_EVERY)
		return;
	if (!shim_peer_alive(d->peer)) {
		d->status = -EPIPE;
		shim_sdma_step(d, SHIM_SDMA_E6_PEER_GONE);
	}
}

/* Push packets of one running descriptor.  Returns packets published;
 * on return d is in S2 (budget used up), S3, S4 or S5. */
static uint32_t shim_sdma_push(struct shim_sdma_desc *d, uint32_t budget)
{
	struct shim_peer *p = d->peer;
	const bool zcopy = ((struct shim_peer_priv *)p)->link != NULL;
	uint32_t npkts = 0;

	if (d->sent == d->req.len) {
		/* zero length: complete without a packet */
		shim_sdma_step(d, SHIM_SDMA_E5_LAST_SENT);
		return 0;
	}
	while (npkts < budget) {
		uint64_t left = d->req.len - d->sent;
		uint32_t chunk = left < p->mtu ? (uint32_t)left : p->mtu;
		struct shim_pio_resv r;
		struct shim_rhq_entry *e;
		struct shim_pkt_hdr h;
		const uint8_t *src = NULL;
		int ret;

		ret = shim_pio_reserve(p, 1, chunk, &r);
		if (ret == -EAGAIN) {
			shim_sdma_no_credit(d);
			return npkts;
		}
		if (ret) {
			/* -EMSGSIZE: the peer's eager ring cannot hold one
			 * packet of its own MTU; it never will */
			d->status = ret;
			shim_sdma_step(d, SHIM_SDMA_E6_PEER_GONE);
			return npkts;
		}
		if (d->state == SHIM_SDMA_S3_WAIT_CREDIT) {
			shim_sdma_step(d, SHIM_SDMA_E4_CREDIT_BACK);
			d->credit_polls = 0;
		}
		if (zcopy && (src = shim_sdma_piece(d, chunk)) &&
		    !shim_udp_ext_set(p, r.hdr_pos, src)) {
			d->iov_off -= chunk; /* no memory for it: copy after all */
			src = NULL;
		}
		if (src) {
			d->ext = true;
			d->ext_end = r.hdr_pos + 1;
			d->ext_epoch = p->udp_epoch;
		} else {
			shim_sdma_gather(d, r.egr, chunk);
		}
		h = d->req.tmpl;
		h.paylen = chunk;
		h.p.tid.handle = d->req.tid;
		h.p.tid.offset = d->req.tid_off + d->sent;
		e = shim_pio_entry(p, &r, 0);
		e->hdr = h;
		shim_pio_publish(p, &r, 0, SHIM_RHF_TID | shim_rhf_egr(p, &r, 0));
		d->sent += chunk;
		npkts++;
		if (d->sent == d->req.len) {
			shim_sdma_step(d, SHIM_SDMA_E5_LAST_SENT);
			return npkts;
		}
		shim_sdma_step(d, SHIM_SDMA_E2_PKT_SENT);
	}
	return npkts;
}

/* shim_sdma_push; to a udp peer the packets of one run leave together
 * (batched system calls), not one per publish. */
static uint32_t shim_sdma_run(struct shim_sdma_desc *d, uint32_t budget)
{
	struct shim_peer_priv *pp = (struct shim_peer_priv *)d->peer;
	uint32_t npkts;

	if (!pp->link)
		return shim_sdma_push(d, budget);
	shim_udp_hold(pp);
	npkts = shim_sdma_push(d, budget);
	shim_udp_unhold(pp);
	return npkts;
}

/* Queue, in submit order, the completions of the descriptors the engine
 * is done with, as far as none of them waits for the peer to acknowledge
 * zero-copy packets (those the peer will never have fail with -EPIPE). */
static void shim_sdma_finish(struct shim_sdma *eng)
{
	while (eng->finished != eng->started) {
		uint32_t pos = eng->finished;
		struct shim_sdma_desc *d = &eng->desc[pos & eng->mask];

		if (d->ext) {
			int rc = shim_udp_released(d->peer, d->ext_end, d->ext_epoch);

			if (!rc)
				return;
			if (rc < 0 && !d->status)
				d->status = rc;
		}
		shim_sdma_complete(eng, d, pos);
		eng->finished++;
	}
}

int shim_sdma_progress(struct shim_sdma *eng)
{
	uint32_t npkts = 0;

	if (!eng)
		return -EINVAL;
	while (eng->started != eng->submitted && npkts < SHIM_SDMA_BUDGET) {
		uint32_t pos = eng->started;
		struct shim_sdma_desc *d = &eng->desc[pos & eng->mask];

		if (d->state == SHIM_SDMA_S1_QUEUED)
			shim_sdma_step(d, SHIM_SDMA_E1_START);
		if (d->state == SHIM_SDMA_S2_RUNNING || d->state == SHIM_SDMA_S3_WAIT_CREDIT)
			npkts += shim_sdma_run(d, SHIM_SDMA_BUDGET - npkts);
		if (d->state != SHIM_SDMA_S4_DONE && d->state != SHIM_SDMA_S5_ERROR)
			break; /* waiting for credits or out of budget: keep FIFO */
		eng->started++;
	}
	shim_sdma_finish(eng);
	return (int)npkts;
}

int shim_sdma_reap(struct shim_sdma *eng, uint64_t *cookie, int *status)
{
	struct shim_sdma_cpl *c;
	struct shim_sdma_desc *d;

	if (!eng || !cookie || !status)
		return -EINVAL;
	if (eng->reaped == eng->cpl_tail)
		return 0;
	c = &eng->cpl[eng->reaped & eng->mask];
	d = &eng->desc[c->desc];
	*cookie = c->cookie;
	*status = c->status;
	/* S4/S5 -> S0.  Even if the step were refused (an engine bug), the
	 * slot is freed: the counters already say it is, and a slot stuck
	 * outside S0 would make every later submit fail. */
	shim_sdma_step(d, SHIM_SDMA_E7_REAPED);
	d->state = SHIM_SDMA_S0_FREE;
	d->peer = NULL;
	eng->reaped++;
	return 1;
}

uint32_t shim_sdma_busy(const struct shim_sdma *eng)
{
	return eng ? eng->submitted - eng->reaped : 0;
}
