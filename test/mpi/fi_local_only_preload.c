/*
 * LD_PRELOAD helper used only when the MPI tests are validated against
 * libfabric's own shm provider (PROV=shm in run_mpi_tests.sh).
 *
 * Why: Open MPI 4.1's ofi MTL always asks fi_getinfo() for
 * FI_LOCAL_COMM | FI_REMOTE_COMM, and libfabric 1.17's shm provider
 * advertises neither bit (its fi_info predates them), so the MTL cannot
 * select shm at all.  Every rank in our runs is on one host, and a hint
 * with neither bit set means "both" per fi_getinfo(3), so dropping them
 * is harmless and lets the same MTL code path (pml cm + mtl ofi) be
 * exercised with a known provider.
 * Never used for opx, which must accept the hints unmodified.
 */
#include <dlfcn.h>
#include <rdma/fabric.h>
#include <stddef.h>

typedef int (*opx_test_getinfo_fn)(uint32_t, const char *, const char *,
				   uint64_t, const struct fi_info *,
				   struct fi_info **);

int fi_getinfo(uint32_t version, const char *node, const char *service,
	       uint64_t flags, const struct fi_info *hints,
	       struct fi_info **info)
{
	static opx_test_getinfo_fn real;
	struct fi_info *copy;
	int ret;

	if (!real) {
		real = (opx_test_getinfo_fn)dlsym(RTLD_NEXT, "fi_getinfo");
		if (!real)
			return -FI_ENOSYS;
	}
	if (!hints || !(hints->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM)))
		return real(version, node, service, flags, hints, info);

	copy = fi_dupinfo(hints);
	if (!copy)
		return -FI_ENOMEM;
	copy->caps &= ~(FI_LOCAL_COMM | FI_REMOTE_COMM);
	ret = real(version, node, service, flags, copy, info);
	fi_freeinfo(copy);
	return ret;
}
