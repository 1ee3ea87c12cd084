/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_av.h - address vectors: struct opx_av and its entries, fi_av_open
 * and the lookups of opx_av.c, and the peers opened through them
 * (opx_av_peer.c).  Lock rules as in opx.h.
 */
#ifndef OPX_AV_H
#define OPX_AV_H

#include "opx.h"

/*
 * Address vector.  fi_addr_t is an index into table[] for both FI_AV_MAP
 * and FI_AV_TABLE.  A reverse map (slid, sctx) -> fi_addr_t serves
 * FI_SOURCE and directed receive.  Peers (mapped receive contexts) are
 * opened on first use and cached in the entry.
 */
struct opx_av_entry {
	struct shim_addr addr;
	struct shim_peer *peer; /* NULL until first send, and once dead */
	uint32_t stalls;        /* sends refused for credits (liveness check pacing) */
	uint32_t checked;       /* liveness round that last found it alive */
	uint32_t sub;           /* a scalable peer's receive contexts 1.. are
				 * av->sub[sub - 1 ...] (made on first use), 0: none */
	bool valid;
	bool dead;              /* the receiver is known gone: sends fail */
	int8_t rma_cma;         /* CMA one-sided ops with it: 0 untried, 1 work, -1 refused */
	bool rma_no_direct;     /* the kernel refused our direct copies into it (EPERM) */
};

struct opx_av {
	struct fid_av av_fid;
	struct opx_domain *domain;
	enum fi_av_type type;
	struct opx_av_entry *table;
	size_t count;      /* slots used (high water mark) */
	size_t size;       /* slots allocated */
	uint32_t *rmap;    /* open addressing: key (slid<<16|sctx)+1, 0 = empty */
	uint64_t *rmap_val;
	size_t rmap_size;  /* power of two */
	_Atomic int refcnt; /* bound endpoints */
	struct shim_ctx *udp_via; /* the first bound endpoint's context: its
				     socket carries the udp peers opened here */
	/* fi_av_attr.rx_ctx_bits: the top bits of an fi_addr_t that name a
	 * receive context of a scalable peer (fi_rx_addr), 0: none */
	unsigned int rx_ctx_bits;
	struct opx_av_entry *sub; /* those receive contexts (1..), see sub above */
	size_t sub_count;
	size_t sub_size;
	bool rx_warned;           /* an index beyond a peer's contexts was logged */
};

int opx_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		void *context);
/* addr indexes an entry of av->table that is inserted and not removed. */
static inline bool opx_av_index_ok(const struct opx_av *av, fi_addr_t addr)
{
	return addr < av->count && av->table[addr].valid;
}
/* An inserted host and port (lid 0) as the endpoint serving it, asked of
 * the shim (opx_av_peer.c): 0, or -FI_EADDRNOTAVAIL (nothing serves it on
 * this host, or another host under FI_OPX_WIRE=shm). */
int opx_av_resolve(struct opx_av *av, const struct shim_addr *a, struct shim_addr *out);
/* Peer for sending to fi_addr; opens the mapping on first use.
 * Returns 0, -FI_EINVAL (bad fi_addr), or a mapped shim error. Lock held. */
int opx_av_peer_locked(struct opx_av *av, fi_addr_t addr, struct shim_peer **peer);
/* The udp peers an endpoint other than the AV's opens through its own
 * socket (opx_ep_peer_locked, opx_ep.h), and their close. */
int opx_av_udp_peer(struct opx_ep *ep, fi_addr_t addr, struct shim_peer **peer);
void opx_av_udp_peers_close(struct opx_ep *ep);
int opx_av_src_addr(struct shim_dev *dev, struct shim_ctx *ctx, uint16_t lid, uint16_t sctx,
		    struct shim_addr *a);
/* A send to addr found no credits: -FI_EAGAIN, or -FI_ECONNREFUSED once
 * the receiver is found dead (checked every OPX_AV_STALL_CHECK stalls). */
int opx_av_stalled_locked(struct opx_av *av, fi_addr_t addr);
/* The receiver at addr is known, or now found, dead (slow path: may map
 * the peer and read /proc; at most once per liveness round, nonzero). */
bool opx_av_peer_dead_locked(struct opx_av *av, fi_addr_t addr, uint32_t round);
/* The udp wire learned a peer's full address (its first datagram): an
 * entry inserted as host and port only now names it (reverse map too). */
void opx_av_learn_locked(struct opx_av *av, const struct shim_addr *addr);
/* The entry fi_addr names: an index, or fi_rx_addr(index, i, rx_ctx_bits)
 * for receive context i of a scalable peer; NULL when there is none
 * (*sub: an entry of av->sub, one of those contexts). */
struct opx_av_entry *opx_av_entry_locked(struct opx_av *av, fi_addr_t addr, bool *sub);
/* The index of the peer fi_addr names (its receive context bits off), as
 * the sources of received packets are reported; FI_ADDR_NOTAVAIL when
 * not valid. */
fi_addr_t opx_av_base_locked(const struct opx_av *av, fi_addr_t addr);
/* Source of a packet as fi_addr_t, FI_ADDR_NOTAVAIL when not in the AV. */
fi_addr_t opx_av_src_locked(const struct opx_av *av, uint16_t slid, uint16_t sctx);

#endif /* OPX_AV_H */
