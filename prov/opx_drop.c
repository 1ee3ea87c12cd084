/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_drop.c - packets refused on receipt.  Whatever layer refuses one
 * (receive validation, matching, rendezvous, one-sided, reliability)
 * counts it here by reason, per endpoint and in the receive context's
 * shared counter; the first of each reason is logged at warn level, the
 * later ones only counted (a hostile sender must not be able to flood the
 * log).  Read by opx_drop_count and the telemetry (opx_stats.c).
 */
#include "opx_drop.h"
#include "opx_ep.h"

static const char *const opx_drop_names[OPX_DROP_MAX] = {
	[OPX_DROP_RHF_ERR] = "receive header error bits",
	[OPX_DROP_OPCODE] = "unknown opcode",
	[OPX_DROP_JKEY] = "wrong job key",
	[OPX_DROP_DEST] = "wrong destination",
	[OPX_DROP_FLAGS] = "unknown flags",
	[OPX_DROP_PAYLEN] = "payload longer than the MTU",
	[OPX_DROP_PAYLOAD] = "payload outside the eager ring",
	[OPX_DROP_CSUM] = "checksum missing or wrong",
	[OPX_DROP_MP_LEN] = "bad multi-packet length",
	[OPX_DROP_MP_BOUND] = "multi-packet message above our eager limit",
	[OPX_DROP_MP_SEQ] = "multi-packet continuation out of sequence",
	[OPX_DROP_RTS] = "bad rendezvous request",
	[OPX_DROP_PROTO] = "refused protocol packet (rendezvous, one-sided, reliability)",
};

const char *opx_drop_name(enum opx_drop_reason reason)
{
	return (unsigned)reason < OPX_DROP_MAX ? opx_drop_names[reason] : "unknown reason";
}

uint64_t opx_drop_count(const struct opx_ep *ep, enum opx_drop_reason reason)
{
	uint64_t n = 0;

	if ((unsigned)reason < OPX_DROP_MAX)
		return ep->tel.drops[reason];
	for (int i = 0; i < OPX_DROP_MAX; i++)
		n += ep->tel.drops[i];
	return n;
}

static __attribute__((noinline, cold)) void opx_drop_log(struct opx_ep *ep,
							 enum opx_drop_reason reason,
							 const char *detail)
{
	if (ep->tel.drops_logged & (1u << reason))
		return;
	ep->tel.drops_logged |= 1u << reason;
	OPX_WARN(FI_LOG_EP_DATA,
		 "endpoint lid %u ctx %u dropped a packet: %s%s%s (first of this reason; "
		 "later ones are only counted)\n",
		 ep->addr.lid, ep->addr.ctx, opx_drop_name(reason), detail ? ": " : "",
		 detail ? detail : "");
}

static void opx_drop_add(struct opx_ep *ep, enum opx_drop_reason reason, const char *detail)
{
	ep->tel.rx_dropped++;
	ep->tel.drops[reason]++;
	atomic_fetch_add_explicit(&ep->rx->ctl->rx_dropped, 1, memory_order_relaxed);
	if (__builtin_expect(!(ep->tel.drops_logged & (1u << reason)), 0))
		opx_drop_log(ep, reason, detail);
}

void opx_drop_note(struct opx_ep *ep, enum opx_drop_reason reason)
{
	opx_drop_add(ep, reason, NULL);
}

void opx_drop_proto(struct opx_ep *ep, const char *why)
{
	opx_drop_add(ep, OPX_DROP_PROTO, why);
}
