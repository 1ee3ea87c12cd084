/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_init.c - provider entry point, parameters, error mapping, fabric.
 *
 * Every tunable is declared here, once, with its default in the help text,
 * so `fi_info -e -p opx` documents the provider.  Values are read exactly
 * once (first fi_prov_ini) into opx_env by opx_param.c, which this file
 * calls and which calls nothing here; defaults and bounds are in
 * opx_param.h.  The data path never calls getenv.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opx_ep.h"
#include "opx_param.h"
#include "opx_wait.h"

static void opx_init_cleanup(void);

struct fi_provider opx_prov = {
	.name = OPX_PROV_NAME,
	.version = OPX_PROV_VERSION,
	.fi_version = OPX_FI_VERSION,
	.getinfo = opx_info_getinfo,
	.fabric = opx_init_fabric_open,
	.cleanup = opx_init_cleanup,
};

/* fi_prov_ini may be called more than once in a process (the core loads
 * the DSO once, but the unit tests call it directly per test); parameters
 * are defined and read only on the first call. */
struct fi_provider *fi_prov_ini(void); /* fi_prov.h only has FI_EXT_INI */
static pthread_once_t opx_ini_once = PTHREAD_ONCE_INIT;

/* ---------------------------------------------------------------------
 * Parameters.
 */
static void opx_init_params_define(void)
{
	fi_param_define(&opx_prov, "UNITS", FI_PARAM_INT,
			"Number of software SuperNIC units to model, 1..%u (default: %d)",
			SHIM_MAX_UNITS, OPX_DEF_UNITS);
	fi_param_define(&opx_prov, "UNIT", FI_PARAM_INT,
			"Force this unit for every endpoint; -1 selects by NUMA locality (default: %d)",
			OPX_DEF_UNIT);
	fi_param_define(&opx_prov, "MTU", FI_PARAM_SIZE_T,
			"Payload bytes per packet, power of two in %zu..%u (default: %zu)", OPX_MIN_MTU,
			SHIM_MTU_MAX, OPX_DEF_MTU);
	fi_param_define(&opx_prov, "HDRQ_ENTRIES", FI_PARAM_SIZE_T,
			"Receive header queue entries per endpoint, power of two in %zu..%zu "
			"(default: %zu)",
			OPX_MIN_HDRQ, OPX_MAX_HDRQ, OPX_DEF_HDRQ_ENTRIES);
	fi_param_define(&opx_prov, "EAGER_RING_BYTES", FI_PARAM_SIZE_T,
			"Eager receive ring bytes per endpoint, power of two in 4 x MTU..%zu "
			"(default: %zu)",
			OPX_MAX_EAGER_BYTES, OPX_DEF_EAGER_BYTES);
	fi_param_define(&opx_prov, "INJECT_SIZE", FI_PARAM_SIZE_T,
			"Largest fi_inject message, <= MTU and <= EAGER_MAX, so that an inject is "
			"always copied out before the call returns (default: %zu)",
			OPX_DEF_INJECT_SIZE);
	fi_param_define(&opx_prov, "EAGER_MAX", FI_PARAM_SIZE_T,
			"Largest (multi-packet) eager message to a peer on this host (shm wire); "
			"larger ones use rendezvous (single copy with Cross Memory Attach). "
			"1..EAGER_RING_BYTES/4 and at most HDRQ_ENTRIES/4 packets; a receiver's "
			"smaller limit wins (default: %zu)",
			OPX_DEF_EAGER_MAX);
	fi_param_define(&opx_prov, "UDP_EAGER_MAX", FI_PARAM_SIZE_T,
			"Largest (multi-packet) eager message to a peer on another host (udp "
			"wire); larger ones use rendezvous (SDMA push into the receiver's "
			"expected-receive registration after a round trip). Bounded like "
			"EAGER_MAX, to %zu and to %u datagrams of the path MTU; from 1 KiB "
			"rounded down to a multiple of 1 KiB (datagrams carry it in KiB); a "
			"receiver's smaller limit wins (default: %zu)",
			OPX_UDP_EAGER_CAP, OPX_UDP_MP_MAX, OPX_DEF_UDP_EAGER_MAX);
	fi_param_define(&opx_prov, "UX_MAX_BYTES", FI_PARAM_SIZE_T,
			"Bound on unexpected message payload buffered per endpoint (default: %zu)",
			OPX_DEF_UX_MAX_BYTES);
	fi_param_define(&opx_prov, "UX_PEER_MAX_BYTES", FI_PARAM_SIZE_T,
			"Of that bound, what one sender may hold at most; beyond it, or beyond its "
			"fair share once the endpoint's bound is reached, its packets are held "
			"back while other senders' keep flowing (default: FI_OPX_UX_MAX_BYTES)");
	fi_param_define(&opx_prov, "JKEY", FI_PARAM_INT,
			"Job key 1..65535 that peers must share; -1 derives it from FI_OPX_UUID, "
			"else the launcher's job id, else the uid (default: %d)",
			OPX_DEF_JKEY);
	fi_param_define(&opx_prov, "UUID", FI_PARAM_STRING,
			"Job identity: only processes with the same job key talk to each other "
			"(a sender gets -FI_EACCES otherwise).  Unset: the launcher's job id "
			"(PMIX_NAMESPACE, OMPI_MCA_orte_ess_jobid, OMPI_MCA_ess_base_jobid, "
			"I_MPI_HYDRA_UUID, SLURM_JOB_ID.SLURM_STEP_ID, first found), else one "
			"key per uid, so processes started by hand still meet (default: unset)");
	fi_param_define(&opx_prov, "SPIN_COUNT", FI_PARAM_INT,
			"Empty polls before a blocking wait yields, 0..%d (default: %d; %d when "
			"the launcher (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS) starts more "
			"ranks on the host than it has CPUs)",
			OPX_MAX_SPIN_COUNT, OPX_DEF_SPIN_COUNT, OPX_OVERSUB_SPIN_COUNT);
	fi_param_define(&opx_prov, "SLEEP_MS", FI_PARAM_INT,
			"Longest single sleep in a blocking wait, 1..%d ms (default: %d)",
			OPX_MAX_SLEEP_MS, OPX_DEF_SLEEP_MS);
	fi_param_define(&opx_prov, "MSG_PREFIX", FI_PARAM_BOOL,
			"Give FI_MSG_PREFIX mode (8 bytes before the data of every send and receive "
			"buffer) to applications whose hints offer it; off, the mode is never "
			"required (opx needs no prefix; fi_pingpong offers the mode but leaves no "
			"prefix on RDM endpoints) (default: false)");
	fi_param_define(&opx_prov, "UDP_GRO", FI_PARAM_BOOL,
			"udp wire: ask the kernel for UDP_GRO, so that one receive takes a whole run "
			"of a sender's datagrams (a GSO send, or what the interface coalesced) "
			"instead of one datagram each; each datagram of the run is still checked on "
			"its own (default: true)");
	fi_param_define(&opx_prov, "UDP_PACK", FI_PARAM_BOOL,
			"udp wire: small packets to a peer that still has datagrams in flight wait "
			"for company and share a datagram (up to 64, each still sequenced, checked "
			"and acknowledged on its own); a packet to a peer with nothing in flight goes "
			"at once.  What waits goes at the next progress call (any completion or "
			"counter read, a blocking wait), or as soon as a datagram's worth waits "
			"(default: true)");
	fi_param_define(&opx_prov, "UDP_CRC", FI_PARAM_BOOL,
			"udp wire: the CRC32C in each datagram's header covers its payload too, "
			"not only the headers.  Off, a payload's integrity is the UDP checksum's, "
			"which the NIC or the kernel computes and checks (as for TCP); the MAC "
			"(FI_OPX_AUTH) covers the headers either way.  Each sender decides for "
			"its own datagrams, receivers check what the header says; costs about "
			"0.1 ns per byte on each side, a fifth of the bandwidth on a 1500-byte "
			"path (default: false)");
	fi_param_define(&opx_prov, "RNDV_CMA", FI_PARAM_BOOL,
			"Rendezvous pulls large messages with one Cross Memory Attach copy; "
			"0 forces the SDMA/TID push path (two copies through shared memory), "
			"which is also used automatically where CMA is not permitted. With CMA on "
			"and Yama's ptrace_scope at 1, each endpoint calls "
			"prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), which lets any process of the "
			"user attach to the whole application (default: %d)",
			1);
	fi_param_define(&opx_prov, "RNDV_SPLIT", FI_PARAM_SIZE_T,
			"From this message size the CMA rendezvous copy is split: the receiver "
			"reads the first half while the sender writes the second, so both cores "
			"copy at once, unless the receiver has rendezvous sends of its own in "
			"flight (its peers are busy pulling them); a receiver that refuses CMA "
			"writes (not dumpable, Yama) makes the receiver pull that half too; 0 "
			"disables (default: %zu; 0 when "
			"more ranks than CPUs run on the host, see SPIN_COUNT)",
			OPX_DEF_RNDV_SPLIT);
	fi_param_define(&opx_prov, "RMA_CMA", FI_PARAM_SIZE_T,
			"From this size an RMA read or write of more than one MTU between "
			"processes of one host is one Cross Memory Attach copy after the target "
			"checked key, range and access (a read copied by the target, a write by "
			"the initiator into the pieces the target granted); smaller ones, all "
			"over the udp wire, and all where the target may not use CMA "
			"(FI_OPX_RNDV_CMA=0 there, Yama) go in MTU chunks; 0 disables "
			"(default: %zu)",
			OPX_DEF_RMA_CMA);
	fi_param_define(&opx_prov, "RMA_DIRECT_WRITE", FI_PARAM_SIZE_T,
			"From this size an RMA write to a process of this host whose region "
			"is in its endpoint's published region table is one Cross Memory "
			"Attach copy by the initiator, checked by the initiator against the "
			"table, completed at once: the target's progress is not needed.  Not "
			"with remote CQ data, while other one-sided operations of the endpoint "
			"are outstanding, to a region with a counter, or to an endpoint with "
			"remote counters; those go through the target.  0 disables "
			"(default: %zu)",
			OPX_DEF_RMA_DIRECT_WRITE);
	fi_param_define(&opx_prov, "RMA_DIRECT_READ", FI_PARAM_SIZE_T,
			"The same for RMA reads (default: %zu)", OPX_DEF_RMA_DIRECT_READ);
	fi_param_define(&opx_prov, "RMA_DIRECT_IDLE_MS", FI_PARAM_INT,
			"Smaller reads and writes are copied by the initiator too when the "
			"target has not polled for this many milliseconds or sleeps in a "
			"blocking wait (it computes: the request would wait for its next call "
			"into libfabric); 0: never (default: %d)",
			OPX_DEF_RMA_DIRECT_IDLE_MS);
	fi_param_define(&opx_prov, "CHECKSUM", FI_PARAM_BOOL,
			"Seal every eager packet sent with a CRC32C of header and payload, and "
			"drop eager packets received unsealed or with a wrong checksum; senders "
			"seal for a receiver that asks whatever their own setting. Detects "
			"corruption of the shared rings, is no protection against a hostile "
			"process of the same user (default: %d)",
			0);
	fi_param_define(&opx_prov, "WIRE", FI_PARAM_STRING,
			"Which wire carries packets: 'auto' (shared memory to this host's "
			"peers, udp to other hosts and network namespaces), 'shm' (no udp "
			"socket: one-host jobs only), 'udp' (every peer, this host's too; for "
			"testing) (default: auto)");
	fi_param_define(&opx_prov, "IFACE", FI_PARAM_STRING,
			"Network interface of the udp wire; its IPv4 address goes into the "
			"endpoint's name and its MTU sizes the datagrams (default: the first "
			"interface that is up and not loopback, else loopback)");
	fi_param_define(&opx_prov, "AUTH", FI_PARAM_STRING,
			"What the MAC of every udp datagram covers: 'header' (both headers, "
			"control datagrams whole), 'full' (the payload too), 'off' (nothing: "
			"anyone who reaches the socket can inject; benchmarks only). Keyed by "
			"the job's secret (AUTH_KEY, else the user's key file mixed with the "
			"launcher's job secret); every process of a job must use the same mode "
			"(default: header)");
	fi_param_define(&opx_prov, "AUTH_KEY", FI_PARAM_STRING,
			"The udp wire's secret, 16 to 64 bytes in hex, the same in every process "
			"of the job; replaces the key file (default: unset)");
	fi_param_define(&opx_prov, "AUTH_KEY_FILE", FI_PARAM_STRING,
			"The user's udp wire key file: 64 hex digits, mode 0600, owned by the "
			"user, not a symlink; created with a random key on first use; hosts must "
			"share it (a shared home does) or get a copy. Mixed with the launcher's "
			"job secret (OMPI_MCA_orte_precondition_transports, FI_OPX_UUID) where "
			"one exists (default: $XDG_CONFIG_HOME/opx/auth.key, else "
			"~/.config/opx/auth.key)");
	fi_param_define(&opx_prov, "PEER_TIMEOUT", FI_PARAM_INT,
			"Seconds a udp peer may be silent, or leave sent packets unacknowledged "
			"without saying it holds them (a live peer that computes or whose ring "
			"is full does), before it is declared dead: its pending operations "
			"complete in error and sends to it fail (default: %d)",
			OPX_DEF_PEER_TIMEOUT);
	fi_param_define(&opx_prov, "FAULT_DROP", FI_PARAM_STRING,
			"udp wire fault injection, for tests: percentage of datagrams sent that "
			"are dropped, e.g. 1 or 0.5 (default: 0)");
	fi_param_define(&opx_prov, "FAULT_DUP", FI_PARAM_STRING,
			"udp fault injection: percentage of datagrams sent twice (default: 0)");
	fi_param_define(&opx_prov, "FAULT_REORDER", FI_PARAM_STRING,
			"udp fault injection: percentage of datagrams held back and sent after "
			"the next one (default: 0)");
	fi_param_define(&opx_prov, "FAULT_CORRUPT", FI_PARAM_STRING,
			"udp fault injection: percentage of datagrams with one byte changed "
			"after the checksum was computed (default: 0)");
	fi_param_define(&opx_prov, "FAULT_SEED", FI_PARAM_SIZE_T,
			"udp fault injection: seed of the decisions; a seed replays the same "
			"decisions for the same sequence of datagrams (default: 1)");
	fi_param_define(&opx_prov, "STATS", FI_PARAM_STRING,
			"Write each endpoint's telemetry when it closes: 'stderr' prints a short "
			"table, anything else is a file path pattern (%%h host, %%p pid) for one "
			"JSON file per process, merged per job by opx_stats (default: unset, off)");
}

static void opx_init_once_fn(void)
{
	shim_crc_init();
	opx_init_params_define();
	opx_param_load();
}

__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
	pthread_once(&opx_ini_once, opx_init_once_fn);
	return &opx_prov;
}

static void opx_init_cleanup(void)
{
	/* Nothing process-wide to release: fabrics own their devices. */
}

/* ---------------------------------------------------------------------
 * Errors.
 */
int opx_init_err_from_shim(int err)
{
	static _Atomic int warned;

	if (err >= 0)
		return err;
	switch (-err) {
	case EAGAIN:
		return -FI_EAGAIN;
	case ENOMEM:
		return -FI_ENOMEM;
	case EINVAL:
		return -FI_EINVAL;
	case EMSGSIZE:
		return -FI_EMSGSIZE;
	case EBUSY:
		return -FI_EBUSY;
	case EPERM:
	case EACCES:
		return -FI_EACCES;
	/* A peer that is gone, reused or out of reach: to the application the
	 * address simply no longer names a usable endpoint. */
	case ENOENT:
	case ESTALE:
	case EHOSTUNREACH:
		return -FI_EADDRNOTAVAIL;
	case EADDRINUSE: /* a service port another live endpoint holds */
		return -FI_EADDRINUSE;
	case ETIMEDOUT:
		return -FI_ETIMEDOUT;
	case ENOSPC:
		return -FI_ENOSPC;
	case ENOSYS:
		return -FI_ENOSYS;
	case EPROTO: /* no FI_EPROTO in fi_errno.h: ABI mismatch with a peer */
	default:
		if (!atomic_exchange(&warned, 1))
			OPX_WARN(FI_LOG_CORE, "unexpected shim error %d (%s), reported as FI_EOTHER\n",
				 err, shim_dev_strerror(err));
		return -FI_EOTHER;
	}
}

int opx_init_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid;
	(void)bfid;
	(void)flags;
	return -FI_ENOSYS;
}

int opx_init_no_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)command;
	(void)arg;
	return -FI_ENOSYS;
}

int opx_init_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
			 void *context)
{
	(void)fid;
	(void)name;
	(void)flags;
	(void)ops;
	(void)context;
	return -FI_ENOSYS;
}

/* ---------------------------------------------------------------------
 * Fabric.
 */
static int opx_init_fabric_close(struct fid *fid)
{
	struct opx_fabric *fab;

	if (!fid || fid->fclass != FI_CLASS_FABRIC)
		return -FI_EINVAL;
	fab = OPX_CONTAINER_OF(fid, struct opx_fabric, fabric_fid.fid);
	if (atomic_load(&fab->refcnt) > 0) {
		OPX_INFO(FI_LOG_FABRIC, "fabric still has %d open domains/eqs\n",
			 atomic_load(&fab->refcnt));
		return -FI_EBUSY;
	}
	shim_dev_close(fab->dev);
	pthread_mutex_destroy(&fab->lock);
	free(fab);
	return 0;
}

static int opx_init_fabric_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
				      struct fid_pep **pep, void *context)
{
	(void)fabric;
	(void)info;
	(void)pep;
	(void)context;
	return -FI_ENOSYS; /* RDM only: there is no connection manager */
}

static int opx_init_fabric_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
				     struct fid_wait **waitset)
{
	(void)fabric;
	(void)attr;
	(void)waitset;
	return -FI_ENOSYS;
}

static struct fi_ops opx_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_init_fabric_close,
	.bind = opx_init_no_bind,
	.control = opx_init_no_control,
	.ops_open = opx_init_no_ops_open,
};

static struct fi_ops_fabric opx_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = opx_domain_open,
	.passive_ep = opx_init_fabric_passive_ep,
	.eq_open = opx_eq_open,
	.wait_open = opx_init_fabric_wait_open,
	.trywait = opx_wait_trywait,
};

/* The shim has no logger of its own: what a user must hear about (names
 * squatted by another user, an unusable wake-up directory) comes here. */
static void opx_init_shim_warn(const char *msg)
{
	OPX_WARN(FI_LOG_CORE, "%s\n", msg);
}

/* The udp wire's secret, when it may be opened: without one (and with a
 * MAC asked for) the wire stays closed, so nothing unauthenticated is
 * ever accepted. */
static void opx_init_dev_params_auth(struct shim_dev_params *dp)
{
	static _Atomic int said;
	const char *from = NULL;

	if (dp->wire == SHIM_WIRE_SHM)
		return;
	if (dp->auth == SHIM_AUTH_OFF) {
		if (!atomic_exchange(&said, 1))
			OPX_WARN(FI_LOG_CORE,
				 "FI_OPX_AUTH=off: the udp wire accepts datagrams from anyone who can "
				 "reach its socket (benchmarks only)\n");
		return;
	}
	if (!opx_auth_secret(dp->auth_key, &from)) {
		if (!atomic_exchange(&said, 1))
			OPX_WARN(FI_LOG_CORE,
				 "no udp wire secret (FI_OPX_AUTH_KEY, the key file FI_OPX_AUTH_KEY_FILE, "
				 "a launcher's job secret): no udp wire, this host's peers only\n");
		dp->wire = SHIM_WIRE_SHM;
		return;
	}
	if (!atomic_exchange(&said, 1))
		OPX_INFO(FI_LOG_CORE,
			 "udp wire: FI_OPX_AUTH=%s, secret from %s; payload CRC32C %s "
			 "(FI_OPX_UDP_CRC)\n",
			 opx_auth_mode_name(dp->auth), from, dp->udp_no_crc ? "off" : "on");
}

/* Device parameters as the shim wants them, from the validated opx_env. */
static void opx_init_dev_params(struct shim_dev_params *dp)
{
	memset(dp, 0, sizeof(*dp));
	dp->num_units = opx_env.units;
	dp->force_unit = opx_env.unit;
	dp->mtu = (uint32_t)opx_env.mtu;
	dp->hdrq_cnt = (uint32_t)opx_env.hdrq_entries;
	dp->egr_bytes = (uint32_t)opx_env.eager_bytes;
	dp->jkey = (uint16_t)opx_env.jkey;
	dp->jkey_src = (uint8_t)opx_env.jkey_src;
	dp->warn = opx_init_shim_warn;
	dp->wire = opx_env.wire;
	if (opx_env.iface)
		snprintf(dp->iface, sizeof(dp->iface), "%s", opx_env.iface);
	dp->fault = opx_env.fault;
	dp->auth = opx_env.auth;
	dp->udp_no_gro = !opx_env.udp_gro;
	dp->udp_no_pack = !opx_env.udp_pack;
	dp->udp_no_crc = !opx_env.udp_crc;
	opx_init_dev_params_auth(dp);
}

/* Open the process-wide device with opx_env's parameters.  Shared with
 * opx_info.c (fi_getinfo probes the device); its prototype is repeated
 * there until opx.h gains it (proposed in the init/info report). */
int opx_init_dev_open(struct shim_dev **devp)
{
	struct shim_dev_params dp;

	fi_prov_ini(); /* parameters, in case the core was bypassed */
	opx_init_dev_params(&dp);
	return opx_init_err_from_shim(shim_dev_open(&dp, devp));
}

int opx_init_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	struct opx_fabric *fab;
	int ret;

	if (!attr || !fabric)
		return -FI_EINVAL;
	if (attr->name && strcmp(attr->name, OPX_FABRIC_NAME)) {
		OPX_INFO(FI_LOG_FABRIC, "fabric name '%s' is not '%s'\n", attr->name,
			 OPX_FABRIC_NAME);
		return -FI_ENODATA;
	}
	if (attr->prov_name && strcmp(attr->prov_name, OPX_PROV_NAME)) {
		OPX_INFO(FI_LOG_FABRIC, "provider name '%s' is not '%s'\n", attr->prov_name,
			 OPX_PROV_NAME);
		return -FI_ENODATA;
	}

	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	ret = opx_init_dev_open(&fab->dev);
	if (ret) {
		OPX_WARN(FI_LOG_FABRIC, "cannot open the SuperNIC device: %s\n", fi_strerror(-ret));
		free(fab);
		return ret;
	}
	pthread_mutex_init(&fab->lock, NULL);
	atomic_init(&fab->refcnt, 0);
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &opx_fabric_fi_ops;
	fab->fabric_fid.ops = &opx_fabric_ops;
	/* The core sets this too; set it for callers that bypass the core. */
	fab->fabric_fid.api_version = attr->api_version ? attr->api_version : OPX_FI_VERSION;
	*fabric = &fab->fabric_fid;
	return 0;
}
