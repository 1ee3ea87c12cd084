/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_ep.c - the RDM endpoint object: open (a receive context from the
 * shim), bind, enable, names, options, cancel, close; and the -FI_ENOSYS
 * table for collectives, which opx does not advertise, so that calling
 * them is an error, not a crash (RMA and atomics: opx_rma.c, opx_atomic.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <string.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>

#include "opx_addr.h"
#include "opx_cq.h"
#include "opx_ep.h"
#include "opx_rel.h"
#include "opx_rma.h"
#include "opx_rndv_api.h"
#include "opx_rx.h"
#include "opx_sep.h"
#include "opx_stats.h"

#define OPX_MIN_MULTI_RECV_DEFAULT 16384

/* Yama's ptrace_scope (0..3), or -1 where Yama is not built in. */
static int opx_ep_yama_scope(void)
{
	char buf[8] = {0};
	ssize_t n;
	int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && buf[0] >= '0' && buf[0] <= '3' ? buf[0] - '0' : -1;
}

/* Counters an endpoint can be bound to, by fi_ep_bind flag. */
#define OPX_EP_CNTRS 6
#define OPX_EP_CNTR_FLAGS                                                                          \
	(FI_SEND | FI_RECV | FI_WRITE | FI_READ | FI_REMOTE_WRITE | FI_REMOTE_READ)
static const uint64_t opx_ep_cntr_bit[OPX_EP_CNTRS] = {FI_SEND,	 FI_RECV,	  FI_WRITE,
						       FI_READ,	 FI_REMOTE_WRITE, FI_REMOTE_READ};

static void opx_ep_cntr_slots(struct opx_ep *ep, struct opx_cntr **slot[OPX_EP_CNTRS])
{
	slot[0] = &ep->send_cntr;
	slot[1] = &ep->recv_cntr;
	slot[2] = &ep->rma_st.write_cntr;
	slot[3] = &ep->rma_st.read_cntr;
	slot[4] = &ep->rma_st.rwrite_cntr;
	slot[5] = &ep->rma_st.rread_cntr;
}

/* One line at FI_LOG_LEVEL=info: what this endpoint got and why, so a
 * user can see the unit, NUMA node, wire, thresholds and job key source. */
static void opx_ep_log_open(const struct opx_ep *ep, const struct opx_domain *domain)
{
	struct shim_unit_info ui = {0};

	if (!fi_log_enabled(&opx_prov, FI_LOG_INFO, FI_LOG_EP_CTRL))
		return;
	(void)shim_dev_unit_info(domain->fabric->dev, ep->addr.unit, &ui);
	OPX_INFO(FI_LOG_EP_CTRL,
		 "endpoint: unit %u (numa node %d, %s) lid %u ctx %u, wire %s, mtu %zu, "
		 "inject <= %zu, eager <= %u (from udp peers %u), rendezvous %s%s, job key "
		 "0x%04x from %s\n",
		 ep->addr.unit, ui.numa_node, opx_env.unit >= 0 ? "FI_OPX_UNIT" : "nearest",
		 ep->addr.lid, ep->addr.ctx, ep->udp ? "shm + udp" : "shm", opx_env.mtu,
		 opx_env.inject_size, ep->rx_lim.rx_eager_max, ep->rx_lim.rx_eager_max_udp,
		 opx_env.rndv_cma ? "CMA pull" : "SDMA/TID push",
		 opx_env.rndv_cma && opx_env.rndv_split ? ", split copy from FI_OPX_RNDV_SPLIT" : "",
		 (unsigned int)opx_env.jkey, opx_param_jkey_src_name(opx_env.jkey_src));
}

/* Detach from the CQs and counters bound (outside the domain lock: CQ and
 * counter take it themselves). */
static void opx_ep_detach(struct opx_ep *ep)
{
	/* each distinct counter was attached once */
	struct opx_cntr **slot[OPX_EP_CNTRS];

	if (ep->tx_cq)
		opx_cq_detach_ep(ep->tx_cq, ep);
	if (ep->rx_cq && ep->rx_cq != ep->tx_cq)
		opx_cq_detach_ep(ep->rx_cq, ep);
	opx_ep_cntr_slots(ep, slot);
	for (size_t i = 0; i < OPX_EP_CNTRS; i++) {
		bool first = *slot[i] != NULL;
		for (size_t j = 0; j < i && first; j++)
			first = *slot[j] != *slot[i];
		if (first)
			opx_cntr_detach_ep(*slot[i], ep);
	}
}

void opx_ep_disable(struct opx_ep *ep)
{
	struct opx_cntr **slot[OPX_EP_CNTRS];

	opx_lock_acquire(&ep->domain->lock);
	if (ep->enabled)
		opx_auto_remove_locked(ep->domain, ep);
	ep->enabled = false;
	opx_lock_release(&ep->domain->lock);
	opx_ep_detach(ep);
	ep->tx_cq = NULL;
	ep->rx_cq = NULL;
	ep->tx_selective = false;
	ep->rx_selective = false;
	opx_ep_cntr_slots(ep, slot);
	for (size_t i = 0; i < OPX_EP_CNTRS; i++)
		*slot[i] = NULL;
}

static int opx_ep_close(struct fid *fid)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	struct opx_domain *domain = ep->domain;

	opx_stats_ep_close(ep); /* FI_OPX_STATS */
	opx_lock_acquire(&domain->lock);
	if (ep->enabled)
		opx_auto_remove_locked(domain, ep); /* the progress thread lets go */
	if (ep->rndv_st.rndv_busy)
		OPX_INFO(FI_LOG_EP_CTRL, "closing endpoint with %zu rendezvous sends pending\n",
			 ep->rndv_st.rndv_busy);
	opx_lock_release(&domain->lock);

	opx_ep_detach(ep);

	opx_lock_acquire(&domain->lock);
	opx_mr_ep_close_locked(ep); /* no peer copies with its table any more */
	opx_rel_linger(ep);
	ep->enabled = false;
	opx_rel_fini(ep);
	if (ep->av)
		atomic_fetch_sub(&ep->av->refcnt, 1);
	if (ep->av && ep->av->udp_via == ep->shim)
		ep->av->udp_via = NULL; /* its udp peers die with the socket */
	opx_match_cleanup(ep);
	opx_rndv_fini(ep);
	opx_rma_fini(ep);
	opx_av_udp_peers_close(ep);
	opx_lock_release(&domain->lock);

	if (ep->svc_port) {
		struct shim_addr name = ep->addr;

		name.sep = ep->svc_sep;
		shim_svc_release(domain->fabric->dev, ep->svc_port, &name);
	}
	shim_ctx_close(ep->shim);
	atomic_fetch_sub(&domain->refcnt, 1);
	free(ep);
	return 0;
}

/* An info whose src_addr carries an IPv4 and a port (fi_getinfo with
 * FI_SOURCE and a service) makes the endpoint reachable there: the name
 * carries both, and the port is claimed in the shim's service registry
 * so fi_av_insert of an address naming it finds this endpoint. */
static int opx_ep_claim_src(struct opx_ep *ep, const struct fi_info *info,
			    const struct opx_ep_at *at)
{
	const struct shim_addr *src = info->src_addr;
	struct shim_addr name;
	uint32_t ip = 0;
	uint16_t port = 0;
	int rc;

	if (!src || info->src_addrlen != sizeof(*src) ||
	    (info->addr_format != FI_ADDR_OPX && info->addr_format != FI_FORMAT_UNSPEC))
		src = NULL;
	if (src) {
		ip = src->ipv4 && shim_dev_host_has_ipv4(src->ipv4) ? src->ipv4 : 0;
		port = src->udp_port;
	}
	if (at && !at->first) {
		/* a scalable endpoint's later context: next to the first */
		ip = at->ipv4;
		port = at->port;
		src = NULL;
		if (!at->udp)
			return 0;
	}
	/* The udp wire: the context's socket, on the service port if asked. */
	rc = shim_udp_open(ep->shim, ip, port);
	if (!rc) {
		ep->udp = true;
		shim_udp_watch(ep->shim, opx_rel_keepalive_ns());
		shim_ctx_addr(ep->shim, &ep->addr);
	} else if (at && !at->first) {
		return opx_init_err_from_shim(rc); /* the caller tries other ports */
	} else if (rc != -ENODEV || opx_env.wire != SHIM_WIRE_SHM) {
		OPX_WARN(FI_LOG_EP_CTRL, "no udp wire (port %u): %s; this host's peers only\n",
			 (unsigned)ntohs(port), strerror(-rc));
		if (port && rc == -EADDRINUSE)
			return -FI_EADDRINUSE;
	}
	if (!src)
		return 0;
	if (!ep->udp) {
		ep->addr.ipv4 = src->ipv4;
		ep->addr.udp_port = src->udp_port;
	}
	if (!src->udp_port)
		return 0;
	name = ep->addr;
	if (at) /* a scalable endpoint is found by its whole name */
		ep->svc_sep = name.sep = at->sep;
	rc = shim_svc_claim(ep->domain->fabric->dev, ntohs(src->udp_port), &name);
	if (rc) {
		OPX_WARN(FI_LOG_EP_CTRL, "cannot claim service port %u: %s\n",
			 (unsigned)ntohs(src->udp_port), shim_dev_strerror(rc));
		return opx_init_err_from_shim(rc);
	}
	ep->svc_port = ntohs(src->udp_port);
	return 0;
}

/* A socket-format endpoint (FI_SOCKADDR_IN, FI_SOCKADDR) is named by its
 * udp socket, so it must have one: at the src_addr's address and port
 * when the info gives them (address 0: the interface the device chose,
 * port 0: any).  Its port is served in the shim's registry as well, so
 * that a peer of this host that inserts the name reaches it over shared
 * memory.  No socket (a shm-only wire, the port taken) fails the open:
 * fi_getinfo offers these formats only where the udp wire is on. */
static int opx_ep_claim_sock(struct opx_ep *ep, const struct fi_info *info)
{
	struct shim_addr src = {0};
	uint16_t port;
	int rc;

	if (info->src_addr) {
		if (opx_addr_sin_check(info->src_addr, info->src_addrlen, false, "fi_endpoint src_addr"))
			return -FI_EINVAL;
		opx_addr_from_sin(0, info->src_addr, &src);
		if (src.ipv4 && !shim_dev_host_has_ipv4(src.ipv4)) {
			OPX_WARN(FI_LOG_EP_CTRL, "src_addr %s is not an address of this host\n",
				 inet_ntoa((struct in_addr){.s_addr = src.ipv4}));
			return -FI_EADDRNOTAVAIL;
		}
	}
	rc = shim_udp_open(ep->shim, src.ipv4, src.udp_port);
	if (rc) {
		OPX_WARN(FI_LOG_EP_CTRL, "%s needs a udp socket, and there is none (%s:%u): %s\n",
			 opx_addr_format_name(ep->domain->addr_format),
			 inet_ntoa((struct in_addr){.s_addr = src.ipv4}), (unsigned)ntohs(src.udp_port),
			 rc == -ENODEV ? "no udp wire here (FI_OPX_WIRE=shm, a launcher that keeps "
					 "the job on this host, or no udp wire secret)"
				       : strerror(-rc));
		return rc == -ENODEV ? -FI_ENODEV : opx_init_err_from_shim(rc);
	}
	ep->udp = true;
	shim_udp_watch(ep->shim, opx_rel_keepalive_ns());
	shim_ctx_addr(ep->shim, &ep->addr);
	port = ntohs(ep->addr.udp_port);
	rc = shim_svc_claim(ep->domain->fabric->dev, port, &ep->addr);
	if (rc) {
		/* a live endpoint of ours serves the port without a socket on
		 * it (a shm-only one), or on another address of this host */
		OPX_WARN(FI_LOG_EP_CTRL, "cannot serve port %u to this host's peers: %s\n",
			 (unsigned)port, shim_dev_strerror(rc));
		return opx_init_err_from_shim(rc);
	}
	ep->svc_port = port;
	return 0;
}

static int opx_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	int rc = 0;

	if (!bfid)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;

	switch (bfid->fclass) {
	case FI_CLASS_AV: {
		struct opx_av *av = OPX_CONTAINER_OF(bfid, struct opx_av, av_fid.fid);
		if (av->domain != ep->domain)
			return -FI_EINVAL;
		if (ep->av)
			return -FI_EINVAL;
		ep->av = av;
		atomic_fetch_add(&av->refcnt, 1);
		if (!av->udp_via && ep->udp)
			av->udp_via = ep->shim;
		return 0;
	}
	case FI_CLASS_CQ: {
		struct opx_cq *cq = OPX_CONTAINER_OF(bfid, struct opx_cq, cq_fid.fid);
		if (cq->domain != ep->domain)
			return -FI_EINVAL;
		if (!(flags & (FI_TRANSMIT | FI_RECV)) ||
		    (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)))
			return -FI_EBADFLAGS;
		if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
			return -FI_EINVAL;
		if (cq != ep->tx_cq && cq != ep->rx_cq) {
			rc = opx_cq_attach_ep(cq, ep);
			if (rc)
				return rc;
		}
		if (flags & FI_TRANSMIT) {
			ep->tx_cq = cq;
			ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
		}
		if (flags & FI_RECV) {
			ep->rx_cq = cq;
			ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
		}
		return 0;
	}
	case FI_CLASS_CNTR: {
		struct opx_cntr *cntr = OPX_CONTAINER_OF(bfid, struct opx_cntr, cntr_fid.fid);
		struct opx_cntr **slot[OPX_EP_CNTRS];
		bool attached = false;
		size_t i;

		if (cntr->domain != ep->domain)
			return -FI_EINVAL;
		if (!(flags & OPX_EP_CNTR_FLAGS) || (flags & ~OPX_EP_CNTR_FLAGS))
			return -FI_EBADFLAGS;
		opx_ep_cntr_slots(ep, slot);
		for (i = 0; i < OPX_EP_CNTRS; i++) {
			if ((flags & opx_ep_cntr_bit[i]) && *slot[i])
				return -FI_EINVAL;
			attached |= *slot[i] == cntr;
		}
		if (!attached) {
			rc = opx_cntr_attach_ep(cntr, ep);
			if (rc)
				return rc;
		}
		for (i = 0; i < OPX_EP_CNTRS; i++)
			if (flags & opx_ep_cntr_bit[i])
				*slot[i] = cntr;
		return 0;
	}
	case FI_CLASS_EQ:
		ep->eq = OPX_CONTAINER_OF(bfid, struct fid_eq, fid);
		return 0;
	default:
		return -FI_EINVAL;
	}
}

static int opx_ep_control(struct fid *fid, int command, void *arg)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		if (!ep->av)
			return -FI_ENOAV;
		/* a scalable endpoint's transmit and receive contexts have
		 * one side each (opx_sep.c); a receive context may have no
		 * CQ at all: a one-sided target (Open MPI's btl ofi enables
		 * one so), whose receives are refused (opx_match_recv_locked) */
		if ((ep->sep_role != OPX_SEP_RX && !ep->tx_cq && !ep->send_cntr) ||
		    (!ep->sep_role && !ep->rx_cq && !ep->recv_cntr))
			return -FI_ENOCQ;
		opx_lock_acquire(&ep->domain->lock);
		if (!ep->enabled) {
			int rc = opx_auto_add_locked(ep->domain, ep);

			if (rc) {
				opx_lock_release(&ep->domain->lock);
				return rc;
			}
		}
		ep->enabled = true;
		opx_mr_ep_enable_locked(ep); /* peers may copy by themselves now */
		opx_lock_release(&ep->domain->lock);
		return 0;
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV))
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			*flags = ep->tx_op_flags;
		else if (*flags & FI_RECV)
			*flags = ep->rx_op_flags;
		else
			return -FI_EINVAL;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			ep->tx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		else if (*flags & FI_RECV)
			ep->rx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		else
			return -FI_EINVAL;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

struct fi_ops opx_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_ep_close,
	.bind = opx_ep_bind,
	.control = opx_ep_control,
	.ops_open = opx_stats_ops_open,
};

static ssize_t opx_ep_cancel(fid_t fid, void *context)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	int rc;

	if (!context)
		return -FI_EINVAL;
	opx_lock_acquire(&ep->domain->lock);
	rc = opx_match_cancel_locked(ep, context);
	opx_lock_release(&ep->domain->lock);
	return rc;
}

static int opx_ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen)
		return -FI_EINVAL;
	if (*optlen < sizeof(size_t)) {
		*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	*(size_t *)optval = ep->min_multi_recv;
	*optlen = sizeof(size_t);
	return 0;
}

static int opx_ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	ep->min_multi_recv = *(const size_t *)optval;
	return 0;
}

static int opx_ep_no_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
			     struct fid_ep **ep, void *context)
{
	(void)sep, (void)index, (void)attr, (void)ep, (void)context;
	return -FI_ENOSYS;
}

static int opx_ep_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
				struct fid_ep **ep, void *context)
{
	(void)sep, (void)index, (void)attr, (void)ep, (void)context;
	return -FI_ENOSYS;
}

static ssize_t opx_ep_no_size_left(struct fid_ep *ep)
{
	(void)ep;
	return -FI_ENOSYS;
}

static struct fi_ops_ep opx_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = opx_ep_cancel,
	.getopt = opx_ep_getopt,
	.setopt = opx_ep_setopt,
	.tx_ctx = opx_ep_no_ctx,
	.rx_ctx = opx_ep_no_rx_ctx,
	.rx_size_left = opx_ep_no_size_left,
	.tx_size_left = opx_ep_no_size_left,
};

/* ---------------------------------------------------------------------
 * Names, in the domain's address format (opx_addr.c): a struct shim_addr
 * (32 bytes), or the udp socket's struct sockaddr_in.
 */
static int opx_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);

	if (!addrlen)
		return -FI_EINVAL;
	/* man fi_cm: a short buffer gets the address truncated */
	return opx_addr_export(ep->domain->addr_format, &ep->addr, addr, addrlen);
}

/* The receive context is assigned by the shim, and the socket is bound
 * at open, so the only name an endpoint can take is the one it has. */
static int opx_ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(fid, struct opx_ep, ep_fid.fid);
	uint8_t name[sizeof(ep->addr)];
	size_t len = sizeof(name);

	if (!addr)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	(void)opx_addr_export(ep->domain->addr_format, &ep->addr, name, &len);
	if (addrlen != len)
		return -FI_EINVAL;
	return memcmp(addr, name, len) ? -FI_EINVAL : 0;
}

static int opx_ep_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep, (void)addr, (void)addrlen;
	return -FI_ENOSYS;
}

static int opx_ep_no_connect(struct fid_ep *ep, const void *addr, const void *param,
			     size_t paramlen)
{
	(void)ep, (void)addr, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

static int opx_ep_no_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}

static int opx_ep_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void)ep, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

static int opx_ep_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
			    size_t paramlen)
{
	(void)pep, (void)handle, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

static int opx_ep_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep, (void)flags;
	return -FI_ENOSYS;
}

static int opx_ep_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
			  void *context)
{
	(void)ep, (void)addr, (void)flags, (void)mc, (void)context;
	return -FI_ENOSYS;
}

static struct fi_ops_cm opx_ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = opx_ep_setname,
	.getname = opx_ep_getname,
	.getpeer = opx_ep_no_getpeer,
	.connect = opx_ep_no_connect,
	.listen = opx_ep_no_listen,
	.accept = opx_ep_no_accept,
	.reject = opx_ep_no_reject,
	.shutdown = opx_ep_no_shutdown,
	.join = opx_ep_no_join,
};

/* ---------------------------------------------------------------------
 * Operations not advertised: -FI_ENOSYS.
 */
/* The stubs below take the full signatures and use none of them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

static ssize_t opx_ep_coll_no_barrier(struct fid_ep *ep, fi_addr_t coll_addr, void *ctx)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_broadcast(struct fid_ep *ep, void *buf, size_t count, void *desc,
					fi_addr_t coll_addr, fi_addr_t root_addr,
					enum fi_datatype dt, uint64_t flags, void *ctx)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_all(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				  void *result, void *result_desc, fi_addr_t coll_addr,
				  enum fi_datatype dt, uint64_t flags, void *ctx)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_reduce_all(struct fid_ep *ep, const void *buf, size_t count,
					 void *desc, void *result, void *result_desc,
					 fi_addr_t coll_addr, enum fi_datatype dt, enum fi_op op,
					 uint64_t flags, void *ctx)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_reduce(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				     void *result, void *result_desc, fi_addr_t coll_addr,
				     fi_addr_t root_addr, enum fi_datatype dt, enum fi_op op,
				     uint64_t flags, void *ctx)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_rooted(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				     void *result, void *result_desc, fi_addr_t coll_addr,
				     fi_addr_t root_addr, enum fi_datatype dt, uint64_t flags,
				     void *ctx)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_msg(struct fid_ep *ep, const struct fi_msg_collective *msg,
				  struct fi_ioc *resultv, void **result_desc, size_t result_count,
				  uint64_t flags)
{
	return -FI_ENOSYS;
}
static ssize_t opx_ep_coll_no_barrier2(struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags,
				       void *ctx)
{
	return -FI_ENOSYS;
}

#pragma GCC diagnostic pop

static struct fi_ops_collective opx_ep_coll_ops = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = opx_ep_coll_no_barrier,
	.broadcast = opx_ep_coll_no_broadcast,
	.alltoall = opx_ep_coll_no_all,
	.allreduce = opx_ep_coll_no_reduce_all,
	.allgather = opx_ep_coll_no_all,
	.reduce_scatter = opx_ep_coll_no_reduce_all,
	.reduce = opx_ep_coll_no_reduce,
	.scatter = opx_ep_coll_no_rooted,
	.gather = opx_ep_coll_no_rooted,
	.msg = opx_ep_coll_no_msg,
	.barrier2 = opx_ep_coll_no_barrier2,
};

/* ---------------------------------------------------------------------
 * Open.
 */
int opx_ep_open(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **epp, void *context)
{
	struct opx_domain *domain;
	struct opx_ep *ep;
	int rc;

	if (!fdom || !info || !epp)
		return -FI_EINVAL;
	domain = OPX_CONTAINER_OF(fdom, struct opx_domain, domain_fid);
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	/* more than one context of a kind is fi_scalable_ep's */
	if (info->ep_attr && (info->ep_attr->tx_ctx_cnt > 1 || info->ep_attr->rx_ctx_cnt > 1)) {
		OPX_INFO(FI_LOG_EP_CTRL, "fi_endpoint: %zu transmit and %zu receive contexts "
					 "need fi_scalable_ep\n",
			 info->ep_attr->tx_ctx_cnt, info->ep_attr->rx_ctx_cnt);
		return -FI_EINVAL;
	}
	rc = opx_ep_create(domain, info, NULL, context, &ep);
	if (rc)
		return rc;
	*epp = &ep->ep_fid;
	return 0;
}

/* What every endpoint fid starts with (opx_ep_create, opx_ep_shell): its
 * empty queues and its operation tables. */
static void opx_ep_init_fid(struct opx_ep *ep, size_t fclass, void *context)
{
	ep->rx_st.last_src = FI_ADDR_NOTAVAIL;
	opx_list_init(&ep->rndv_st.ctl_pend);
	opx_list_init(&ep->match.posted_tag);
	opx_list_init(&ep->match.posted_msg);
	opx_list_init(&ep->match.ux_tag);
	opx_list_init(&ep->match.ux_msg);
	opx_list_init(&ep->match.req_free);
	opx_list_init(&ep->match.ux_free);
	ep->ep_fid.fid.fclass = fclass;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &opx_ep_fi_ops;
	ep->ep_fid.ops = &opx_ep_ops;
	ep->ep_fid.cm = &opx_ep_cm_ops;
	ep->ep_fid.msg = &opx_ops_msg;
	ep->ep_fid.tagged = &opx_ops_tagged;
	ep->ep_fid.rma = &opx_ops_rma;
	ep->ep_fid.atomic = &opx_ops_atomic;
	ep->ep_fid.collective = &opx_ep_coll_ops;
}

int opx_ep_create(struct opx_domain *domain, const struct fi_info *info,
		  const struct opx_ep_at *at, void *context, struct opx_ep **epp)
{
	struct hfi1_ctxt_info cinfo;
	struct hfi1_base_info binfo;
	struct opx_ep *ep;
	int rc;

	if (info->caps & ~(OPX_CAPS | FI_MSG | FI_TAGGED))
		return -FI_EOPNOTSUPP;
	/* names follow the domain's format (opx_addr.c): one per domain */
	if (info->addr_format != FI_FORMAT_UNSPEC && info->addr_format != domain->addr_format) {
		OPX_WARN(FI_LOG_EP_CTRL, "info addr_format %s differs from its domain's %s\n",
			 opx_addr_format_name(info->addr_format),
			 opx_addr_format_name(domain->addr_format));
		return -FI_EINVAL;
	}

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	rc = shim_ctx_open_at(domain->fabric->dev, domain->unit, at ? at->ctx : -1,
			      at ? at->nonce : 0, &ep->shim, &cinfo, &binfo);
	if (rc) {
		if (!at || at->first)
			OPX_WARN(FI_LOG_EP_CTRL, "no receive context on unit %d: %s\n",
				 domain->unit, shim_dev_strerror(rc));
		free(ep);
		return opx_init_err_from_shim(rc);
	}
	rc = opx_rndv_init(ep);
	if (rc) {
		shim_ctx_close(ep->shim);
		free(ep);
		return rc;
	}
	ep->rx = shim_ctx_rx(ep->shim);
	shim_ctx_addr(ep->shim, &ep->addr);
	opx_rx_advertise(ep); /* before the address is given out */
	ep->jkey = (uint16_t)binfo.jkey;
	ep->pid = (uint32_t)getpid();
	ep->domain = domain;
	if (at)
		ep->sep_role = at->role;
	rc = opx_addr_is_sock(domain->addr_format) ? opx_ep_claim_sock(ep, info)
						    : opx_ep_claim_src(ep, info, at);
	if (rc) {
		opx_rndv_fini(ep);
		shim_ctx_close(ep->shim);
		free(ep);
		return rc;
	}
	opx_ep_log_open(ep, domain);
	ep->caps = info->caps ? info->caps : OPX_CAPS & ~OPX_CAPS_ASKED_ONLY;
	ep->source_err = (ep->caps & (FI_SOURCE | FI_SOURCE_ERR)) == (FI_SOURCE | FI_SOURCE_ERR);
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	if ((info->mode & FI_MSG_PREFIX) && info->ep_attr)
		ep->msg_prefix = info->ep_attr->msg_prefix_size;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ep->min_multi_recv = OPX_MIN_MULTI_RECV_DEFAULT;
	opx_ep_init_fid(ep, FI_CLASS_EP, context);

	/* Let peers pull rendezvous data from us with Cross Memory Attach
	 * under Yama's ptrace_scope=1.  It lets any process of the user
	 * attach to the whole application, so only when CMA is on and Yama
	 * is in the one mode where it helps (2 and 3 ignore it). */
	if (opx_env.rndv_cma && opx_ep_yama_scope() == 1) {
		OPX_INFO(FI_LOG_EP_CTRL, "Yama ptrace_scope 1: PR_SET_PTRACER_ANY for CMA\n");
		(void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	}

	atomic_fetch_add(&domain->refcnt, 1);
	*epp = ep;
	return 0;
}

/* A scalable endpoint's own fid (opx_sep.c): an endpoint with no context
 * that is never enabled, so every data call on it fails with
 * -FI_EOPBADSTATE through the ordinary tables (fi_endpoint(3): a
 * scalable endpoint is not used for communication itself). */
struct opx_ep *opx_ep_shell(struct opx_domain *domain, const struct shim_addr *name, void *context)
{
	struct opx_ep *ep = calloc(1, sizeof(*ep));

	if (!ep)
		return NULL;
	ep->domain = domain;
	ep->addr = *name;
	opx_ep_init_fid(ep, FI_CLASS_SEP, context);
	return ep;
}
