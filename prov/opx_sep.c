/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_sep.c - scalable endpoints: fi_scalable_ep, fi_tx_context,
 * fi_rx_context, and the name that lets a peer reach each receive
 * context with fi_rx_addr.
 *
 * Design.  Every context is an ordinary opx endpoint (opx_ep.c) with a
 * receive context of its own, so the data path is the plain endpoint's,
 * unchanged: receive context i is an endpoint that only receives,
 * transmit context k one that only sends (its own receive context takes
 * the answers a sender needs: rendezvous DONEs, one-sided replies, udp
 * acks).  The fid an application gets from fi_tx_context/fi_rx_context
 * *is* that endpoint's, with fid ops of this file (bind filtered by the
 * context's side, enable, close).
 *
 * Name.  A scalable endpoint has one name, the address of its receive
 * context 0 with the sep byte of struct shim_addr set to T << 4 | (R - 1)
 * for R receive and T transmit contexts (R <= 16, T <= 15: what a byte
 * holds, T >= 1 so that 0 stays "a plain endpoint").  Its contexts are
 * opened consecutively: receive context i is context number ctx + i with
 * nonce + i and, on the udp wire, udp_port + i; transmit context k comes
 * after them, at R + k.  A peer therefore derives every context from the
 * name alone (opx_addr_sep_ctx): fi_rx_addr(fi_addr, i, rx_ctx_bits)
 * sends to receive context i (opx_av.c makes its entry on first use), an
 * index beyond R fails the send with -FI_EINVAL, and the reverse map
 * attributes packets from any of the R + T contexts to the one fi_addr_t
 * (FI_SOURCE, directed receive).  A plain fi_addr_t is receive context 0,
 * so plain endpoints and scalable ones talk to each other both ways.
 *
 * Opening finds R + T free consecutive context numbers (and ports): the
 * first context opens wherever the shim's cursor is, the others at the
 * numbers after it (shim_ctx_open_at); if one is taken the whole range is
 * let go and tried again further on, a bounded number of times.
 *
 * Wires and trust.  Each context is a full shim context: on shm its own
 * 0600 segment with its job-key check, on udp its own socket, its own
 * authenticated flows (every datagram MACed, first contact by cookie,
 * sessions keyed by its nonce).  Nothing about the sep is trusted from a
 * packet: the derived addresses come from the name the application
 * inserted, and a derived context is verified by the shim exactly as any
 * inserted address is (uid, mode, job key, nonce).
 *
 * A receive context enabled without a CQ or counter is a one-sided target
 * only, progressed through its endpoint's transmit contexts' CQs
 * (opx_sep_ride).
 *
 * Closing a context unbinds its CQs and counters and disables it; its
 * receive context stays the scalable endpoint's (the name must stay
 * true) until the scalable endpoint is closed, which fails with
 * -FI_EBUSY while a context is open.
 *
 * Limits: socket address formats (FI_SOCKADDR_IN) name one udp socket
 * and cannot carry the contexts: refused.  FI_SHARED_CONTEXT (shared
 * transmit/receive contexts) is refused by fi_getinfo and fi_stx_context.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "opx_addr.h"
#include "opx_cq.h"
#include "opx_ep.h"
#include "opx_sep.h"
#include "opx_stats.h"

/* Ranges tried before giving up with -FI_EBUSY. */
#define OPX_SEP_TRIES 32

struct opx_sep {
	struct opx_ep *shell; /* the fid the application holds (opx_ep_shell) */
	struct opx_domain *domain;
	struct opx_av *av;
	struct fi_ops_ep ops; /* the shell's, with tx_ctx and rx_ctx */
	struct shim_addr name;
	unsigned int rx_cnt;
	unsigned int tx_cnt;
	struct opx_ep *rx[OPX_SEP_MAX_RX];
	struct opx_ep *tx[OPX_SEP_MAX_TX];
	bool rx_open[OPX_SEP_MAX_RX];
	bool tx_open[OPX_SEP_MAX_TX];
	/* a receive context enabled without CQ or counter (a one-sided
	 * target only) rides on the transmit contexts' CQs for progress:
	 * those it is attached to (opx_sep_ride) */
	bool rx_bare[OPX_SEP_MAX_RX];
	struct opx_cq *ride[OPX_SEP_MAX_RX][OPX_SEP_MAX_TX];
	uint64_t tx_caps;
	uint64_t rx_caps;
	struct fi_tx_attr tx_attr; /* what a context reports (fi_tx_context attr) */
	struct fi_rx_attr rx_attr;
};

static struct opx_sep *opx_sep_of(struct fid *fid)
{
	struct opx_ep *shell;

	if (!fid || fid->fclass != FI_CLASS_SEP)
		return NULL;
	shell = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	return shell->sep;
}

static struct opx_ep *opx_sep_ctx_ep(struct fid *fid)
{
	if (!fid || (fid->fclass != FI_CLASS_TX_CTX && fid->fclass != FI_CLASS_RX_CTX))
		return NULL;
	return OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
}

/* ---------------------------------------------------------------------
 * Progress of bare receive contexts.  With manual progress an endpoint
 * moves only when a CQ or counter it is bound to is read; a receive
 * context that is only a one-sided target (Open MPI's btl ofi enables
 * one without any CQ) would never execute what arrives.  So it is
 * attached to the CQs of the transmit contexts of its endpoint: reading
 * any of them progresses it too.  Called without the domain lock.
 */
static void opx_sep_ride(struct opx_sep *sep, unsigned int i, struct opx_cq *cq)
{
	unsigned int k;

	for (k = 0; k < sep->tx_cnt && sep->ride[i][k]; k++)
		if (sep->ride[i][k] == cq)
			return; /* on it already (transmit contexts sharing a CQ) */
	if (k < sep->tx_cnt && !opx_cq_attach_ep(cq, sep->rx[i]))
		sep->ride[i][k] = cq;
}

static void opx_sep_unride(struct opx_sep *sep, unsigned int i, struct opx_cq *only)
{
	for (unsigned int k = 0; k < sep->tx_cnt; k++) {
		struct opx_cq *cq = sep->ride[i][k];

		if (!cq || (only && cq != only))
			continue;
		opx_cq_detach_ep(cq, sep->rx[i]);
		sep->ride[i][k] = NULL;
	}
}

/* A context was enabled: bare receive contexts ride on transmit CQs. */
static void opx_sep_enabled(struct opx_sep *sep, struct opx_ep *ep)
{
	if (ep->sep_role == OPX_SEP_RX) {
		unsigned int i;

		if (ep->rx_cq || ep->recv_cntr)
			return;
		for (i = 0; i < sep->rx_cnt && sep->rx[i] != ep; i++)
			;
		sep->rx_bare[i] = true;
		for (unsigned int k = 0; k < sep->tx_cnt; k++)
			if (sep->tx[k]->enabled && sep->tx[k]->tx_cq)
				opx_sep_ride(sep, i, sep->tx[k]->tx_cq);
		return;
	}
	if (!ep->tx_cq)
		return;
	for (unsigned int i = 0; i < sep->rx_cnt; i++)
		if (sep->rx_bare[i])
			opx_sep_ride(sep, i, ep->tx_cq);
}

/* ---------------------------------------------------------------------
 * Contexts.
 */
static int opx_sep_ctx_close(struct fid *fid)
{
	struct opx_ep *ep = opx_sep_ctx_ep(fid);
	struct opx_sep *sep;

	if (!ep)
		return -FI_EINVAL;
	sep = ep->sep;
	for (unsigned int i = 0; i < sep->rx_cnt; i++) {
		if (sep->rx[i] == ep) {
			opx_sep_unride(sep, i, NULL);
			sep->rx_bare[i] = false;
		} else if (ep->sep_role == OPX_SEP_TX && ep->tx_cq) {
			bool shared = false; /* another transmit context keeps it */

			for (unsigned int k = 0; k < sep->tx_cnt; k++)
				shared |= sep->tx[k] != ep && sep->tx[k]->enabled &&
					  sep->tx[k]->tx_cq == ep->tx_cq;
			if (!shared)
				opx_sep_unride(sep, i, ep->tx_cq);
		}
	}
	opx_ep_disable(ep);
	opx_lock_acquire(&sep->domain->lock);
	for (unsigned int i = 0; i < sep->rx_cnt; i++)
		if (sep->rx[i] == ep)
			sep->rx_open[i] = false;
	for (unsigned int k = 0; k < sep->tx_cnt; k++)
		if (sep->tx[k] == ep)
			sep->tx_open[k] = false;
	opx_lock_release(&sep->domain->lock);
	return 0;
}

/* A context takes the CQ and counters of its own side; the AV is the
 * scalable endpoint's (bound to every context by fi_scalable_ep_bind). */
static int opx_sep_ctx_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct opx_ep *ep = opx_sep_ctx_ep(fid);
	bool tx;

	if (!ep || !bfid)
		return -FI_EINVAL;
	tx = ep->sep_role == OPX_SEP_TX;
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		if (flags & (tx ? FI_RECV : FI_TRANSMIT)) {
			OPX_INFO(FI_LOG_EP_CTRL, "a %s context takes no %s CQ\n",
				 tx ? "transmit" : "receive", tx ? "receive" : "transmit");
			return -FI_EBADFLAGS;
		}
		break;
	case FI_CLASS_CNTR:
		if (flags & (tx ? (FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE)
				: (FI_SEND | FI_READ | FI_WRITE))) {
			OPX_INFO(FI_LOG_EP_CTRL, "a %s context takes no counter of the other side\n",
				 tx ? "transmit" : "receive");
			return -FI_EBADFLAGS;
		}
		break;
	case FI_CLASS_AV:
		/* the scalable endpoint's, bound already: nothing to do */
		return ep->av && &ep->av->av_fid.fid == bfid ? 0 : -FI_EINVAL;
	case FI_CLASS_EQ:
		break;
	default:
		return -FI_EINVAL;
	}
	return opx_ep_fi_ops.bind(fid, bfid, flags);
}

static int opx_sep_ctx_control(struct fid *fid, int command, void *arg)
{
	struct opx_ep *ep = opx_sep_ctx_ep(fid);
	int rc;

	if (!ep)
		return -FI_EINVAL;
	/* the AV comes from the scalable endpoint */
	if (command == FI_ENABLE && !ep->sep->av)
		return -FI_ENOAV;
	rc = opx_ep_fi_ops.control(fid, command, arg);
	if (!rc && command == FI_ENABLE)
		opx_sep_enabled(ep->sep, ep);
	return rc;
}

static struct fi_ops opx_sep_ctx_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_sep_ctx_close,
	.bind = opx_sep_ctx_bind,
	.control = opx_sep_ctx_control,
	.ops_open = opx_stats_ops_open,
};

/* attr in: what the application asks (NULL: the endpoint's); out: what
 * it gets.  Only less than the endpoint has can be asked. */
static int opx_sep_tx_attr(struct opx_sep *sep, struct fi_tx_attr *attr, uint64_t *op_flags)
{
	const struct fi_tx_attr *have = &sep->tx_attr;

	*op_flags = have->op_flags;
	if (!attr)
		return 0;
	/* FI_NAMED_RX_CTX is what a transmit context of ours does anyway
	 * (fi_rx_addr); MPICH names it in every fi_tx_context */
	if ((attr->caps & ~(have->caps | FI_NAMED_RX_CTX)) || attr->inject_size > have->inject_size ||
	    attr->size > have->size || attr->iov_limit > have->iov_limit ||
	    attr->rma_iov_limit > have->rma_iov_limit || (attr->msg_order & ~have->msg_order)) {
		OPX_INFO(FI_LOG_EP_CTRL, "fi_tx_context: attributes beyond the endpoint's\n");
		return -FI_EINVAL;
	}
	*op_flags = attr->op_flags;
	attr->caps = attr->caps ? attr->caps : have->caps;
	attr->mode = have->mode;
	attr->msg_order = have->msg_order;
	attr->comp_order = have->comp_order;
	attr->inject_size = have->inject_size;
	attr->size = have->size;
	attr->iov_limit = have->iov_limit;
	attr->rma_iov_limit = have->rma_iov_limit;
	return 0;
}

static int opx_sep_rx_attr(struct opx_sep *sep, struct fi_rx_attr *attr, uint64_t *op_flags)
{
	const struct fi_rx_attr *have = &sep->rx_attr;

	*op_flags = have->op_flags;
	if (!attr)
		return 0;
	if ((attr->caps & ~(have->caps | OPX_CAPS_ASKED_ONLY | FI_NAMED_RX_CTX)) ||
	    attr->total_buffered_recv > have->total_buffered_recv || attr->size > have->size ||
	    attr->iov_limit > have->iov_limit || (attr->msg_order & ~have->msg_order)) {
		OPX_INFO(FI_LOG_EP_CTRL, "fi_rx_context: attributes beyond the endpoint's\n");
		return -FI_EINVAL;
	}
	*op_flags = attr->op_flags;
	attr->caps = attr->caps ? attr->caps : have->caps;
	attr->mode = have->mode;
	attr->msg_order = have->msg_order;
	attr->comp_order = have->comp_order;
	attr->total_buffered_recv = have->total_buffered_recv;
	attr->size = have->size;
	attr->iov_limit = have->iov_limit;
	return 0;
}

/* Hand out context ep as the fid of class fclass. */
static void opx_sep_ctx_give(struct opx_ep *ep, size_t fclass, void *context, struct fid_ep **out)
{
	ep->ep_fid.fid.fclass = fclass;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &opx_sep_ctx_fi_ops;
	*out = &ep->ep_fid;
}

static int opx_sep_tx_ctx(struct fid_ep *fsep, int index, struct fi_tx_attr *attr,
			  struct fid_ep **tx_ep, void *context)
{
	struct opx_sep *sep = fsep ? opx_sep_of(&fsep->fid) : NULL;
	uint64_t op_flags;
	int rc;

	if (!sep || !tx_ep)
		return -FI_EINVAL;
	if (index < 0 || (unsigned int)index >= sep->tx_cnt) {
		OPX_INFO(FI_LOG_EP_CTRL, "fi_tx_context %d: the endpoint has %u\n", index,
			 sep->tx_cnt);
		return -FI_EINVAL;
	}
	opx_lock_acquire(&sep->domain->lock);
	if (sep->tx_open[index]) {
		opx_lock_release(&sep->domain->lock);
		return -FI_EBUSY; /* one fid per context: close it first */
	}
	rc = opx_sep_tx_attr(sep, attr, &op_flags);
	if (rc) {
		opx_lock_release(&sep->domain->lock);
		return rc;
	}
	sep->tx[index]->tx_op_flags = op_flags;
	sep->tx_open[index] = true;
	opx_sep_ctx_give(sep->tx[index], FI_CLASS_TX_CTX, context, tx_ep);
	opx_lock_release(&sep->domain->lock);
	return 0;
}

static int opx_sep_rx_ctx(struct fid_ep *fsep, int index, struct fi_rx_attr *attr,
			  struct fid_ep **rx_ep, void *context)
{
	struct opx_sep *sep = fsep ? opx_sep_of(&fsep->fid) : NULL;
	uint64_t op_flags;
	int rc;

	if (!sep || !rx_ep)
		return -FI_EINVAL;
	if (index < 0 || (unsigned int)index >= sep->rx_cnt) {
		OPX_INFO(FI_LOG_EP_CTRL, "fi_rx_context %d: the endpoint has %u\n", index,
			 sep->rx_cnt);
		return -FI_EINVAL;
	}
	opx_lock_acquire(&sep->domain->lock);
	if (sep->rx_open[index]) {
		opx_lock_release(&sep->domain->lock);
		return -FI_EBUSY; /* one fid per context: close it first */
	}
	rc = opx_sep_rx_attr(sep, attr, &op_flags);
	if (rc) {
		opx_lock_release(&sep->domain->lock);
		return rc;
	}
	sep->rx[index]->rx_op_flags = op_flags;
	sep->rx_open[index] = true;
	opx_sep_ctx_give(sep->rx[index], FI_CLASS_RX_CTX, context, rx_ep);
	opx_lock_release(&sep->domain->lock);
	return 0;
}

/* ---------------------------------------------------------------------
 * The scalable endpoint.
 */
static void opx_sep_free_ctxs(struct opx_sep *sep)
{
	for (unsigned int i = 0; i < OPX_SEP_MAX_RX; i++) {
		if (sep->rx[i])
			(void)opx_ep_fi_ops.close(&sep->rx[i]->ep_fid.fid);
		sep->rx[i] = NULL;
	}
	for (unsigned int k = 0; k < OPX_SEP_MAX_TX; k++) {
		if (sep->tx[k])
			(void)opx_ep_fi_ops.close(&sep->tx[k]->ep_fid.fid);
		sep->tx[k] = NULL;
	}
}

static int opx_sep_close(struct fid *fid)
{
	struct opx_sep *sep = opx_sep_of(fid);

	if (!sep)
		return -FI_EINVAL;
	opx_lock_acquire(&sep->domain->lock);
	for (unsigned int i = 0; i < sep->rx_cnt; i++)
		if (sep->rx_open[i])
			goto busy;
	for (unsigned int k = 0; k < sep->tx_cnt; k++)
		if (sep->tx_open[k])
			goto busy;
	opx_lock_release(&sep->domain->lock);
	opx_sep_free_ctxs(sep);
	atomic_fetch_sub(&sep->domain->refcnt, 1);
	free(sep->shell);
	free(sep);
	return 0;
busy:
	opx_lock_release(&sep->domain->lock);
	OPX_INFO(FI_LOG_EP_CTRL, "scalable endpoint still has open contexts: close them first\n");
	return -FI_EBUSY;
}

/* The AV (and an EQ) go to every context. */
static int opx_sep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct opx_sep *sep = opx_sep_of(fid);
	int rc;

	if (!sep || !bfid)
		return -FI_EINVAL;
	if (bfid->fclass == FI_CLASS_AV) {
		struct opx_av *av = OPX_CONTAINER_OF(bfid, struct opx_av, av_fid.fid);

		if (sep->av || av->domain != sep->domain)
			return -FI_EINVAL;
	} else if (bfid->fclass != FI_CLASS_EQ) {
		OPX_INFO(FI_LOG_EP_CTRL, "a scalable endpoint takes an AV or EQ; CQs and counters "
					 "go to its contexts\n");
		return -FI_EINVAL;
	}
	for (unsigned int i = 0; i < sep->rx_cnt; i++) {
		rc = opx_ep_fi_ops.bind(&sep->rx[i]->ep_fid.fid, bfid, flags);
		if (rc)
			return rc;
	}
	for (unsigned int k = 0; k < sep->tx_cnt; k++) {
		rc = opx_ep_fi_ops.bind(&sep->tx[k]->ep_fid.fid, bfid, flags);
		if (rc)
			return rc;
	}
	if (bfid->fclass == FI_CLASS_AV)
		sep->av = OPX_CONTAINER_OF(bfid, struct opx_av, av_fid.fid);
	return 0;
}

static int opx_sep_control(struct fid *fid, int command, void *arg)
{
	struct opx_sep *sep = opx_sep_of(fid);

	(void)arg;
	if (!sep)
		return -FI_EINVAL;
	switch (command) {
	case FI_ENABLE:
		/* the contexts are enabled one by one, with their CQs */
		return sep->av ? 0 : -FI_ENOAV;
	default:
		return -FI_ENOSYS;
	}
}

static struct fi_ops opx_sep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_sep_close,
	.bind = opx_sep_bind,
	.control = opx_sep_control,
	.ops_open = opx_init_no_ops_open,
};

/* Open the R + T contexts at consecutive numbers (see the top). */
static int opx_sep_open_ctxs(struct opx_sep *sep, const struct fi_info *info)
{
	unsigned int n = sep->rx_cnt + sep->tx_cnt;
	uint8_t byte = (uint8_t)(sep->tx_cnt << 4 | (sep->rx_cnt - 1));
	int rc = -FI_EBUSY;

	for (int attempt = 0; attempt < OPX_SEP_TRIES; attempt++) {
		struct opx_ep_at at = {.ctx = -1, .sep = byte, .role = OPX_SEP_RX, .first = true};
		struct opx_ep *ep;
		struct shim_addr base;
		unsigned int k;

		rc = opx_ep_create(sep->domain, info, &at, NULL, &ep);
		if (rc)
			return rc;
		ep->sep = sep;
		sep->rx[0] = ep;
		base = ep->addr;
		if (base.ctx + n > SHIM_MAX_CTXTS || base.nonce > UINT32_MAX - n ||
		    (base.udp_port && ntohs(base.udp_port) + n > 65536u)) {
			opx_sep_free_ctxs(sep); /* no room after it: try further on */
			rc = -FI_EBUSY;
			continue;
		}
		for (k = 1; k < n; k++) {
			struct shim_addr a;

			opx_addr_sep_ctx(&base, k, &a);
			at = (struct opx_ep_at){.ctx = a.ctx,
						.nonce = a.nonce,
						.ipv4 = base.ipv4,
						.port = a.udp_port,
						.udp = ep->udp,
						.role = k < sep->rx_cnt ? OPX_SEP_RX : OPX_SEP_TX};
			rc = opx_ep_create(sep->domain, info, &at, NULL,
					   k < sep->rx_cnt ? &sep->rx[k] : &sep->tx[k - sep->rx_cnt]);
			if (rc)
				break;
			(k < sep->rx_cnt ? sep->rx[k] : sep->tx[k - sep->rx_cnt])->sep = sep;
		}
		if (k == n) {
			sep->name = base;
			sep->name.sep = byte;
			return 0;
		}
		opx_sep_free_ctxs(sep);
		if (rc != -FI_EBUSY && rc != -FI_EADDRINUSE)
			return rc;
	}
	OPX_WARN(FI_LOG_EP_CTRL, "no %u consecutive free receive contexts (and ports) found in %d "
				 "tries\n", n, OPX_SEP_TRIES);
	return rc;
}

/* The number of contexts of a kind the info asks (0: one). */
static int opx_sep_count(size_t asked, unsigned int max, const char *what, unsigned int *n)
{
	if (asked == FI_SHARED_CONTEXT) {
		OPX_INFO(FI_LOG_EP_CTRL, "%s: shared contexts are not supported\n", what);
		return -FI_EOPNOTSUPP;
	}
	if (asked > max) {
		OPX_INFO(FI_LOG_EP_CTRL, "%s %zu: at most %u\n", what, asked, max);
		return -FI_EINVAL;
	}
	*n = asked ? (unsigned int)asked : 1u;
	return 0;
}

int opx_sep_open(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **sep_out,
		 void *context)
{
	struct opx_domain *domain;
	struct fi_info *tmpl;
	struct opx_sep *sep;
	int rc;

	if (!fdom || fdom->fid.fclass != FI_CLASS_DOMAIN || !info || !sep_out)
		return -FI_EINVAL;
	domain = OPX_CONTAINER_OF(fdom, struct opx_domain, domain_fid);
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	if (info->caps & ~(OPX_CAPS | FI_MSG | FI_TAGGED))
		return -FI_EOPNOTSUPP;
	if (opx_addr_is_sock(domain->addr_format)) {
		OPX_WARN(FI_LOG_EP_CTRL, "scalable endpoints need FI_ADDR_OPX names: %s names one "
					 "udp socket, not several contexts\n",
			 opx_addr_format_name(domain->addr_format));
		return -FI_EOPNOTSUPP;
	}
	sep = calloc(1, sizeof(*sep));
	if (!sep)
		return -FI_ENOMEM;
	sep->domain = domain;
	rc = opx_sep_count(info->ep_attr ? info->ep_attr->rx_ctx_cnt : 0, OPX_SEP_MAX_RX,
			   "rx_ctx_cnt", &sep->rx_cnt);
	if (!rc)
		rc = opx_sep_count(info->ep_attr ? info->ep_attr->tx_ctx_cnt : 0, OPX_SEP_MAX_TX,
				   "tx_ctx_cnt", &sep->tx_cnt);
	if (rc) {
		free(sep);
		return rc;
	}
	/* what the contexts report: the info's attributes, else ours */
	tmpl = opx_info_template();
	if (!tmpl) {
		free(sep);
		return -FI_ENOMEM;
	}
	sep->tx_attr = info->tx_attr ? *info->tx_attr : *tmpl->tx_attr;
	sep->rx_attr = info->rx_attr ? *info->rx_attr : *tmpl->rx_attr;
	if (!sep->tx_attr.caps)
		sep->tx_attr.caps = tmpl->tx_attr->caps;
	if (!sep->rx_attr.caps)
		sep->rx_attr.caps = tmpl->rx_attr->caps;
	if (!sep->tx_attr.inject_size)
		sep->tx_attr.inject_size = tmpl->tx_attr->inject_size;
	if (!sep->tx_attr.size)
		sep->tx_attr.size = tmpl->tx_attr->size;
	if (!sep->tx_attr.iov_limit)
		sep->tx_attr.iov_limit = tmpl->tx_attr->iov_limit;
	if (!sep->tx_attr.rma_iov_limit)
		sep->tx_attr.rma_iov_limit = tmpl->tx_attr->rma_iov_limit;
	if (!sep->tx_attr.msg_order)
		sep->tx_attr.msg_order = tmpl->tx_attr->msg_order;
	if (!sep->rx_attr.size)
		sep->rx_attr.size = tmpl->rx_attr->size;
	if (!sep->rx_attr.iov_limit)
		sep->rx_attr.iov_limit = tmpl->rx_attr->iov_limit;
	if (!sep->rx_attr.total_buffered_recv)
		sep->rx_attr.total_buffered_recv = tmpl->rx_attr->total_buffered_recv;
	if (!sep->rx_attr.msg_order)
		sep->rx_attr.msg_order = tmpl->rx_attr->msg_order;
	fi_freeinfo(tmpl);

	rc = opx_sep_open_ctxs(sep, info);
	if (rc) {
		free(sep);
		return rc;
	}
	sep->shell = opx_ep_shell(domain, &sep->name, context);
	if (!sep->shell) {
		opx_sep_free_ctxs(sep);
		free(sep);
		return -FI_ENOMEM;
	}
	sep->shell->sep = sep;
	sep->ops = *sep->shell->ep_fid.ops;
	sep->ops.tx_ctx = opx_sep_tx_ctx;
	sep->ops.rx_ctx = opx_sep_rx_ctx;
	sep->shell->ep_fid.ops = &sep->ops;
	sep->shell->ep_fid.fid.ops = &opx_sep_fi_ops;
	atomic_fetch_add(&domain->refcnt, 1);
	OPX_INFO(FI_LOG_EP_CTRL, "scalable endpoint: %u receive and %u transmit contexts from "
				 "lid %u ctx %u\n",
		 sep->rx_cnt, sep->tx_cnt, sep->name.lid, sep->name.ctx);
	*sep_out = &sep->shell->ep_fid;
	return 0;
}
