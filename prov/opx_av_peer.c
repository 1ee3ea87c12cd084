/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_av_peer.c - the address vector's peers as the shim knows them: the
 * endpoint an inserted host and port names (the service registry of this
 * host, else a udp flow that already spoke), the sender of a packet from
 * the shim's own records, the peer a send opens on first use and finds
 * dead, and the receive contexts of scalable peers (fi_rx_addr).  The
 * table and its reverse map are opx_av.c's, which calls this file
 * (opx_av_resolve at insert); this file never calls opx_av.c.  Same
 * locking: the _locked functions are called with domain->lock held.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opx_addr.h"
#include "opx_ep.h"

/* ---------------------------------------------------------------------
 * Addresses the shim knows.
 */
/* The address of the sender (lid, ctx) of a packet, from the shim's own
 * records, never from the packet: a udp flow of ctx that spoke as it (a
 * sender on another host, or any sender under FI_OPX_WIRE=udp), else the
 * context of this host that has it.  0, or -ENOENT. */
int opx_av_src_addr(struct shim_dev *dev, struct shim_ctx *ctx, uint16_t lid, uint16_t sctx,
		    struct shim_addr *a)
{
	for (struct shim_peer *p = shim_udp_next(ctx, NULL); p; p = shim_udp_next(ctx, p))
		if (!shim_udp_peer_addr(p, a) && a->lid == lid && a->ctx == sctx)
			return 0;
	return shim_svc_addr_lookup(dev, lid, sctx, a) ? -ENOENT : 0;
}

/* A peer on the udp wire that spoke to us already is known in full (a
 * server inserting the socket address of a client whose first message
 * it holds): its flow learned the rest, and the entry must name it now,
 * since opx_av_learn_locked only sees a flow's first datagram. */
static bool opx_av_flow_learned(struct opx_av *av, const struct shim_addr *a,
				struct shim_addr *out)
{
	struct shim_addr l;

	for (struct shim_peer *p = shim_udp_next(av->udp_via, NULL); p;
	     p = shim_udp_next(av->udp_via, p)) {
		if (!shim_udp_peer_addr(p, &l) && l.lid && l.ipv4 == a->ipv4 &&
		    l.udp_port == a->udp_port) {
			*out = l;
			return true;
		}
	}
	return false;
}

/* The endpoint serving an unresolved address's port on this host, from
 * the shim's service registry.  -FI_EADDRNOTAVAIL when nothing serves it
 * here (another host waits for the udp wire). */
int opx_av_resolve(struct opx_av *av, const struct shim_addr *a, struct shim_addr *out)
{
	struct shim_dev *dev = av->domain->fabric->dev;
	uint16_t port = ntohs(a->udp_port);
	int rc;

	/* This host (loopback included): the registry knows the endpoint's
	 * whole address, also the interface address its socket is bound to
	 * when every peer goes over udp (FI_OPX_WIRE=udp). */
	if (a->host_id == shim_dev_host_id(dev) && opx_env.wire == SHIM_WIRE_UDP &&
	    !shim_svc_lookup(dev, port, out))
		return 0;
	if (a->host_id != shim_dev_host_id(dev) || opx_env.wire == SHIM_WIRE_UDP) {
		/* another host: the udp wire reaches host and port as they are,
		 * and the first exchange tells the rest (opx_av_learn_locked) */
		if (opx_env.wire == SHIM_WIRE_SHM) {
			OPX_WARN(FI_LOG_AV, "insert: %s:%u is not on this host (FI_OPX_WIRE=shm)\n",
				 inet_ntoa((struct in_addr){.s_addr = a->ipv4}), (unsigned)port);
			return -FI_EADDRNOTAVAIL;
		}
		if (!opx_av_flow_learned(av, a, out))
			*out = *a;
		return 0;
	}
	rc = shim_svc_lookup(dev, port, out);
	if (rc) {
		OPX_WARN(FI_LOG_AV, "insert: no endpoint serves port %u on this host: %s\n",
			 (unsigned)port, shim_dev_strerror(rc));
		return -FI_EADDRNOTAVAIL;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Send path.
 */
/* A peer refused before the first packet: another job (job key) or not
 * ours (uid, owner, mode).  Name both keys and where each came from. */
static void opx_av_warn_refused(struct opx_av *av, fi_addr_t addr, const struct shim_addr *a)
{
	uint16_t key = 0;
	uint8_t src = 0;

	if (shim_shm_jkey(av->domain->fabric->dev, a, &key, &src) == 0 &&
	    key != (uint16_t)opx_env.jkey) {
		OPX_WARN(FI_LOG_AV,
			 "fi_addr %" PRIu64 " (lid %u ctx %u) belongs to another job: its job key "
			 "0x%04x (from %s) differs from ours 0x%04x (from %s); set the same "
			 "FI_OPX_UUID on both sides if they are one job\n",
			 addr, a->lid, a->ctx, key, opx_param_jkey_src_name(src),
			 (unsigned int)opx_env.jkey, opx_param_jkey_src_name(opx_env.jkey_src));
		return;
	}
	OPX_WARN(FI_LOG_AV,
		 "fi_addr %" PRIu64 " (lid %u ctx %u, uid %u) refused: its receive context is not "
		 "a 0600 file owned by our uid %u\n",
		 addr, a->lid, a->ctx, a->uid, (unsigned int)geteuid());
}

/* Liveness is checked once every this many sends refused for credits. */
#define OPX_AV_STALL_CHECK 256u

/* The receiver is gone for good (this address names one incarnation of
 * one context): drop our reference, fail every later send at once.
 * -FI_ECONNREFUSED is what a datagram socket answers when nobody listens
 * on its address any more: the closest documented code for "the peer's
 * receive context has no owner", and distinct from -FI_EIO (data lost in
 * a transfer that had started). */
static void opx_av_mark_dead(struct opx_av *av, struct opx_av_entry *e, fi_addr_t addr)
{
	(void)av;
	if (e->peer)
		shim_peer_close(e->peer);
	e->peer = NULL;
	if (!e->dead)
		OPX_WARN(FI_LOG_AV, "fi_addr %" PRIu64 " (lid %u ctx %u): receiver is gone\n", addr,
			 e->addr.lid, e->addr.ctx);
	e->dead = true;
}

int opx_av_stalled_locked(struct opx_av *av, fi_addr_t addr)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	bool sub;
	struct opx_av_entry *e = opx_av_entry_locked(av, addr, &sub);

	if (!e)
		return -FI_EAGAIN;
	if (++e->stalls % OPX_AV_STALL_CHECK || !e->peer || shim_peer_alive(e->peer))
		return -FI_EAGAIN;
	opx_av_mark_dead(av, e, addr);
	return -FI_ECONNREFUSED;
}

bool opx_av_peer_dead_locked(struct opx_av *av, fi_addr_t addr, uint32_t round)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	struct opx_av_entry *e;
	struct shim_peer *p;
	bool sub;
	int ret;

	e = opx_av_entry_locked(av, addr, &sub);
	if (!e)
		return false; /* removed: not ours to judge */
	if (e->dead)
		return true;
	if (e->checked == round)
		return false; /* found alive this round already */
	e->checked = round;
	if (!e->peer) {
		ret = shim_peer_open_via(av->domain->fabric->dev, av->udp_via, &e->addr, &p);
		if (ret == -ENOENT || ret == -ESTALE) {
			opx_av_mark_dead(av, e, addr); /* closed, or its number reused */
			return true;
		}
		if (ret)
			return false;
		e->peer = p;
	}
	if (shim_peer_alive(e->peer))
		return false;
	opx_av_mark_dead(av, e, addr);
	return true;
}

static int opx_av_peer_open_slow(struct opx_av *av, fi_addr_t addr, struct shim_peer **peer)
{
	struct opx_av_entry *e;
	bool sub;
	int ret;

	e = opx_av_entry_locked(av, addr, &sub);
	if (!e)
		return -FI_EINVAL;
	if (e->peer) { /* a receive context of a scalable peer, open already */
		*peer = e->peer;
		return 0;
	}
	if (e->dead)
		return -FI_ECONNREFUSED;
	ret = shim_peer_open_via(av->domain->fabric->dev, av->udp_via, &e->addr, &e->peer);
	if (ret == -EACCES) {
		e->peer = NULL;
		opx_av_warn_refused(av, addr, &e->addr);
		return -FI_EACCES;
	}
	if (ret) {
		e->peer = NULL;
		OPX_WARN(FI_LOG_AV, "cannot reach fi_addr %" PRIu64 " (lid %u ctx %u): %s\n", addr,
			 e->addr.lid, e->addr.ctx, shim_dev_strerror(ret));
		return opx_init_err_from_shim(ret);
	}
	*peer = e->peer;
	return 0;
}

int opx_av_udp_peer(struct opx_ep *ep, fi_addr_t addr, struct shim_peer **peer)
{
	struct opx_av *av = ep->av;
	bool sub;
	struct opx_av_entry *e = opx_av_entry_locked(av, addr, &sub);
	/* by slot: the table's index, or a scalable peer's context's in av->sub */
	struct shim_peer ***arr = sub ? &ep->peers.usub : &ep->peers.upeers;
	size_t *arr_n = sub ? &ep->peers.usub_n : &ep->peers.upeers_n;
	const struct shim_addr *a;
	struct shim_peer *p;
	size_t slot;
	int ret;

	if (!e)
		return -FI_EINVAL;
	a = &e->addr;
	slot = sub ? (size_t)(e - av->sub) : (size_t)(e - av->table);
	if (slot >= *arr_n) {
		size_t n = *arr_n ? *arr_n : 16;
		struct shim_peer **t;

		while (n <= slot)
			n *= 2;
		t = realloc(*arr, n * sizeof(*t));
		if (!t)
			return -FI_ENOMEM;
		memset(t + *arr_n, 0, (n - *arr_n) * sizeof(*t));
		*arr = t;
		*arr_n = n;
	}
	addr = slot;
	p = (*arr)[addr];
	/* a link is its address and port: an entry removed and reused for
	 * another peer finds a different one here */
	if (p && p->addr.ipv4 == a->ipv4 && p->addr.udp_port == a->udp_port) {
		*peer = p;
		return 0;
	}
	if (p)
		shim_peer_close(p);
	(*arr)[addr] = NULL;
	ret = shim_peer_open_via(ep->domain->fabric->dev, ep->shim, a, &p);
	if (ret)
		return opx_init_err_from_shim(ret);
	(*arr)[addr] = p;
	*peer = p;
	return 0;
}

/* Close the peers of one of those arrays (by slot, NULL: none) and free it. */
static void opx_av_peer_array_close(struct shim_peer ***arr, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		if ((*arr)[i])
			shim_peer_close((*arr)[i]);
	free(*arr);
	*arr = NULL;
	*n = 0;
}

void opx_av_udp_peers_close(struct opx_ep *ep)
{
	opx_av_peer_array_close(&ep->peers.upeers, &ep->peers.upeers_n);
	opx_av_peer_array_close(&ep->peers.usub, &ep->peers.usub_n);
}

/* ---------------------------------------------------------------------
 * Receive contexts of scalable peers (fi_rx_addr).
 */
/* Split addr into the table index and the receive context index. */
static void opx_av_rx_split(const struct opx_av *av, fi_addr_t addr, fi_addr_t *base,
			    uint64_t *rx)
{
	unsigned int shift = 64u - av->rx_ctx_bits;

	if (!av->rx_ctx_bits) {
		*base = addr;
		*rx = 0;
		return;
	}
	*rx = addr >> shift;
	*base = addr & ((1ULL << shift) - 1);
}

/* Make the entries of receive contexts 1.. of the scalable peer e. */
static int opx_av_sub_make(struct opx_av *av, struct opx_av_entry *e)
{
	unsigned int n = opx_addr_sep_rx(&e->addr) - 1;
	struct opx_av_entry *t;

	if (av->sub_count + n > av->sub_size) {
		size_t size = av->sub_size ? av->sub_size : 64;

		while (size < av->sub_count + n)
			size *= 2;
		t = realloc(av->sub, size * sizeof(*t));
		if (!t)
			return -FI_ENOMEM;
		av->sub = t;
		av->sub_size = size;
	}
	for (unsigned int i = 0; i < n; i++) {
		struct opx_av_entry *s = &av->sub[av->sub_count + i];

		memset(s, 0, sizeof(*s));
		opx_addr_sep_ctx(&e->addr, i + 1, &s->addr);
		s->valid = true;
	}
	e->sub = (uint32_t)av->sub_count + 1;
	av->sub_count += n;
	return 0;
}

struct opx_av_entry *opx_av_entry_locked(struct opx_av *av, fi_addr_t addr, bool *sub)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	struct opx_av_entry *e;
	fi_addr_t base;
	uint64_t rx;

	*sub = false;
	if (addr < av->count)
		return av->table[addr].valid ? &av->table[addr] : NULL;
	opx_av_rx_split(av, addr, &base, &rx);
	if (!rx || !opx_av_index_ok(av, base))
		return NULL;
	e = &av->table[base];
	if (rx >= opx_addr_sep_rx(&e->addr)) {
		if (!av->rx_warned)
			OPX_WARN(FI_LOG_AV, "fi_rx_addr(%" PRIu64 ", %" PRIu64 "): the peer has %u "
					    "receive context(s) (logged once per AV)\n",
				 base, rx, opx_addr_sep_rx(&e->addr));
		av->rx_warned = true;
		return NULL;
	}
	if (!e->sub && opx_av_sub_make(av, e))
		return NULL;
	*sub = true;
	return &av->sub[e->sub - 1 + rx - 1];
}

fi_addr_t opx_av_base_locked(const struct opx_av *av, fi_addr_t addr)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	fi_addr_t base;
	uint64_t rx;

	if (addr < av->count)
		return av->table[addr].valid ? addr : FI_ADDR_NOTAVAIL;
	opx_av_rx_split(av, addr, &base, &rx);
	if (!rx || !opx_av_index_ok(av, base) || rx >= opx_addr_sep_rx(&av->table[base].addr))
		return FI_ADDR_NOTAVAIL;
	return base;
}

/* Called for every send: an already-open peer costs one bounds check and
 * one load.  A removed or never-valid entry always has peer == NULL, so
 * the fast path needs no separate valid test. */
int opx_av_peer_locked(struct opx_av *av, fi_addr_t addr, struct shim_peer **peer)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	if (__builtin_expect(addr < av->count, 1)) {
		struct shim_peer *p = av->table[addr].peer;

		if (__builtin_expect(p != NULL, 1)) {
			*peer = p;
			return 0;
		}
	}
	return opx_av_peer_open_slow(av, addr, peer);
}
