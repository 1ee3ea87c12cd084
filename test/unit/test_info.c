/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_info.c - init, parameters and fi_getinfo hint filtering (node,
 * service and src_addr, the port a server endpoint claims), including
 * the negative API paths.  Fabric, domain, MR and EQ: test_domain.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "opx.h"

static struct fi_info *hints_new(void)
{
	struct fi_info *h = fi_allocinfo();

	assert_non_null(h);
	return h;
}

static int getinfo_v(uint32_t version, const struct fi_info *hints, struct fi_info **info)
{
	return fx_prov()->getinfo(version, NULL, NULL, 0, hints, info);
}

static int getinfo(const struct fi_info *hints, struct fi_info **info)
{
	return getinfo_v(FX_VERSION, hints, info);
}

/* ---------------------------------------------------------------------
 * Init and parameters.
 */
static void test_prov_ini_idempotent(void **state)
{
	(void)state;
	struct fi_provider *a = fx_prov();
	struct fi_provider *b = fi_prov_ini();

	assert_ptr_equal(a, b);
	assert_string_equal(a->name, "opx");
	assert_int_equal(a->version, OPX_PROV_VERSION);
	assert_int_equal(a->fi_version, OPX_FI_VERSION);
	assert_non_null(a->getinfo);
	assert_non_null(a->fabric);
}

static void test_param_defaults(void **state)
{
	(void)state;
	int jkey = (int)((getuid() & 0xffffu) ^ 0x5a5au);

	fx_prov();
	assert_int_equal(opx_env.units, 1);
	assert_int_equal(opx_env.unit, -1);
	assert_int_equal(opx_env.mtu, 8192);
	assert_int_equal(opx_env.hdrq_entries, 1024);
	assert_int_equal(opx_env.eager_bytes, 256u << 10);
	assert_int_equal(opx_env.inject_size, 8192);
	assert_true(opx_env.inject_size <= opx_env.mtu);
	assert_int_equal(opx_env.eager_max, 8192);
	assert_true(opx_env.eager_max <= opx_env.eager_bytes / 4);
	assert_true(opx_env.max_msg_size >= ((size_t)4 << 30)); /* rendezvous: >= 4 GiB */
	assert_int_equal(opx_env.ux_max_bytes, 64u << 20);
	assert_int_equal(opx_env.jkey, jkey ? jkey : 0x5a5a);
	assert_int_not_equal(opx_env.jkey, 0);
	assert_int_equal(opx_env.spin_count, 1000);
	assert_int_equal(opx_env.sleep_ms, 10);
	assert_int_equal(opx_env.rma_direct_write, 16u << 10);
	assert_int_equal(opx_env.rma_direct_read, 16u << 10);
	assert_int_equal(opx_env.rma_direct_idle_ms, 1);
}

static void test_params_listed(void **state)
{
	(void)state;
	static const char *const names[] = {
		"FI_OPX_UNITS",       "FI_OPX_UNIT",        "FI_OPX_MTU",
		"FI_OPX_HDRQ_ENTRIES", "FI_OPX_EAGER_RING_BYTES", "FI_OPX_INJECT_SIZE",
		"FI_OPX_EAGER_MAX",   "FI_OPX_UX_MAX_BYTES", "FI_OPX_JKEY",
		"FI_OPX_SPIN_COUNT",  "FI_OPX_SLEEP_MS", "FI_OPX_RMA_DIRECT_WRITE",
		"FI_OPX_RMA_DIRECT_READ", "FI_OPX_RMA_DIRECT_IDLE_MS",
	};
	struct fi_param *params = NULL;
	int count = 0;
	size_t i;

	fx_prov();
	assert_int_equal(fi_getparams(&params, &count), 0);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int j, found = 0;

		for (j = 0; j < count; j++)
			if (!strcmp(params[j].name, names[i])) {
				found++;
				assert_non_null(strstr(params[j].help_string, "default"));
			}
		if (found != 1)
			fail_msg("%s defined %d times", names[i], found);
	}
	fi_freeparams(params);
}

static void test_err_map(void **state)
{
	(void)state;
	assert_int_equal(opx_init_err_from_shim(0), 0);
	assert_int_equal(opx_init_err_from_shim(-EAGAIN), -FI_EAGAIN);
	assert_int_equal(opx_init_err_from_shim(-ENOMEM), -FI_ENOMEM);
	assert_int_equal(opx_init_err_from_shim(-EINVAL), -FI_EINVAL);
	assert_int_equal(opx_init_err_from_shim(-EMSGSIZE), -FI_EMSGSIZE);
	assert_int_equal(opx_init_err_from_shim(-EBUSY), -FI_EBUSY);
	assert_int_equal(opx_init_err_from_shim(-EPERM), -FI_EACCES);
	assert_int_equal(opx_init_err_from_shim(-EACCES), -FI_EACCES);
	assert_int_equal(opx_init_err_from_shim(-ENOENT), -FI_EADDRNOTAVAIL);
	assert_int_equal(opx_init_err_from_shim(-ESTALE), -FI_EADDRNOTAVAIL);
	assert_int_equal(opx_init_err_from_shim(-EHOSTUNREACH), -FI_EADDRNOTAVAIL);
	assert_int_equal(opx_init_err_from_shim(-EPROTO), -FI_EOTHER);
	assert_int_equal(opx_init_err_from_shim(-EXDEV), -FI_EOTHER);
}

/* ---------------------------------------------------------------------
 * fi_getinfo.
 */
/* Hints that leave the progress model open get one entry, manual: Open MPI
 * hands the entries of one provider out to a host's ranks in turn, as if
 * they were NICs (opx_info_add_auto). */
static void test_hints_one_entry(void **state)
{
	(void)state;
	struct fi_info *h = fi_allocinfo(), *fi = NULL;

	assert_non_null(h);
	h->caps = FI_TAGGED;
	h->ep_attr->type = FI_EP_RDM;
	assert_int_equal(h->domain_attr->data_progress, FI_PROGRESS_UNSPEC);
	assert_int_equal(h->domain_attr->control_progress, FI_PROGRESS_UNSPEC);
	assert_int_equal(getinfo(h, &fi), 0);
	assert_non_null(fi);
	assert_int_equal(fi->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	assert_int_equal(fi->domain_attr->control_progress, FI_PROGRESS_MANUAL);
	assert_null(fi->next);
	fi_freeinfo(fi);
	/* asked for, auto progress is what it gets */
	h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	assert_int_equal(getinfo(h, &fi), 0);
	assert_int_equal(fi->domain_attr->data_progress, FI_PROGRESS_AUTO);
	assert_null(fi->next);
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

static void test_null_hints(void **state)
{
	(void)state;
	struct fi_info *fi = NULL;

	assert_int_equal(getinfo(NULL, &fi), 0);
	assert_non_null(fi);
	/* manual progress first; the same again with auto progress second */
	assert_int_equal(fi->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	assert_int_equal(fi->domain_attr->control_progress, FI_PROGRESS_MANUAL);
	assert_non_null(fi->next);
	assert_int_equal(fi->next->domain_attr->data_progress, FI_PROGRESS_AUTO);
	assert_int_equal(fi->next->domain_attr->control_progress, FI_PROGRESS_AUTO);
	assert_int_equal(fi->next->caps, fi->caps);
	assert_int_equal(fi->next->mode, fi->mode);
	assert_null(fi->next->next);
	assert_int_equal(fi->caps, OPX_CAPS & ~OPX_CAPS_ASKED_ONLY); /* FI_SOURCE_ERR only when asked */
	assert_int_equal(fi->mode, 0);
	assert_int_equal(fi->addr_format, FI_ADDR_OPX);
	assert_int_equal(fi->ep_attr->type, FI_EP_RDM);
	assert_int_equal(fi->ep_attr->protocol, FI_PROTO_OPX);
	/* The core names the provider; a core provider leaves it NULL. */
	assert_null(fi->fabric_attr->prov_name);
	assert_string_equal(fi->fabric_attr->name, "opx");
	assert_int_equal(fi->fabric_attr->api_version, FX_VERSION);
	assert_int_equal(fi->fabric_attr->prov_version, OPX_PROV_VERSION);
	assert_non_null(fi->domain_attr->name);
	assert_memory_equal(fi->domain_attr->name, "opx_", 4);
	assert_int_equal(fi->domain_attr->threading, FI_THREAD_DOMAIN);
	assert_int_equal(fi->domain_attr->control_progress, FI_PROGRESS_MANUAL);
	assert_int_equal(fi->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	assert_int_equal(fi->domain_attr->mr_mode, 0);
	fi_freeinfo(fi);

	assert_int_equal(getinfo(NULL, NULL), -FI_EINVAL);
}

static void test_info_fields_sane(void **state)
{
	(void)state;
	struct fi_info *fi = NULL;

	assert_int_equal(getinfo(NULL, &fi), 0);
	assert_int_equal(fi->tx_attr->inject_size, opx_env.inject_size);
	assert_true(fi->tx_attr->inject_size <= opx_env.mtu);
	assert_true(fi->tx_attr->inject_size <= fi->ep_attr->max_msg_size);
	assert_int_equal(fi->ep_attr->max_msg_size, opx_env.max_msg_size);
	assert_true(fi->domain_attr->cq_data_size >= 4);
	/* Open MPI counts leading zero bits as bits lost: the top must be set. */
	assert_true(fi->ep_attr->mem_tag_format & (1ULL << 63));
	assert_int_equal(fi->tx_attr->iov_limit, OPX_IOV_LIMIT);
	assert_int_equal(fi->rx_attr->iov_limit, OPX_IOV_LIMIT);
	assert_int_equal(fi->tx_attr->caps & ~OPX_TX_CAPS, 0);
	assert_int_equal(fi->rx_attr->caps & ~OPX_RX_CAPS, 0);
	assert_int_equal(fi->rx_attr->total_buffered_recv, opx_env.ux_max_bytes);
	assert_int_equal(fi->domain_attr->mr_key_size, 8);
	/* scalable endpoints (test_sep): up to 15 transmit and 16 receive
	 * contexts, one of each unless asked */
	assert_int_equal(fi->domain_attr->max_ep_tx_ctx, 15);
	assert_int_equal(fi->domain_attr->max_ep_rx_ctx, 16);
	assert_true(fi->domain_attr->tx_ctx_cnt >= fi->domain_attr->max_ep_tx_ctx);
	assert_true(fi->domain_attr->rx_ctx_cnt >= fi->domain_attr->max_ep_rx_ctx);
	assert_int_equal(fi->ep_attr->tx_ctx_cnt, 1);
	assert_int_equal(fi->ep_attr->rx_ctx_cnt, 1);
	assert_true(fi->caps & FI_NAMED_RX_CTX);
	fi_freeinfo(fi);
}

typedef void (*hint_mut)(struct fi_info *h);

#define MUT(name, body)                                                                            \
	static void mut_##name(struct fi_info *h)                                                  \
	{                                                                                          \
		body;                                                                              \
	}

MUT(caps_trigger, h->caps = FI_TAGGED | FI_TRIGGER)
MUT(ep_msg, h->ep_attr->type = FI_EP_MSG)
MUT(ep_dgram, h->ep_attr->type = FI_EP_DGRAM)
MUT(protocol, h->ep_attr->protocol = FI_PROTO_RXM)
MUT(max_msg, h->ep_attr->max_msg_size = opx_env.max_msg_size + 1)
MUT(prefix, h->ep_attr->msg_prefix_size = OPX_MSG_PREFIX_SIZE + 8)
MUT(ep_tx_ctx, h->ep_attr->tx_ctx_cnt = 16)
MUT(ep_rx_ctx, h->ep_attr->rx_ctx_cnt = 17)
MUT(ep_shared_tx, h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT)
MUT(ep_shared_rx, h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT)
MUT(fabric_name, h->fabric_attr->name = strdup("ib0"))
MUT(prov_name, h->fabric_attr->prov_name = strdup("shm"))
MUT(domain_name, h->domain_attr->name = strdup("opx_99"))
MUT(addr_format, h->addr_format = FI_SOCKADDR_IN6) /* IPv4 only: test_sockaddr */
MUT(inject, h->tx_attr->inject_size = opx_env.inject_size + 1)
MUT(tx_size, h->tx_attr->size = OPX_TX_SIZE + 1)
MUT(tx_iov, h->tx_attr->iov_limit = OPX_IOV_LIMIT + 1)
MUT(tx_rma_iov, h->tx_attr->rma_iov_limit = 2)
MUT(tx_caps, h->tx_attr->caps = FI_RMA | FI_REMOTE_WRITE)
MUT(tx_order, h->tx_attr->msg_order = FI_ORDER_STRICT)
MUT(tx_comp_order, h->tx_attr->comp_order = FI_ORDER_STRICT)
MUT(tx_op_flags, h->tx_attr->op_flags = FI_COMMIT_COMPLETE) /* no persistent memory */
MUT(rx_size, h->rx_attr->size = OPX_RX_SIZE + 1)
MUT(rx_iov, h->rx_attr->iov_limit = OPX_IOV_LIMIT + 1)
MUT(rx_caps, h->rx_attr->caps = FI_ATOMIC | FI_READ)
MUT(rx_buffered, h->rx_attr->total_buffered_recv = opx_env.ux_max_bytes + 1)
MUT(rx_comp_order, h->rx_attr->comp_order = FI_ORDER_DATA)
MUT(threading_bad, h->domain_attr->threading = (enum fi_threading)99)
MUT(ctrl_bad, h->domain_attr->control_progress = (enum fi_progress)9)
MUT(data_bad, h->domain_attr->data_progress = (enum fi_progress)9)
MUT(av_bad, h->domain_attr->av_type = (enum fi_av_type)7)
MUT(cq_data, h->domain_attr->cq_data_size = OPX_CQ_DATA_SIZE + 1)
MUT(mr_key, h->domain_attr->mr_key_size = 16)
MUT(ep_cnt, h->domain_attr->ep_cnt = OPX_MAX_EPS + 1)
MUT(dom_tx_ctx, h->domain_attr->tx_ctx_cnt = OPX_MAX_EPS + 1)
MUT(max_ep_rx, h->domain_attr->max_ep_rx_ctx = 17)
MUT(max_ep_tx, h->domain_attr->max_ep_tx_ctx = 16)
MUT(stx, h->domain_attr->max_ep_stx_ctx = 1)
MUT(srx, h->domain_attr->max_ep_srx_ctx = 1)
MUT(mr_iov, h->domain_attr->mr_iov_limit = OPX_IOV_LIMIT + 1)
MUT(dom_caps, h->domain_attr->caps = FI_SHARED_AV)

static void test_rejected_hints(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		hint_mut mut;
	} cases[] = {
#define C(n) {#n, mut_##n}
		C(caps_trigger), C(ep_msg),      C(ep_dgram),
		C(protocol),    C(max_msg),       C(prefix),         C(ep_tx_ctx),   C(fabric_name),
		C(prov_name),   C(domain_name),   C(addr_format),    C(inject),      C(tx_size),
		C(tx_iov),      C(tx_rma_iov),    C(tx_caps),        C(tx_order),    C(tx_comp_order),
		C(tx_op_flags), C(rx_size),       C(rx_iov),         C(rx_caps),     C(rx_buffered),
		C(rx_comp_order), C(threading_bad), C(ctrl_bad),     C(data_bad),    C(av_bad),
		C(cq_data),     C(mr_key),        C(ep_cnt),         C(dom_tx_ctx),  C(max_ep_rx),
		C(srx),         C(mr_iov),        C(dom_caps),       C(ep_rx_ctx),   C(ep_shared_tx),
		C(ep_shared_rx), C(max_ep_tx),    C(stx),
#undef C
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fi_info *h = hints_new();
		struct fi_info *fi = (struct fi_info *)(uintptr_t)0x1;
		int ret;

		cases[i].mut(h);
		ret = getinfo(h, &fi);
		if (ret != -FI_ENODATA)
			fail_msg("hint %s: got %d, want -FI_ENODATA", cases[i].name, ret);
		assert_null(fi);
		fi_freeinfo(h);
	}
}

static void test_hint_threading(void **state)
{
	(void)state;
	static const char *const names[] = {"safe", "fid", "domain", "completion", "endpoint"};
	static const enum fi_threading vals[] = {FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN,
						 FI_THREAD_COMPLETION, FI_THREAD_ENDPOINT};
	struct fi_info *fi;
	size_t i;

	for (i = 0; i < 5; i++) {
		assert_int_equal(fx_getinfo(names[i], 0, &fi), 0);
		assert_int_equal(fi->domain_attr->threading, vals[i]);
		fi_freeinfo(fi);
	}
	assert_int_equal(fx_getinfo("FI_THREAD_SAFE", 0, &fi), 0);
	assert_int_equal(fi->domain_attr->threading, FI_THREAD_SAFE);
	fi_freeinfo(fi);
	assert_int_equal(fx_getinfo("bogus", 0, &fi), -FI_EINVAL);
}

static void test_hint_av_type(void **state)
{
	(void)state;
	enum fi_av_type types[] = {FI_AV_MAP, FI_AV_TABLE, FI_AV_UNSPEC};
	size_t i;

	for (i = 0; i < 3; i++) {
		struct fi_info *h = hints_new(), *fi = NULL;

		h->domain_attr->av_type = types[i];
		assert_int_equal(getinfo(h, &fi), 0);
		assert_int_equal(fi->domain_attr->av_type, types[i]);
		fi_freeinfo(fi);
		fi_freeinfo(h);
	}
}

static void test_hint_caps(void **state)
{
	(void)state;
	struct fi_info *fi;

	/* Tagged only: no unrequested primary caps come back. */
	assert_int_equal(fx_getinfo(NULL, FI_TAGGED, &fi), 0);
	assert_true(fi->caps & FI_TAGGED);
	assert_true((fi->caps & (FI_SEND | FI_RECV)) == (FI_SEND | FI_RECV));
	assert_false(fi->caps & FI_MSG);
	assert_false(fi->caps & FI_DIRECTED_RECV);
	assert_int_equal(fi->caps & ~OPX_CAPS, 0);
	assert_int_equal(fi->tx_attr->caps & ~fi->caps, 0);
	assert_int_equal(fi->rx_attr->caps & ~fi->caps, 0);
	fi_freeinfo(fi);

	/* Send-only messages. */
	assert_int_equal(fx_getinfo(NULL, FI_MSG | FI_SEND, &fi), 0);
	assert_true(fi->caps & FI_SEND);
	assert_false(fi->caps & FI_RECV);
	assert_false(fi->caps & FI_TAGGED);
	assert_true(fi->tx_attr->caps & FI_MSG);
	fi_freeinfo(fi);

	/* Secondary caps asked for are kept. */
	assert_int_equal(fx_getinfo(NULL, FI_MSG | FI_MULTI_RECV | FI_SOURCE, &fi), 0);
	assert_true(fi->caps & FI_MULTI_RECV);
	assert_true(fi->caps & FI_SOURCE);
	assert_true(fi->rx_attr->caps & FI_MULTI_RECV);
	fi_freeinfo(fi);

	/* One-sided, as Open MPI's btl ofi asks: FI_RMA | FI_ATOMIC alone
	 * means every direction; the tx side initiates, the rx side is
	 * the target. */
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_ATOMIC, &fi), 0);
	assert_int_equal(fi->caps & (FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
				     FI_REMOTE_WRITE),
			 FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	assert_false(fi->caps & FI_RMA_EVENT); /* secondary: only when asked */
	assert_true(fi->tx_attr->caps & FI_WRITE);
	assert_true(fi->rx_attr->caps & FI_REMOTE_WRITE);
	assert_true(fi->tx_attr->msg_order & FI_ORDER_RAW);
	assert_false(fi->tx_attr->msg_order & FI_ORDER_SAW);
	assert_int_equal(fi->tx_attr->rma_iov_limit, 1);
	fi_freeinfo(fi);
	/* What Open MPI 4.1's btl ofi asks for.  FI_DELIVERY_COMPLETE holds
	 * for one-sided operations and, since sends honour it too, for an
	 * endpoint that also sends. */
	{
		struct fi_info *h = hints_new();
		h->caps = FI_RMA | FI_ATOMIC;
		h->ep_attr->type = FI_EP_RDM;
		h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
		h->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
		assert_int_equal(getinfo(h, &fi), 0);
		assert_true(fi->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
		assert_false(fi->caps & (FI_MSG | FI_TAGGED));
		fi_freeinfo(fi);
		h->caps = FI_RMA | FI_TAGGED;
		assert_int_equal(getinfo(h, &fi), 0);
		assert_true(fi->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
		assert_true(fi->caps & FI_TAGGED);
		fi_freeinfo(fi);
		fi_freeinfo(h);
	}
	/* Only remote reads asked for: no write access comes back. */
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_REMOTE_READ, &fi), 0);
	assert_true(fi->caps & FI_REMOTE_READ);
	assert_false(fi->caps & (FI_WRITE | FI_REMOTE_WRITE));
	fi_freeinfo(fi);
}

/* What Open MPI 4.1's ofi MTL asks for. */
static void test_hint_ompi_mtl(void **state)
{
	(void)state;
	struct fi_info *h = hints_new(), *fi = NULL;

	h->mode = FI_CONTEXT;
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	h->ep_attr->type = FI_EP_RDM;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->tx_attr->op_flags = FI_COMPLETION;
	h->rx_attr->op_flags = FI_COMPLETION;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->av_type = FI_AV_MAP;
	h->domain_attr->cq_data_size = sizeof(int);
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	assert_int_equal(getinfo(h, &fi), 0);
	assert_true(fi->caps & FI_DIRECTED_RECV);
	assert_true(fi->caps & FI_TAGGED);
	assert_true(fi->domain_attr->cq_data_size >= sizeof(int));
	assert_int_equal(fi->domain_attr->av_type, FI_AV_MAP);
	assert_int_equal(fi->domain_attr->mr_mode, 0);
	assert_int_equal(fi->mode & ~h->mode, 0);
	assert_true(fi->ep_attr->mem_tag_format & (1ULL << 63));
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

static void test_hint_names_match(void **state)
{
	(void)state;
	struct fi_info *ref = NULL, *h = hints_new(), *fi = NULL;

	assert_int_equal(getinfo(NULL, &ref), 0);
	h->fabric_attr->name = strdup("opx");
	h->fabric_attr->prov_name = strdup("opx");
	h->domain_attr->name = strdup(ref->domain_attr->name);
	h->addr_format = FI_ADDR_OPX;
	h->ep_attr->protocol = FI_PROTO_OPX;
	h->ep_attr->max_msg_size = ref->ep_attr->max_msg_size;
	h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->tx_attr->inject_size = ref->tx_attr->inject_size;
	assert_int_equal(getinfo(h, &fi), 0);
	assert_string_equal(fi->domain_attr->name, ref->domain_attr->name);
	fi_freeinfo(fi);
	fi_freeinfo(h);
	fi_freeinfo(ref);
}

static void test_hint_mr_mode(void **state)
{
	(void)state;
	struct fi_info *h = hints_new(), *fi = NULL;

	h->domain_attr->mr_mode = FI_MR_BASIC;
	assert_int_equal(getinfo(h, &fi), 0);
	assert_int_equal(fi->domain_attr->mr_mode, FI_MR_BASIC);
	fi_freeinfo(fi);
	h->domain_attr->mr_mode = FI_MR_SCALABLE;
	assert_int_equal(getinfo(h, &fi), 0);
	assert_int_equal(fi->domain_attr->mr_mode, FI_MR_SCALABLE);
	fi_freeinfo(fi);
	/* Before 1.5, UNSPEC must resolve to one of the old modes. */
	h->domain_attr->mr_mode = FI_MR_UNSPEC;
	assert_int_equal(getinfo_v(FI_VERSION(1, 4), h, &fi), 0);
	assert_int_equal(fi->domain_attr->mr_mode, FI_MR_SCALABLE);
	assert_int_equal(fi->fabric_attr->api_version, FI_VERSION(1, 4));
	fi_freeinfo(fi);
	fi_freeinfo(h);
}

/* Issue 31 item 1: msg_order offers FI_ORDER_RAW/WAR/WAW, so the
 * matching ep_attr->max_order_*_size says up to what size that holds:
 * one-sided operations to a target run in posting order whatever their
 * size (opx_rma.c), so any size, -1 per fi_endpoint(3).  The fabtests
 * getinfo_{raw,war,waw}_ordering1/2 checks: with caps FI_RMA and the
 * order asked, the size is > 0; a size asked in the hints is met (the
 * returned size is at least the hint) or the call fails. */
static size_t *order_size(struct fi_ep_attr *ep, int i)
{
	return i == 0 ? &ep->max_order_raw_size
		      : i == 1 ? &ep->max_order_war_size : &ep->max_order_waw_size;
}

static void test_hint_order_sizes(void **state)
{
	(void)state;
	static const uint64_t orders[] = {FI_ORDER_RAW, FI_ORDER_WAR, FI_ORDER_WAW};
	static const size_t asked[] = {1, 4096, (size_t)1 << 30, SIZE_MAX};
	struct fi_info *fi = NULL;
	int i;

	assert_int_equal(getinfo(NULL, &fi), 0);
	for (i = 0; i < 3; i++) {
		assert_true(fi->tx_attr->msg_order & orders[i]);
		assert_true(*order_size(fi->ep_attr, i) == SIZE_MAX);
	}
	fi_freeinfo(fi);

	for (i = 0; i < 3; i++) {
		struct fi_info *h = hints_new();
		size_t k;

		h->caps = FI_RMA;
		h->tx_attr->msg_order = orders[i];
		h->rx_attr->msg_order = orders[i];
		assert_int_equal(getinfo(h, &fi), 0);
		assert_true(fi->tx_attr->msg_order & orders[i]);
		assert_true(*order_size(fi->ep_attr, i) > 0);
		fi_freeinfo(fi);
		for (k = 0; k < sizeof(asked) / sizeof(asked[0]); k++) {
			*order_size(h->ep_attr, i) = asked[k];
			fi = NULL;
			assert_int_equal(getinfo(h, &fi), 0);
			assert_true(*order_size(fi->ep_attr, i) >= asked[k]);
			fi_freeinfo(fi);
		}
		fi_freeinfo(h);
	}
}

/* Issue 31 item 4: MPICH's ch4:ofi first asks with FI_VERSION(0, 0); the
 * libfabric core passes it through and util providers (tcp, shm) answer
 * it like any version up to their own.  Only a newer API is refused. */
static void test_getinfo_version_zero(void **state)
{
	(void)state;
	struct fi_info *h = hints_new(), *fi = NULL;

	assert_int_equal(getinfo_v(FI_VERSION(0, 0), NULL, &fi), 0);
	assert_non_null(fi);
	assert_int_equal(fi->fabric_attr->api_version, FI_VERSION(0, 0));
	/* an API older than 1.5: an old-style memory registration mode */
	assert_int_equal(fi->domain_attr->mr_mode, FI_MR_SCALABLE);
	fi_freeinfo(fi);

	h->caps = FI_TAGGED;
	h->ep_attr->type = FI_EP_RDM;
	fi = NULL;
	assert_int_equal(getinfo_v(FI_VERSION(0, 0), h, &fi), 0);
	assert_non_null(fi);
	assert_true(fi->caps & FI_TAGGED);
	fi_freeinfo(fi);
	fi = NULL;
	assert_int_equal(getinfo_v(FI_VERSION(1, 0), h, &fi), 0);
	fi_freeinfo(fi);

	/* newer than the provider implements: no match */
	fi = (struct fi_info *)(uintptr_t)0x1;
	assert_int_equal(getinfo_v(FI_VERSION(1, 18), h, &fi), -FI_ENODATA);
	assert_null(fi);
	fi = (struct fi_info *)(uintptr_t)0x1;
	assert_int_equal(getinfo_v(FI_VERSION(2, 0), h, &fi), -FI_ENODATA);
	assert_null(fi);
	fi_freeinfo(h);
}

/* Issue 10 items 1-2: node and service are resolved, src_addr is always
 * returned (format and length known before an endpoint exists), a
 * src_addr in hints is honoured, an unresolvable node is -FI_ENODATA. */
static void test_node_service(void **state)
{
	(void)state;
	struct fi_info *h = hints_new(), *fi = NULL;
	const struct shim_addr *src, *dst;
	struct shim_addr mine;
	uint64_t host_id;

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;

	/* no node, no service: this host, no port */
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(fi->addr_format, FI_ADDR_OPX);
	assert_non_null(fi->src_addr);
	assert_int_equal(fi->src_addrlen, sizeof(struct shim_addr));
	src = fi->src_addr;
	host_id = src->host_id;
	assert_true(host_id != 0);
	assert_int_equal(src->udp_port, 0);
	assert_true(src->ipv4 != 0);
	assert_null(fi->dest_addr);
	fi_freeinfo(fi);

	/* a client: node and service name the peer */
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, "127.0.0.1", "47592", 0, h, &fi), 0);
	assert_non_null(fi->src_addr);
	assert_int_equal(fi->src_addrlen, sizeof(struct shim_addr));
	assert_non_null(fi->dest_addr);
	assert_int_equal(fi->dest_addrlen, sizeof(struct shim_addr));
	dst = fi->dest_addr;
	assert_int_equal(dst->ipv4, inet_addr("127.0.0.1"));
	assert_int_equal(dst->udp_port, htons(47592));
	assert_int_equal(dst->host_id, host_id); /* loopback is this host */
	assert_int_equal(dst->lid, 0);           /* context resolved at fi_av_insert */
	fi_freeinfo(fi);

	/* a server: the service is where its endpoint will be reachable */
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, "47592", FI_SOURCE, h, &fi), 0);
	src = fi->src_addr;
	assert_non_null(src);
	assert_int_equal(src->udp_port, htons(47592));
	assert_int_equal(src->host_id, host_id);
	assert_null(fi->dest_addr);
	fi_freeinfo(fi);

	/* a src_addr in hints is honoured */
	memset(&mine, 0, sizeof(mine));
	mine.host_id = host_id;
	mine.ipv4 = inet_addr("127.0.0.2");
	mine.udp_port = htons(4242);
	h->addr_format = FI_ADDR_OPX;
	h->src_addr = malloc(sizeof(mine));
	assert_non_null(h->src_addr);
	memcpy(h->src_addr, &mine, sizeof(mine));
	h->src_addrlen = sizeof(mine);
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, h, &fi), 0);
	assert_int_equal(fi->src_addrlen, sizeof(mine));
	assert_memory_equal(fi->src_addr, &mine, sizeof(mine));
	fi_freeinfo(fi);
	h->src_addrlen = 5; /* not our format */
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	free(h->src_addr);
	h->src_addr = NULL;
	h->src_addrlen = 0;

	/* names that do not resolve */
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, "no.such.host.invalid", NULL, 0, h, &fi),
			 -FI_ENODATA);
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, "999.1.1.1", "1", FI_NUMERICHOST, h, &fi),
			 -FI_ENODATA);
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, "127.0.0.1", "no-such-service-xyz", 0, h,
					    &fi),
			 -FI_ENODATA);
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, "127.0.0.1", "70000", 0, h, &fi),
			 -FI_ENODATA);
	fi_freeinfo(h);
}

/* Issue 10 item 1: a server endpoint opened with fi_getinfo(NULL, port,
 * FI_SOURCE) claims the port; a second one gets -FI_EADDRINUSE; a client
 * address from fi_getinfo("127.0.0.1", port, 0) inserts as the server's
 * full address; once the server is closed it no longer resolves. */
static void test_service_claim_resolve(void **state)
{
	(void)state;
	struct fi_info *h = hints_new(), *srv = NULL, *cli = NULL;
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep = NULL, *ep2 = NULL;
	struct shim_addr name, looked;
	size_t len = sizeof(name);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	char port[16];
	int ret = -FI_EADDRINUSE;

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED;
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	/* a random port, another one if some endpoint holds it */
	for (int tries = 0; tries < 20 && ret == -FI_EADDRINUSE; tries++) {
		snprintf(port, sizeof(port), "%d", 20000 + rand() % 40000);
		fi_freeinfo(srv);
		srv = NULL;
		assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, port, FI_SOURCE, h, &srv), 0);
		if (!ep) {
			assert_int_equal(fx_prov()->fabric(srv->fabric_attr, &fab, NULL), 0);
			assert_int_equal(fi_domain(fab, srv, &dom, NULL), 0);
			assert_int_equal(fi_av_open(dom, &av_attr, &av, NULL), 0);
			assert_int_equal(fi_cq_open(dom, &cq_attr, &cq, NULL), 0);
		}
		ret = fi_endpoint(dom, srv, &ep, NULL);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(ep, &av->fid, 0), 0);
	assert_int_equal(fi_enable(ep), 0);
	assert_int_equal(fi_getname(&ep->fid, &name, &len), 0);
	assert_int_equal(name.udp_port, htons((uint16_t)atoi(port)));

	/* the port is taken while the endpoint lives */
	assert_int_equal(fi_endpoint(dom, srv, &ep2, NULL), -FI_EADDRINUSE);

	/* a client's dest_addr resolves to the endpoint */
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, "127.0.0.1", port, 0, h, &cli), 0);
	assert_int_equal(fi_av_insert(av, cli->dest_addr, 1, &fa, 0, NULL), 1);
	len = sizeof(looked);
	assert_int_equal(fi_av_lookup(av, fa, &looked, &len), 0);
	assert_memory_equal(&looked, &name, sizeof(name));

	/* fi_av_insertsvc finds it the same way */
	fa = FI_ADDR_NOTAVAIL;
	assert_int_equal(fi_av_insertsvc(av, "127.0.0.1", port, &fa, 0, NULL), 1);
	len = sizeof(looked);
	assert_int_equal(fi_av_lookup(av, fa, &looked, &len), 0);
	assert_memory_equal(&looked, &name, sizeof(name));
	assert_int_equal(fi_av_insertsvc(av, "no.such.host.invalid", port, &fa, 0, NULL),
			 -FI_EADDRNOTAVAIL);

	/* closed: the port is free again and resolves to nothing */
	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_av_insert(av, cli->dest_addr, 1, &fa, 0, NULL), -FI_EADDRNOTAVAIL);
	assert_int_equal(fa, FI_ADDR_NOTAVAIL);
	assert_int_equal(fi_endpoint(dom, srv, &ep2, NULL), 0);
	assert_int_equal(fi_close(&ep2->fid), 0);

	assert_int_equal(fi_close(&cq->fid), 0);
	assert_int_equal(fi_close(&av->fid), 0);
	assert_int_equal(fi_close(&dom->fid), 0);
	assert_int_equal(fi_close(&fab->fid), 0);
	fi_freeinfo(cli);
	fi_freeinfo(srv);
	fi_freeinfo(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prov_ini_idempotent),
		cmocka_unit_test(test_param_defaults),
		cmocka_unit_test(test_params_listed),
		cmocka_unit_test(test_err_map),
		cmocka_unit_test(test_null_hints),
		cmocka_unit_test(test_hints_one_entry),
		cmocka_unit_test(test_info_fields_sane),
		cmocka_unit_test(test_rejected_hints),
		cmocka_unit_test(test_hint_threading),
		cmocka_unit_test(test_hint_av_type),
		cmocka_unit_test(test_hint_caps),
		cmocka_unit_test(test_hint_ompi_mtl),
		cmocka_unit_test(test_hint_names_match),
		cmocka_unit_test(test_hint_mr_mode),
		cmocka_unit_test(test_hint_order_sizes),
		cmocka_unit_test(test_getinfo_version_zero),
		cmocka_unit_test(test_node_service),
		cmocka_unit_test(test_service_claim_resolve),
	};
	fx_param_defaults(); /* parameters are read once per process */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
