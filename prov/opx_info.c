/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_info.c - fi_getinfo: describe what opx really supports and filter
 * it by the application's hints.
 *
 * The rule from fi_getinfo(3): a non-zero hint is a requirement.  Every
 * hint we cannot meet yields -FI_ENODATA with one FI_LOG_LEVEL=info line
 * naming the attribute, so "why is opx not selected?" has an answer in
 * the log.  Allocation goes through fi_allocinfo/fi_freeinfo so the core
 * (and applications) free what we return.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opx.h"
#include "opx_addr.h"

/* In opx_init.c; see the note there.  fi_prov_ini has no prototype in
 * fi_prov.h (only the FI_EXT_INI definition macro). */
struct fi_provider *fi_prov_ini(void);

/*
 * Tag format.  Open MPI's ofi MTL (4.1 and later) counts the leading zero
 * bits of ep_attr->mem_tag_format and removes one communicator-id bit per
 * zero bit (too few bits and the MTL refuses the provider).  Libfabric's
 * historical FI_TAG_GENERIC (0xAAAA...) and all-ones both have the top bit
 * set; FI_TAG_GENERIC >> 1 would cost the MTL one bit.  Our matching
 * engine compares all 64 tag bits with no provider-reserved bits, so we
 * advertise all 64 as application tag bits.
 */
#define OPX_MEM_TAG_FORMAT UINT64_MAX

#define OPX_DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define OPX_CQ_CNT 64
#define OPX_CNTR_CNT 64
#define OPX_MR_CNT 65536
#define OPX_MR_KEY_SIZE 8
#define OPX_PROTO_VERSION 1
/* fi_endpoint(3): an order size of -1 guarantees ordering for any size. */
#define OPX_ORDER_SIZE SIZE_MAX

/* fi_getinfo(3): primary caps must be asked for explicitly; secondary
 * caps may be reported unasked when they cost nothing. */
#define OPX_PRIMARY_CAPS (FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_RMA | FI_ATOMIC)
/* Secondary capabilities that cost nothing on our data path: the shm and
 * udp wires are both always present in the model. */
#define OPX_FREE_SECONDARY_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)

#define OPX_TX_OP_FLAGS                                                                            \
	(FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |                   \
	 FI_DELIVERY_COMPLETE)
#define OPX_RX_OP_FLAGS (FI_COMPLETION | FI_MULTI_RECV)

/* What the device offers this process, from one probe. */
struct opx_info_dev {
	int unit;         /* the unit it would use */
	uint64_t host_id;
	uint32_t udp_ip;  /* the udp wire's IPv4 (network order), 0: no udp wire */
};

/* Probe the device: the unit this process would use, or a -FI_E* code.
 * The device is reference counted by the shim, so this is cheap when a
 * fabric is already open. */
static int opx_info_probe(struct opx_info_dev *d)
{
	struct shim_dev *dev;
	int ret;

	ret = opx_init_dev_open(&dev);
	if (ret) {
		OPX_WARN(FI_LOG_CORE, "no usable SuperNIC device: %s\n", fi_strerror(-ret));
		return ret;
	}
	ret = shim_dev_select_unit(dev);
	d->host_id = shim_dev_host_id(dev);
	if (shim_udp_probe(dev, &d->udp_ip))
		d->udp_ip = 0;
	shim_dev_close(dev);
	if (ret < 0) {
		OPX_WARN(FI_LOG_CORE, "no active unit: %s\n", shim_dev_strerror(ret));
		return opx_init_err_from_shim(ret);
	}
	d->unit = ret;
	return 0;
}

static struct fi_info *opx_info_build(int unit, uint32_t version)
{
	struct fi_info *fi;
	char name[32];

	fi = fi_allocinfo();
	if (!fi)
		return NULL;
	snprintf(name, sizeof(name), "opx_%d", unit);

	fi->caps = OPX_CAPS & ~OPX_CAPS_ASKED_ONLY;
	fi->mode = 0;
	fi->addr_format = FI_ADDR_OPX;
	fi->src_addr = NULL;
	fi->src_addrlen = 0;
	fi->nic = NULL;

	fi->tx_attr->caps = OPX_TX_CAPS;
	fi->tx_attr->mode = 0;
	fi->tx_attr->op_flags = 0;
	fi->tx_attr->msg_order = OPX_MSG_ORDER;
	fi->tx_attr->comp_order = FI_ORDER_NONE;
	fi->tx_attr->inject_size = opx_env.inject_size;
	fi->tx_attr->size = OPX_TX_SIZE;
	fi->tx_attr->iov_limit = OPX_IOV_LIMIT;
	fi->tx_attr->rma_iov_limit = 1; /* fi_writemsg/readmsg/atomicmsg: one remote range */

	fi->rx_attr->caps = OPX_RX_CAPS & ~OPX_CAPS_ASKED_ONLY;
	fi->rx_attr->mode = 0;
	fi->rx_attr->op_flags = 0;
	fi->rx_attr->msg_order = OPX_MSG_ORDER;
	fi->rx_attr->comp_order = FI_ORDER_NONE;
	fi->rx_attr->total_buffered_recv = opx_env.ux_max_bytes;
	fi->rx_attr->size = OPX_RX_SIZE;
	fi->rx_attr->iov_limit = OPX_IOV_LIMIT;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_OPX;
	fi->ep_attr->protocol_version = OPX_PROTO_VERSION;
	fi->ep_attr->max_msg_size = opx_env.max_msg_size;
	fi->ep_attr->msg_prefix_size = 0;
	/* msg_order offers RAW/WAR/WAW: one-sided operations to a target run
	 * there in posting order whatever their size (opx_rma.c), so the
	 * data ordering holds for any size: -1 in fi_endpoint(3). */
	fi->ep_attr->max_order_raw_size = OPX_ORDER_SIZE;
	fi->ep_attr->max_order_war_size = OPX_ORDER_SIZE;
	fi->ep_attr->max_order_waw_size = OPX_ORDER_SIZE;
	fi->ep_attr->mem_tag_format = OPX_MEM_TAG_FORMAT;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	fi->domain_attr->name = strdup(name);
	fi->domain_attr->threading = FI_THREAD_DOMAIN;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
	fi->domain_attr->av_type = FI_AV_UNSPEC;
	fi->domain_attr->mr_mode = version < FI_VERSION(1, 5) ? FI_MR_SCALABLE : 0;
	fi->domain_attr->mr_key_size = OPX_MR_KEY_SIZE;
	fi->domain_attr->cq_data_size = OPX_CQ_DATA_SIZE;
	fi->domain_attr->cq_cnt = OPX_CQ_CNT;
	fi->domain_attr->ep_cnt = OPX_MAX_EPS;
	/* every context is a receive context of the unit (opx_sep.c) */
	fi->domain_attr->tx_ctx_cnt = OPX_MAX_EPS;
	fi->domain_attr->rx_ctx_cnt = OPX_MAX_EPS;
	fi->domain_attr->max_ep_tx_ctx = OPX_SEP_MAX_TX;
	fi->domain_attr->max_ep_rx_ctx = OPX_SEP_MAX_RX;
	fi->domain_attr->max_ep_stx_ctx = 0;
	fi->domain_attr->max_ep_srx_ctx = 0;
	fi->domain_attr->cntr_cnt = OPX_CNTR_CNT;
	fi->domain_attr->mr_iov_limit = OPX_IOV_LIMIT;
	fi->domain_attr->caps = OPX_DOMAIN_CAPS;
	fi->domain_attr->mode = 0;
	fi->domain_attr->mr_cnt = OPX_MR_CNT;

	fi->fabric_attr->name = strdup(OPX_FABRIC_NAME);
	/* prov_name stays NULL: the core fills it in (and would append to it,
	 * as for a utility provider, "opx;opx", if we set it). */
	fi->fabric_attr->prov_name = NULL;
	fi->fabric_attr->prov_version = OPX_PROV_VERSION;
	fi->fabric_attr->api_version = version;

	if (!fi->domain_attr->name || !fi->fabric_attr->name) {
		fi_freeinfo(fi);
		return NULL;
	}
	return fi;
}

struct fi_info *opx_info_template(void)
{
	struct opx_info_dev d;

	fi_prov_ini();
	if (opx_info_probe(&d))
		return NULL;
	return opx_info_build(d.unit, OPX_FI_VERSION);
}

/* ---------------------------------------------------------------------
 * Hint checks.  Each returns true when the hint can be met; on a miss it
 * logs which attribute failed (the caller returns -FI_ENODATA).
 */
#define OPX_NOMATCH(...)                                                                           \
	do {                                                                                       \
		OPX_INFO(FI_LOG_CORE, "hints not supported: " __VA_ARGS__);                        \
		return false;                                                                      \
	} while (0)

static bool opx_info_check_bits(const char *what, uint64_t asked, uint64_t have)
{
	if (asked & ~have)
		OPX_NOMATCH("%s 0x%llx outside supported 0x%llx\n", what,
			    (unsigned long long)(asked & ~have), (unsigned long long)have);
	return true;
}

static bool opx_info_check_max(const char *what, size_t asked, size_t have)
{
	if (asked > have)
		OPX_NOMATCH("%s %zu > supported %zu\n", what, asked, have);
	return true;
}

static bool opx_info_check_fabric(const struct fi_fabric_attr *h)
{
	if (!h)
		return true;
	if (h->name && strcmp(h->name, OPX_FABRIC_NAME))
		OPX_NOMATCH("fabric name '%s'\n", h->name);
	if (h->prov_name && strcmp(h->prov_name, OPX_PROV_NAME))
		OPX_NOMATCH("provider name '%s'\n", h->prov_name);
	return true;
}

static bool opx_info_check_ep(const struct fi_ep_attr *h, const struct fi_ep_attr *t)
{
	if (!h)
		return true;
	if (h->type != FI_EP_UNSPEC && h->type != FI_EP_RDM)
		OPX_NOMATCH("ep_attr.type %s (opx has FI_EP_RDM only)\n",
			    fi_tostr(&h->type, FI_TYPE_EP_TYPE));
	if (h->protocol != FI_PROTO_UNSPEC && h->protocol != FI_PROTO_OPX)
		OPX_NOMATCH("ep_attr.protocol %u\n", h->protocol);
	if (h->protocol_version > t->protocol_version)
		OPX_NOMATCH("ep_attr.protocol_version %u\n", h->protocol_version);
	if (!opx_info_check_max("ep_attr.max_msg_size", h->max_msg_size, t->max_msg_size) ||
	    !opx_info_check_max("ep_attr.msg_prefix_size", h->msg_prefix_size,
				OPX_MSG_PREFIX_SIZE) ||
	    !opx_info_check_max("ep_attr.max_order_raw_size", h->max_order_raw_size,
				t->max_order_raw_size) ||
	    !opx_info_check_max("ep_attr.max_order_war_size", h->max_order_war_size,
				t->max_order_war_size) ||
	    !opx_info_check_max("ep_attr.max_order_waw_size", h->max_order_waw_size,
				t->max_order_waw_size) ||
	    /* more than one: a scalable endpoint (opx_sep.c); FI_SHARED_CONTEXT
	     * (SIZE_MAX) is above every maximum */
	    !opx_info_check_max("ep_attr.tx_ctx_cnt", h->tx_ctx_cnt, OPX_SEP_MAX_TX) ||
	    !opx_info_check_max("ep_attr.rx_ctx_cnt", h->rx_ctx_cnt, OPX_SEP_MAX_RX) ||
	    !opx_info_check_max("ep_attr.auth_key_size", h->auth_key_size, 0))
		return false;
	return true;
}

/* Every completion level is honoured for sends (opx_msg.c) and one-sided
 * operations (opx_rma.c, which always complete once the target has placed
 * the data): the op flags accepted do not depend on the capabilities. */
static uint64_t opx_info_tx_op_flags(uint64_t caps)
{
	(void)caps;
	return OPX_TX_OP_FLAGS;
}

static bool opx_info_check_tx(const struct fi_tx_attr *h, const struct fi_tx_attr *t, uint64_t caps)
{
	if (!h)
		return true;
	return opx_info_check_bits("tx_attr.caps", h->caps, t->caps) &&
	       opx_info_check_bits("tx_attr.op_flags", h->op_flags, opx_info_tx_op_flags(caps)) &&
	       opx_info_check_bits("tx_attr.msg_order", h->msg_order, t->msg_order) &&
	       opx_info_check_bits("tx_attr.comp_order", h->comp_order, t->comp_order) &&
	       opx_info_check_max("tx_attr.inject_size", h->inject_size, t->inject_size) &&
	       opx_info_check_max("tx_attr.size", h->size, t->size) &&
	       opx_info_check_max("tx_attr.iov_limit", h->iov_limit, t->iov_limit) &&
	       opx_info_check_max("tx_attr.rma_iov_limit", h->rma_iov_limit, t->rma_iov_limit);
}

static bool opx_info_check_rx(const struct fi_rx_attr *h, const struct fi_rx_attr *t)
{
	if (!h)
		return true;
	return opx_info_check_bits("rx_attr.caps", h->caps, t->caps | OPX_CAPS_ASKED_ONLY) &&
	       opx_info_check_bits("rx_attr.op_flags", h->op_flags, OPX_RX_OP_FLAGS) &&
	       opx_info_check_bits("rx_attr.msg_order", h->msg_order, t->msg_order) &&
	       opx_info_check_bits("rx_attr.comp_order", h->comp_order, t->comp_order) &&
	       opx_info_check_max("rx_attr.total_buffered_recv", h->total_buffered_recv,
				  t->total_buffered_recv) &&
	       opx_info_check_max("rx_attr.size", h->size, t->size) &&
	       opx_info_check_max("rx_attr.iov_limit", h->iov_limit, t->iov_limit);
}

static bool opx_info_check_domain(const struct fi_domain_attr *h, const struct fi_domain_attr *t)
{
	if (!h)
		return true;
	if (h->name && strcmp(h->name, t->name))
		OPX_NOMATCH("domain name '%s' (ours: '%s')\n", h->name, t->name);
	switch (h->threading) {
	case FI_THREAD_UNSPEC:
	case FI_THREAD_SAFE:
	case FI_THREAD_FID:
	case FI_THREAD_DOMAIN:
	case FI_THREAD_COMPLETION:
	case FI_THREAD_ENDPOINT:
		break;
	default:
		OPX_NOMATCH("domain_attr.threading %d\n", (int)h->threading);
	}
	/* Manual progress by default; AUTO when asked for: a progress thread
	 * per domain (opx_auto.c). */
	if (h->control_progress != FI_PROGRESS_UNSPEC &&
	    h->control_progress != FI_PROGRESS_MANUAL && h->control_progress != FI_PROGRESS_AUTO)
		OPX_NOMATCH("domain_attr.control_progress %s\n",
			    fi_tostr(&h->control_progress, FI_TYPE_PROGRESS));
	if (h->data_progress != FI_PROGRESS_UNSPEC && h->data_progress != FI_PROGRESS_MANUAL &&
	    h->data_progress != FI_PROGRESS_AUTO)
		OPX_NOMATCH("domain_attr.data_progress %s\n",
			    fi_tostr(&h->data_progress, FI_TYPE_PROGRESS));
	if (h->resource_mgmt != FI_RM_UNSPEC && h->resource_mgmt != FI_RM_ENABLED &&
	    h->resource_mgmt != FI_RM_DISABLED)
		OPX_NOMATCH("domain_attr.resource_mgmt %d\n", (int)h->resource_mgmt);
	if (h->av_type != FI_AV_UNSPEC && h->av_type != FI_AV_MAP && h->av_type != FI_AV_TABLE)
		OPX_NOMATCH("domain_attr.av_type %d\n", (int)h->av_type);
	return opx_info_check_max("domain_attr.mr_key_size", h->mr_key_size, t->mr_key_size) &&
	       opx_info_check_max("domain_attr.cq_data_size", h->cq_data_size, t->cq_data_size) &&
	       opx_info_check_max("domain_attr.cq_cnt", h->cq_cnt, t->cq_cnt) &&
	       opx_info_check_max("domain_attr.ep_cnt", h->ep_cnt, t->ep_cnt) &&
	       opx_info_check_max("domain_attr.tx_ctx_cnt", h->tx_ctx_cnt, t->tx_ctx_cnt) &&
	       opx_info_check_max("domain_attr.rx_ctx_cnt", h->rx_ctx_cnt, t->rx_ctx_cnt) &&
	       opx_info_check_max("domain_attr.max_ep_tx_ctx", h->max_ep_tx_ctx,
				  t->max_ep_tx_ctx) &&
	       opx_info_check_max("domain_attr.max_ep_rx_ctx", h->max_ep_rx_ctx,
				  t->max_ep_rx_ctx) &&
	       opx_info_check_max("domain_attr.max_ep_stx_ctx", h->max_ep_stx_ctx, 0) &&
	       opx_info_check_max("domain_attr.max_ep_srx_ctx", h->max_ep_srx_ctx, 0) &&
	       opx_info_check_max("domain_attr.cntr_cnt", h->cntr_cnt, t->cntr_cnt) &&
	       opx_info_check_max("domain_attr.mr_iov_limit", h->mr_iov_limit, t->mr_iov_limit) &&
	       opx_info_check_max("domain_attr.mr_cnt", h->mr_cnt, t->mr_cnt) &&
	       opx_info_check_max("domain_attr.auth_key_size", h->auth_key_size, 0) &&
	       opx_info_check_bits("domain_attr.caps", h->caps, t->caps);
}

/* FI_ADDR_OPX always; the socket formats name an endpoint by its udp
 * socket, so only where endpoints get one (opx_addr.c). */
static bool opx_info_check_addr_format(uint32_t asked, const struct opx_info_dev *d)
{
	uint32_t fmt;

	if (opx_addr_format(asked, &fmt))
		OPX_NOMATCH("addr_format %s (opx has FI_ADDR_OPX, FI_SOCKADDR_IN, FI_SOCKADDR)\n",
			    opx_addr_format_name(asked));
	if (opx_addr_is_sock(fmt) && !d->udp_ip)
		OPX_NOMATCH("addr_format %s names endpoints by their udp socket, and there is no "
			    "udp wire here (FI_OPX_WIRE=shm, a launcher that keeps the job on this "
			    "host, no udp wire secret, or no interface up)\n",
			    opx_addr_format_name(fmt));
	return true;
}

static bool opx_info_check_hints(const struct fi_info *h, const struct fi_info *t,
				 const struct opx_info_dev *d)
{
	if (!opx_info_check_bits("caps", h->caps, t->caps | OPX_CAPS_ASKED_ONLY))
		return false;
	if ((h->caps & FI_SOURCE_ERR) && !(h->caps & FI_SOURCE))
		OPX_NOMATCH("caps FI_SOURCE_ERR without FI_SOURCE\n");
	if (!opx_info_check_addr_format(h->addr_format, d))
		return false;
	if (opx_addr_is_sock(h->addr_format) && h->ep_attr &&
	    (h->ep_attr->tx_ctx_cnt > 1 || h->ep_attr->rx_ctx_cnt > 1))
		OPX_NOMATCH("scalable endpoints (%zu transmit, %zu receive contexts) need "
			    "FI_ADDR_OPX names, not %s\n",
			    h->ep_attr->tx_ctx_cnt, h->ep_attr->rx_ctx_cnt,
			    opx_addr_format_name(h->addr_format));
	return opx_info_check_fabric(h->fabric_attr) && opx_info_check_ep(h->ep_attr, t->ep_attr) &&
	       opx_info_check_tx(h->tx_attr, t->tx_attr, h->caps) &&
	       opx_info_check_rx(h->rx_attr, t->rx_attr) &&
	       opx_info_check_domain(h->domain_attr, t->domain_attr);
}

/* ---------------------------------------------------------------------
 * Narrow the template to what the hints asked for.
 */
static uint64_t opx_info_caps_select(uint64_t asked)
{
	uint64_t caps;

	if (!asked)
		return OPX_CAPS & ~OPX_CAPS_ASKED_ONLY;
	caps = asked;
	/* No primary capability at all reads as "the defaults". */
	if (!(caps & OPX_PRIMARY_CAPS))
		caps |= FI_MSG | FI_TAGGED;
	/* FI_SEND/FI_RECV restrict a primary capability; neither means both. */
	if (!(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	/* FI_READ..FI_REMOTE_WRITE restrict FI_RMA/FI_ATOMIC; none means all. */
	if ((caps & (FI_RMA | FI_ATOMIC)) &&
	    !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)))
		caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	/* fi_getinfo(3): neither FI_LOCAL_COMM nor FI_REMOTE_COMM means the
	 * configuration that costs least - for us that is both. */
	caps |= OPX_FREE_SECONDARY_CAPS;
	return caps & OPX_CAPS;
}

static uint64_t opx_info_mr_mode_select(uint32_t version, int asked)
{
	/* Old-style (pre 1.5) values: BASIC and SCALABLE are whole modes.
	 * BASIC implies provider keys, which the domain then hands out. */
	if (asked == FI_MR_BASIC || asked == FI_MR_SCALABLE)
		return (uint64_t)asked;
	if (version < FI_VERSION(1, 5))
		return FI_MR_SCALABLE;
	/* 1.5+: mr_mode bits are things the application can cope with; we
	 * need none of them. */
	return 0;
}

static void opx_info_narrow(struct fi_info *fi, const struct fi_info *h, uint32_t version)
{
	fi->caps = opx_info_caps_select(h->caps);
	fi->tx_attr->caps = fi->caps & OPX_TX_CAPS;
	fi->rx_attr->caps = fi->caps & OPX_RX_CAPS;
	if (h->tx_attr) {
		if (h->tx_attr->caps)
			fi->tx_attr->caps &= h->tx_attr->caps;
		fi->tx_attr->op_flags = h->tx_attr->op_flags;
	}
	if (h->rx_attr) {
		if (h->rx_attr->caps)
			fi->rx_attr->caps &= h->rx_attr->caps;
		fi->rx_attr->op_flags = h->rx_attr->op_flags;
	}
	/* Our matching uses every tag bit, so any layout the application
	 * chose is one we support; echo it back. */
	if (h->ep_attr && h->ep_attr->mem_tag_format)
		fi->ep_attr->mem_tag_format = h->ep_attr->mem_tag_format;
	/* contexts of a scalable endpoint, as many as asked (checked) */
	if (h->ep_attr && h->ep_attr->tx_ctx_cnt)
		fi->ep_attr->tx_ctx_cnt = h->ep_attr->tx_ctx_cnt;
	if (h->ep_attr && h->ep_attr->rx_ctx_cnt)
		fi->ep_attr->rx_ctx_cnt = h->ep_attr->rx_ctx_cnt;
	if (h->domain_attr) {
		const struct fi_domain_attr *hd = h->domain_attr;

		if (hd->threading != FI_THREAD_UNSPEC)
			fi->domain_attr->threading = hd->threading;
		if (hd->av_type != FI_AV_UNSPEC)
			fi->domain_attr->av_type = hd->av_type;
		/* asked for: the domain runs a progress thread (opx_auto.c) */
		if (hd->control_progress == FI_PROGRESS_AUTO)
			fi->domain_attr->control_progress = FI_PROGRESS_AUTO;
		if (hd->data_progress == FI_PROGRESS_AUTO)
			fi->domain_attr->data_progress = FI_PROGRESS_AUTO;
		fi->domain_attr->mr_mode = (int)opx_info_mr_mode_select(version, hd->mr_mode);
	}
	/* A destination address in our own format is passed through (node
	 * and service are not resolved: opx has no name service). */
	/* FI_MSG_PREFIX when the application offers it and FI_OPX_MSG_PREFIX
	 * says to use it (fi_getinfo(3)): its
	 * send and receive buffers start with OPX_MSG_PREFIX_SIZE bytes of
	 * space, the data after them (opx_msg.c) */
	if ((h->mode & FI_MSG_PREFIX) && opx_env.msg_prefix) {
		fi->mode |= FI_MSG_PREFIX;
		fi->ep_attr->msg_prefix_size = OPX_MSG_PREFIX_SIZE;
	}
	if (h->dest_addr && h->addr_format == FI_ADDR_OPX &&
	    h->dest_addrlen == sizeof(struct shim_addr)) {
		fi->dest_addr = malloc(sizeof(struct shim_addr));
		if (fi->dest_addr) {
			memcpy(fi->dest_addr, h->dest_addr, sizeof(struct shim_addr));
			fi->dest_addrlen = sizeof(struct shim_addr);
		}
	}
}

/* ---------------------------------------------------------------------
 * Node and service.  Addresses name an endpoint by host and port, the way
 * IP does, so the udp wire can carry them unchanged: ipv4 and udp_port of
 * struct shim_addr.  On this host a port is a name in the shim's service
 * registry; an endpoint opened with a src_addr that has a port claims it
 * (opx_ep.c), and fi_av_insert resolves a dest_addr naming one (opx_av.c).
 */
/* service -> port in host order (0 when NULL); -FI_ENODATA if unknown. */
static int opx_info_port(const char *service, uint16_t *port)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
	struct addrinfo *res = NULL;
	char *end;
	unsigned long v;

	*port = 0;
	if (!service)
		return 0;
	v = strtoul(service, &end, 10);
	if (*service && !*end) {
		if (v == 0 || v > 65535) {
			OPX_INFO(FI_LOG_CORE, "service '%s' is not a port number\n", service);
			return -FI_ENODATA;
		}
		*port = (uint16_t)v;
		return 0;
	}
	/* a service name (e.g. from /etc/services) */
	hints.ai_flags = AI_PASSIVE;
	if (getaddrinfo(NULL, service, &hints, &res) || !res) {
		OPX_INFO(FI_LOG_CORE, "unknown service '%s'\n", service);
		return -FI_ENODATA;
	}
	*port = ntohs(((const struct sockaddr_in *)res->ai_addr)->sin_port);
	freeaddrinfo(res);
	return *port ? 0 : -FI_ENODATA;
}

/* node -> IPv4 (network order); -FI_ENODATA when it does not resolve. */
static int opx_info_node(const char *node, uint64_t flags, uint32_t *ipv4)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
	struct addrinfo *res = NULL;
	int rc;

	if (flags & FI_NUMERICHOST)
		hints.ai_flags |= AI_NUMERICHOST;
	rc = getaddrinfo(node, NULL, &hints, &res);
	if (rc || !res) {
		OPX_WARN(FI_LOG_CORE, "node '%s' does not resolve to an IPv4 address: %s\n", node,
			 rc ? gai_strerror(rc) : "no address");
		return -FI_ENODATA;
	}
	*ipv4 = ((const struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
	freeaddrinfo(res);
	return 0;
}

int opx_info_addr_from_node(struct shim_dev *dev, const char *node, const char *service,
			    uint64_t flags, struct shim_addr *a)
{
	uint32_t ipv4;
	uint16_t port;
	int ret;

	if (!node || !service)
		return -FI_EINVAL;
	ret = opx_info_port(service, &port);
	if (!ret)
		ret = opx_info_node(node, flags, &ipv4);
	if (ret)
		return ret;
	opx_addr_unresolved(shim_dev_host_id(dev), ipv4, htons(port), a);
	return 0;
}

static int opx_info_set_addr(void **dst, size_t *dstlen, const struct shim_addr *a)
{
	void *p = malloc(sizeof(*a));

	if (!p)
		return -FI_ENOMEM;
	memcpy(p, a, sizeof(*a));
	free(*dst);
	*dst = p;
	*dstlen = sizeof(*a);
	return 0;
}

/*
 * src_addr: always returned, so applications learn the address format and
 * length before opening an endpoint: this host (host_id, the node's IPv4
 * with FI_SOURCE, else this host's), the service as udp_port when node and
 * service are local (FI_SOURCE, or no node), and no context yet (lid 0).
 * A src_addr in hints, in our format, is honoured as given.
 * dest_addr: node and service without FI_SOURCE name a remote endpoint:
 * its IPv4 and port, host_id set when that IPv4 is one of this host's,
 * lid 0 ("unresolved": fi_av_insert looks the service up).
 */
static int opx_info_addrs(struct fi_info *fi, const char *node, const char *service,
			  uint64_t flags, const struct fi_info *hints, uint64_t host_id, int unit)
{
	bool source = (flags & FI_SOURCE) || !node;
	struct shim_addr a;
	uint32_t ipv4 = 0;
	uint16_t port;
	int ret;

	ret = opx_info_port(service, &port);
	if (ret)
		return ret;
	if (node) {
		ret = opx_info_node(node, flags, &ipv4);
		if (ret)
			return ret;
	}

	if (hints && hints->src_addr) {
		if (hints->src_addrlen != sizeof(struct shim_addr)) {
			OPX_INFO(FI_LOG_CORE, "hints src_addr of %zu bytes is not an FI_ADDR_OPX\n",
				 hints->src_addrlen);
			return -FI_ENODATA;
		}
		memcpy(&a, hints->src_addr, sizeof(a));
	} else {
		memset(&a, 0, sizeof(a));
		a.host_id = host_id;
		a.ipv4 = source && node ? ipv4 : shim_dev_host_ipv4();
		a.udp_port = source ? htons(port) : 0;
		a.unit = (uint8_t)unit;
		a.uid = (uint32_t)geteuid();
		a.pid = (uint32_t)getpid();
	}
	ret = opx_info_set_addr(&fi->src_addr, &fi->src_addrlen, &a);
	if (ret)
		return ret;

	if (!source && port) {
		opx_addr_unresolved(host_id, ipv4, htons(port), &a);
		ret = opx_info_set_addr(&fi->dest_addr, &fi->dest_addrlen, &a);
	}
	return ret;
}

static int opx_info_set_sin(void **dst, size_t *dstlen, uint32_t ipv4, uint16_t port)
{
	struct sockaddr_in *sin = calloc(1, sizeof(*sin));

	if (!sin)
		return -FI_ENOMEM;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = ipv4;
	sin->sin_port = port;
	free(*dst);
	*dst = sin;
	*dstlen = sizeof(*sin);
	return 0;
}

/*
 * The socket formats (FI_SOCKADDR_IN, FI_SOCKADDR; opx_addr.c): names are
 * struct sockaddr_in, as fi_getinfo(3) has them.  src_addr: the hints'
 * (ignored with FI_SOURCE), else the node's IPv4 with FI_SOURCE or the
 * udp wire's, and the service as port when node and service are local;
 * an IPv4 that is not this host's cannot be bound: -FI_ENODATA.
 * dest_addr: node and service without FI_SOURCE, else the hints' when
 * node and service are NULL or FI_SOURCE is set.  IPv6 is refused with a
 * warning: the udp wire is IPv4.
 */
static int opx_info_addrs_sock(struct fi_info *fi, const char *node, const char *service,
			       uint64_t flags, const struct fi_info *hints,
			       const struct opx_info_dev *d)
{
	bool source = (flags & FI_SOURCE) || !node;
	struct shim_addr src, dst;
	uint32_t ipv4 = 0;
	uint16_t port;
	int ret;

	fi->addr_format = hints->addr_format;
	ret = opx_info_port(service, &port);
	if (ret)
		return ret;
	if (node) {
		ret = opx_info_node(node, flags, &ipv4);
		if (ret)
			return ret;
	}
	if (hints->src_addr && !(flags & FI_SOURCE)) {
		if (opx_addr_sin_check(hints->src_addr, hints->src_addrlen, false, "hints src_addr"))
			return -FI_ENODATA;
		opx_addr_from_sin(0, hints->src_addr, &src);
	} else {
		opx_addr_unresolved(0, source && node ? ipv4 : d->udp_ip, source ? htons(port) : 0,
				    &src);
	}
	if (src.ipv4 && !shim_dev_host_has_ipv4(src.ipv4)) {
		OPX_INFO(FI_LOG_CORE, "src_addr %s is not an address of this host\n",
			 inet_ntoa((struct in_addr){.s_addr = src.ipv4}));
		return -FI_ENODATA;
	}
	ret = opx_info_set_sin(&fi->src_addr, &fi->src_addrlen, src.ipv4, src.udp_port);
	if (ret)
		return ret;

	if (!source && port)
		return opx_info_set_sin(&fi->dest_addr, &fi->dest_addrlen, ipv4, htons(port));
	if (hints->dest_addr && ((!node && !service) || (flags & FI_SOURCE))) {
		if (opx_addr_sin_check(hints->dest_addr, hints->dest_addrlen, false,
				       "hints dest_addr"))
			return -FI_ENODATA;
		opx_addr_from_sin(0, hints->dest_addr, &dst);
		return opx_info_set_sin(&fi->dest_addr, &fi->dest_addrlen, dst.ipv4, dst.udp_port);
	}
	return 0;
}

/*
 * Progress: the first entry is manual progress (no thread, the fastest),
 * and a hint-less fi_getinfo gets a second entry, the same in every other
 * respect, with FI_PROGRESS_AUTO (a progress thread per domain,
 * opx_auto.c).  Middleware that picks a provider from such a list by its
 * progress model (MPICH with MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1
 * scores the entries of a hint-less fi_getinfo) finds it there, as it does
 * with real OPX.  Not when there are hints, even with the progress model
 * left open: Open MPI takes several entries of one provider for several
 * NICs and gives each local rank one of them in turn (local rank modulo
 * their count), so every second rank of a host ran with a progress thread
 * and a real lock on every call, 15 % slower (MPI latency 8 B 0.17 against
 * 0.195 us); a caller that wants auto progress asks for it in its hints.
 */
static int opx_info_add_auto(struct fi_info *fi, const struct fi_info *hints)
{
	struct fi_info *a;

	if (hints)
		return 0;
	a = fi_dupinfo(fi);
	if (!a)
		return -FI_ENOMEM;
	a->domain_attr->control_progress = FI_PROGRESS_AUTO;
	a->domain_attr->data_progress = FI_PROGRESS_AUTO;
	fi->next = a;
	return 0;
}

int opx_info_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		     const struct fi_info *hints, struct fi_info **info)
{
	struct opx_info_dev d;
	struct fi_info *fi;
	int ret;

	if (!info)
		return -FI_EINVAL;
	*info = NULL;
	/* Like the core (which skips a provider whose fi_version is older
	 * than asked) and its util providers: any version up to ours is
	 * served, 0.0 included - MPICH's ch4:ofi asks with FI_VERSION(0, 0)
	 * first.  Versions before 1.5 get the old mr_mode (opx_info_build). */
	if (FI_VERSION_LT(OPX_FI_VERSION, version)) {
		OPX_INFO(FI_LOG_CORE, "API version %u.%u is not supported (opx implements %u.%u)\n",
			 FI_MAJOR(version), FI_MINOR(version), FI_MAJOR(OPX_FI_VERSION),
			 FI_MINOR(OPX_FI_VERSION));
		return -FI_ENODATA;
	}
	fi_prov_ini();

	ret = opx_info_probe(&d);
	if (ret)
		return -FI_ENODATA;
	fi = opx_info_build(d.unit, version);
	if (!fi)
		return -FI_ENOMEM;
	if (hints) {
		if (!opx_info_check_hints(hints, fi, &d)) {
			fi_freeinfo(fi);
			return -FI_ENODATA;
		}
		opx_info_narrow(fi, hints, version);
	} else if (version < FI_VERSION(1, 5)) {
		fi->domain_attr->mr_mode = FI_MR_SCALABLE;
	}
	if (hints && opx_addr_is_sock(hints->addr_format))
		ret = opx_info_addrs_sock(fi, node, service, flags, hints, &d);
	else
		ret = opx_info_addrs(fi, node, service, flags, hints, d.host_id, d.unit);
	if (ret) {
		fi_freeinfo(fi);
		return ret;
	}
	ret = opx_info_add_auto(fi, hints);
	if (ret) {
		fi_freeinfo(fi);
		return ret;
	}
	*info = fi;
	return 0;
}
