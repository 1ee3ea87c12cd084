/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_addr.h - address formats and the contexts a scalable endpoint's
 * address names (prov/opx_addr.c).  FI_ADDR_OPX is struct shim_addr; in
 * FI_SOCKADDR_IN and FI_SOCKADDR an endpoint is named by its udp socket,
 * a struct sockaddr_in.  The format is the domain's
 * (struct opx_domain.addr_format).
 */
#ifndef OPX_ADDR_H
#define OPX_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

#include "shim_abi.h"

static inline bool opx_addr_is_sock(uint32_t fmt)
{
	return fmt == FI_SOCKADDR_IN || fmt == FI_SOCKADDR;
}
/* The format of a domain opened from an info of format asked (UNSPEC:
 * FI_ADDR_OPX): 0, or -FI_EINVAL for a format opx does not have. */
int opx_addr_format(uint32_t asked, uint32_t *fmt);
/* Its name for logs (fi_tostr's buffer is shared: not twice in a call). */
const char *opx_addr_format_name(uint32_t fmt);
/* Bytes of one address in fmt (the stride of fi_av_insert's array). */
size_t opx_addr_len(uint32_t fmt);
/* addr (len bytes) is a struct sockaddr_in, with an address and a port
 * when need_port: 0, or -FI_EINVAL and a log line that says why (IPv6,
 * another family, too short, no port); what names it in the log. */
int opx_addr_sin_check(const void *addr, size_t len, bool need_port, const char *what);
/* A host and a port (both network order) as an unresolved address (lid
 * 0), host_id set when ipv4 is one of this host's: fi_av_insert resolves
 * it (opx_av.c). */
void opx_addr_unresolved(uint64_t host_id, uint32_t ipv4, uint16_t port, struct shim_addr *a);
/* The same from a checked struct sockaddr_in (any alignment). */
void opx_addr_from_sin(uint64_t host_id, const void *sin, struct shim_addr *a);
/* An address's udp socket as a struct sockaddr_in (any alignment). */
void opx_addr_to_sin(const struct shim_addr *a, void *sin);
/* a in format fmt into buf (*len bytes): 0, or -FI_ETOOSMALL with what
 * fits copied; *len becomes the full length either way. */
int opx_addr_export(uint32_t fmt, const struct shim_addr *a, void *buf, size_t *len);
/* fi_av_straddr of an address in fmt. */
const char *opx_addr_str(uint32_t fmt, const void *addr, char *buf, size_t *len);

/* Scalable endpoints (opx_sep.c): the contexts an address names
 * (struct shim_addr.sep): receive contexts at ctx, ctx + 1, ..., then
 * the transmit contexts.  A plain endpoint is one context of each kind
 * in one. */
#define OPX_SEP_MAX_RX 16u
#define OPX_SEP_MAX_TX 15u
static inline unsigned int opx_addr_sep_rx(const struct shim_addr *a)
{
	return a->sep ? (a->sep & 0xfu) + 1u : 1u;
}
static inline unsigned int opx_addr_sep_tx(const struct shim_addr *a)
{
	return a->sep >> 4;
}
/* Receive and transmit contexts: the (lid, ctx) its packets may come from. */
static inline unsigned int opx_addr_sep_ctxs(const struct shim_addr *a)
{
	return a->sep ? opx_addr_sep_rx(a) + opx_addr_sep_tx(a) : 1u;
}
/* The address of context i of a (scalable) endpoint named by base. */
void opx_addr_sep_ctx(const struct shim_addr *base, unsigned int i, struct shim_addr *out);

#endif /* OPX_ADDR_H */
