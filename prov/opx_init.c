/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_init.c - provider entry point, parameters, error mapping, fabric.
 *
 * Every tunable is declared here, once, with its default in the help text,
 * so `fi_info -e -p opx` documents the provider.  Values are read exactly
 * once (first fi_prov_ini) into opx_env; the data path never calls getenv.
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

/* Defaults, named so the help text and the fallback cannot disagree. */
#define OPX_DEF_UNITS 1
#define OPX_DEF_UNIT (-1)
#define OPX_DEF_MTU ((size_t)SHIM_MTU_DEFAULT)
#define OPX_DEF_HDRQ_ENTRIES ((size_t)SHIM_HDRQ_CNT_DEFAULT)
#define OPX_DEF_EAGER_BYTES ((size_t)SHIM_EGR_BYTES_DEFAULT)
#define OPX_DEF_INJECT_SIZE ((size_t)8192)
#define OPX_DEF_EAGER_MAX ((size_t)8192)
/* Across hosts a rendezvous pays a round trip (RTS, then CTS) of about
 * 7 us before any data moves, where the shm wire's costs 0.3; eager
 * costs copies (send ring, reorder stash, receive ring, receive buffer)
 * that the push of a rendezvous saves.  Between two namespace hosts (MTU
 * 9000, opx_bw -m lat, best of 4-8 runs on a loaded 2-core machine):
 * 16 KiB 20-22 us eager against 33-45 rendezvous, 32 KiB 40 against
 * 45-51, from 40 KiB eager slower.  A lost last datagram of an eager
 * message waits for the retransmission timeout (1 ms at least), which
 * hurt eager more than rendezvous when the machine was overloaded.
 * Bounded like EAGER_MAX by the receive rings. */
#define OPX_DEF_UDP_EAGER_MAX ((size_t)32 << 10)
#define OPX_UDP_EAGER_CAP ((size_t)255 << 10)
/* Rendezvous pulls with Cross Memory Attach, which has no size limit of
 * its own; 1 TiB keeps lengths well inside every 64-bit computation. */
#define OPX_DEF_MAX_MSG_SIZE ((size_t)1 << 40)
#define OPX_DEF_RNDV_SPLIT ((size_t)32 << 10)
#define OPX_DEF_RMA_CMA ((size_t)16 << 10)
/* From these sizes the initiator copies by itself (see README) */
#define OPX_DEF_RMA_DIRECT_WRITE ((size_t)16 << 10)
#define OPX_DEF_RMA_DIRECT_READ ((size_t)16 << 10)
#define OPX_DEF_RMA_DIRECT_IDLE_MS 1
#define OPX_DEF_UX_MAX_BYTES ((size_t)64 << 20)
#define OPX_DEF_JKEY (-1)
#define OPX_DEF_SPIN_COUNT 1000
/* More ranks than CPUs (2 cores, mpi_collbench of bench-mpi.sh, us per
 * operation, split copy off in all but the first column):
 *                              defaults   spin 300   spin 100   spin 50
 *   np 8 allreduce 64 KiB      855-876    518-658               320-418
 *   np 4 allreduce 64 KiB      149-200    105-109    92-99      95-116
 *   np 4 bcast 8 B (stream)    0.41-0.46  0.56-0.58  0.80-0.85  1.0-1.2
 * Yielding sooner helps whoever waits for a descheduled peer and costs
 * pipelined small messages; 200 sits in between.  Without the split
 * copy, np 8 neighbour exchange of 64 KiB: 137 against 240 us. */
#define OPX_OVERSUB_SPIN_COUNT 200
#define OPX_DEF_SLEEP_MS 10
#define OPX_DEF_PEER_TIMEOUT 10

/* Bounds: the shim's ring indexes are 32-bit and its hdrq/eager sizes
 * must be powers of two; anything outside would be refused later by
 * shim_dev_open with a far less helpful message. */
#define OPX_MIN_MTU ((size_t)256)
#define OPX_MIN_HDRQ ((size_t)64)
#define OPX_MAX_HDRQ ((size_t)1 << 16) /* shim_dev_open refuses more */
#define OPX_MAX_EAGER_BYTES ((size_t)1 << 30)
#define OPX_MAX_SLEEP_MS 10000
#define OPX_MAX_SPIN_COUNT (1 << 30)

static void opx_cleanup(void);

struct fi_provider opx_prov = {
	.name = OPX_PROV_NAME,
	.version = OPX_PROV_VERSION,
	.fi_version = OPX_FI_VERSION,
	.getinfo = opx_getinfo,
	.fabric = opx_fabric_open,
	.cleanup = opx_cleanup,
};

struct opx_params opx_env = {
	.units = OPX_DEF_UNITS,
	.unit = OPX_DEF_UNIT,
	.mtu = OPX_DEF_MTU,
	.hdrq_entries = OPX_DEF_HDRQ_ENTRIES,
	.eager_bytes = OPX_DEF_EAGER_BYTES,
	.inject_size = OPX_DEF_INJECT_SIZE,
	.eager_max = OPX_DEF_EAGER_MAX,
	.udp_eager_max = OPX_DEF_UDP_EAGER_MAX,
	.max_msg_size = OPX_DEF_MAX_MSG_SIZE,
	.ux_max_bytes = OPX_DEF_UX_MAX_BYTES,
	.ux_peer_max_bytes = OPX_DEF_UX_MAX_BYTES,
	.jkey = OPX_DEF_JKEY,
	.spin_count = OPX_DEF_SPIN_COUNT,
	.sleep_ms = OPX_DEF_SLEEP_MS,
	.rndv_cma = true,
	.udp_gro = true,
	.rndv_split = OPX_DEF_RNDV_SPLIT,
	.rma_cma = OPX_DEF_RMA_CMA,
	.rma_direct_write = OPX_DEF_RMA_DIRECT_WRITE,
	.rma_direct_read = OPX_DEF_RMA_DIRECT_READ,
	.rma_direct_idle_ms = OPX_DEF_RMA_DIRECT_IDLE_MS,
};

/* fi_prov_ini may be called more than once in a process (the core loads
 * the DSO once, but the unit tests call it directly per test); parameters
 * are defined and read only on the first call. */
struct fi_provider *fi_prov_ini(void); /* fi_prov.h only has FI_EXT_INI */
static pthread_once_t opx_ini_once = PTHREAD_ONCE_INIT;

/* ---------------------------------------------------------------------
 * Parameters.
 */
static bool opx_is_pow2(size_t v)
{
	return v && !(v & (v - 1));
}

static void opx_params_define(void)
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

/* The raw text of FI_OPX_<name>, to check what fi_param_get would
 * silently turn into a number (libfabric parses with strtol and no
 * error check: "abc" reads as 0). */
static const char *opx_param_raw(const char *name)
{
	char env[64];

	snprintf(env, sizeof(env), "FI_OPX_%s", name);
	return getenv(env);
}

/* Whole-string unsigned parse (decimal, 0x hex, 0 octal; surrounding
 * blanks allowed): false on anything else, a sign, or overflow. */
static bool opx_parse_u64(const char *s, unsigned long long *out)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 0);
	if (errno || end == s)
		return false;
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	return *end == '\0';
}

static bool opx_parse_int(const char *s, int *out)
{
	unsigned long long u;
	bool neg;

	while (*s == ' ' || *s == '\t')
		s++;
	neg = *s == '-';
	if (neg || *s == '+')
		s++;
	if (!opx_parse_u64(s, &u) || u > (neg ? (unsigned long long)INT_MAX + 1 : INT_MAX))
		return false;
	*out = neg ? (int)(0 - u) : (int)u;
	return true;
}

/* Read one int parameter; an unset variable keeps the default silently,
 * a set but unparsable or out-of-range one warns and keeps the default:
 * a bad value never makes the provider disappear. */
static void opx_param_int(const char *name, int *val, int lo, int hi)
{
	const char *raw;
	int v;

	if (fi_param_get_int(&opx_prov, name, &v) != 0)
		return;
	raw = opx_param_raw(name);
	if (raw && !opx_parse_int(raw, &v)) {
		OPX_WARN(FI_LOG_CORE, "FI_OPX_%s=\"%s\" is not an integer, using default %d\n",
			 name, raw, *val);
		return;
	}
	if (v < lo || v > hi) {
		OPX_WARN(FI_LOG_CORE, "FI_OPX_%s=%d out of range [%d, %d], using default %d\n", name, v,
			 lo, hi, *val);
		return;
	}
	*val = v;
}

static void opx_param_size(const char *name, size_t *val, size_t lo, size_t hi, bool pow2)
{
	unsigned long long u;
	const char *raw;
	size_t v;

	if (fi_param_get_size_t(&opx_prov, name, &v) != 0)
		return;
	raw = opx_param_raw(name);
	if (raw) {
		if (!opx_parse_u64(raw, &u) || u > SIZE_MAX) {
			OPX_WARN(FI_LOG_CORE,
				 "FI_OPX_%s=\"%s\" is not a non-negative integer, using default "
				 "%zu\n",
				 name, raw, *val);
			return;
		}
		v = (size_t)u;
	}
	if (v < lo || v > hi || (pow2 && !opx_is_pow2(v))) {
		OPX_WARN(FI_LOG_CORE, "FI_OPX_%s=%zu invalid (range [%zu, %zu]%s), using default %zu\n",
			 name, v, lo, hi, pow2 ? ", power of two" : "", *val);
		return;
	}
	*val = v;
}

static void opx_param_bool(const char *name, bool *val)
{
	int v;

	if (fi_param_get_bool(&opx_prov, name, &v) == 0) {
		*val = v != 0;
		return;
	}
	if (opx_param_raw(name))
		OPX_WARN(FI_LOG_CORE, "FI_OPX_%s=\"%s\" is not a boolean, using default %d\n", name,
			 opx_param_raw(name), *val);
}

/* The job key keeps jobs apart: two jobs of one user must not deliver
 * into each other's receives.  Like OPX it comes from the job's identity:
 * FI_OPX_UUID, else the launcher's job id (every rank of one launch sees
 * the same one), else the uid, which is what processes started by hand
 * share.  PMIx namespaces come before SLURM_JOB_ID: two mpiruns inside
 * one allocation share the job id but not the namespace.  Zero is
 * reserved (it reads as "unset" on the wire). */
static const char *const opx_jkey_src_names[OPX_JKEY_SRC_COUNT] = {
	[OPX_JKEY_SRC_UID] = "uid",
	[OPX_JKEY_SRC_JKEY] = "FI_OPX_JKEY",
	[OPX_JKEY_SRC_UUID] = "FI_OPX_UUID",
	[OPX_JKEY_SRC_PMIX] = "PMIX_NAMESPACE",
	[OPX_JKEY_SRC_ORTE] = "OMPI_MCA_orte_ess_jobid",
	[OPX_JKEY_SRC_OMPI] = "OMPI_MCA_ess_base_jobid",
	[OPX_JKEY_SRC_HYDRA] = "I_MPI_HYDRA_UUID",
	[OPX_JKEY_SRC_SLURM] = "SLURM_JOB_ID",
};

const char *opx_jkey_src_name(int src)
{
	return src >= 0 && src < OPX_JKEY_SRC_COUNT ? opx_jkey_src_names[src] : "unknown";
}

static int opx_jkey_hash(const char *id, const char *id2)
{
	uint32_t h = 0x811c9dc5u; /* FNV-1a */

	for (const char *p = id; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x01000193u;
	if (id2) {
		h = (h ^ '.') * 0x01000193u;
		for (const char *p = id2; *p; p++)
			h = (h ^ (uint8_t)*p) * 0x01000193u;
	}
	h = (h ^ (h >> 16)) & 0xffffu;
	return h ? (int)h : 1;
}

static int opx_jkey_derive(int *src)
{
	static const struct {
		const char *var;
		int src;
	} launchers[] = {
		{"PMIX_NAMESPACE", OPX_JKEY_SRC_PMIX},
		{"OMPI_MCA_orte_ess_jobid", OPX_JKEY_SRC_ORTE},
		{"OMPI_MCA_ess_base_jobid", OPX_JKEY_SRC_OMPI},
		{"I_MPI_HYDRA_UUID", OPX_JKEY_SRC_HYDRA},
		{"SLURM_JOB_ID", OPX_JKEY_SRC_SLURM},
	};
	char *uuid = NULL;
	int k;

	if (fi_param_get_str(&opx_prov, "UUID", &uuid) == 0 && uuid && *uuid) {
		*src = OPX_JKEY_SRC_UUID;
		return opx_jkey_hash(uuid, NULL);
	}
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const char *id = getenv(launchers[i].var);

		if (!id || !*id)
			continue;
		*src = launchers[i].src;
		return opx_jkey_hash(id, launchers[i].src == OPX_JKEY_SRC_SLURM
						 ? getenv("SLURM_STEP_ID")
						 : NULL);
	}
	*src = OPX_JKEY_SRC_UID;
	k = (int)((getuid() & 0xffffu) ^ 0x5a5au);
	return k ? k : 0x5a5a;
}

/* Ranks of this job on this host, as the launcher says (Open MPI, MPICH
 * and Intel MPI's hydra); 0 when none says. */
static long opx_local_ranks(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *s = getenv(vars[i]);
		unsigned long long v;

		if (s && opx_parse_u64(s, &v) && v > 0 && v < (1ull << 31))
			return (long)v;
	}
	return 0;
}

/* Whether the launcher says every rank of the job runs on this host:
 * Open MPI (local size = world size), hydra (MPI_LOCALNRANKS = PMI_SIZE),
 * Slurm (one node). */
static bool opx_job_all_local(void)
{
	static const char *const pairs[][2] = {
		{"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"},
		{"MPI_LOCALNRANKS", "PMI_SIZE"},
	};
	unsigned long long a, b;
	const char *s;

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		const char *l = getenv(pairs[i][0]), *w = getenv(pairs[i][1]);

		if (l && w)
			return opx_parse_u64(l, &a) && opx_parse_u64(w, &b) && a > 0 && a == b;
	}
	s = getenv("SLURM_JOB_NUM_NODES");
	if (!s)
		s = getenv("SLURM_NNODES");
	return s && opx_parse_u64(s, &a) && a == 1;
}

/* More ranks than CPUs: a waiting rank should give its CPU away soon, and
 * a rendezvous should not need both processes running at once (the split
 * copy does).  Only the defaults change: FI_OPX_SPIN_COUNT and
 * FI_OPX_RNDV_SPLIT, when set, win. */
static void opx_params_oversub(struct opx_params *p)
{
	long ranks = opx_local_ranks(), cpus = sysconf(_SC_NPROCESSORS_ONLN);

	p->oversubscribed = ranks > 0 && cpus > 0 && ranks > cpus;
	if (!p->oversubscribed)
		return;
	p->spin_count = OPX_OVERSUB_SPIN_COUNT;
	p->rndv_split = 0;
	OPX_INFO(FI_LOG_CORE,
		 "%ld ranks on %ld CPUs: oversubscribed, spin count %d and no split copy "
		 "unless set\n",
		 ranks, cpus, OPX_OVERSUB_SPIN_COUNT);
}

/* A percentage ("1", "0.5") as parts per million; warns and keeps 0 on
 * anything else. */
static uint32_t opx_param_ppm(const char *name)
{
	char *raw = NULL, *end;
	double v;

	if (fi_param_get_str(&opx_prov, name, &raw) || !raw || !*raw)
		return 0;
	errno = 0;
	v = strtod(raw, &end);
	if (errno || end == raw || *end || v < 0 || v > 100) {
		OPX_WARN(FI_LOG_CORE, "FI_OPX_%s=\"%s\" is not a percentage, using 0\n", name, raw);
		return 0;
	}
	return (uint32_t)(v * 10000.0 + 0.5);
}

static void opx_params_wire(struct opx_params *p)
{
	char *w = NULL;
	size_t seed = 1;

	p->wire = SHIM_WIRE_AUTO;
	if (!fi_param_get_str(&opx_prov, "WIRE", &w) && w && *w) {
		if (!strcmp(w, "shm"))
			p->wire = SHIM_WIRE_SHM;
		else if (!strcmp(w, "udp"))
			p->wire = SHIM_WIRE_UDP;
		else if (strcmp(w, "auto"))
			OPX_WARN(FI_LOG_CORE, "FI_OPX_WIRE=\"%s\" is not auto, shm or udp: auto\n", w);
	} else if (opx_job_all_local()) {
		/* No socket where no peer can be: a socket is a door. */
		p->wire = SHIM_WIRE_SHM;
		OPX_INFO(FI_LOG_CORE, "the launcher says every rank of the job is on this host: "
				      "no udp socket (FI_OPX_WIRE=auto opens one)\n");
	}
	p->auth = opx_auth_mode();
	p->iface = NULL;
	if (fi_param_get_str(&opx_prov, "IFACE", &p->iface) || (p->iface && !*p->iface))
		p->iface = NULL;
	p->peer_timeout = OPX_DEF_PEER_TIMEOUT;
	opx_param_int("PEER_TIMEOUT", &p->peer_timeout, 1, 3600);
	p->fault.drop = opx_param_ppm("FAULT_DROP");
	p->fault.dup = opx_param_ppm("FAULT_DUP");
	p->fault.reorder = opx_param_ppm("FAULT_REORDER");
	p->fault.corrupt = opx_param_ppm("FAULT_CORRUPT");
	opx_param_size("FAULT_SEED", &seed, 1, SIZE_MAX, false);
	p->fault.seed = seed;
}

static void opx_params_load(void)
{
	struct opx_params *p = &opx_env;

	opx_param_int("UNITS", &p->units, 1, (int)SHIM_MAX_UNITS);
	opx_param_int("UNIT", &p->unit, -1, p->units - 1);
	opx_param_size("MTU", &p->mtu, OPX_MIN_MTU, SHIM_MTU_MAX, true);
	opx_param_size("HDRQ_ENTRIES", &p->hdrq_entries, OPX_MIN_HDRQ, OPX_MAX_HDRQ, true);
	/* Keep a default eager ring if the mtu grew past what it can hold. */
	if (p->eager_bytes < 4 * p->mtu)
		p->eager_bytes = 4 * p->mtu;
	opx_param_size("EAGER_RING_BYTES", &p->eager_bytes, 4 * p->mtu, OPX_MAX_EAGER_BYTES, true);
	/* Inject and eager limits depend on the values above: a default that
	 * no longer fits is clamped rather than left inconsistent.  A
	 * multi-packet eager message takes at most a quarter of the eager
	 * ring and of the header queue. */
	size_t eager_cap = p->eager_bytes / 4;
	if (eager_cap > p->hdrq_entries / 4 * p->mtu)
		eager_cap = p->hdrq_entries / 4 * p->mtu;
	if (p->eager_max > eager_cap)
		p->eager_max = eager_cap;
	opx_param_size("EAGER_MAX", &p->eager_max, 1, eager_cap, false);
	/* the udp wire advertises it in KiB in one byte (src_eager) */
	size_t udp_cap = eager_cap < OPX_UDP_EAGER_CAP ? eager_cap : OPX_UDP_EAGER_CAP;
	if (p->udp_eager_max > udp_cap)
		p->udp_eager_max = udp_cap;
	opx_param_size("UDP_EAGER_MAX", &p->udp_eager_max, 1, udp_cap, false);
	if (p->udp_eager_max >= 1024)
		p->udp_eager_max &= ~(size_t)1023;
	/* fi_inject promises the buffer is reusable on return, which only an
	 * eager send (copied into the peer's ring) keeps: inject_size never
	 * exceeds what we send eagerly. */
	size_t inject_cap = p->mtu < p->eager_max ? p->mtu : p->eager_max;
	if (p->inject_size > inject_cap)
		p->inject_size = inject_cap;
	opx_param_size("INJECT_SIZE", &p->inject_size, 0, inject_cap, false);
	opx_param_size("UX_MAX_BYTES", &p->ux_max_bytes, 1, SIZE_MAX, false);
	p->ux_peer_max_bytes = p->ux_max_bytes;
	opx_param_size("UX_PEER_MAX_BYTES", &p->ux_peer_max_bytes, 1, p->ux_max_bytes, false);
	opx_param_int("JKEY", &p->jkey, -1, 0xffff);
	if (p->jkey == 0) {
		OPX_WARN(FI_LOG_CORE, "FI_OPX_JKEY=0 is reserved, deriving one from the uid\n");
		p->jkey = -1;
	}
	p->jkey_src = OPX_JKEY_SRC_JKEY;
	if (p->jkey < 0)
		p->jkey = opx_jkey_derive(&p->jkey_src);
	OPX_INFO(FI_LOG_CORE, "job key 0x%04x from %s\n", (unsigned int)p->jkey,
		 opx_jkey_src_name(p->jkey_src));
	opx_params_oversub(p);
	opx_param_int("SPIN_COUNT", &p->spin_count, 0, OPX_MAX_SPIN_COUNT);
	opx_param_int("SLEEP_MS", &p->sleep_ms, 1, OPX_MAX_SLEEP_MS);
	opx_param_bool("RNDV_CMA", &p->rndv_cma);
	opx_param_bool("MSG_PREFIX", &p->msg_prefix);
	opx_param_bool("UDP_GRO", &p->udp_gro);
	opx_param_size("RNDV_SPLIT", &p->rndv_split, 0, SIZE_MAX, false);
	opx_param_size("RMA_CMA", &p->rma_cma, 0, SIZE_MAX, false);
	opx_param_size("RMA_DIRECT_WRITE", &p->rma_direct_write, 0, SIZE_MAX, false);
	opx_param_size("RMA_DIRECT_READ", &p->rma_direct_read, 0, SIZE_MAX, false);
	opx_param_int("RMA_DIRECT_IDLE_MS", &p->rma_direct_idle_ms, 0, 1000000);
	opx_param_bool("CHECKSUM", &p->checksum);
	p->stats = NULL;
	if (fi_param_get_str(&opx_prov, "STATS", &p->stats) || (p->stats && !*p->stats))
		p->stats = NULL;
	p->max_msg_size = OPX_DEF_MAX_MSG_SIZE;
	opx_params_wire(p);
}

static void opx_ini_once_fn(void)
{
	shim_crc_init();
	opx_params_define();
	opx_params_load();
}

__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
	pthread_once(&opx_ini_once, opx_ini_once_fn);
	return &opx_prov;
}

static void opx_cleanup(void)
{
	/* Nothing process-wide to release: fabrics own their devices. */
}

/* ---------------------------------------------------------------------
 * Errors.
 */
int opx_err_from_shim(int err)
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
				 err, shim_strerror(err));
		return -FI_EOTHER;
	}
}

int opx_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid;
	(void)bfid;
	(void)flags;
	return -FI_ENOSYS;
}

int opx_no_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)command;
	(void)arg;
	return -FI_ENOSYS;
}

int opx_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
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
static int opx_fabric_close(struct fid *fid)
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

static int opx_fabric_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
				 struct fid_pep **pep, void *context)
{
	(void)fabric;
	(void)info;
	(void)pep;
	(void)context;
	return -FI_ENOSYS; /* RDM only: there is no connection manager */
}

static int opx_fabric_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
				struct fid_wait **waitset)
{
	(void)fabric;
	(void)attr;
	(void)waitset;
	return -FI_ENOSYS;
}

static struct fi_ops opx_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_fabric_close,
	.bind = opx_no_bind,
	.control = opx_no_control,
	.ops_open = opx_no_ops_open,
};

static struct fi_ops_fabric opx_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = opx_domain_open,
	.passive_ep = opx_fabric_passive_ep,
	.eq_open = opx_eq_open,
	.wait_open = opx_fabric_wait_open,
	.trywait = opx_trywait,
};

/* The shim has no logger of its own: what a user must hear about (names
 * squatted by another user, an unusable wake-up directory) comes here. */
static void opx_shim_warn(const char *msg)
{
	OPX_WARN(FI_LOG_CORE, "%s\n", msg);
}

/* The udp wire's secret, when it may be opened: without one (and with a
 * MAC asked for) the wire stays closed, so nothing unauthenticated is
 * ever accepted. */
static void opx_dev_params_auth(struct shim_dev_params *dp)
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
		OPX_INFO(FI_LOG_CORE, "udp wire: FI_OPX_AUTH=%s, secret from %s\n",
			 opx_auth_mode_name(dp->auth), from);
}

/* Device parameters as the shim wants them, from the validated opx_env. */
static void opx_dev_params(struct shim_dev_params *dp)
{
	memset(dp, 0, sizeof(*dp));
	dp->num_units = opx_env.units;
	dp->force_unit = opx_env.unit;
	dp->mtu = (uint32_t)opx_env.mtu;
	dp->hdrq_cnt = (uint32_t)opx_env.hdrq_entries;
	dp->egr_bytes = (uint32_t)opx_env.eager_bytes;
	dp->jkey = (uint16_t)opx_env.jkey;
	dp->jkey_src = (uint8_t)opx_env.jkey_src;
	dp->warn = opx_shim_warn;
	dp->wire = opx_env.wire;
	if (opx_env.iface)
		snprintf(dp->iface, sizeof(dp->iface), "%s", opx_env.iface);
	dp->fault = opx_env.fault;
	dp->auth = opx_env.auth;
	dp->udp_no_gro = !opx_env.udp_gro;
	opx_dev_params_auth(dp);
}

/* Open the process-wide device with opx_env's parameters.  Shared with
 * opx_info.c (fi_getinfo probes the device); its prototype is repeated
 * there until opx.h gains it (proposed in the init/info report). */
int opx_dev_open(struct shim_dev **devp)
{
	struct shim_dev_params dp;

	fi_prov_ini(); /* parameters, in case the core was bypassed */
	opx_dev_params(&dp);
	return opx_err_from_shim(shim_dev_open(&dp, devp));
}

int opx_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
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
	ret = opx_dev_open(&fab->dev);
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
