/*
 * LD_PRELOAD helper: print every fi_getinfo() call an application makes
 * (version, hints in fi_tostr() form, result and, for each provider
 * returned, its name, caps and mode) to stderr, then return what libfabric
 * returned, unchanged.  Used to record what an MPI library asks of opx:
 * run_mpich_tests.sh builds it and README's MPICH section quotes it.
 *
 *   LD_PRELOAD=fi_getinfo_trace.so mpiexec -n 2 ./a.out 2>trace
 *
 * Only the process whose PMI_RANK (MPICH's hydra) or OMPI_COMM_WORLD_RANK
 * is 0, or that has neither, prints, so a job's trace is one process's.
 * Each call names the object it came from: libfabric's utility providers
 * (rxm, rxd) call fi_getinfo themselves to find a core provider.
 */
#include <dlfcn.h>
#include <rdma/fabric.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*opx_trace_getinfo_fn)(uint32_t, const char *, const char *,
				    uint64_t, const struct fi_info *,
				    struct fi_info **);

static int opx_trace_enabled(void)
{
	const char *r = getenv("PMI_RANK");

	if (!r)
		r = getenv("OMPI_COMM_WORLD_RANK");
	return !r || strcmp(r, "0") == 0;
}

int fi_getinfo(uint32_t version, const char *node, const char *service,
	       uint64_t flags, const struct fi_info *hints,
	       struct fi_info **info)
{
	static opx_trace_getinfo_fn real;
	static int call;
	const void *from = __builtin_return_address(0);
	const struct fi_info *p;
	const char *who;
	Dl_info dli;
	int ret;

	if (!real) {
		real = (opx_trace_getinfo_fn)dlsym(RTLD_NEXT, "fi_getinfo");
		if (!real)
			return -FI_ENOSYS;
	}
	ret = real(version, node, service, flags, hints, info);
	if (!opx_trace_enabled())
		return ret;
	call++;
	who = dladdr(from, &dli) && dli.dli_fname ? dli.dli_fname : "?";
	if (strrchr(who, '/'))
		who = strrchr(who, '/') + 1;
	fprintf(stderr, "fi_getinfo #%d from %s: version %u.%u node %s service %s flags 0x%llx -> %d (%s)\n",
		call, who, FI_MAJOR(version), FI_MINOR(version), node ? node : "NULL",
		service ? service : "NULL", (unsigned long long)flags, ret,
		ret ? fi_strerror(-ret) : "ok");
	if (hints)
		fprintf(stderr, "fi_getinfo #%d hints:\n%s", call,
			fi_tostr(hints, FI_TYPE_INFO));
	else
		fprintf(stderr, "fi_getinfo #%d hints: NULL\n", call);
	/* fi_tostr() returns one static buffer: one call per fprintf. */
	for (p = ret ? NULL : *info; p; p = p->next) {
		fprintf(stderr, "fi_getinfo #%d returned %s: caps %s", call,
			p->fabric_attr && p->fabric_attr->prov_name ?
			p->fabric_attr->prov_name : "?",
			fi_tostr(&p->caps, FI_TYPE_CAPS));
		fprintf(stderr, " mode %s\n", fi_tostr(&p->mode, FI_TYPE_MODE));
	}
	return ret;
}
