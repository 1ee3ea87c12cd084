/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_sep.h - between opx_ep.c and opx_sep.c: a scalable endpoint's
 * contexts are plain endpoints (opx_ep.c: opx_ep_create, opx_ep_fi_ops,
 * opx_ep_disable) opened where struct opx_ep_at says, and its fid is a
 * never-enabled endpoint (opx_sep.c: opx_ep_shell).  What the rest of
 * the provider calls is declared in opx.h and opx_ep.h.
 */
#ifndef OPX_SEP_H
#define OPX_SEP_H

#include "opx_ep.h"

/* Where a scalable endpoint's context opens (opx_sep.c): context number
 * ctx with nonce, its udp socket on ipv4 and port (network order); the
 * service port of the whole endpoint claimed for its first context only,
 * in the name sep. */
struct opx_ep_at {
	int ctx;
	uint32_t nonce;
	uint32_t ipv4;
	uint16_t port;
	uint8_t sep;
	uint8_t role;
	bool first;
	bool udp; /* the first context has a udp socket: this one must too */
};

/* opx_ep.c: an endpoint, opened where at says (NULL: anywhere), and the
 * fid ops of a plain one, which a scalable endpoint's contexts call. */
int opx_ep_create(struct opx_domain *domain, const struct fi_info *info,
		  const struct opx_ep_at *at, void *context, struct opx_ep **epp);
extern struct fi_ops opx_ep_fi_ops;
/* Unbind its CQs and counters and disable it (a scalable endpoint's
 * context closed: its receive context stays the endpoint's). */
void opx_ep_disable(struct opx_ep *ep);
/* The never-enabled endpoint a scalable endpoint's fid is (opx_sep.c). */
struct opx_ep *opx_ep_shell(struct opx_domain *domain, const struct shim_addr *name,
			    void *context);

#endif /* OPX_SEP_H */
