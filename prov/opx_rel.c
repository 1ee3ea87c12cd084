/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rel.c - the reliability module: exactly-once, in-order delivery per
 * flow over the udp wire, which loses, duplicates and reorders.  The shm
 * wire is reliable by construction and never comes here.
 *
 * A flow is one direction between two receive contexts; both directions
 * between a pair share one shim udp peer (the "link") and one struct
 * opx_rel_flow here.  Sequence numbers are positions in the sender's send
 * ring (shim_udp.c), counted from the link's base.  The ring doubles as
 * the replay memory: nothing is freed before it is acknowledged, and a
 * full ring is back-pressure (-FI_EAGAIN to the caller), so memory never
 * grows without bound.
 *
 * psn arithmetic: 32 bits that wrap, so psns are only ever compared by
 * their difference modulo 2^32, never with a plain "<".  A DATA packet is
 * classified by d = psn - expected (uint32_t): d == 0 in order; 0 < d <
 * OPX_REL_STASH ahead, in the window; d >= 2^31 (negative as int32_t)
 * behind, a duplicate; anything else beyond the window.  OPX_REL_STASH
 * divides 2^32, so the stash slot psn % OPX_REL_STASH is the same across
 * the wrap and unique within the window.  The send side compares alike:
 * shim_udp_release() ignores an ack outside (acked, sent], an rtt sample
 * ends when (int32_t)(acked - rtt_psn) >= 0.
 *
 * Receive side (opx_rel_progress, per datagram of shim_udp_recv):
 *   any type       its cumulative ack (piggy-backed) frees our send ring:
 *                  shim_udp_release()
 *   DATA, NACK     opx_rel_data, opx_rel_nacked (opx_rel_rx.c, which
 *                  describes what they do)
 *   ACK            with SHIM_UDP_ACK_HELD (the peer holds what we sent,
 *                  unread or for want of ring room): progress_ns = now
 * Then, at most every OPX_REL_TICK_NS (they walk every flow), opx_rel_timers,
 * per flow: drain the stash (ring-full retry, whole
 * multi-packet messages); clear ack_due_ns once a datagram carried
 * udp_ack == expected; a standalone ACK (opx_rel_ack) on ack_force, when
 * opx_rel_ack_due says so, and every opx_rel_keepalive_ns() while held (the next
 * packet stashed for want of ring room: the ack says SHIM_UDP_ACK_HELD);
 * NACK again each hole still missing one NACK round trip after it was
 * NACKed (opx_rel_nack_rto: RFC 6298 over NACK-to-packet samples, Karn's
 * rule, doubled for each unanswered NACK of the hole; the time a hole
 * was NACKed lives in its empty stash slot), or at once when a hole
 * NACKed later was answered (the sender answers NACKs in order down one
 * path: the earlier one's retransmission, or its NACK, was lost too).
 * Loss is repaired by NACKs
 * within a round trip, whatever the window; the RTO is the last resort.
 *
 * Send side (opx_rel_tx_timer; acked and sent from shim_udp_tx_state, the
 * ring holds [acked, sent) for replay):
 *   nothing heard for FI_OPX_PEER_TIMEOUT s (a live peer sends at
 *   least a keepalive every opx_rel_keepalive_ns(), a quarter of that
 *   timeout at most) -----------------------------------------------> DEAD
 *   nothing sent for opx_rel_keepalive_ns(): an ACK as keepalive
 *   IDLE (acked == sent) --- packets sent ---------------------------> ARMED
 *   ARMED, on arming and whenever the ack moves: progress_ns = now,
 *          rto = opx_rel_rto() = srtt_ns + 4 * rttvar_ns within
 *          [OPX_REL_RTO_NS, OPX_REL_RTO_MAX_NS], timer_ns = now + rto; the
 *          floor spares a receiver that is only slow or preempted
 *   ARMED, timer expired: shim_udp_resend of acked (the first missing)
 *          and of sent - 1 (a probe: its arrival shows the receiver a
 *          lost tail as holes, which it NACKs), rto doubled (capped), no
 *          rtt sample (Karn).  Not a burst: the timer fires mostly for a
 *          receiver that was only slow, which has the rest.
 *   ARMED, no ack progress and no HELD ack for FI_OPX_PEER_TIMEOUT s
 *          (it hears us no more: a path that lost our packets) -----> DEAD
 *          A peer that computes, or lets its ring fill, holds our
 *          packets: that is flow control (a shm peer's full ring), and
 *          its HELD acks keep the flow ARMED for as long as it lives.
 *   ARMED, acked == sent -------------------------------------------> IDLE
 *   Both death rules count time up to ep->rel.drained_ns, the last poll
 *   that found our socket empty, not up to now: a process that computed
 *   for longer than the timeout has the peers' datagrams of that time
 *   still unread, and must not take them for silent before it read them.
 *   And what it reads then proves nothing: a socket that filled up while
 *   it computed dropped the rest, keepalives included, so after such a
 *   gap, and at the first drain (nothing to measure a gap from), every
 *   peer gets a full timeout from the drain (rel.resumed_ns,
 *   opx_rel_drained).
 *   DEAD   shim_udp_fail: nothing more is sent, the ring looks full,
 *          shim_peer_alive() is false.  A send that stalls on the peer
 *          fails with FI_ECONNREFUSED (opx_av_stalled_locked), and
 *          opx_rndv_check_peers fails the rendezvous sends and receives
 *          waiting on it and the receives directed at it.
 *   rtt (opx_rel_rtt, RFC 6298 gains 1/8 and 1/4): one sample at a time,
 *   from the check that set rtt_psn = sent to the first ack at or past it.
 *
 * The watchdog thread of shim_udp_wd.c is no second reliability engine: it
 * works only when the owner has not polled the socket for
 * SHIM_UDP_WD_IDLE_NS, never receives and never touches this state.  It
 * sends unacknowledged packets again (with its own doubling timeout),
 * repeats the cumulative ack while datagrams wait unread, and sends the
 * keepalive ACK; once the application progresses this file takes over
 * from the ring as the watchdog left it.
 *
 * A peer that restarts at the same address has another session nonce:
 * shim_udp_source() drops datagrams of its previous life and resets the
 * link (base = sent = tail, udp_ack 0, not dead, udp_epoch++).
 * opx_rel_flow() sees the epoch change and clears the flow
 * (opx_rel_flow_clear: stash empty, expected 0, rto and rtt reset), and
 * the AV learns the address again.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "opx_rel.h"
#include "opx_rel_priv.h"

#define OPX_REL_ACK_EVERY 16u      /* packets between standalone acks, */
#define OPX_REL_ACK_DGRAMS 8u      /* and data datagrams (opx_rel_ack_due), */
#define OPX_REL_ACK_BYTES 65536u   /* and payload bytes, unless the datagrams */
#define OPX_REL_ACK_SMALL 1024u    /* average less than this */
#define OPX_REL_ACK_NS 200000ull   /* a quiet flow's wait for a piggy-back */
#define OPX_REL_ACK_MAX_NS 500000ull /* a busy flow's: half the smallest RTO */
#define OPX_REL_TICK_NS 5000ull    /* timers (acks, nacks, replays) at most this often */
#define OPX_REL_QUIET_CLOCK 8u     /* empty polls per clock read, a power of two */
#define OPX_REL_NACK_NS 1000000ull /* a hole is NACKed again after this, */
#define OPX_REL_NACK_MIN_NS 100000ull /* or after twice the NACK round trip */
#define OPX_REL_NACK_MAX_NS 20000000ull
#define OPX_REL_NACK_SCAN_NS 50000ull /* holes to NACK again looked for at most this often */
#define OPX_REL_RTO_NS 1000000ull  /* smallest retransmission timeout */
#define OPX_REL_RTO_MAX_NS 64000000ull
#define OPX_REL_RX_BATCH 16
#define OPX_REL_STASH_IDLE_NS 1000000000ull
#define OPX_REL_REAP_NS 100000000ull

static uint64_t opx_rel_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void opx_rel_resent_free(struct opx_rel_flow *f)
{
	free(f->resent);
	f->resent = NULL;
}

static void opx_rel_stash_free(struct opx_rel_flow *f)
{
	if (!f->stash)
		return;
	for (uint32_t i = 0; i < OPX_REL_STASH; i++)
		free(f->stash[i].buf);
	free(f->stash);
	f->stash = NULL;
}

static void opx_rel_flow_clear(struct opx_rel_flow *f, uint32_t epoch)
{
	if (f->stash)
		for (uint32_t i = 0; i < OPX_REL_STASH; i++)
			f->stash[i].used = false;
	f->epoch = epoch;
	f->expected = 0;
	f->ack_force = false;
	f->ack_due_ns = 0;
	f->ack_dgrams = 0;
	f->ack_bytes = 0;
	f->rx_hi = 0;
	f->nack_scan_ns = 0;
	f->nack_rtt_ns = 0;
	f->nack_rttvar_ns = 0;
	f->nack_answered_ns = 0;
	f->nack_evidence = false;
	f->stashed = 0;
	f->held = false;
	f->held_ack_ns = 0;
	f->acked_seen = 0;
	f->progress_ns = 0;
	f->rto_ns = OPX_REL_RTO_NS;
	f->timer_ns = 0;
	f->rtt_on = false;
	f->srtt_ns = 0;
	f->rttvar_ns = 0;
}

static struct opx_rel_flow *opx_rel_flow(struct shim_peer *peer)
{
	struct opx_rel_flow *f = peer->rel;

	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return NULL;
		opx_rel_flow_clear(f, peer->udp_epoch);
		peer->rel = f;
	} else if (f->epoch != peer->udp_epoch) {
		/* the peer restarted: its new life starts at psn 0 */
		opx_rel_flow_clear(f, peer->udp_epoch);
		f->learned = false;
	}
	return f;
}

void opx_rel_ack_soon(struct shim_peer *peer)
{
	struct opx_rel_flow *f;

	if (!peer || peer->wire != SHIM_WIRE_UDP || !peer->rel)
		return;
	f = opx_rel_flow(peer);
	if (f)
		f->ack_force = true;
}

uint64_t opx_rel_keepalive_ns(void)
{
	uint64_t quarter = (uint64_t)opx_env.peer_timeout * 1000000000ull / 4;

	return quarter < SHIM_UDP_KEEPALIVE_NS ? quarter : SHIM_UDP_KEEPALIVE_NS;
}

/* The flow's ack went, in our own datagram or carried by another: none
 * is due (a forced one is cleared by opx_rel_ack only: a duplicate may
 * have asked for it after the carried ack left). */
static void opx_rel_acked(struct opx_rel_flow *f)
{
	f->ack_due_ns = 0;
	f->ack_dgrams = 0;
	f->ack_bytes = 0;
}

/* The cumulative ack; HELD while our ring is too full for the next
 * packet, so that the sender waits for us instead of declaring us dead. */
static void opx_rel_ack(struct opx_ep *ep, struct shim_peer *peer, struct opx_rel_flow *f)
{
	peer->udp_ack = f->expected;
	if (f->held)
		f->held_ack_ns = opx_rel_now();
	if (!shim_udp_send_ctl(peer, SHIM_UDP_ACK, 0, f->held ? SHIM_UDP_ACK_HELD : 0))
		ep->rel.acks_sent++;
	f->ack_force = false;
	opx_rel_acked(f);
}

/* Whether a flow's standalone ack is due (one that no datagram of ours
 * carries; lock held, f->ack_due_ns set).  Rarely while the peer streams
 * at us: an ack is a datagram and a system call of its own on both
 * sides, while the data comes in batches (GSO/GRO: up to 64 KiB per
 * call).  So: after OPX_REL_ACK_EVERY packets *and* OPX_REL_ACK_DGRAMS
 * data datagrams (however many small packets a PACK carries) *and*
 * OPX_REL_ACK_BYTES of payload, about one ack per receive batch (the
 * bytes only count for datagrams that average OPX_REL_ACK_SMALL or more:
 * a stream of small messages is acked every 8 datagrams, and a
 * 1500-byte path every 49 instead of every 16, which took a fifth off
 * its bandwidth); after half the sender's window whatever the datagrams
 * (its ring must not fill before the ack arrives; its eager bytes, 1 MiB,
 * hold 16 acks' worth); OPX_REL_ACK_NS after the flow fell quiet (a reply
 * of ours would have carried it by then: request-response traffic sends
 * none.  20 us was too short: an application that takes a window of 64
 * completions before it answers, as osu_bw and opx_bw do, often needs
 * longer, under a sanitizer or on a loaded machine always; nothing waits
 * for the ack meanwhile but the sender's ring, 1024 packets deep); and
 * OPX_REL_ACK_MAX_NS after the oldest unacknowledged packet, well inside
 * the sender's smallest retransmission timeout.  A receiver that completes
 * a push acks at once (opx_rel_ack_soon). */
bool opx_rel_ack_due(const struct opx_rel_flow *f, uint32_t ack_sent, uint64_t now)
{
	uint32_t pkts = f->expected - ack_sent;
	bool bytes = f->ack_bytes >= OPX_REL_ACK_BYTES ||
		     f->ack_bytes < (uint64_t)f->ack_dgrams * OPX_REL_ACK_SMALL;

	return (pkts >= OPX_REL_ACK_EVERY && f->ack_dgrams >= OPX_REL_ACK_DGRAMS && bytes) ||
	       pkts >= SHIM_UDP_WINDOW / 2 || shim_udp_since(now, f->rx_last_ns) >= OPX_REL_ACK_NS ||
	       shim_udp_since(now, f->ack_due_ns) >= OPX_REL_ACK_MAX_NS;
}

/* How long a NACKed hole waits for its retransmission before it is
 * NACKed again: the NACK round trip seen (NACK to the packet) and four
 * times its variation, as RFC 6298 times a retransmission (it varies
 * with the sender's queue, which the retransmission waits behind);
 * OPX_REL_NACK_NS before the first sample.  Too short, and the sender
 * sends a hole twice. */
static uint64_t opx_rel_nack_rto(const struct opx_rel_flow *f)
{
	uint64_t t = f->nack_rtt_ns + 4 * f->nack_rttvar_ns;

	if (!f->nack_rtt_ns)
		return OPX_REL_NACK_NS;
	if (t < OPX_REL_NACK_MIN_NS)
		return OPX_REL_NACK_MIN_NS;
	return t > OPX_REL_NACK_MAX_NS ? OPX_REL_NACK_MAX_NS : t;
}

/* Holes are looked for again at a quarter of that: a walk of the window
 * per NACK round trip or so, not per tick. */
static uint64_t opx_rel_nack_scan_ns(const struct opx_rel_flow *f)
{
	uint64_t t = opx_rel_nack_rto(f) / 4;

	return t < OPX_REL_NACK_SCAN_NS ? OPX_REL_NACK_SCAN_NS : t;
}

/* Round-trip estimate: finish the sample in flight when the ack covers
 * it, start the next one at what was sent last. */
static void opx_rel_rtt(struct opx_rel_flow *f, uint32_t acked, uint32_t sent, uint64_t now)
{
	if (f->rtt_on && (int32_t)(acked - f->rtt_psn) >= 0) {
		uint64_t r = now - f->rtt_t0;

		if (!f->srtt_ns) {
			f->srtt_ns = r;
			f->rttvar_ns = r / 2;
		} else {
			uint64_t err = r > f->srtt_ns ? r - f->srtt_ns : f->srtt_ns - r;

			f->rttvar_ns = (3 * f->rttvar_ns + err) / 4;
			f->srtt_ns = (7 * f->srtt_ns + r) / 8;
		}
		f->rtt_on = false;
	}
	if (!f->rtt_on && sent != acked) {
		f->rtt_psn = sent;
		f->rtt_t0 = now;
		f->rtt_on = true;
	}
}

/* The timeout after ack progress. */
static uint64_t opx_rel_rto(const struct opx_rel_flow *f)
{
	uint64_t rto = f->srtt_ns + 4 * f->rttvar_ns;

	if (rto < OPX_REL_RTO_NS)
		return OPX_REL_RTO_NS;
	return rto > OPX_REL_RTO_MAX_NS ? OPX_REL_RTO_MAX_NS : rto;
}

static void opx_rel_dead(struct opx_ep *ep, struct shim_peer *peer)
{
	shim_udp_fail(peer);
	ep->rel.peers_dead++;
}

/* The send side of a flow: acknowledgements, timeouts, death. */
static void opx_rel_tx_timer(struct opx_ep *ep, struct shim_peer *peer, struct opx_rel_flow *f,
			     uint64_t now)
{
	const uint64_t timeout_ns = (uint64_t)opx_env.peer_timeout * 1000000000ull;
	uint64_t rx_ns;
	uint32_t acked, sent, tx_count;

	/* Every live process sends something on each of its flows at least
	 * every opx_rel_keepalive_ns() (traffic, acks, keepalives; its
	 * watchdog when it does not progress), so silence for the peer
	 * timeout means it died, whichever side waits for whom.  Silence up
	 * to when we last emptied the socket: after a time without polling
	 * (we computed) what the peer sent meanwhile waits unread, and the
	 * first datagrams read must not find the others silent. */
	shim_udp_times(peer, &rx_ns, &tx_count);
	if (rx_ns < ep->rel.resumed_ns)
		rx_ns = ep->rel.resumed_ns;
	if (shim_peer_alive(peer) && shim_udp_since(ep->rel.drained_ns, rx_ns) > timeout_ns) {
		OPX_WARN(FI_LOG_EP_DATA,
			 "udp peer lid %u ctx %u: silent for %d s: declared dead (heard %" PRIu64
			 " ms ago, socket emptied %" PRIu64 " ms ago, resumed %" PRIu64 " ms ago)\n",
			 peer->lid, peer->ctx, opx_env.peer_timeout, shim_udp_since(now, rx_ns) / 1000000,
			 shim_udp_since(now, ep->rel.drained_ns) / 1000000,
			 shim_udp_since(now, ep->rel.resumed_ns) / 1000000);
		opx_rel_dead(ep, peer);
		return;
	}
	/* silent on our side since the count last moved (to a timer tick) */
	shim_udp_note_moved(tx_count, &f->tx_seen, &f->tx_seen_ns, now);
	if (shim_udp_since(now, f->tx_seen_ns) > opx_rel_keepalive_ns() && shim_peer_alive(peer))
		opx_rel_ack(ep, peer, f);

	shim_udp_tx_state(peer, &acked, &sent);
	opx_rel_rtt(f, acked, sent, now);
	if (acked == sent || !shim_peer_alive(peer)) {
		f->progress_ns = 0;
		return;
	}
	if (!f->progress_ns || acked != f->acked_seen) {
		f->acked_seen = acked;
		f->progress_ns = now;
		f->rto_ns = opx_rel_rto(f);
		f->timer_ns = now + f->rto_ns;
		shim_udp_rto_hint(peer, f->rto_ns);
		return;
	}
	if (shim_udp_since(ep->rel.drained_ns, f->progress_ns > ep->rel.resumed_ns
							   ? f->progress_ns
							   : ep->rel.resumed_ns) > timeout_ns) {
		OPX_WARN(FI_LOG_EP_DATA,
			 "udp peer lid %u ctx %u: no acknowledgement for %d s, %u packets "
			 "unacknowledged: declared dead\n",
			 peer->lid, peer->ctx, opx_env.peer_timeout, sent - acked);
		opx_rel_dead(ep, peer);
		return;
	}
	if (now < f->timer_ns)
		return;
	/* The last resort (holes the receiver sees are NACKed): the first
	 * unacknowledged packet, and the last sent as a probe, whose arrival
	 * shows the receiver every hole below it (a lost tail it cannot see
	 * otherwise).  Not a burst: a receiver that was only slow has the
	 * rest, and each of them would come twice. */
	if (!shim_udp_resend(peer, acked)) {
		ep->rel.retransmits++;
		ep->rel.rto_resends++;
	}
	if (sent - 1 != acked && !shim_udp_resend(peer, sent - 1)) {
		ep->rel.retransmits++;
		ep->rel.rto_resends++;
	}
	ep->rel.timeouts++;
	f->rtt_on = false; /* Karn: no sample across a retransmission */
	f->rto_ns = f->rto_ns * 2 > OPX_REL_RTO_MAX_NS ? OPX_REL_RTO_MAX_NS : f->rto_ns * 2;
	f->timer_ns = now + f->rto_ns;
	shim_udp_rto_hint(peer, f->rto_ns);
}

/* A peer declared dead that nothing of ours refers to (the address
 * vector removed it, or it was never in it: it only spoke to us) goes
 * with its flow: its memory and its place under the link cap come back.
 * The answer cache lets go of it first.  true: p is gone. */
static bool opx_rel_reap(struct opx_ep *ep, struct shim_peer *p)
{
	for (size_t i = 0; i < OPX_ANON_PEERS; i++)
		if (ep->peers.anon[i] == p) {
			ep->peers.anon[i] = NULL;
			shim_peer_close(p);
		}
	if (atomic_load(&p->refcnt) > 0)
		return false;
	if (p->rel) {
		opx_rel_stash_free(p->rel);
		opx_rel_resent_free(p->rel);
		free(p->rel);
		p->rel = NULL;
	}
	return shim_udp_forget(p) == 0;
}

static void opx_rel_timers(struct opx_ep *ep, uint64_t now)
{
	/* dead peers are looked for every OPX_REL_REAP_NS, not every tick */
	bool reap = shim_udp_since(now, ep->rel.reap_ns) > OPX_REL_REAP_NS;
	struct shim_peer *next;

	if (reap)
		ep->rel.reap_ns = now;
	for (struct shim_peer *p = shim_udp_next(ep->shim, NULL); p; p = next) {
		struct opx_rel_flow *f;

		next = shim_udp_next(ep->shim, p);
		if (reap && !shim_peer_alive(p) && opx_rel_reap(ep, p))
			continue;
		f = opx_rel_flow(p);
		if (!f)
			continue;
		if (f->stashed)
			opx_rel_drain_stash(ep, f, now);
		else if (f->stash && shim_udp_since(now, f->stash_idle_ns) > OPX_REL_STASH_IDLE_NS)
			opx_rel_stash_free(f);
		if (f->resent && shim_udp_since(now, f->nack_rx_ns) > OPX_REL_STASH_IDLE_NS)
			opx_rel_resent_free(f);
		/* a link that sent no data this long gives its send ring's pages back */
		shim_udp_trim(p, now, OPX_REL_STASH_IDLE_NS);
		/* a datagram that went meanwhile carried the ack */
		if (f->ack_due_ns && p->udp_ack_sent == f->expected)
			opx_rel_acked(f);
		if (f->ack_force || (f->ack_due_ns && opx_rel_ack_due(f, p->udp_ack_sent, now)) ||
		    (f->held && shim_udp_since(now, f->held_ack_ns) >= opx_rel_keepalive_ns()))
			opx_rel_ack(ep, p, f);
		/* holes NACKed a NACK round trip ago and still missing (the
		 * NACK or the retransmission was lost): again */
		if (f->stashed && now - f->nack_scan_ns >= (f->nack_evidence ? OPX_REL_NACK_SCAN_NS
									    : opx_rel_nack_scan_ns(f))) {
			f->nack_scan_ns = now;
			f->nack_evidence = false;
			opx_rel_nack(ep, p, f, f->expected, f->rx_hi, now, opx_rel_nack_rto(f));
		}
		opx_rel_tx_timer(ep, p, f, now);
	}
}

/* The datagram size of a link follows the smaller of both ends' path
 * MTU (the shim grows it to what the peer's header says it takes,
 * src_mtu): say so once per change. */
static void opx_rel_mtu_log(struct opx_rel_flow *f, const struct shim_udp_pkt *pkt)
{
	const struct shim_peer *p = pkt->peer;

	f->mtu_logged = p->mtu;
	OPX_INFO(FI_LOG_EP_DATA,
		 "udp peer lid %u ctx %u: %u payload bytes per datagram (the peer takes %u)\n",
		 p->lid, p->ctx, p->mtu, (unsigned int)pkt->uh.src_mtu * SHIM_BLOCK);
}

/* A poll found the socket empty at now.  Back after not emptying it for
 * longer than the peer timeout (the application computed), what peers
 * sent meanwhile may have overflowed the socket and been dropped by the
 * kernel, their keepalives with it, so what was read proves no silence:
 * every peer gets a full timeout from now to be heard (resumed_ns,
 * opx_rel_tx_timer).  So does the first drain of all: nothing says how
 * long the socket went unread before it (test_rel_drained_rule). */
void opx_rel_drained(struct opx_rel_stats *rel, uint64_t now, uint64_t timeout_ns)
{
	if (!rel->drained_ns || now - rel->drained_ns > timeout_ns)
		rel->resumed_ns = now;
	rel->drained_ns = now;
}

void opx_rel_progress(struct opx_ep *ep)
{
	struct shim_udp_pkt pkts[OPX_REL_RX_BATCH];
	uint64_t now = 0;
	bool timed;
	int n;

	n = shim_udp_recv(ep->shim, pkts, OPX_REL_RX_BATCH);
	/* the clock: the one the shim read for the batch; an empty poll
	 * reads it (for the timers) only every OPX_REL_QUIET_CLOCK-th time:
	 * a poll is a fraction of a timer tick, and the clock read was a
	 * tenth of its cost */
	timed = n > 0 || !(++ep->rel.quiet & (OPX_REL_QUIET_CLOCK - 1));
	if (n > 0)
		now = pkts[0].rx_ns;
	else if (timed)
		now = opx_rel_now();
	if (timed && shim_udp_rx_empty(ep->shim))
		opx_rel_drained(&ep->rel, now, (uint64_t)opx_env.peer_timeout * 1000000000ull);
	for (int i = 0; i < n; i++) {
		const struct shim_udp_pkt *pkt = &pkts[i];
		struct opx_rel_flow *f = opx_rel_flow(pkt->peer);

		if (!f)
			continue;
		if (!f->learned && ep->av) {
			struct shim_addr a;

			if (!shim_udp_peer_addr(pkt->peer, &a) && a.lid)
				opx_av_learn_locked(ep->av, &a);
			f->learned = true;
		}
		if (pkt->peer->mtu != f->mtu_logged)
			opx_rel_mtu_log(f, pkt);
		shim_udp_release(pkt->peer, pkt->uh.ack);
		switch (pkt->uh.type) {
		case SHIM_UDP_DATA: {
			uint32_t took = opx_rel_data_run(ep, f, pkt, (uint32_t)(n - i), now);

			if (took)
				i += (int)took - 1;
			else
				opx_rel_data(ep, f, pkt, now);
			break;
		}
		case SHIM_UDP_ACK:
			/* it holds what we sent, unread or for want of ring
			 * room: alive, so the ack standing still is no loss */
			if ((pkt->uh.rhf & SHIM_UDP_ACK_HELD) && f->progress_ns)
				f->progress_ns = now;
			break;
		case SHIM_UDP_NACK:
			opx_rel_nacked(ep, f, pkt, now);
			break;
		default:
			break;
		}
	}
	ep->rel.flows = shim_udp_next(ep->shim, NULL) != NULL;
	/* the timers walk every flow: not on every poll, or a job with many
	 * remote peers pays for all of them on each one */
	if (timed && ep->rel.flows && now - ep->rel.timers_ns >= OPX_REL_TICK_NS) {
		ep->rel.timers_ns = now;
		opx_rel_timers(ep, now);
	}
	/* a flush point: small packets that waited for company go */
	shim_udp_flush(ep->shim);
}

/* Endpoint close: like a TCP close, what was sent is not dropped with
 * the process.  Acknowledge what we received, then keep receiving acks
 * and sending again until every flow's sent packets are acknowledged,
 * the peers stop answering (OPX_REL_LINGER_IDLE_NS without progress: a
 * peer that exited), or OPX_REL_LINGER_NS passed. */
#define OPX_REL_LINGER_NS 2000000000ull
#define OPX_REL_LINGER_IDLE_NS 250000000ull
void opx_rel_linger(struct opx_ep *ep)
{
	uint64_t start = opx_rel_now(), moved = start;
	uint64_t last_left = UINT64_MAX;

	if (!ep->udp || !ep->rel.flows)
		return;
	shim_udp_flush(ep->shim); /* what waited for company goes first */
	for (struct shim_peer *p = shim_udp_next(ep->shim, NULL); p; p = shim_udp_next(ep->shim, p))
		if (p->rel && shim_peer_alive(p))
			opx_rel_ack(ep, p, p->rel);
	for (;;) {
		uint64_t now = opx_rel_now(), left = 0;

		for (struct shim_peer *p = shim_udp_next(ep->shim, NULL); p;
		     p = shim_udp_next(ep->shim, p)) {
			uint32_t acked, sent;

			shim_udp_tx_state(p, &acked, &sent);
			if (shim_peer_alive(p))
				left += sent - acked;
		}
		if (!left || now - start > OPX_REL_LINGER_NS || now - moved > OPX_REL_LINGER_IDLE_NS)
			break;
		if (left != last_left) {
			last_left = left;
			moved = now;
		}
		opx_rel_progress(ep);
	}
}

void opx_rel_fini(struct opx_ep *ep)
{
	if (ep->rel.flows) {
		struct shim_udp_stats st;

		shim_udp_stats(ep->shim, &st);
		OPX_INFO(FI_LOG_EP_DATA,
			 "udp wire: %" PRIu64 " datagrams in, %" PRIu64 " out; acks %" PRIu64
			 ", nacks %" PRIu64 ", retransmits %" PRIu64 ", timeouts %" PRIu64
			 ", duplicates %" PRIu64 ", out of order %" PRIu64 ", beyond window %" PRIu64
			 ", dead peers %" PRIu64 "; dropped: length %" PRIu64 ", magic %" PRIu64
			 ", crc %" PRIu64 ", job key %" PRIu64 ", session %" PRIu64 ", mac %" PRIu64
			 ", identity %" PRIu64 ", quota %" PRIu64 "\n",
			 st.rx_datagrams, st.tx_datagrams, ep->rel.acks_sent, ep->rel.nacks_sent,
			 ep->rel.retransmits, ep->rel.timeouts, ep->rel.dups, ep->rel.stashed,
			 ep->rel.beyond_window, ep->rel.peers_dead, st.drop_len, st.drop_magic,
			 st.drop_crc, st.drop_jkey, st.drop_dest, st.drop_mac, st.drop_ident,
			 st.drop_quota);
	}
	for (struct shim_peer *p = shim_udp_next(ep->shim, NULL); p; p = shim_udp_next(ep->shim, p)) {
		struct opx_rel_flow *f = p->rel;

		if (!f)
			continue;
		opx_rel_stash_free(f);
		opx_rel_resent_free(f);
		free(f);
		p->rel = NULL;
	}
}
