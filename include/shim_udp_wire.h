/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp_wire.h - the software SuperNIC's udp wire between hosts, part
 * of the shim ABI (same version as shim_abi.h): the datagram format and
 * what the provider's reliability module calls.
 */
#ifndef SHIM_UDP_WIRE_H
#define SHIM_UDP_WIRE_H

#include "shim_dev.h"

/* ---------------------------------------------------------------------
 * The udp wire (shim_udp.c): one UDP socket per receive context, the same
 * packet format as the shm wire behind a datagram header.  It is not
 * reliable: it loses, duplicates and reorders, and validates what it
 * receives (length, magic, MAC, CRC32C, sender address, job key,
 * destination) before the
 * provider's reliability module (prov/opx_rel.c) sees it.
 *
 * Datagram: struct shim_udp_hdr, then for DATA the 56-byte packet header
 * and paylen payload bytes when SHIM_RHF_EGR (inline payload rides in the
 * packet header).  A udp peer's packet sequence numbers are the positions
 * of its send ring relative to the flow's start (psn 0 = first packet).
 *
 * PACK datagram: several consecutive small packets of one flow share a
 * datagram (struct shim_udp_hdr with psn the first's, rhf the count),
 * each as struct shim_udp_frame, its 56-byte packet header and len
 * payload bytes, back to back (no padding).  The tag covers all of it in
 * every authenticated mode.  A receiver hands them out as DATA packets
 * psn, psn + 1, ...  A sender packs only first transmissions; what is
 * sent again goes packet by packet.
 */
#define SHIM_UDP_MAGIC 0x5558504fu /* "OPXU" */
#define SHIM_UDP_VERSION 7u /* 5: src_eager; 6: PACK; 7: SHIM_UDP_AUTH_PCRC */
#define SHIM_UDP_DATA 1u
#define SHIM_UDP_ACK 2u  /* ack only */
#define SHIM_UDP_NACK 3u /* psn: the first packet missing */
#define SHIM_UDP_PACK 4u /* psn: the first packet's; rhf: how many */
/* Packets a PACK datagram carries: at least 2, at most this. */
#define SHIM_UDP_PACK_MAX 64u
/* Packets a link keeps in flight at most: its send ring's entries (the
 * replay memory).  A receiver's reorder window must hold as many, or what
 * arrives past a hole beyond it is dropped and only a timeout brings it
 * back.  A power of two (psn % window is a slot across the wrap). */
#define SHIM_UDP_WINDOW 1024u
/* ACK rhf: the acking side holds packets of ours that arrived and that it
 * has not taken in yet (its owner does not poll, or its ring is full).
 * The peer is alive and busy, not lost: the ack standing still is flow
 * control, as with a shm peer whose ring is full. */
#define SHIM_UDP_ACK_HELD 1u

struct shim_udp_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t jkey;
	uint32_t psn;       /* DATA: sequence number (PACK: the first's); NACK:
			     * first missing */
	uint32_t ack;       /* every type: the reverse flow's psns below it arrived */
	uint32_t src_nonce; /* sender's receive context (restart detection) */
	uint32_t dst_nonce; /* receiver's; 0 before the first exchange */
	uint32_t rhf;       /* DATA: SHIM_RHF_EGR and SHIM_RHF_TID only; NACK: more
			     * missing; ACK: SHIM_UDP_ACK_HELD; PACK: the count */
	uint32_t crc;       /* with this field and mac 0: shim_crc32c of the two
			     * headers (this one, and the packet header of DATA),
			     * continued by shim_crc32c_wide over the payload
			     * when auth has SHIM_UDP_AUTH_PCRC */
	uint64_t src_host;  /* sender's host id, lid, ctx, unit: its address */
	uint16_t src_lid;
	uint16_t src_ctx;
	uint16_t src_unit;
	uint16_t src_mtu;   /* payload bytes / SHIM_BLOCK the sender can receive
			     * in one datagram (its path MTU): a link sends at
			     * most min(ours, theirs), SHIM_UDP_SAFE_MTU until it
			     * heard the peer */
	uint32_t src_ipv4;  /* the sender's socket address (network order): must
			     * be the address the datagram came from */
	uint16_t src_port;
	uint8_t auth;       /* SHIM_AUTH_*: what mac covers, peers must agree;
			     * | SHIM_UDP_AUTH_PCRC: crc covers the payload too
			     * (the sender's choice); no other bit */
	uint8_t src_eager;  /* the largest multi-packet eager message the sender
			     * takes from the udp wire, in KiB (rounded down,
			     * at most 255); 0: one packet only.  The link
			     * keeps it in its ctl->rx_eager_max (bytes; 1 for
			     * one packet, 0 until the peer was heard) */
	uint8_t mac[16];    /* SHIM_AUTH_HEADER/FULL: see shim_auth.h; else 0 */
};
static_assert(sizeof(struct shim_udp_hdr) == 72, "udp header layout");

/* struct shim_udp_hdr.auth: the mode, and whether the CRC covers the
 * payload.  Without PCRC the payload's integrity is the UDP checksum's
 * (computed and checked by the NIC or the kernel, as for TCP), and in
 * SHIM_AUTH_HEADER a PACK's tag's; SHIM_AUTH_FULL's tag covers it
 * anyway.  The flag is covered by the CRC and the tag like the rest of
 * the header, so stripping it fails both. */
#define SHIM_UDP_AUTH_PCRC 0x80u

/* One packet of a PACK datagram, before its packet header. */
struct shim_udp_frame {
	uint32_t rhf; /* SHIM_RHF_EGR or 0 (no TID packets in a PACK) */
	uint32_t len; /* payload bytes after the packet header: its paylen
		       * with SHIM_RHF_EGR, else 0 */
};
static_assert(sizeof(struct shim_udp_frame) == 8, "udp frame layout");

/* Payload bytes per udp packet for an interface MTU. */
#define SHIM_UDP_OVERHEAD (28u + sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr))
/* Payload bytes a 1500-byte path carries: what a link sends before it
 * knows how large a datagram the peer can take (hosts may differ). */
#define SHIM_UDP_SAFE_MTU ((1500u - (uint32_t)SHIM_UDP_OVERHEAD) & ~(SHIM_BLOCK - 1u))

/* A received, validated datagram.  pay points into the shim's receive
 * buffers and is valid until the next shim_udp_recv() on the context. */
struct shim_udp_pkt {
	struct shim_udp_hdr uh;
	struct shim_rhq_entry e; /* DATA: rhf and packet header (copies) */
	const uint8_t *pay;      /* DATA with SHIM_RHF_EGR: paylen bytes */
	struct shim_peer *peer;  /* the flow it belongs to (created on first contact) */
	uint64_t rx_ns;          /* CLOCK_MONOTONIC when its batch was received */
	bool dgram_first;        /* the first packet of its datagram (a lone
				  * DATA, or a PACK's first): datagrams count */
};

/* Receive-side statistics of a context's udp wire. */
struct shim_udp_stats {
	uint64_t rx_datagrams;
	uint64_t tx_datagrams;
	uint64_t drop_len;      /* truncated, too short, length mismatch */
	uint64_t drop_magic;    /* not ours, other version, unknown type */
	uint64_t drop_crc;      /* corrupted */
	uint64_t drop_jkey;     /* another job */
	uint64_t drop_dest;     /* for an earlier context at this port, a stale sender */
	uint64_t drop_nomem;    /* no flow could be created */
	uint64_t drop_mac;      /* not authenticated with the job's secret, or
				 * another FI_OPX_AUTH mode */
	uint64_t drop_ident;    /* the header's source disagrees with the address
				 * it came from, or names another link's peer */
	uint64_t drop_quota;    /* a new source beyond the context's link cap */
	uint64_t links_freed;   /* flows of dead peers freed (shim_udp_forget) */
	uint64_t fault_drop, fault_dup, fault_reorder, fault_corrupt;
	uint64_t tx_errors;     /* sendmsg failures other than a full buffer */
	uint64_t wd_resends;    /* packets the watchdog sent again (the owner did
				 * not poll: it cannot read which were lost) */
	uint64_t tx_packed;     /* packets sent sharing a PACK datagram */
	uint64_t rx_packed;     /* packets received in PACK datagrams */
	uint64_t trims;         /* idle links whose send rings gave their pages
				 * back (shim_udp_trim) */
	uint64_t tx_ctl;        /* ACK and NACK datagrams handed to the socket,
				 * keepalives and HELD answers included (part
				 * of tx_datagrams unless the send failed) */
};

/* Whether contexts of dev get a udp wire (it is not shm-only: FI_OPX_WIRE,
 * a launcher that keeps the job on this host, no secret; and an interface
 * is up): 0 with *ipv4 (network order; may be NULL) the address
 * shim_udp_open(ctx, 0, port) binds, -ENODEV (no wire, or FI_OPX_IFACE
 * names no interface that is up), -errno. */
int shim_udp_probe(const struct shim_dev *dev, uint32_t *ipv4);
/* Bind the context's socket: ipv4 (network order; 0 = the interface the
 * device chose) and port (network order; 0 = any).  -EADDRINUSE, -errno.
 * A context without a bound socket has no udp wire (wire shm). */
int shim_udp_open(struct shim_ctx *ctx, uint32_t ipv4, uint16_t port);
bool shim_udp_on(const struct shim_ctx *ctx);
/* Up to max validated datagrams; 0 when none is waiting. */
int shim_udp_recv(struct shim_ctx *ctx, struct shim_udp_pkt *pkts, int max);
/* Whether the last shim_udp_recv left the socket empty (it read fewer
 * than it could take, or found nothing): everything that came before it
 * has been read. */
bool shim_udp_rx_empty(const struct shim_ctx *ctx);
/* Put an in-order DATA packet into the context's own receive ring (a TID
 * payload is placed at its offset first): 0, -EAGAIN (ring full: keep
 * it), -EINVAL (bad placement: drop it). */
int shim_udp_deliver(struct shim_ctx *ctx, const struct shim_udp_pkt *pkt);
/* n consecutive packets of one message in one reservation, so packets of
 * other flows cannot come between them (multi-packet eager): 0, -EAGAIN,
 * -EINVAL (not eager data).  *pkts[i] in psn order. */
int shim_udp_deliver_n(struct shim_ctx *ctx, const struct shim_udp_pkt *const *pkts, uint32_t n);
/* An ACK or NACK to the peer (its udp_ack stamped).  A NACK names the
 * first missing psn and in mask bit i whether psn + 1 + i is missing too;
 * an ACK's mask is its flags (SHIM_UDP_ACK_HELD).  Either travels in the
 * rhf field. */
int shim_udp_send_ctl(struct shim_peer *peer, uint8_t type, uint32_t psn, uint32_t mask);
/* Send the staged packet psn again: 0, -ENOENT when it is not staged. */
int shim_udp_resend(struct shim_peer *peer, uint32_t psn);
/* Send the staged ones of psns psn .. psn + n - 1 again (n at most
 * SHIM_UDP_RESEND_MAX), in one batch as first transmissions go: how many,
 * -ENOENT when none is staged, -EINVAL for a bad peer or n. */
#define SHIM_UDP_RESEND_MAX 64u
int shim_udp_resend_run(struct shim_peer *peer, uint32_t psn, uint32_t n);
/* Everything below ack arrived: free it from the send ring (credits). */
void shim_udp_release(struct shim_peer *peer, uint32_t ack);
/* Send-ring state: psns below *acked are freed, below *sent transmitted. */
/* An idle link gives its send ring's pages back to the kernel (they
 * come back, zeroed, when it next sends): a remote peer that stopped
 * talking costs its link's bookkeeping, not the ~1 MiB it may have
 * touched.  Does nothing unless everything sent was acknowledged,
 * nothing waits to be sent, and no data went to the peer for idle_ns
 * (decided at these calls: the owner calls it every timer tick; acks
 * and keepalives, which a live pair exchanges forever, do not count).
 * The owner calls it (lock held): nobody else writes the ring.  1 if
 * the pages went back now, else 0. */
int shim_udp_trim(struct shim_peer *peer, uint64_t now, uint64_t idle_ns);
void shim_udp_tx_state(const struct shim_peer *peer, uint32_t *acked, uint32_t *sent);
/* The owner's retransmission timeout for the link (its round trips, the
 * scheduling of both ends included): the watchdog, which cannot read the
 * acks, waits at least twice it before it sends anything again. */
void shim_udp_rto_hint(struct shim_peer *peer, uint64_t rto_ns);
/* CLOCK_MONOTONIC ns of the last datagram from the peer (its flow's
 * creation before any), and how many went to it (wrapping; a caller
 * that notes when the count moved knows how long the flow was silent on
 * our side without a clock read on every send). */
void shim_udp_times(const struct shim_peer *peer, uint64_t *rx_ns, uint32_t *tx_count);
/* now - then, 0 when then is later: a stamp taken after the caller read
 * its clock (or by another thread) must not wrap an unsigned age. */
static inline uint64_t shim_udp_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}
/* A counter bumped on a hot path instead of a clock read there: a
 * periodic reader notes when it last saw it move (*seen, *moved_ns), and
 * shim_udp_since(now, *moved_ns) is how long it stood still, to a tick. */
static inline void shim_udp_note_moved(uint64_t count, uint64_t *seen, uint64_t *moved_ns,
				       uint64_t now)
{
	if (count != *seen) {
		*seen = count;
		*moved_ns = now;
	}
}
/* Keepalive period: a flow silent this long on our side gets an ack
 * (the default; shim_udp_watch shortens it, so that a peer that declares
 * silence of its timeout death hears a few in that time). */
#define SHIM_UDP_KEEPALIVE_NS 1000000000ull
/* The owner (the provider) progresses the context from now on: start the
 * watchdog now, not with the first flow, so that a process that computes
 * before it ever polls still answers a first contact (HELD acks), and
 * send keepalives every keepalive_ns (0: the default). */
void shim_udp_watch(struct shim_ctx *ctx, uint64_t keepalive_ns);
/* The peer stopped answering: shim_peer_alive() says false from now on
 * and nothing more is transmitted to it. */
void shim_udp_fail(struct shim_peer *peer);
/* The address the peer told us in its datagrams (lid 0 until it spoke). */
int shim_udp_peer_addr(const struct shim_peer *peer, struct shim_addr *addr);
/* Iterate the context's udp flows (NULL starts; NULL at the end).  The
 * next flow is taken before a flow is forgotten (shim_udp_forget). */
struct shim_peer *shim_udp_next(struct shim_ctx *ctx, struct shim_peer *prev);
/* Free the flow of a peer declared dead (shim_udp_fail) that nobody
 * refers to any more: its memory and its place under the link cap come
 * back (a datagram from that address later makes a new flow).  The
 * provider frees its reliability state (peer->rel) first.  0, -EBUSY
 * (alive, or referenced), -EINVAL. */
int shim_udp_forget(struct shim_peer *peer);
/* The largest multi-packet eager message the context takes over the udp
 * wire, stamped on every datagram it sends (src_eager; rounded down to
 * KiB, at most 255 KiB).  Set it before the socket opens; until a peer
 * was heard its link's ctl->rx_eager_max is 0 (unknown). */
void shim_udp_advertise(struct shim_ctx *ctx, uint32_t eager_max);
/* Send what fault injection held back. */
void shim_udp_flush(struct shim_ctx *ctx);
/* Until shim_udp_uncork, packets published to the context's udp peers
 * wait in their send rings (as a held link's do); uncork sends them, in
 * batches and packed: the replies one receive drain makes (RMA, atomics,
 * rendezvous) leave in a few system calls instead of one each.  No-ops
 * without a udp socket. */
void shim_udp_cork(struct shim_ctx *ctx);
void shim_udp_uncork(struct shim_ctx *ctx);
void shim_udp_stats(const struct shim_ctx *ctx, struct shim_udp_stats *st);

#endif /* SHIM_UDP_WIRE_H */
