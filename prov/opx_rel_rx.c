/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rel_rx.c - what each datagram of a udp flow does to the
 * reliability state: a DATA packet delivered in order (a whole
 * multi-packet message in one reservation), stashed ahead of a hole, its
 * holes NACKed, or counted as a duplicate or beyond the window; a NACK
 * answered with the psns it names.  opx_rel.c calls it, per datagram
 * (opx_rel_progress) and from its timers (the stash drained, holes NACKed
 * again: opx_rel_timers); it never calls opx_rel.c.  The psn arithmetic
 * (d below), the timers, the send side and the flow's life are described
 * in opx_rel.c; the flow state is in opx_rel_priv.h.
 *
 * Per datagram (d = psn - expected):
 *   DATA, d == 0   opx_rel_deliver into the receive ring (TID data: straight
 *                  into the posted buffer), expected++, ack_due_ns set,
 *                  then opx_rel_drain_stash from the new expected on
 *                  ring full: stashed, ring_full++, drained again later
 *   DATA, d == 0,  OPX_OP_MP_FIRST of n <= OPX_UDP_MP_MAX packets, all n
 *   multi-packet   in this batch, in order (one GSO send, one GRO receive):
 *                  opx_rel_data_run, one reservation from the batch's
 *                  buffers, expected += n; else stashed, and
 *                  opx_rel_deliver_mp once all n are in the stash
 *   DATA, ahead    opx_rel_stash (the same psn twice: dups++); the psns
 *                  between the previous highest arrival (rx_hi) and this one
 *                  are new holes: opx_rel_nack names them at once, as many
 *                  NACKs (first hole, mask of the next 32) as they take
 *   DATA, behind   dups++, ack_force: the sender missed our ack
 *   DATA, beyond   beyond_window++, dropped: replay brings it back (the
 *                  stash holds the sender's whole window, SHIM_UDP_WINDOW,
 *                  so only a misbehaving sender gets there)
 *   NACK(psn, m)   psn and psn + 1 + i for each bit i of m sent again,
 *                  each at most once per half our srtt (opx_rel_nack_want: a
 *                  copy sent for the last NACK is still on its way, behind
 *                  our queue), each run of consecutive ones in one batch
 *                  (shim_udp_resend_run); the RTO starts over
 */
#include <stdlib.h>
#include <string.h>

#include "opx_drop.h"
#include "opx_rel_priv.h"
#include "opx_ux.h"

#define OPX_REL_NACK_BATCH 64u     /* NACK datagrams per scan at most */

static bool opx_rel_is_hole(const struct opx_rel_flow *f, uint32_t psn)
{
	const struct opx_rel_slot *s = &f->stash[psn % OPX_REL_STASH];

	return !s->used || s->pkt.uh.psn != psn;
}

/* Whether the hole psn of slot s was NACKed too recently to ask again:
 * within min_age, doubled for every NACK it went unanswered (no sample
 * comes from a hole NACKed twice, so a round trip longer than the
 * estimate would otherwise have every hole asked for at each scan). */
static bool opx_rel_nack_recent(const struct opx_rel_flow *f, const struct opx_rel_slot *s,
				uint32_t psn, uint64_t now, uint64_t min_age)
{
	uint32_t k = s->nack_n > 6 ? 6 : s->nack_n;

	if (!s->nack_ns || s->nack_psn != psn || s->nack_ns < f->nack_answered_ns)
		return false;
	if (k > 1)
		min_age <<= k - 1;
	return shim_udp_since(now, s->nack_ns) < min_age;
}

static void opx_rel_nack_mark(struct opx_rel_slot *s, uint32_t psn, uint64_t now)
{
	s->nack_n = s->nack_ns && s->nack_psn == psn ? s->nack_n + 1 : 1;
	s->nack_psn = psn;
	s->nack_ns = now;
}

/* NACK the holes in [lo, hi) not NACKed within min_age: each NACK names
 * its first hole and in its mask which of the next 32 psns are holes to
 * send again too, as many NACKs as it takes (at most OPX_REL_NACK_BATCH),
 * so the sender fills every hole of the window in one round trip and
 * sends nothing twice that arrived.  Only psns below one that arrived
 * are asked for (hi): those above the last arrival may still be on their
 * way.  A hole's slot remembers when it was NACKed (opx_rel_nack_sample). */
void opx_rel_nack(struct opx_ep *ep, struct shim_peer *peer, struct opx_rel_flow *f,
		  uint32_t lo, uint32_t hi, uint64_t now, uint64_t min_age)
{
	uint32_t sent = 0;

	if (!f->stash) {
		/* no stash (no memory): the first hole only */
		if (!shim_udp_send_ctl(peer, SHIM_UDP_NACK, f->expected, 0))
			ep->rel.nacks_sent++;
		return;
	}
	for (uint32_t psn = lo; psn != hi && sent < OPX_REL_NACK_BATCH; psn++) {
		struct opx_rel_slot *s = &f->stash[psn % OPX_REL_STASH];
		uint32_t first = psn, mask = 0;

		if (!opx_rel_is_hole(f, psn) || opx_rel_nack_recent(f, s, psn, now, min_age))
			continue;
		opx_rel_nack_mark(s, psn, now);
		for (uint32_t i = 0; i < 32 && (uint32_t)(first + 1 + i - lo) < (uint32_t)(hi - lo); i++) {
			uint32_t q = first + 1 + i;
			struct opx_rel_slot *t = &f->stash[q % OPX_REL_STASH];

			if (!opx_rel_is_hole(f, q) || opx_rel_nack_recent(f, t, q, now, min_age))
				continue;
			opx_rel_nack_mark(t, q, now);
			mask |= 1u << i;
		}
		psn = first + 32; /* the loop's ++ moves past the mask */
		if (!shim_udp_send_ctl(peer, SHIM_UDP_NACK, first, mask)) {
			ep->rel.nacks_sent++;
			sent++;
		}
		if ((uint32_t)(psn + 1 - lo) > (uint32_t)(hi - lo))
			break;
	}
}

/* A packet came: if it filled a hole NACKed once, the time since the
 * NACK is a sample of the NACK round trip. */
static void opx_rel_nack_sample(struct opx_rel_flow *f, uint32_t psn, uint64_t now)
{
	struct opx_rel_slot *s;
	uint64_t r;

	if (!f->stash)
		return;
	s = &f->stash[psn % OPX_REL_STASH];
	if (!s->nack_ns || s->nack_psn != psn)
		return;
	r = shim_udp_since(now, s->nack_ns);
	if (s->nack_ns > f->nack_answered_ns) {
		f->nack_answered_ns = s->nack_ns;
		f->nack_evidence = true;
	}
	s->nack_ns = 0;
	if (s->nack_n != 1)
		return; /* Karn: which of the NACKs did it answer? */
	if (!f->nack_rtt_ns) {
		f->nack_rtt_ns = r;
		f->nack_rttvar_ns = r / 2;
	} else {
		uint64_t err = r > f->nack_rtt_ns ? r - f->nack_rtt_ns : f->nack_rtt_ns - r;

		f->nack_rttvar_ns = (3 * f->nack_rttvar_ns + err) / 4;
		f->nack_rtt_ns = (7 * f->nack_rtt_ns + r) / 8;
	}
}

/* Back-pressure on a sender over its share of the unexpected bound
 * (opx_ux_src_over): its packets stay in the stash, its acks say HELD
 * (it waits, it does not time us out) and its send ring fills (its sends
 * see -FI_EAGAIN), while the receive ring keeps taking the others'. */
static bool opx_rel_over_share(struct opx_ep *ep, struct opx_rel_flow *f,
			       const struct shim_peer *peer)
{
	if (!ep->match.ux_bytes || !opx_ux_src_over(ep, peer->lid, peer->ctx, 0))
		return false;
	f->held = true;
	ep->rel.ux_held++;
	return true;
}

/* In order: into the receive ring.  -FI_EAGAIN when the ring is full
 * (the packet stays where it is and is tried again). */
static int opx_rel_deliver(struct opx_ep *ep, struct opx_rel_flow *f,
			   const struct shim_udp_pkt *pkt, uint64_t now)
{
	int rc;

	if (opx_rel_over_share(ep, f, pkt->peer))
		return -FI_EAGAIN;
	rc = shim_udp_deliver(ep->shim, pkt);

	f->held = rc == -EAGAIN;
	if (rc == -EAGAIN) {
		ep->rel.ring_full++;
		return -FI_EAGAIN;
	}
	if (rc)
		opx_drop_proto(ep, "udp packet with a bad placement");
	f->expected++;
	pkt->peer->udp_ack = f->expected;
	if (!f->ack_due_ns)
		f->ack_due_ns = now;
	return 0;
}

/* The packets of a multi-packet eager message starting at the stash
 * slot of f->expected: how many there are (0: not a well-formed first
 * packet, deliver it alone and let the receive path judge it). */
static uint32_t opx_rel_mp_count(const struct shim_pkt_hdr *h)
{
	uint64_t total = opx_proto_pw(h).mp_first.total;

	if (h->opcode != OPX_OP_MP_FIRST || !h->paylen || total <= h->paylen)
		return 0;
	total = (total + h->paylen - 1) / h->paylen;
	return total <= OPX_UDP_MP_MAX ? (uint32_t)total : 0;
}

/* The n packets of a whole multi-packet message at f->expected, in one
 * reservation, so no other flow's packet comes between them; expected
 * moves past them.  -FI_EAGAIN over the flow's share or with the ring
 * full (held, counted). */
static int opx_rel_deliver_whole(struct opx_ep *ep, struct opx_rel_flow *f,
				 const struct shim_udp_pkt *const *pkts, uint32_t n, uint64_t now)
{
	int rc;

	if (opx_rel_over_share(ep, f, pkts[0]->peer))
		return -FI_EAGAIN;
	rc = shim_udp_deliver_n(ep->shim, pkts, n);
	f->held = rc == -EAGAIN;
	if (rc == -EAGAIN) {
		ep->rel.ring_full++;
		return -FI_EAGAIN;
	}
	if (rc)
		opx_drop_proto(ep, "udp multi-packet message that is not eager data");
	f->expected += n;
	pkts[0]->peer->udp_ack = f->expected;
	if (!f->ack_due_ns)
		f->ack_due_ns = now;
	return 0;
}

/* A whole multi-packet message, once every packet is in the stash.
 * -FI_EAGAIN while some are missing or it cannot go yet. */
static int opx_rel_deliver_mp(struct opx_ep *ep, struct opx_rel_flow *f, uint32_t n, uint64_t now)
{
	const struct shim_udp_pkt *pkts[OPX_UDP_MP_MAX] = {NULL};
	uint32_t first = f->expected;

	if (!f->stash)
		return -FI_EAGAIN;
	for (uint32_t i = 0; i < n; i++) {
		const struct opx_rel_slot *s = &f->stash[(first + i) % OPX_REL_STASH];

		if (!s->used || s->pkt.uh.psn != first + i)
			return -FI_EAGAIN;
		pkts[i] = &s->pkt;
	}
	if (opx_rel_deliver_whole(ep, f, pkts, n, now))
		return -FI_EAGAIN;
	for (uint32_t i = 0; i < n; i++)
		f->stash[(first + i) % OPX_REL_STASH].used = false;
	f->stashed -= n;
	if (!f->stashed)
		f->stash_idle_ns = now;
	return 0;
}

uint32_t opx_rel_data_run(struct opx_ep *ep, struct opx_rel_flow *f,
			  const struct shim_udp_pkt *pkts, uint32_t avail, uint64_t now)
{
	const struct shim_udp_pkt *run[OPX_UDP_MP_MAX];
	uint32_t m;

	if (pkts[0].uh.psn != f->expected || f->stashed)
		return 0;
	m = opx_rel_mp_count(&pkts[0].e.hdr);
	if (m < 2 || m > avail)
		return 0;
	for (uint32_t k = 0; k < m; k++) {
		if (pkts[k].uh.type != SHIM_UDP_DATA || pkts[k].peer != pkts[0].peer ||
		    pkts[k].uh.psn != f->expected + k)
			return 0;
		run[k] = &pkts[k];
	}
	if (opx_rel_deliver_whole(ep, f, run, m, now))
		return 0; /* not now: the stash holds them */
	for (uint32_t k = 0; k < m; k++) {
		opx_rel_ack_count(f, &pkts[k]);
		opx_rel_nack_sample(f, pkts[k].uh.psn, now);
		if (k) /* the first one's was taken by the caller */
			shim_udp_release(pkts[k].peer, pkts[k].uh.ack);
	}
	f->rx_last_ns = now;
	if ((int32_t)(f->rx_hi - f->expected) < 0)
		f->rx_hi = f->expected;
	return m;
}

void opx_rel_drain_stash(struct opx_ep *ep, struct opx_rel_flow *f, uint64_t now)
{
	while (f->stashed) {
		struct opx_rel_slot *s = &f->stash[f->expected % OPX_REL_STASH];
		uint32_t n;

		if (!s->used || s->pkt.uh.psn != f->expected)
			break;
		n = opx_rel_mp_count(&s->pkt.e.hdr);
		if (n) {
			if (opx_rel_deliver_mp(ep, f, n, now))
				break;
			continue;
		}
		if (opx_rel_deliver(ep, f, &s->pkt, now))
			break;
		s->used = false;
		if (!--f->stashed)
			f->stash_idle_ns = now;
	}
}

static void opx_rel_stash(struct opx_ep *ep, struct opx_rel_flow *f, const struct shim_udp_pkt *pkt)
{
	uint32_t len = (pkt->e.rhf & SHIM_RHF_EGR) ? pkt->e.hdr.paylen : 0;
	struct opx_rel_slot *s;

	if (!f->stash) {
		f->stash = calloc(OPX_REL_STASH, sizeof(*f->stash));
		if (!f->stash)
			return; /* replay brings it back */
	}
	s = &f->stash[pkt->uh.psn % OPX_REL_STASH];

	if (s->used) {
		ep->rel.dups++; /* the same psn again */
		return;
	}
	if (len) {
		if (!s->buf)
			s->buf = malloc(ep->rx->mtu);
		if (!s->buf || len > ep->rx->mtu)
			return; /* replay brings it back */
		memcpy(s->buf, pkt->pay, len);
	}
	s->pkt = *pkt;
	s->pkt.pay = len ? s->buf : NULL;
	s->used = true;
	f->stashed++;
	ep->rel.stashed++;
}

void opx_rel_data(struct opx_ep *ep, struct opx_rel_flow *f, const struct shim_udp_pkt *pkt,
		  uint64_t now)
{
	uint32_t d = pkt->uh.psn - f->expected;

	f->rx_last_ns = now;
	opx_rel_ack_count(f, pkt);
	if (d < OPX_REL_STASH)
		opx_rel_nack_sample(f, pkt->uh.psn, now);
	if (d == 0 && (int32_t)(f->rx_hi - f->expected) <= 0)
		f->rx_hi = f->expected + 1; /* keeps up over the wrap */
	if (d == 0 && !opx_rel_mp_count(&pkt->e.hdr)) {
		if (opx_rel_deliver(ep, f, pkt, now) == 0)
			opx_rel_drain_stash(ep, f, now);
		else
			opx_rel_stash(ep, f, pkt); /* ring full: tried again on progress */
		return;
	}
	if (d == 0) {
		/* a multi-packet message waits in the stash until it is whole */
		opx_rel_stash(ep, f, pkt);
		opx_rel_drain_stash(ep, f, now);
		return;
	}
	if (d < OPX_REL_STASH) {
		/* the psns between the last arrival and this one are new
		 * holes: NACKed now, once; older ones by opx_rel_timers */
		uint32_t lo = (int32_t)(f->rx_hi - f->expected) > 0 ? f->rx_hi : f->expected;

		opx_rel_stash(ep, f, pkt);
		if ((int32_t)(pkt->uh.psn + 1 - lo) > 0) {
			if (pkt->uh.psn != lo)
				opx_rel_nack(ep, pkt->peer, f, lo, pkt->uh.psn, now, 0);
			f->rx_hi = pkt->uh.psn + 1;
		}
		/* a packet of the multi-packet message waiting at expected may
		 * complete it: deliver now, not at the next timer tick (up to
		 * OPX_REL_TICK_NS late, on every message of two packets or more) */
		if (f->stash) {
			const struct opx_rel_slot *h = &f->stash[f->expected % OPX_REL_STASH];

			if (h->used && h->pkt.uh.psn == f->expected && d < opx_rel_mp_count(&h->pkt.e.hdr))
				opx_rel_drain_stash(ep, f, now);
		}
		return;
	}
	if (d >= 0x80000000u) {
		/* already delivered: the sender missed our ack */
		ep->rel.dups++;
		f->ack_force = true;
		return;
	}
	ep->rel.beyond_window++;
}

/* Whether psn goes again for a NACK: not when a NACK had it sent within
 * half the round trip (that copy is still on its way, behind what we
 * queued before it, and the receiver asked again only because it cannot
 * see our queue); else it is noted as sent now. */
static bool opx_rel_nack_want(struct opx_ep *ep, struct opx_rel_flow *f, uint32_t psn, uint64_t now)
{
	uint32_t t = (uint32_t)(now >> 10);

	if (f->resent) {
		struct opx_rel_resent *r = &f->resent[psn % SHIM_UDP_WINDOW];

		if (r->psn == psn && r->t_us &&
		    (uint64_t)(uint32_t)(t - r->t_us) << 10 < f->srtt_ns / 2) {
			ep->rel.nack_ignored++;
			return false;
		}
		r->psn = psn;
		r->t_us = t ? t : 1;
	}
	return true;
}

/* Send the run of n psns from first again, in one batch. */
static void opx_rel_nack_run(struct opx_ep *ep, struct shim_peer *peer, uint32_t first, uint32_t n)
{
	int sent = n ? shim_udp_resend_run(peer, first, n) : 0;

	if (sent > 0)
		ep->rel.nack_resends += (uint64_t)sent;
}

/* A NACK: send exactly the psns it names, once per round trip (the
 * receiver asks again after its NACK round trip), each run of
 * consecutive ones in one batch (a lost GSO batch is a run of holes).
 * The receiver is alive and steering the recovery: the retransmission
 * timeout starts over. */
void opx_rel_nacked(struct opx_ep *ep, struct opx_rel_flow *f,
		    const struct shim_udp_pkt *pkt, uint64_t now)
{
	uint32_t first = 0, n = 0;

	ep->rel.nacks_rx++;
	f->nack_rx_ns = now;
	if (!f->resent)
		f->resent = calloc(SHIM_UDP_WINDOW, sizeof(*f->resent)); /* NULL: no filter */
	for (uint32_t i = 0; i <= 32; i++) {
		uint32_t psn = pkt->uh.psn + i;

		if (i && !(pkt->uh.rhf & (1u << (i - 1))))
			continue;
		if (!opx_rel_nack_want(ep, f, psn, now))
			continue;
		if (n && psn == first + n) {
			n++;
			continue;
		}
		opx_rel_nack_run(ep, pkt->peer, first, n);
		first = psn;
		n = 1;
	}
	opx_rel_nack_run(ep, pkt->peer, first, n);
	ep->rel.retransmits = ep->rel.nack_resends + ep->rel.rto_resends;
	if (f->progress_ns)
		f->timer_ns = now + f->rto_ns;
}
