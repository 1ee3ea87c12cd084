/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_progress.c - one progress step of an endpoint, the top of the data
 * path.  Every caller that needs the endpoint to move (posting a send or
 * receive, reading a CQ or counter, waiting, closing) calls
 * opx_progress_locked with the domain lock held, and everything below
 * runs from here, in one direction:
 *
 *   wire        opx_rel_progress (udp datagrams: order, acks, replays,
 *               into our own receive ring) - the shm wire needs no step
 *   engines     opx_rndv_progress (SDMA pushes, queued control packets),
 *               opx_rma_progress (queued operations and replies)
 *   receive     opx_rx_drain: validate and dispatch each packet of the
 *               receive ring (opx_rx.c), as many as the CQs have room for;
 *               a message nothing is posted for may wait a few drains
 *               for its receive (opx_rx_defer)
 *     -> match     eager and multi-packet messages, RTS (opx_match.c)
 *     -> rndv      rendezvous control and data (opx_rndv.c)
 *     -> rma       one-sided requests and replies (opx_rma.c)
 *   completion  CQ entries and counters (opx_complete.c)
 *
 * No layer below calls back up into this one: the calls that progress are
 * the API's (opx_msg.c, opx_rma_api.c, reading or waiting on a CQ or a
 * counter, opx_pset.c), and the data path below only writes completions
 * into those objects (opx_complete.c).  When nothing arrived the
 * step also looks for dead senders' holes in the ring and, after
 * FI_OPX_SPIN_COUNT empty polls, for dead peers, and yields the CPU.
 */
#include <sched.h>

#include "opx_cq.h"
#include "opx_ep.h"
#include "opx_rel.h"
#include "opx_rma.h"
#include "opx_rndv_api.h"
#include "opx_rx.h"

#define OPX_PROGRESS_BATCH 64

/* A packet completes at most this many operations on each CQ. */
#define OPX_CQ_PER_PACKET 2

/* How many packets this progress call may consume: as many as the CQs
 * have room for.  A packet left queued returns no credits, so a full CQ
 * that cannot grow pushes back on the senders instead of losing
 * completions. */
static inline int opx_progress_rx_budget(struct opx_ep *ep)
{
	const size_t want = OPX_PROGRESS_BATCH * OPX_CQ_PER_PACKET;
	size_t room = want;

	if (ep->rx_cq && opx_cq_free_locked(ep->rx_cq) < want &&
	    !opx_cq_room_locked(ep->rx_cq, want))
		room = opx_cq_free_locked(ep->rx_cq);
	if (ep->tx_cq && opx_cq_free_locked(ep->tx_cq) < want &&
	    !opx_cq_room_locked(ep->tx_cq, want) && opx_cq_free_locked(ep->tx_cq) < room)
		room = opx_cq_free_locked(ep->tx_cq);
	return (int)(room / OPX_CQ_PER_PACKET);
}

/* What an empty poll of the udp socket counts towards FI_OPX_SPIN_COUNT:
 * a recvfrom() that finds nothing took 1.3-2.6 us on the 2-core VM of
 * the project, an empty look at the rings some 50 ns. */
#define OPX_SPIN_SOCK_WEIGHT 25u

uint32_t opx_progress_locked(struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	int n, budget;
	bool sock;
	uint32_t cost;

	if (!ep->enabled)
		return 1;
	/* the progress thread (FI_PROGRESS_AUTO) looks whether the
	 * application progresses by itself (opx_auto.c) */
	ep->tel.app_progress += !ep->domain->auto_self;
	/* the udp socket: every time once there are udp flows, else now and
	 * then for a first contact (a system call is not free) */
	sock = __builtin_expect(ep->udp, 0) &&
	       (ep->rel.flows || !(ep->rel.polls++ & OPX_REL_IDLE_POLL_MASK));
	if (sock)
		opx_rel_progress(ep);
	/* udp peers of the address vector live in the first bound
	 * endpoint's context: what waits there for company (small packets
	 * packed into shared datagrams) goes at our progress too */
	if (__builtin_expect(ep->av && ep->av->udp_via && ep->av->udp_via != ep->shim, 0))
		shim_udp_flush(ep->av->udp_via);
	budget = opx_progress_rx_budget(ep);
	if (__builtin_expect(opx_rndv_pending(ep), 0) && budget)
		opx_rndv_progress(ep);
	if (__builtin_expect(ep->rma_st.rma_busy, 0))
		opx_rma_progress(ep);
	n = opx_rx_drain(ep, budget);
	/* Idle polling must not starve other ranks sharing a core. */
	if (n) {
		ep->rx_st.idle = 0;
		ep->rx_st.spun = 0;
		return 0;
	}
	/* A dead sender's hole is looked for every 64 empty polls (cheap: a
	 * load of our own head entry and a clock read; the senders' tail only
	 * after 20 ms standing still), so blocking waits, which progress once
	 * per sleep slice, also get past one. */
	if ((++ep->rx_st.idle & 63) == 0) {
		/* it also tells peers that we poll: below their size
		 * thresholds they copy one-sided data by themselves only
		 * while we do not (opx_rma.c) */
		if (shim_claim_rx_recover(ep->shim) > 0)
			return 0; /* filled: poll again */
	}
	/* FI_OPX_SPIN_COUNT counts empty looks at the rings (some 50 ns
	 * each); an empty look at the udp socket is a system call, worth
	 * OPX_SPIN_SOCK_WEIGHT of them: without the weight, 4 ranks of
	 * MPICH's sendflood on 2 cores over the udp wire spun 0.4 ms before
	 * each yield and took 78 s instead of 13 */
	cost = sock ? OPX_SPIN_SOCK_WEIGHT : 1;
	ep->rx_st.spun += cost;
	if (ep->rx_st.spun >= (uint32_t)opx_env.spin_count) {
		ep->rx_st.idle = 0;
		ep->rx_st.spun = 0;
		opx_rndv_check_peers(ep); /* paced: at most every 50 ms */
		ep->tel.yields++;
		sched_yield();
	}
	return cost;
}
