/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_load.c - what libfabric itself costs a process at start-up, before
 * any provider's code: the time to load libfabric.so.1 (with the
 * libraries it links, whose constructors run then) and the time of its
 * first fi_getinfo (which initializes every built-in provider).  Both
 * happen inside MPI_Init for a stack that reaches libfabric through
 * Open MPI's ofi MTL; scripts/bench-mpi.sh prints them under its job
 * start table.
 *
 * Usage: fi_load            prints "fi_load dlopen_s=D getinfo_s=G rc=R"
 * The provider asked for is whatever FI_PROVIDER says (the query is
 * otherwise open), so the figure is the one MPI_Init sees.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

#include <rdma/fabric.h>

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
			  const struct fi_info *, struct fi_info **);
typedef void (*freeinfo_fn)(struct fi_info *);

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
	struct fi_info *info = NULL;
	double t0 = now_s(), t1, t2;
	void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
	getinfo_fn getinfo;
	freeinfo_fn freeinfo;
	int rc;

	t1 = now_s();
	if (!lib) {
		fprintf(stderr, "fi_load: %s\n", dlerror());
		return 1;
	}
	getinfo = (getinfo_fn)dlsym(lib, "fi_getinfo");
	freeinfo = (freeinfo_fn)dlsym(lib, "fi_freeinfo");
	if (!getinfo || !freeinfo) {
		fprintf(stderr, "fi_load: no fi_getinfo in libfabric.so.1\n");
		return 1;
	}
	rc = getinfo(FI_VERSION(1, 9), NULL, NULL, 0, NULL, &info);
	t2 = now_s();
	if (!rc)
		freeinfo(info);
	printf("fi_load dlopen_s=%.3f getinfo_s=%.3f rc=%d\n", t1 - t0, t2 - t1, rc);
	return 0;
}
