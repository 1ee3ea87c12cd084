/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp.h - the udp wire's private state, shared by shim_udp.c (links,
 * socket set-up), shim_udp_wd.c (the watchdog, and the first look at a
 * datagram it shares with the receive side), shim_udp_rx.c (receive,
 * validation and delivery) and shim_udp_tx.c (transmit and the send side
 * of a flow).  The overview is at the top of shim_udp.c.
 */
#ifndef SHIM_UDP_H
#define SHIM_UDP_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "shim_internal.h"

#define SHIM_UDP_BATCH 16u
#define SHIM_UDP_BATCH_AFTER 2u
/* Bytes of a DATA datagram before its payload. */
#define SHIM_UDP_HDRS (sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr))
#define SHIM_UDP_HASH 256u
/* The send ring of one flow: replay memory for up to this many packets
 * and bytes in flight towards one peer (fewer bytes when the receive
 * queue we got is small, see shim_udp_open). */
#define SHIM_UDP_RING_CNT SHIM_UDP_WINDOW
#define SHIM_UDP_RING_BYTES (1u << 20)
/* Packets one transmit call hands the kernel at most (one sendmmsg);
 * consecutive datagrams of one size travel as one UDP_SEGMENT (GSO) send
 * of at most SHIM_UDP_GSO_BYTES, cut into datagrams below the socket. */
#define SHIM_UDP_TX_BATCH 64u
/* Receive queue asked for (shim_udp_open), and the smallest send ring
 * whatever the queue we got. */
#define SHIM_UDP_RCVBUF (16 << 20)
#define SHIM_UDP_RING_MIN (128u << 10)
#define SHIM_UDP_GSO_BYTES 65000u
#define SHIM_UDP_GSO_SEGS 64u
/* A receive buffer with UDP_GRO on: the largest UDP payload, rounded up. */
#define SHIM_UDP_GRO_BYTES 65536u
/* Links whose small packets wait for company (shim_udp_kick) at most;
 * beyond it a link sends at once. */
#define SHIM_UDP_DEFER_MAX 64u

/* Links (flows) a context keeps at most: a source beyond it is dropped
 * (drop_quota) until a link goes. */
#define SHIM_UDP_MAX_LINKS 16384u

/* ---------------------------------------------------------------------
 * Datagram authentication (shim_udp_auth.c).
 */
#define SHIM_UDP_MAC_BYTES 16u
struct shim_udp_auth {
	int mode;            /* SHIM_AUTH_* */
	uint8_t hdr_key[16]; /* SipHash key of the headers' tag */
	uint8_t pay_key[16]; /* SipHash key of the payload's digest (FULL) */
};
/* Subkeys from the job's secret: 0, -ENOSYS (no libsodium), -EINVAL. */
int shim_udp_auth_init(struct shim_udp_auth *a, int mode, const uint8_t key[SHIM_AUTH_KEY_BYTES]);
void shim_udp_auth_fini(struct shim_udp_auth *a);
/* Set uh->auth and uh->mac over uh, the packet header (DATA, else NULL)
 * and, FULL or a PACK datagram, the payload (a PACK's: all after uh).
 * uh->crc must be final. */
void shim_udp_auth_seal(const struct shim_udp_auth *a, struct shim_udp_hdr *uh,
			const struct shim_pkt_hdr *ph, const uint8_t *pay, size_t paylen);
/* Whether a received datagram's tag is right (constant time) and its
 * mode ours. */
bool shim_udp_auth_check(const struct shim_udp_auth *a, const struct shim_udp_hdr *uh,
			 const struct shim_pkt_hdr *ph, const uint8_t *pay, size_t paylen);

/* Scratch of one batched transmission: a header per packet, its pieces,
 * and one message per run of same-sized datagrams. */
struct shim_udp_tx {
	struct shim_udp_hdr uh[SHIM_UDP_TX_BATCH];
	uint32_t len[SHIM_UDP_TX_BATCH];
	struct iovec iov[3 * SHIM_UDP_TX_BATCH];
	struct mmsghdr msg[SHIM_UDP_TX_BATCH];
	uint32_t segs[SHIM_UDP_TX_BATCH]; /* datagrams in each message */
	uint32_t pos[SHIM_UDP_TX_BATCH];  /* ring position of each message's first */
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} cm[SHIM_UDP_TX_BATCH];
};

struct shim_udp_link {
	struct shim_peer_priv pp;   /* first: what the provider holds */
	struct shim_udp *udp;       /* home wire; NULL once the context closed */
	struct shim_udp_link *next; /* hash chain */
	struct shim_udp_link *all_next; /* every link of the context (shim_udp_next) */
	struct sockaddr_in to;
	uint32_t remote_nonce;      /* 0 until known */
	uint32_t old_nonce;         /* the previous life's: its stragglers are dropped */
	struct shim_addr learned;   /* lid 0 until the peer spoke */
	uint32_t base;              /* ring position of psn 0 */
	uint32_t sent;              /* ring position of the next first transmission */
	bool dead;
	bool hold;                  /* shim_udp_hold: publishes wait for shim_udp_unhold */
	/* Packing (shim_udp_kick): the first wait_cnt packets from sent
	 * wait for company, wait_bytes as PACK frames; waiting: in the
	 * wire's defer list; flushing: shim_udp_flush sends them now. */
	uint32_t wait_cnt;
	uint32_t wait_bytes;
	bool waiting;
	bool flushing;
	void *mem;                  /* the send ring's queues (the ctl is apart) */
	size_t mem_len;
	/* Zero copy (shim_udp_ext_set): per send ring slot, the caller's
	 * memory its payload is read from instead of the ring's eager
	 * blocks (which are reserved all the same: they bound the bytes in
	 * flight), or NULL.  Allocated at the first, a slot cleared when it
	 * is acknowledged, all at a reset, freed when the link is trimmed;
	 * ext_live (owner only) counts the slots set.  The owner writes a
	 * slot before publishing it and clears it, allocates and frees the
	 * table under udp->lock; the watchdog reads it under that lock, as
	 * the ring. */
	const uint8_t **ext;
	uint32_t ext_live;
	/* shim_udp_trim gave the queues' pages back at this sent position;
	 * nothing was sent since while sent still equals it */
	bool trimmed;
	uint32_t trim_sent;
	/* owner only: sent at shim_udp_trim's last look and when it last
	 * moved, so idleness is decided on data sent, without a clock read
	 * per send; acks and keepalives do not move it */
	uint32_t idle_sent;
	uint64_t idle_since_ns;
	_Atomic uint64_t rx_ns;     /* CLOCK_MONOTONIC of the last datagram from it */
	_Atomic uint32_t tx_count;  /* datagrams sent to it: its readers note when
				     * it moved (no clock read per send) */
	/* watchdog only */
	uint32_t wd_acked;          /* send-ring head at its last look */
	uint32_t wd_next;           /* next position to send again */
	uint64_t wd_ns;             /* when that head last moved */
	uint64_t wd_rto_ns;
	/* the owner's retransmission timeout (shim_udp_rto_hint), 0: none yet */
	_Atomic uint64_t rto_hint_ns;
	uint64_t wd_tx_seen;        /* tx_count at its last look ... */
	uint64_t wd_tx_ns;          /* ... and when it last moved */
};

struct shim_udp {
	struct shim_ctx *ctx;
	int fd;
	uint32_t ipv4;              /* advertised, network order */
	uint16_t port;              /* network order */
	uint32_t mtu;               /* payload bytes per datagram */
	bool in_wait;               /* fd is in ctx->wait_fd's set (a sleep is armed) */
	struct shim_udp_link *hash[SHIM_UDP_HASH];
	struct shim_udp_link *links; /* all of them, newest first; only the owner adds */
	struct shim_peer *self;     /* producer handle on our own ring */
	uint64_t rng;               /* fault injection */
	uint8_t *held;              /* reorder: one datagram held back */
	size_t held_len;
	struct sockaddr_in held_to;
	uint8_t *scratch;           /* linearised datagram (faults) */
	uint8_t *wd_buf;            /* the watchdog's look at an unread datagram */
	bool gso;                   /* UDP_SEGMENT accepted (cleared on the first refusal) */
	bool gro;                   /* UDP_GRO on: a receive buffer may hold a run of datagrams */
	bool faulty;                /* fault injection configured: datagram by datagram */
	bool pcrc;                  /* the CRC of what we send covers payloads
				     * (SHIM_UDP_AUTH_PCRC; never in SHIM_AUTH_FULL) */
	uint32_t ring_bytes;        /* eager bytes of each link's send ring (shim_udp_open) */
	struct shim_udp_tx *tx;     /* first transmissions (shim_udp_kick) */
	uint8_t *pack;              /* a PACK datagram being built; NULL: no packing */
	struct shim_udp_link *defer[SHIM_UDP_DEFER_MAX]; /* links with packets waiting */
	uint32_t ndefer;
	bool cork;                  /* shim_udp_cork: kicks only join the defer list */
	uint8_t *rbuf;              /* SHIM_UDP_BATCH receive buffers */
	size_t rbuf_sz;
	struct mmsghdr msgs[SHIM_UDP_BATCH];
	struct iovec iovs[SHIM_UDP_BATCH];
	struct sockaddr_in from[SHIM_UDP_BATCH];
	int rx_filled;              /* msgs[] entries the last receive call filled */
	/* What shim_udp_recv has not handed out yet: msgs[rx_msg] from byte
	 * rx_off on, cut in rx_seg-byte datagrams (UDP_GRO), and the
	 * entries after it up to rx_filled. */
	int rx_msg;
	size_t rx_off;
	size_t rx_seg;
	/* A validated PACK datagram being handed out: pk_left packets from
	 * byte pk_off of pk_d (in the receive buffers, which are not
	 * received into again before it is all handed out), the next being
	 * psn pk_uh.psn + pk_idx, from pk_from. */
	const uint8_t *pk_d;
	size_t pk_off;
	uint32_t pk_left;
	uint32_t pk_idx;
	struct shim_udp_hdr pk_uh;
	struct sockaddr_in pk_from;
	/* Receive one datagram per call (recvmsg: an empty poll costs half
	 * an empty recvmmsg) until SHIM_UDP_BATCH_AFTER calls in a row found
	 * one, then batches (recvmmsg) while a call takes more than one. */
	bool rx_batch;
	uint32_t rx_hits;
	bool rx_empty;              /* the last receive call left nothing unread */
	struct shim_udp_stats st;
	struct shim_udp_auth auth;  /* the datagrams' MAC */
	uint32_t nlinks;            /* links of the context (the owner counts) */
	uint32_t max_links;
	uint32_t warned;            /* drop reasons already reported (bit per reason) */
	/* The watchdog (see shim_udp_watchdog): the process's thread
	 * watches the context from its first flow on.  lock orders it against the send-ring release, link
	 * creation and fault injection state. */
	pthread_mutex_t lock;
	bool wd_running;         /* the process's watchdog ticks it */
	pid_t wd_pid;            /* the process that watches it (fork) */
	struct shim_udp *wd_next; /* shim_udp_wd_list */
	_Atomic uint64_t app_polls; /* the owner's receive polls */
	uint64_t wd_polls;          /* the watchdog's last look at it ... */
	uint64_t wd_polls_ns;       /* ... and when it last moved */
	uint64_t keepalive_ns;      /* SHIM_UDP_KEEPALIVE_NS or shorter */
	uint64_t wd_scan_ns;        /* the watchdog's last look at unread senders */
	bool wd_watched;            /* shim_udp_watch(): idle until the owner polls */
};

static inline uint32_t shim_udp_hash(uint32_t ip, uint16_t port)
{
	return ((ip * 2654435761u) ^ ((uint32_t)port * 40503u)) % SHIM_UDP_HASH;
}

/* The link to ip:port (network order), or NULL.  Inline: shim_udp.c, the
 * receive side and the watchdog all look links up, and the watchdog's
 * file must not call back into shim_udp.c, which starts it. */
static inline struct shim_udp_link *shim_udp_link_find(struct shim_udp *u, uint32_t ip,
						       uint16_t port)
{
	for (struct shim_udp_link *l = u->hash[shim_udp_hash(ip, port)]; l; l = l->next)
		if (l->to.sin_addr.s_addr == ip && l->to.sin_port == port)
			return l;
	return NULL;
}

static inline uint64_t shim_udp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* shim_udp_wd.c, for the receive side and the watchdog: the length of
 * the first datagram of the n bytes at d, from its own header (at most
 * n): with UDP_GRO a receive buffer holds a run of one sender's
 * datagrams, all as long as the first but the last.  Read before any
 * check: a wrong length only makes the datagrams cut from it fail theirs
 * (length, tag). */
size_t shim_udp_seg_len(const uint8_t *d, size_t n);
/* Whether datagram d (n bytes) has the right tag for our mode; no counting. */
bool shim_udp_authentic(const struct shim_udp *u, const struct shim_udp_hdr *uh,
			const struct shim_pkt_hdr *ph, const uint8_t *d, size_t n);
/* Whether shim_udp_recv holds datagrams it took from the socket and has
 * not handed out yet (the rest of a run): the socket's readiness does
 * not show them. */
static inline bool shim_udp_rx_pending(const struct shim_udp *u)
{
	return u->rx_msg < u->rx_filled || u->pk_left;
}
/* Send what waits for company on the wire's links now (the owner). */
void shim_udp_flush_waiting(struct shim_udp *u);
/* Forget a link's place in the defer list (it is freed). */
void shim_udp_unwait(struct shim_udp_link *l);

/* The watchdog, for a sender we have no link to (we never read from it:
 * its first datagrams wait unread while we compute): an ACK with ack 0
 * and SHIM_UDP_ACK_HELD to its address and session. */
void shim_udp_send_held(struct shim_udp *u, const struct sockaddr_in *to, uint32_t dst_nonce);

/* One more datagram went to l (the owner and the watchdog both send:
 * an increment lost to a race still moves the count). */
static inline void shim_udp_sent(struct shim_udp_link *l)
{
	atomic_store_explicit(&l->tx_count,
			      atomic_load_explicit(&l->tx_count, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static inline uint64_t shim_udp_rand(struct shim_udp *u)
{
	/* xorshift64*: reproducible from the seed */
	u->rng ^= u->rng >> 12;
	u->rng ^= u->rng << 25;
	u->rng ^= u->rng >> 27;
	return u->rng * 2685821657736338717ull;
}

static inline bool shim_udp_chance(struct shim_udp *u, uint32_t ppm)
{
	return ppm && (uint32_t)(shim_udp_rand(u) % 1000000u) < ppm;
}

/* shim_udp_tx.c, for the watchdog: send the staged packet at ring
 * position pos again. */
void shim_udp_xmit(struct shim_udp_link *l, uint32_t pos);

/* shim_udp_wd.c, for shim_udp.c, which calls into shim_udp_wd.c and
 * never the other way: start the context's watchdog thread (a new link,
 * shim_udp_watch; nothing when it runs already) and stop it (the
 * context closes). */
void shim_udp_watchdog_start(struct shim_udp *u);
void shim_udp_watchdog_stop(struct shim_udp *u);

/* shim_udp.c, for the receive side (shim_udp_rx.c), which calls into
 * shim_udp.c and never the other way. */
/* A new link to ip:port, hashed, listed and watched; NULL without memory. */
struct shim_udp_link *shim_udp_link_new(struct shim_udp *u, uint32_t ip, uint16_t port);
/* The peer at l's address began a new life (nonce): the flow restarts. */
void shim_udp_link_reset(struct shim_udp_link *l, uint32_t nonce);

#endif
