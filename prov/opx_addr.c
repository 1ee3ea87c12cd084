/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_addr.c - address formats: how an endpoint's name looks to the
 * application.
 *
 * FI_ADDR_OPX (the default) is struct shim_addr, 32 bytes: host identity,
 * IPv4 address and UDP port, LID, context, unit, nonce.  Across hosts an
 * opx endpoint *is* its udp socket, so it can also be named the way IP
 * names it: FI_SOCKADDR_IN (and FI_SOCKADDR, which opx takes as IPv4: a
 * struct sockaddr_in of sin_family AF_INET; the udp wire has no IPv6),
 * the address and port of the endpoint's socket.  Such a name is what
 * fi_getinfo(node, service) gives as dest_addr in the native format, a
 * host and a port with no context yet: fi_av_insert resolves it the same
 * way (opx_av.c): on this host through the service registry, where every
 * endpoint of a socket-format domain serves its socket's port, elsewhere
 * over the udp wire, whose first exchange tells the rest.
 *
 * The format is the domain's (fi_domain's info), and every name the
 * domain's objects take or give follows it: fi_getname/fi_setname,
 * fi_av_insert/lookup/straddr and FI_SOURCE_ERR's err_data.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opx.h"
#include "opx_addr.h"

static_assert(sizeof(struct sockaddr_in) == 16, "a sockaddr_in is 16 bytes");

const char *opx_addr_format_name(uint32_t fmt)
{
	switch (fmt) {
	case FI_FORMAT_UNSPEC:
		return "FI_FORMAT_UNSPEC";
	case FI_ADDR_OPX:
		return "FI_ADDR_OPX";
	case FI_SOCKADDR_IN:
		return "FI_SOCKADDR_IN";
	case FI_SOCKADDR:
		return "FI_SOCKADDR";
	case FI_SOCKADDR_IN6:
		return "FI_SOCKADDR_IN6";
	default:
		return "another format";
	}
}

int opx_addr_format(uint32_t asked, uint32_t *fmt)
{
	switch (asked) {
	case FI_FORMAT_UNSPEC:
		*fmt = FI_ADDR_OPX;
		return 0;
	case FI_ADDR_OPX:
	case FI_SOCKADDR_IN:
	case FI_SOCKADDR:
		*fmt = asked;
		return 0;
	default:
		OPX_INFO(FI_LOG_CORE, "address format %s (%u) is not one of opx's (FI_ADDR_OPX, "
				      "FI_SOCKADDR_IN, FI_SOCKADDR)\n",
			 opx_addr_format_name(asked), (unsigned)asked);
		return -FI_EINVAL;
	}
}

size_t opx_addr_len(uint32_t fmt)
{
	return opx_addr_is_sock(fmt) ? sizeof(struct sockaddr_in) : sizeof(struct shim_addr);
}

/* The family comes first in every struct sockaddr; read it without
 * assuming the caller's buffer is aligned for one. */
static sa_family_t opx_addr_family(const void *addr)
{
	sa_family_t f;

	memcpy(&f, addr, sizeof(f));
	return f;
}

int opx_addr_sin_check(const void *addr, size_t len, bool need_port, const char *what)
{
	struct sockaddr_in sin;

	if (!addr || len < sizeof(sa_family_t)) {
		OPX_INFO(FI_LOG_CORE, "%s: no address\n", what);
		return -FI_EINVAL;
	}
	if (opx_addr_family(addr) == AF_INET6) {
		OPX_WARN(FI_LOG_CORE, "%s: an IPv6 address (AF_INET6): opx's udp wire is IPv4 "
				      "only, its socket addresses are struct sockaddr_in\n",
			 what);
		return -FI_EINVAL;
	}
	if (opx_addr_family(addr) != AF_INET) {
		OPX_WARN(FI_LOG_CORE, "%s: address family %u is not AF_INET\n", what,
			 (unsigned)opx_addr_family(addr));
		return -FI_EINVAL;
	}
	if (len < sizeof(sin)) {
		OPX_WARN(FI_LOG_CORE, "%s: %zu bytes, a struct sockaddr_in has %zu\n", what, len,
			 sizeof(sin));
		return -FI_EINVAL;
	}
	if (!need_port)
		return 0;
	memcpy(&sin, addr, sizeof(sin));
	if (!sin.sin_port || sin.sin_addr.s_addr == htonl(INADDR_ANY)) {
		OPX_WARN(FI_LOG_CORE, "%s: %s:%u names no endpoint (an address and a port are "
				      "needed)\n",
			 what, inet_ntoa(sin.sin_addr), (unsigned)ntohs(sin.sin_port));
		return -FI_EINVAL;
	}
	return 0;
}

void opx_addr_unresolved(uint64_t host_id, uint32_t ipv4, uint16_t port, struct shim_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->host_id = shim_dev_host_has_ipv4(ipv4) ? host_id : 0;
	a->ipv4 = ipv4;
	a->udp_port = port;
	a->uid = (uint32_t)geteuid();
}

void opx_addr_from_sin(uint64_t host_id, const void *sin_addr, struct shim_addr *a)
{
	struct sockaddr_in sin;

	memcpy(&sin, sin_addr, sizeof(sin));
	opx_addr_unresolved(host_id, sin.sin_addr.s_addr, sin.sin_port, a);
}

void opx_addr_to_sin(const struct shim_addr *a, void *sin_addr)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = a->udp_port;
	sin.sin_addr.s_addr = a->ipv4;
	memcpy(sin_addr, &sin, sizeof(sin));
}

int opx_addr_export(uint32_t fmt, const struct shim_addr *a, void *buf, size_t *len)
{
	struct sockaddr_in sin;
	const void *src = a;
	size_t n = sizeof(*a);

	if (opx_addr_is_sock(fmt)) {
		opx_addr_to_sin(a, &sin);
		src = &sin;
		n = sizeof(sin);
	}
	if (!buf || *len < n) {
		/* fi_cm(3), fi_av(3): what fits, and the length it needs */
		if (buf && *len)
			memcpy(buf, src, *len);
		*len = n;
		return -FI_ETOOSMALL;
	}
	memcpy(buf, src, n);
	*len = n;
	return 0;
}

/* fi_av_straddr: "opx://host/lid:ctx:unit/nonce" natively; in the socket
 * formats the form libfabric's own providers print (ofi_straddr). */
const char *opx_addr_str(uint32_t fmt, const void *addr, char *buf, size_t *len)
{
	char ip[INET_ADDRSTRLEN];
	int n;

	if (!addr || !len || (!buf && *len))
		return NULL;
	if (opx_addr_is_sock(fmt)) {
		struct sockaddr_in sin;

		if (opx_addr_family(addr) != AF_INET)
			return NULL;
		memcpy(&sin, addr, sizeof(sin));
		if (!inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip)))
			return NULL;
		n = snprintf(buf, *len, "fi_sockaddr_in://%s:%u", ip, (unsigned)ntohs(sin.sin_port));
	} else {
		struct shim_addr a;

		memcpy(&a, addr, sizeof(a));
		n = snprintf(buf, *len, "opx://%" PRIx64 "/%u:%u:%u/%" PRIx32, a.host_id, a.lid,
			     a.ctx, a.unit, a.nonce);
	}
	if (n < 0)
		return NULL;
	*len = (size_t)n + 1;
	return buf;
}

/* Context i of a scalable endpoint (opx_sep.c): the numbers of its first
 * plus i, so that one name carries them all. */
void opx_addr_sep_ctx(const struct shim_addr *base, unsigned int i, struct shim_addr *out)
{
	*out = *base;
	out->sep = 0;
	out->ctx = (uint16_t)(base->ctx + i);
	out->nonce = base->nonce + i;
	if (base->udp_port)
		out->udp_port = htons((uint16_t)(ntohs(base->udp_port) + i));
}
