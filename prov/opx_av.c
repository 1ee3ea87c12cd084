/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_av.c - address vector.
 *
 * fi_addr_t is a plain index into av->table[] for both FI_AV_TABLE and
 * FI_AV_MAP: the table gives O(1) sends and the index is as opaque as a
 * pointer would be for MAP.  Indices are never reused after fi_av_remove
 * (append only), so an application that inserts with fi_addr == NULL can
 * always predict the next index from the number of successful inserts.
 *
 * A reverse map (slid, sctx) -> fi_addr_t serves FI_SOURCE and directed
 * receive on the receive path.  It is open addressing with linear probing
 * and backward-shift deletion, so it needs no tombstones and a lookup
 * touches one or two cache lines.
 *
 * Scalable peers (opx_sep.c): a name whose sep byte is set stands for
 * several consecutive contexts.  Every one of them maps back to the
 * peer's one fi_addr_t in the reverse map (its transmit contexts send,
 * its receive contexts answer), and in an AV opened with rx_ctx_bits,
 * fi_rx_addr(fi_addr, i, bits) sends to its receive context i: an entry
 * of av->sub made from the name on first use (opx_av_entry_locked), so
 * the table's indices stay those of the inserts.  A plain fi_addr_t is
 * receive context 0.
 *
 * What the shim knows of the peers (the endpoint an inserted host and
 * port names, a packet's sender, opening a peer on the first send and
 * finding it dead, the receive contexts of scalable peers) is
 * opx_av_peer.c, which this file calls and which never calls back.
 *
 * Locking: every API entry point takes domain->lock; the _locked helpers
 * are called by the endpoint with it held.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opx_addr.h"
#include "opx_ep.h"

#define OPX_AV_MIN_SIZE 64
#define OPX_AV_RMAP_MIN 128
#define OPX_AV_MAX_INIT_SIZE (1u << 16)
#define OPX_AV_RX_BITS_MAX 16
/* Key values: 0 is an empty slot; valid keys are (slid << 16 | sctx) + 1
 * with sctx < SHIM_MAX_CTXTS, so they never wrap to 0. */
#define OPX_AV_RMAP_EMPTY 0u

/*
 * Private part of the AV.  struct opx_av (opx.h) is the first member so
 * the other files keep using it through container_of on av_fid.
 */
struct opx_av_priv {
	struct opx_av av;
	size_t rmap_used; /* occupied reverse-map slots */
	size_t rmap_dups; /* inserts that overrode a live reverse-map key */
};

static struct opx_av_priv *opx_av_priv_of(struct opx_av *av)
{
	return OPX_CONTAINER_OF(av, struct opx_av_priv, av);
}

static inline uint32_t opx_av_key(uint16_t slid, uint16_t sctx)
{
	return (((uint32_t)slid << 16) | sctx) + 1u;
}

/* Multiplicative hash: LIDs and contexts are small dense integers, so a
 * plain mask would cluster them. */
static inline size_t opx_av_hash(uint32_t key, size_t mask)
{
	return (size_t)((key * 0x9e3779b1u) >> 7) & mask;
}

/* ---------------------------------------------------------------------
 * Reverse map.
 */
static void opx_av_rmap_put(struct opx_av *av, uint32_t key, uint64_t val)
{
	size_t mask = av->rmap_size - 1;
	size_t i = opx_av_hash(key, mask);

	while (av->rmap[i] != OPX_AV_RMAP_EMPTY) {
		if (av->rmap[i] == key) {
			/* Same (lid, ctx) inserted again: the later insert
			 * wins, as a restarted peer would be re-inserted.
			 * Two hosts with one LID (addresses in different
			 * /16 subnets) are not told apart: say so. */
			const struct shim_addr *was = &av->table[av->rmap_val[i]].addr;
			const struct shim_addr *now = &av->table[val].addr;

			if (av->table[av->rmap_val[i]].valid && was->host_id != now->host_id)
				OPX_WARN(FI_LOG_AV, "hosts %" PRIx64 " and %" PRIx64 " share LID %u "
					 "(IPv4 addresses alike in their low 16 bits): messages "
					 "from context %u of one are attributed to the other\n",
					 was->host_id, now->host_id, now->lid, now->ctx);
			av->rmap_val[i] = val;
			opx_av_priv_of(av)->rmap_dups++;
			return;
		}
		i = (i + 1) & mask;
	}
	av->rmap[i] = key;
	av->rmap_val[i] = val;
	opx_av_priv_of(av)->rmap_used++;
}

static int opx_av_rmap_resize(struct opx_av *av, size_t new_size)
{
	uint32_t *old_keys = av->rmap;
	uint64_t *old_vals = av->rmap_val;
	size_t old_size = av->rmap_size;
	uint32_t *keys = calloc(new_size, sizeof(*keys));
	uint64_t *vals = calloc(new_size, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -FI_ENOMEM;
	}
	av->rmap = keys;
	av->rmap_val = vals;
	av->rmap_size = new_size;
	opx_av_priv_of(av)->rmap_used = 0;
	for (size_t i = 0; i < old_size; i++) {
		if (old_keys[i] == OPX_AV_RMAP_EMPTY)
			continue;
		size_t j = opx_av_hash(old_keys[i], new_size - 1);

		while (keys[j] != OPX_AV_RMAP_EMPTY)
			j = (j + 1) & (new_size - 1);
		keys[j] = old_keys[i];
		vals[j] = old_vals[i];
		opx_av_priv_of(av)->rmap_used++;
	}
	free(old_keys);
	free(old_vals);
	return 0;
}

/* Remove key if it maps to val; backward-shift the probe chain after it
 * so later lookups never stop at a hole. */
static void opx_av_rmap_del(struct opx_av *av, uint32_t key, uint64_t val)
{
	size_t mask = av->rmap_size - 1;
	size_t i = opx_av_hash(key, mask);

	while (av->rmap[i] != key) {
		if (av->rmap[i] == OPX_AV_RMAP_EMPTY)
			return;
		i = (i + 1) & mask;
	}
	if (av->rmap_val[i] != val)
		return; /* a later insert of the same (lid, ctx) owns it */

	size_t hole = i;
	size_t j = i;

	for (;;) {
		j = (j + 1) & mask;
		if (av->rmap[j] == OPX_AV_RMAP_EMPTY)
			break;
		size_t home = opx_av_hash(av->rmap[j], mask);
		/* Move j into the hole unless its home lies cyclically in
		 * (hole, j]: then the hole is not on its probe path. */
		bool stays = (hole <= j) ? (home > hole && home <= j) : (home > hole || home <= j);
		if (stays)
			continue;
		av->rmap[hole] = av->rmap[j];
		av->rmap_val[hole] = av->rmap_val[j];
		hole = j;
	}
	av->rmap[hole] = OPX_AV_RMAP_EMPTY;
	av->rmap_val[hole] = 0;
	opx_av_priv_of(av)->rmap_used--;
}

fi_addr_t opx_av_src_locked(const struct opx_av *av, uint16_t slid, uint16_t sctx)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	uint32_t key = opx_av_key(slid, sctx);
	size_t mask = av->rmap_size - 1;
	size_t i = opx_av_hash(key, mask);

	/* A forged sctx of 0xffff with slid 0xffff wraps the key to the
	 * empty marker; no valid entry has it. */
	if (__builtin_expect(key == OPX_AV_RMAP_EMPTY, 0))
		return FI_ADDR_NOTAVAIL;
	/* Load factor stays below 1/2, so the loop ends at an empty slot;
	 * the bound makes that a certainty rather than an assumption. */
	for (size_t n = 0; n < av->rmap_size; n++) {
		uint32_t k = av->rmap[i];

		if (k == key)
			return av->rmap_val[i];
		if (k == OPX_AV_RMAP_EMPTY)
			break;
		i = (i + 1) & mask;
	}
	return FI_ADDR_NOTAVAIL;
}

/* ---------------------------------------------------------------------
 * Table.
 */
static bool opx_av_addr_ok(const struct shim_addr *a)
{
	unsigned int n = opx_addr_sep_ctxs(a);

	if (a->sep && (opx_addr_sep_tx(a) == 0 || (a->udp_port && ntohs(a->udp_port) + n > 65536u)))
		return false;
	return a->lid != 0 && a->ctx + n <= SHIM_MAX_CTXTS && a->unit < SHIM_MAX_UNITS;
}

/* The reverse-map keys of an entry: every context of a scalable peer. */
static void opx_av_rmap_put_all(struct opx_av *av, const struct shim_addr *a, uint64_t idx)
{
	for (unsigned int k = 0; k < opx_addr_sep_ctxs(a); k++)
		opx_av_rmap_put(av, opx_av_key(a->lid, (uint16_t)(a->ctx + k)), idx);
}

/* An address from fi_getinfo(node, service) without FI_SOURCE: a host
 * and a port, no receive context yet (lid 0). */
static bool opx_av_addr_unresolved(const struct shim_addr *a)
{
	return a->lid == 0 && a->udp_port != 0;
}

void opx_av_learn_locked(struct opx_av *av, const struct shim_addr *addr)
{
	OPX_ASSERT_LOCKED(&av->domain->lock);
	for (size_t i = 0; i < av->count; i++) {
		struct opx_av_entry *e = &av->table[i];

		if (!e->valid || !opx_av_addr_unresolved(&e->addr) || e->addr.ipv4 != addr->ipv4 ||
		    e->addr.udp_port != addr->udp_port)
			continue;
		e->addr = *addr;
		opx_av_rmap_put_all(av, addr, i);
		OPX_INFO(FI_LOG_AV, "fi_addr %zu (%s:%u) is lid %u ctx %u\n", i,
			 inet_ntoa((struct in_addr){.s_addr = addr->ipv4}),
			 (unsigned)ntohs(addr->udp_port), addr->lid, addr->ctx);
	}
}

static int opx_av_grow(struct opx_av *av, size_t need)
{
	size_t size = av->size;
	struct opx_av_entry *t;

	while (size < need)
		size *= 2;
	if (size == av->size)
		return 0;
	t = realloc(av->table, size * sizeof(*t));
	if (!t)
		return -FI_ENOMEM;
	memset(t + av->size, 0, (size - av->size) * sizeof(*t));
	av->table = t;
	av->size = size;
	return 0;
}

/* Address i of an insert's array, in format fmt, as a shim_addr (*a
 * points into the array or at tmp): 0, or the positive FI_E* of an
 * address that names no endpoint (FI_SYNC_ERR's per-address code). */
static int opx_av_addr_in(struct opx_av *av, uint32_t fmt, const void *addr, size_t i,
			  struct shim_addr *tmp, const struct shim_addr **a)
{
	const uint8_t *p = (const uint8_t *)addr + i * opx_addr_len(fmt);

	if (!opx_addr_is_sock(fmt)) {
		*a = (const struct shim_addr *)p;
		return 0;
	}
	if (opx_addr_sin_check(p, sizeof(struct sockaddr_in), true, "fi_av_insert"))
		return FI_EINVAL;
	opx_addr_from_sin(shim_dev_host_id(av->domain->fabric->dev), p, tmp);
	*a = tmp;
	return 0;
}

/* fi_av_insert of count addresses in format fmt (the domain's, or
 * FI_ADDR_OPX for fi_av_insertsvc's). */
static int opx_av_insert_fmt(struct opx_av *av, uint32_t fmt, const void *addr, size_t count,
			     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	int *sync_err = (flags & FI_SYNC_ERR) ? context : NULL;
	int inserted = 0, unresolved = 0;
	int ret;

	if (flags & ~(FI_MORE | FI_SYNC_ERR))
		return -FI_EBADFLAGS;
	if (count == 0)
		return 0;
	if (!addr || ((flags & FI_SYNC_ERR) && !context))
		return -FI_EINVAL;
	/* MAP hands out values the application cannot predict, so it must
	 * give us somewhere to write them. */
	if (!fi_addr && av->type == FI_AV_MAP)
		return -FI_EINVAL;
	if (count > (size_t)INT32_MAX)
		return -FI_EINVAL;

	opx_lock_acquire(&av->domain->lock);
	ret = opx_av_grow(av, av->count + count);
	if (ret)
		goto unlock;
	/* Keep the reverse map under half full for short probe chains
	 * (a scalable peer takes up to 31 keys: counted as it comes). */
	if ((opx_av_priv_of(av)->rmap_used + count) * 2 > av->rmap_size) {
		size_t rs = av->rmap_size;

		while ((opx_av_priv_of(av)->rmap_used + count) * 2 > rs)
			rs *= 2;
		ret = opx_av_rmap_resize(av, rs);
		if (ret)
			goto unlock;
	}

	for (size_t i = 0; i < count; i++) {
		const struct shim_addr *a;
		struct shim_addr given, resolved;
		int bad = opx_av_addr_in(av, fmt, addr, i, &given, &a);

		if (bad) {
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
			if (sync_err)
				sync_err[i] = bad;
			continue;
		}
		if (opx_av_addr_unresolved(a)) {
			if (opx_av_resolve(av, a, &resolved)) {
				if (fi_addr)
					fi_addr[i] = FI_ADDR_NOTAVAIL;
				if (sync_err)
					sync_err[i] = FI_EADDRNOTAVAIL;
				unresolved++;
				continue;
			}
			a = &resolved;
		}
		if (!opx_av_addr_unresolved(a) && !opx_av_addr_ok(a)) {
			OPX_INFO(FI_LOG_AV, "insert: invalid address lid %u ctx %u unit %u\n",
				 a->lid, a->ctx, a->unit);
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
			if (sync_err)
				sync_err[i] = FI_EINVAL;
			continue;
		}
		if (a->lid && opx_addr_sep_ctxs(a) > 1 &&
		    (opx_av_priv_of(av)->rmap_used + opx_addr_sep_ctxs(a)) * 2 > av->rmap_size) {
			ret = opx_av_rmap_resize(av, av->rmap_size * 4);
			if (ret)
				goto unlock;
		}
		fi_addr_t idx = av->count++;
		struct opx_av_entry *e = &av->table[idx];

		e->addr = *a;
		e->peer = NULL;
		e->stalls = 0;
		e->checked = 0;
		e->sub = 0;
		e->dead = false;
		e->valid = true;
		if (a->lid) /* else when learned */
			opx_av_rmap_put_all(av, a, idx);
		if (fi_addr)
			fi_addr[i] = idx;
		if (sync_err)
			sync_err[i] = 0;
		inserted++;
	}
	/* nothing inserted because nothing serves the address: say so */
	ret = (!inserted && unresolved) ? -FI_EADDRNOTAVAIL : inserted;
unlock:
	opx_lock_release(&av->domain->lock);
	return ret;
}

static int opx_av_insert(struct fid_av *av_fid, const void *addr, size_t count, fi_addr_t *fi_addr,
			 uint64_t flags, void *context)
{
	struct opx_av *av = OPX_CONTAINER_OF(av_fid, struct opx_av, av_fid);

	return opx_av_insert_fmt(av, av->domain->addr_format, addr, count, fi_addr, flags,
				 context);
}

/* fi_av_insertsvc: the endpoint serving service on node, found the way
 * fi_av_insert finds a dest_addr from fi_getinfo(node, service). */
static int opx_av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
			    fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct opx_av *av = OPX_CONTAINER_OF(av_fid, struct opx_av, av_fid);
	struct shim_addr a;
	int ret;

	ret = opx_info_addr_from_node(av->domain->fabric->dev, node, service, 0, &a);
	if (ret)
		return ret == -FI_ENODATA ? -FI_EADDRNOTAVAIL : ret;
	return opx_av_insert_fmt(av, FI_ADDR_OPX, &a, 1, fi_addr, flags, context);
}

static int opx_av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
			    const char *service, size_t svccnt, fi_addr_t *fi_addr, uint64_t flags,
			    void *context)
{
	(void)av_fid;
	(void)node;
	(void)nodecnt;
	(void)service;
	(void)svccnt;
	(void)fi_addr;
	(void)flags;
	(void)context;
	return -FI_ENOSYS;
}

/* After removing the owner of a reverse-map key, an older entry with the
 * same (lid, ctx) should become the source again.  Scanning is O(n), so
 * it is done only when duplicates were ever inserted. */
static void opx_av_rmap_restore(struct opx_av *av, uint16_t lid, uint16_t ctx)
{
	for (size_t i = av->count; i-- > 0;) {
		const struct opx_av_entry *e = &av->table[i];

		if (e->valid && e->addr.lid == lid && ctx >= e->addr.ctx &&
		    ctx < e->addr.ctx + opx_addr_sep_ctxs(&e->addr)) {
			/* the key was just deleted, so this is a fresh slot */
			opx_av_rmap_put(av, opx_av_key(lid, ctx), i);
			return;
		}
	}
}

/* A removed scalable peer's receive contexts go with it. */
static void opx_av_sub_drop(struct opx_av *av, struct opx_av_entry *e)
{
	if (!e->sub)
		return;
	for (unsigned int i = 1; i < opx_addr_sep_rx(&e->addr); i++) {
		struct opx_av_entry *s = &av->sub[e->sub - 1 + i - 1];

		if (s->peer)
			shim_peer_close(s->peer);
		s->peer = NULL;
		s->valid = false;
	}
	e->sub = 0;
}

static int opx_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct opx_av *av = OPX_CONTAINER_OF(av_fid, struct opx_av, av_fid);
	struct opx_av_priv *priv = opx_av_priv_of(av);
	int ret = 0;

	if (flags)
		return -FI_EBADFLAGS;
	if (count && !fi_addr)
		return -FI_EINVAL;

	opx_lock_acquire(&av->domain->lock);
	/* Validate everything first so a bad index removes nothing. */
	for (size_t i = 0; i < count; i++) {
		if (!opx_av_index_ok(av, fi_addr[i])) {
			ret = -FI_EINVAL;
			goto unlock;
		}
		for (size_t j = 0; j < i; j++) {
			if (fi_addr[j] == fi_addr[i]) {
				ret = -FI_EINVAL; /* the second one is already gone */
				goto unlock;
			}
		}
	}
	for (size_t i = 0; i < count; i++) {
		struct opx_av_entry *e = &av->table[fi_addr[i]];

		/* drop the AV's reference: rendezvous still in flight with
		 * this peer hold their own (shim_peer_get) */
		if (e->peer) {
			shim_peer_close(e->peer);
			e->peer = NULL;
		}
		e->valid = false;
		opx_av_sub_drop(av, e);
		for (unsigned int k = 0; k < opx_addr_sep_ctxs(&e->addr); k++) {
			uint16_t ctx = (uint16_t)(e->addr.ctx + k);

			opx_av_rmap_del(av, opx_av_key(e->addr.lid, ctx), fi_addr[i]);
			if (priv->rmap_dups &&
			    opx_av_src_locked(av, e->addr.lid, ctx) == FI_ADDR_NOTAVAIL)
				opx_av_rmap_restore(av, e->addr.lid, ctx);
		}
	}
unlock:
	opx_lock_release(&av->domain->lock);
	return ret;
}

static int opx_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct opx_av *av = OPX_CONTAINER_OF(av_fid, struct opx_av, av_fid);
	int ret = 0;

	if (!addrlen || (!addr && *addrlen))
		return -FI_EINVAL;

	opx_lock_acquire(&av->domain->lock);
	if (!opx_av_index_ok(av, fi_addr)) {
		ret = -FI_EINVAL;
	} else {
		/* man fi_av: a short buffer gets what fits, *addrlen the size
		 * needed, and the call succeeds */
		(void)opx_addr_export(av->domain->addr_format, &av->table[fi_addr].addr, addr,
				      addrlen);
	}
	opx_lock_release(&av->domain->lock);
	return ret;
}

/* Reads no AV state (the address need not be inserted), so no lock. */
static const char *opx_av_straddr(struct fid_av *av_fid, const void *addr, char *buf, size_t *len)
{
	struct opx_av *av = OPX_CONTAINER_OF(av_fid, struct opx_av, av_fid);

	return opx_addr_str(av->domain->addr_format, addr, buf, len);
}

static int opx_av_set_open(struct fid_av *av_fid, struct fi_av_set_attr *attr,
			   struct fid_av_set **av_set, void *context)
{
	(void)av_fid;
	(void)attr;
	(void)av_set;
	(void)context;
	return -FI_ENOSYS;
}

static struct fi_ops_av opx_av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = opx_av_insert,
	.insertsvc = opx_av_insertsvc,
	.insertsym = opx_av_insertsym,
	.remove = opx_av_remove,
	.lookup = opx_av_lookup,
	.straddr = opx_av_straddr,
	.av_set = opx_av_set_open,
};

/* ---------------------------------------------------------------------
 * fid ops and open.
 */
static void opx_av_free(struct opx_av *av)
{
	for (size_t i = 0; i < av->count; i++) {
		if (av->table[i].peer)
			shim_peer_close(av->table[i].peer);
	}
	for (size_t i = 0; i < av->sub_count; i++) {
		if (av->sub[i].peer)
			shim_peer_close(av->sub[i].peer);
	}
	free(av->sub);
	free(av->table);
	free(av->rmap);
	free(av->rmap_val);
	free(opx_av_priv_of(av));
}

static int opx_av_close(struct fid *fid)
{
	struct opx_av *av = OPX_CONTAINER_OF(fid, struct opx_av, av_fid.fid);
	struct opx_domain *domain = av->domain;

	opx_lock_acquire(&domain->lock);
	if (atomic_load(&av->refcnt) > 0) {
		opx_lock_release(&domain->lock);
		return -FI_EBUSY;
	}
	opx_av_free(av);
	opx_lock_release(&domain->lock);
	atomic_fetch_sub(&domain->refcnt, 1);
	return 0;
}

/* Binding an EQ is how FI_EVENT asynchronous inserts would be reported;
 * opx inserts synchronously only. */
static int opx_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid;
	(void)bfid;
	(void)flags;
	return -FI_ENOSYS;
}

static struct fi_ops opx_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_av_close,
	.bind = opx_av_bind,
	.control = opx_init_no_control,
	.ops_open = opx_init_no_ops_open,
};

int opx_av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr, struct fid_av **av_out,
		void *context)
{
	struct opx_domain *domain;
	struct opx_av_priv *priv;
	struct opx_av *av;
	size_t size;

	if (!domain_fid || !attr || !av_out)
		return -FI_EINVAL;
	domain = OPX_CONTAINER_OF(domain_fid, struct opx_domain, domain_fid);

	switch (attr->type) {
	case FI_AV_UNSPEC:
		/* man fi_av: the provider picks and reports it back. */
		attr->type = FI_AV_TABLE;
		break;
	case FI_AV_MAP:
	case FI_AV_TABLE:
		break;
	default:
		OPX_WARN(FI_LOG_AV, "unsupported AV type %d\n", attr->type);
		return -FI_EINVAL;
	}
	if (attr->name) {
		OPX_INFO(FI_LOG_AV, "named (shared) AVs are not supported\n");
		return -FI_ENOSYS;
	}
	if (attr->flags & FI_EVENT) {
		OPX_INFO(FI_LOG_AV, "asynchronous (FI_EVENT) AVs are not supported\n");
		return -FI_ENOSYS;
	}
	if (attr->flags & FI_READ)
		return -FI_EINVAL; /* read-only access needs a named AV */
	if (attr->flags & ~(uint64_t)FI_SYMMETRIC)
		return -FI_EBADFLAGS;
	/* fi_rx_addr's receive context index in the top bits: room for a
	 * scalable peer's OPX_SEP_MAX_RX and more (an index beyond a peer's
	 * contexts fails its send), the rest for the table */
	if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits > OPX_AV_RX_BITS_MAX) {
		OPX_WARN(FI_LOG_AV, "rx_ctx_bits %d: opx takes 0 to %d\n", attr->rx_ctx_bits,
			 OPX_AV_RX_BITS_MAX);
		return -FI_EINVAL;
	}

	priv = calloc(1, sizeof(*priv));
	if (!priv)
		return -FI_ENOMEM;
	av = &priv->av;
	/* attr->count is a hint: honour it up front only up to a modest
	 * size, the table grows by doubling anyway. */
	size = OPX_AV_MIN_SIZE;
	while (size < attr->count && size < OPX_AV_MAX_INIT_SIZE)
		size *= 2;
	av->table = calloc(size, sizeof(*av->table));
	av->rmap_size = OPX_AV_RMAP_MIN;
	while (av->rmap_size < size * 2)
		av->rmap_size *= 2;
	av->rmap = calloc(av->rmap_size, sizeof(*av->rmap));
	av->rmap_val = calloc(av->rmap_size, sizeof(*av->rmap_val));
	if (!av->table || !av->rmap || !av->rmap_val) {
		free(av->table);
		free(av->rmap);
		free(av->rmap_val);
		free(priv);
		return -FI_ENOMEM;
	}
	av->size = size;
	av->count = 0;
	av->type = attr->type;
	av->domain = domain;
	av->rx_ctx_bits = (unsigned int)attr->rx_ctx_bits;
	atomic_init(&av->refcnt, 0);

	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &opx_av_fi_ops;
	av->av_fid.ops = &opx_av_ops;

	atomic_fetch_add(&domain->refcnt, 1);
	*av_out = &av->av_fid;
	return 0;
}
