/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx.h - private header of the opx provider: the object model shared by
 * the files in prov/.  The endpoint and its protocols live in opx_ep.h,
 * address vectors in opx_av.h, CQs and counters in opx_cq.h, their
 * progress sets in opx_wait.h.
 *
 * Locking: every object of a domain shares domain->lock.  It is a real
 * mutex only when the domain was opened with FI_THREAD_SAFE (or a mode
 * above FI_THREAD_DOMAIN); otherwise taking it is a predictable branch.
 * API entry points take it; internal functions (names ending in _locked,
 * or documented so) assume it is held.  Fabric and EQ have their own
 * always-on mutex (control path).  The lock itself: opx_lock.h.
 */
#ifndef OPX_H
#define OPX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "opx_list.h"
#include "opx_lock.h"
#include "shim_ring.h"
#include "shim_udp_wire.h"

#define OPX_PROV_NAME "opx"
#define OPX_FABRIC_NAME "opx"
#define OPX_VERSION_MAJOR 0
#define OPX_VERSION_MINOR 1
#define OPX_PROV_VERSION FI_VERSION(OPX_VERSION_MAJOR, OPX_VERSION_MINOR)
#define OPX_FI_VERSION FI_VERSION(1, 17)

#define OPX_IOV_LIMIT 4
/* FI_MSG_PREFIX: the space before the data of a send or receive buffer */
#define OPX_MSG_PREFIX_SIZE 8u
#define OPX_CQ_DATA_SIZE 8
#define OPX_TX_SIZE 1024
#define OPX_RX_SIZE 1024
#define OPX_MAX_EPS 256

/* Capabilities that really work; fi_getinfo never returns more. */
#define OPX_RMA_CAPS                                                                               \
	(FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT)
#define OPX_CAPS                                                                                   \
	(FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV |   \
	 FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SOURCE_ERR | FI_NAMED_RX_CTX | OPX_RMA_CAPS)
/* Supported, but changes what completions look like: only when asked. */
#define OPX_CAPS_ASKED_ONLY FI_SOURCE_ERR
#define OPX_TX_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE)
#define OPX_RX_CAPS                                                                                \
	(FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV |             \
	 FI_SOURCE_ERR | FI_RMA | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT)
/* One-sided operations between two endpoints are executed at the target
 * in posting order (opx_rma.c): reads, writes and atomics are ordered
 * among themselves, and after earlier sends (RAS: both go through one
 * ordered queue).  No SAW/SAR: a send may overtake a multi-chunk write
 * still queued for credits. */
#define OPX_MSG_ORDER                                                                              \
	(FI_ORDER_SAS | FI_ORDER_RAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW |  \
	 FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW)

extern struct fi_provider opx_prov;

#define OPX_WARN(subsys, ...) FI_WARN(&opx_prov, subsys, __VA_ARGS__)
#define OPX_INFO(subsys, ...) FI_INFO(&opx_prov, subsys, __VA_ARGS__)
/* FI_DBG only prints in a libfabric built with ENABLE_DEBUG, which a
 * provider plugin cannot rely on: a debug build of opx (--enable-debug)
 * logs OPX_DBG at FI_LOG_DEBUG itself; other builds compile it out. */
#ifdef OPX_DEBUG
#define OPX_DBG(subsys, ...) FI_LOG(&opx_prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)
#else
#define OPX_DBG(subsys, ...) FI_DBG(&opx_prov, subsys, __VA_ARGS__)
#endif

/* ---------------------------------------------------------------------
 * Parameters: every tunable, defined with fi_param_define in opx_init.c
 * and read once at init into opx_env.
 */
struct opx_params {
	int units;            /* FI_OPX_UNITS: software units to model */
	int unit;             /* FI_OPX_UNIT: force a unit (-1: by NUMA) */
	size_t mtu;           /* FI_OPX_MTU: payload bytes per packet */
	size_t hdrq_entries;  /* FI_OPX_HDRQ_ENTRIES */
	size_t eager_bytes;   /* FI_OPX_EAGER_RING_BYTES */
	size_t inject_size;   /* FI_OPX_INJECT_SIZE: fi_inject limit */
	size_t eager_max;     /* FI_OPX_EAGER_MAX: largest (multi-packet) eager message
			       * to a peer of the shm wire */
	size_t udp_eager_max; /* FI_OPX_UDP_EAGER_MAX: the same to a peer of the udp wire */
	size_t max_msg_size;  /* advertised: rendezvous has no limit of its own */
	size_t ux_max_bytes;  /* FI_OPX_UX_MAX_BYTES: unexpected payload bound per endpoint */
	size_t ux_peer_max_bytes; /* FI_OPX_UX_PEER_MAX_BYTES: of it, per sender at most */
	int jkey;             /* FI_OPX_JKEY, else from the job identity (opx_jkey_src) */
	int jkey_src;         /* OPX_JKEY_SRC_*: where jkey came from */
	int spin_count;       /* FI_OPX_SPIN_COUNT: empty polls before yielding */
	int sleep_ms;         /* FI_OPX_SLEEP_MS: bounded sleep slice in blocking waits */
	bool rndv_cma;        /* FI_OPX_RNDV_CMA: pull with CMA (else SDMA/TID push) */
	bool msg_prefix;      /* FI_OPX_MSG_PREFIX: FI_MSG_PREFIX when the hints offer it */
	bool udp_gro;         /* FI_OPX_UDP_GRO: the udp socket takes a run of datagrams at once */
	bool udp_pack;        /* FI_OPX_UDP_PACK: small packets to one peer share datagrams */
	bool udp_crc;         /* FI_OPX_UDP_CRC: CRC32C of every payload on the udp wire */
	size_t rndv_split;    /* FI_OPX_RNDV_SPLIT: sender writes half from this size (0: off) */
	size_t rma_cma;       /* FI_OPX_RMA_CMA: one-sided ops from this size copy once (0: off) */
	size_t rma_direct_write; /* FI_OPX_RMA_DIRECT_WRITE: initiator copies by itself (0: off) */
	size_t rma_direct_read;  /* FI_OPX_RMA_DIRECT_READ: the same for reads */
	int rma_direct_idle_ms;  /* FI_OPX_RMA_DIRECT_IDLE_MS: smaller too to a target not polling */
	bool checksum;        /* FI_OPX_CHECKSUM: seal eager packets, require seals (opx_csum.c) */
	char *stats;          /* FI_OPX_STATS: "stderr" or a path pattern (opx_stats.c), NULL: off */
	bool oversubscribed;  /* the launcher put more ranks here than CPUs are online */
	int wire;             /* FI_OPX_WIRE: SHIM_WIRE_AUTO, _SHM or _UDP */
	char *iface;          /* FI_OPX_IFACE: interface of the udp wire, NULL: first up */
	int peer_timeout;     /* FI_OPX_PEER_TIMEOUT: seconds without an ack before a peer is dead */
	struct shim_fault fault; /* FI_OPX_FAULT_*: udp fault injection (tests) */
	int auth;             /* FI_OPX_AUTH: SHIM_AUTH_* of the udp wire */
};
extern struct opx_params opx_env;

/* The udp wire's authentication (opx_auth.c): the mode FI_OPX_AUTH asks
 * for, and the job's secret (false: none found; the wire stays closed
 * unless the mode is off).  from says where it came from (log). */
int opx_auth_mode(void);
const char *opx_auth_mode_name(int mode);
bool opx_auth_secret(uint8_t key[SHIM_AUTH_KEY_BYTES], const char **from);

/* Where the job key came from, in order of precedence.  Peers must share
 * it: a sender refuses (-FI_EACCES) a receiver with another key. */
enum opx_jkey_src {
	OPX_JKEY_SRC_UID = 0, /* last resort: the same for every job of a user */
	OPX_JKEY_SRC_JKEY,    /* FI_OPX_JKEY */
	OPX_JKEY_SRC_UUID,    /* FI_OPX_UUID */
	OPX_JKEY_SRC_PMIX,    /* PMIX_NAMESPACE (Open MPI, srun --mpi=pmix) */
	OPX_JKEY_SRC_ORTE,    /* OMPI_MCA_orte_ess_jobid */
	OPX_JKEY_SRC_OMPI,    /* OMPI_MCA_ess_base_jobid */
	OPX_JKEY_SRC_HYDRA,   /* I_MPI_HYDRA_UUID (Intel MPI, MPICH hydra) */
	OPX_JKEY_SRC_SLURM,   /* SLURM_JOB_ID[.SLURM_STEP_ID] */
	OPX_JKEY_SRC_COUNT
};
const char *opx_param_jkey_src_name(int src); /* opx_param.c */

/* opx_init.c: open the shim device with opx_env's parameters (-FI_E*). */
int opx_init_dev_open(struct shim_dev **devp);

/* opx_init.c: map a shim -errno (or plain -errno) to -FI_E*.  One place
 * for it. */
int opx_init_err_from_shim(int err);

/* ---------------------------------------------------------------------
 * Fabric.
 */
struct opx_fabric {
	struct fid_fabric fabric_fid;
	struct shim_dev *dev;
	_Atomic int refcnt; /* domains, eqs */
	pthread_mutex_t lock;
};

int opx_init_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);

/* ---------------------------------------------------------------------
 * Domain and memory registration.
 */
struct opx_mr {
	struct fid_mr mr_fid;
	struct opx_domain *domain;
	uint64_t access;
	uint64_t flags;
	uint64_t offset;
	size_t iov_count;
	struct iovec iov[OPX_IOV_LIMIT];
	size_t len;            /* bytes in iov[], the remote-accessible range */
	bool probe;            /* a piece at NULL: accesses probed first (opx_mr.c) */
	struct opx_cntr *cntr; /* fi_mr_bind (FI_RMA_EVENT): counts remote accesses */
	uint64_t cntr_flags;   /* FI_REMOTE_WRITE and/or FI_REMOTE_READ */
	struct opx_mr *hnext;  /* domain->mr_table chain (opx_mr.c) */
};

/* Keys of a domain: chained hash table, O(1) lookup (opx_mr.c). */
struct opx_mr_table {
	struct opx_mr **bucket;
	size_t mask; /* buckets - 1 */
	size_t count;
};

struct opx_domain {
	struct fid_domain domain_fid;
	struct opx_fabric *fabric;
	struct opx_lock lock;
	enum fi_threading threading;
	uint64_t mr_mode;
	uint32_t addr_format; /* FI_ADDR_OPX, FI_SOCKADDR_IN or FI_SOCKADDR (opx_addr.c) */
	int unit;
	_Atomic int refcnt; /* av, cq, cntr, ep, mr */
	struct opx_mr_table mr_table;
	uint64_t next_mr_key;
	/* endpoints publishing the regions in their region tables (opx_mr.c) */
	struct opx_list rgn_eps;
	struct opx_auto *autop; /* FI_PROGRESS_AUTO: the progress thread (opx_auto.c) */
	bool auto_self;         /* lock held: the progress thread is progressing */
};

/* opx_auto.c: the progress thread of a FI_PROGRESS_AUTO domain.  Start at
 * domain open, stop at close; endpoints join at fi_enable and leave at
 * close (lock held). */
struct opx_auto;
struct opx_ep;
int opx_auto_start(struct opx_domain *d);
void opx_auto_stop(struct opx_domain *d);
int opx_auto_add_locked(struct opx_domain *d, struct opx_ep *ep);
void opx_auto_remove_locked(struct opx_domain *d, struct opx_ep *ep);

int opx_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
		    void *context);
struct opx_mr *opx_mr_find_locked(struct opx_domain *domain, uint64_t key);
extern struct fi_ops_mr opx_domain_mr_ops; /* opx_mr.c */
void opx_mr_table_free(struct opx_mr_table *t);

/* ---------------------------------------------------------------------
 * Event queue (control path; RDM endpoints rarely post to it).
 */
struct opx_eq {
	struct fid_eq eq_fid;
	struct opx_fabric *fabric;
	struct opx_lock lock; /* always on: its own, not the domain's */
	struct opx_list events;
	struct opx_list errors;
	enum fi_wait_obj wait_obj;
	int efd; /* eventfd when FI_WAIT_FD */
	_Atomic int refcnt;
};

int opx_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
		void *context);

/* ---------------------------------------------------------------------
 * Endpoint hooks used by CQ/counter progress (opx_ep.c, opx_progress.c).
 */
int opx_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		void *context);
/* fi_scalable_ep (opx_sep.c). */
int opx_sep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
		 void *context);
/* One progress step of an endpoint (opx_progress.c).  Lock held.
 * Returns what the step counts towards FI_OPX_SPIN_COUNT: 0 when it
 * found work, 1 for an empty look at the rings, more when it also
 * polled the udp socket (a system call). */
uint32_t opx_progress_locked(struct opx_ep *ep);

/* ---------------------------------------------------------------------
 * Info (opx_info.c).
 */
int opx_info_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		     const struct fi_info *hints, struct fi_info **info);
/* The unresolved address (lid 0) that node and service name, as in a
 * dest_addr from fi_getinfo: 0, -FI_ENODATA when either does not
 * resolve, -FI_EINVAL when one is missing.  fi_av_insert resolves it. */
int opx_info_addr_from_node(struct shim_dev *dev, const char *node, const char *service,
			    uint64_t flags, struct shim_addr *a);
/* A template fi_info describing everything opx supports. */
struct fi_info *opx_info_template(void);

/* Default op handlers for fid ops opx does not implement (opx_init.c). */
int opx_init_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int opx_init_no_control(struct fid *fid, int command, void *arg);
int opx_init_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
			 void *context);

#endif /* OPX_H */
