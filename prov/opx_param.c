/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_param.c - reading the parameters: each FI_OPX_* value opx_init.c
 * defined is read once (opx_param_load, from the first fi_prov_ini) into
 * opx_env, checked against its bounds and the values it depends on; a bad
 * value warns and keeps the default, it never makes the provider
 * disappear.  Also what some values are derived from: the job key from
 * the job's identity, and what the launcher says about the ranks on this
 * host (more than CPUs, all of the job).  Defaults and bounds are in
 * opx_param.h.  opx_init.c calls this file; it calls nothing there.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opx_ep.h"
#include "opx_param.h"

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
	.udp_pack = true,
	.rndv_split = OPX_DEF_RNDV_SPLIT,
	.rma_cma = OPX_DEF_RMA_CMA,
	.rma_direct_write = OPX_DEF_RMA_DIRECT_WRITE,
	.rma_direct_read = OPX_DEF_RMA_DIRECT_READ,
	.rma_direct_idle_ms = OPX_DEF_RMA_DIRECT_IDLE_MS,
};

static bool opx_param_is_pow2(size_t v)
{
	return v && !(v & (v - 1));
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
static bool opx_param_parse_u64(const char *s, unsigned long long *out)
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

static bool opx_param_parse_int(const char *s, int *out)
{
	unsigned long long u;
	bool neg;

	while (*s == ' ' || *s == '\t')
		s++;
	neg = *s == '-';
	if (neg || *s == '+')
		s++;
	if (!opx_param_parse_u64(s, &u) || u > (neg ? (unsigned long long)INT_MAX + 1 : INT_MAX))
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
	if (raw && !opx_param_parse_int(raw, &v)) {
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
		if (!opx_param_parse_u64(raw, &u) || u > SIZE_MAX) {
			OPX_WARN(FI_LOG_CORE,
				 "FI_OPX_%s=\"%s\" is not a non-negative integer, using default "
				 "%zu\n",
				 name, raw, *val);
			return;
		}
		v = (size_t)u;
	}
	if (v < lo || v > hi || (pow2 && !opx_param_is_pow2(v))) {
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

const char *opx_param_jkey_src_name(int src)
{
	return src >= 0 && src < OPX_JKEY_SRC_COUNT ? opx_jkey_src_names[src] : "unknown";
}

static int opx_param_jkey_hash(const char *id, const char *id2)
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

static int opx_param_jkey_derive(int *src)
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
		return opx_param_jkey_hash(uuid, NULL);
	}
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const char *id = getenv(launchers[i].var);

		if (!id || !*id)
			continue;
		*src = launchers[i].src;
		return opx_param_jkey_hash(id, launchers[i].src == OPX_JKEY_SRC_SLURM
						       ? getenv("SLURM_STEP_ID")
						       : NULL);
	}
	*src = OPX_JKEY_SRC_UID;
	k = (int)((getuid() & 0xffffu) ^ 0x5a5au);
	return k ? k : 0x5a5a;
}

/* Ranks of this job on this host, as the launcher says (Open MPI, MPICH
 * and Intel MPI's hydra); 0 when none says. */
static long opx_param_local_ranks(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *s = getenv(vars[i]);
		unsigned long long v;

		if (s && opx_param_parse_u64(s, &v) && v > 0 && v < (1ull << 31))
			return (long)v;
	}
	return 0;
}

/* Whether the launcher says every rank of the job runs on this host:
 * Open MPI (local size = world size), hydra (MPI_LOCALNRANKS = PMI_SIZE),
 * Slurm (one node). */
static bool opx_param_job_all_local(void)
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
			return opx_param_parse_u64(l, &a) && opx_param_parse_u64(w, &b) && a > 0 &&
			       a == b;
	}
	s = getenv("SLURM_JOB_NUM_NODES");
	if (!s)
		s = getenv("SLURM_NNODES");
	return s && opx_param_parse_u64(s, &a) && a == 1;
}

/* More ranks than CPUs: a waiting rank should give its CPU away soon, and
 * a rendezvous should not need both processes running at once (the split
 * copy does).  Only the defaults change: FI_OPX_SPIN_COUNT and
 * FI_OPX_RNDV_SPLIT, when set, win. */
static void opx_param_oversub(struct opx_params *p)
{
	long ranks = opx_param_local_ranks(), cpus = sysconf(_SC_NPROCESSORS_ONLN);

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

static void opx_param_wire(struct opx_params *p)
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
	} else if (opx_param_job_all_local()) {
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

void opx_param_load(void)
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
		p->jkey = opx_param_jkey_derive(&p->jkey_src);
	OPX_INFO(FI_LOG_CORE, "job key 0x%04x from %s\n", (unsigned int)p->jkey,
		 opx_param_jkey_src_name(p->jkey_src));
	opx_param_oversub(p);
	opx_param_int("SPIN_COUNT", &p->spin_count, 0, OPX_MAX_SPIN_COUNT);
	opx_param_int("SLEEP_MS", &p->sleep_ms, 1, OPX_MAX_SLEEP_MS);
	opx_param_bool("RNDV_CMA", &p->rndv_cma);
	opx_param_bool("MSG_PREFIX", &p->msg_prefix);
	opx_param_bool("UDP_GRO", &p->udp_gro);
	opx_param_bool("UDP_PACK", &p->udp_pack);
	opx_param_bool("UDP_CRC", &p->udp_crc);
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
	opx_param_wire(p);
}
