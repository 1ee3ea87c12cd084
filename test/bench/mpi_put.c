/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_put.c - osu_put_latency / osu_get_latency-style one-sided latency
 * between two MPI ranks, so opx under Open MPI's osc rdma (over btl ofi)
 * can be compared with Open MPI's osc sm in one run.
 *
 *   mpirun -np 2 mpi_put [-l LABEL] [-w create|allocate] [-o put,get,acc]
 *                        [-y flush,lock] [-s SIZES] [-t SECS] [-T SECS]
 *
 * Built by scripts/bench-rma.sh with mpicc (automake does not know about
 * MPI).  Rank 0 is the origin, rank 1 the passive target, which waits in
 * MPI_Barrier (and so progresses its transport) while rank 0 measures.
 * For each size, each op (MPI_Put, MPI_Get of S bytes at displacement 0;
 * with -o acc also MPI_Accumulate MPI_SUM of S / 4 ints, measured only)
 * and each synchronisation:
 *
 *   flush  MPI_Win_lock(MPI_LOCK_SHARED) once, then op + MPI_Win_flush per
 *          iteration, then unlock (osu's -s flush);
 *   lock   MPI_Win_lock(MPI_LOCK_SHARED) + op + MPI_Win_unlock per
 *          iteration (osu's -s lock).
 *
 * usec is the average time of one iteration.  Rank 0 prints one line each:
 *
 *   mpi_rma label=opx win=create op=put sync=flush size=8 iters=20000 usec=2.345
 *
 * The window flavour matters on one node.  osc sm only takes windows from
 * MPI_Win_allocate; osc rdma, when every rank is on one node, places
 * MPI_Win_allocate windows in a shared segment and does puts and gets as
 * memcpy, never calling its BTL: only MPI_Win_create (-w create, osu's
 * default) sends the data through btl ofi, i.e. through the provider.
 *
 * The warm-up grows (x4) until it lasts 10 ms over at least 4 iterations
 * (or 50 ms) and sizes the measured phase to about -t seconds.  Data is checked once per size, outside the timing:
 * rank 0 puts a pattern and rank 1 checks its window after the unlock and a
 * barrier; rank 1 fills its window and rank 0 gets it into a poisoned
 * buffer.  A mismatch exits 2 (MPI_Abort).
 *
 * A test program: it aborts the job on errors, and an alarm (-T) bounds
 * the run so a broken transport cannot hang a benchmark script.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#define MP_MAX_SIZE (64UL << 20)
#define MP_MAX_SIZES 32
#define MP_MAX_ITERS 10000000u
#define MP_CAL_MIN_S 0.01
#define MP_POISON 0xa5

enum mp_op { MP_PUT, MP_GET, MP_ACC, MP_NOPS };
enum mp_sync { MP_FLUSH, MP_LOCK, MP_NSYNCS };

static const char *const mp_op_names[] = { "put", "get", "acc" };
static const char *const mp_sync_names[] = { "flush", "lock" };

struct mp_opts {
	const char *label;
	int create; /* MPI_Win_create (1) or MPI_Win_allocate (0) */
	int ops[MP_NOPS];
	int syncs[MP_NSYNCS];
	size_t sizes[MP_MAX_SIZES];
	int nsizes;
	double target_s;
	unsigned int timeout_s;
};

struct mp_state {
	int rank;
	MPI_Win win;
	uint8_t *origin; /* rank 0's source/destination */
	uint8_t *base;   /* this rank's window */
	size_t max_size;
};

static void mp_on_alarm(int sig)
{
	static const char msg[] = "mpi_put: timeout, giving up\n";
	ssize_t n;

	(void)sig;
	n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)n;
	_exit(3);
}

static void mp_fail(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* Print "mpi_put: <message>" and end the job with status code. */
static void mp_fail(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mpi_put: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

/* ---- data pattern ------------------------------------------------------ */

static uint64_t mp_word(uint64_t seed, uint64_t k)
{
	uint64_t x = (seed ^ 0x6a09e667f3bcc908ULL) + k * 0x9fb21c651e98df25ULL;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 27);
}

static void mp_fill(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t k = 0; k < len; k += 8) {
		uint64_t w = mp_word(seed, k / 8);

		memcpy(p + k, &w, len - k < 8 ? len - k : 8);
	}
}

static int mp_check(const uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t k = 0; k < len; k += 8) {
		uint64_t w = mp_word(seed, k / 8);

		if (memcmp(p + k, &w, len - k < 8 ? len - k : 8))
			return 1;
	}
	return 0;
}

/* ---- one-sided operations ---------------------------------------------- */

static void mp_rma(struct mp_state *st, enum mp_op op, size_t size)
{
	int rc;

	if (op == MP_PUT)
		rc = MPI_Put(st->origin, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, st->win);
	else if (op == MP_GET)
		rc = MPI_Get(st->origin, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, st->win);
	else /* osu_acc_latency: MPI_SUM of ints (at least one) */
		rc = MPI_Accumulate(st->origin, size < 4 ? 1 : (int)(size / 4), MPI_INT, 1, 0,
				    size < 4 ? 1 : (int)(size / 4), MPI_INT, MPI_SUM, st->win);
	if (rc != MPI_SUCCESS)
		mp_fail(1, "MPI_%s of %zu bytes failed", mp_op_names[op], size);
}

static void mp_lock(struct mp_state *st)
{
	if (MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, st->win) != MPI_SUCCESS)
		mp_fail(1, "MPI_Win_lock failed");
}

static void mp_unlock(struct mp_state *st)
{
	if (MPI_Win_unlock(1, st->win) != MPI_SUCCESS)
		mp_fail(1, "MPI_Win_unlock failed");
}

/* Rank 0: n iterations; returns the seconds they took. */
static double mp_phase(struct mp_state *st, enum mp_op op, enum mp_sync sync, size_t size,
		       uint32_t n)
{
	double t0, dt;

	if (sync == MP_FLUSH) {
		mp_lock(st);
		t0 = MPI_Wtime();
		for (uint32_t i = 0; i < n; i++) {
			mp_rma(st, op, size);
			if (MPI_Win_flush(1, st->win) != MPI_SUCCESS)
				mp_fail(1, "MPI_Win_flush failed");
		}
		dt = MPI_Wtime() - t0;
		mp_unlock(st);
		return dt;
	}
	t0 = MPI_Wtime();
	for (uint32_t i = 0; i < n; i++) {
		mp_lock(st);
		mp_rma(st, op, size);
		mp_unlock(st);
	}
	return MPI_Wtime() - t0;
}

/*
 * Put a pattern and have rank 1 check it; have rank 1 fill its window and
 * get it.  Every rank returns only when both checks passed.
 */
static void mp_check_size(struct mp_state *st, size_t size)
{
	uint64_t seed = 0x5000000000ULL | size;
	int bad = 0, any;

	if (st->rank == 0) {
		mp_fill(st->origin, size, seed);
		mp_lock(st);
		mp_rma(st, MP_PUT, size);
		mp_unlock(st);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (st->rank == 1) {
		bad = mp_check(st->base, size, seed);
		if (bad)
			fprintf(stderr, "mpi_put: put of %zu bytes: target data wrong\n", size);
		mp_fill(st->base, size, seed + 1);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (st->rank == 0) {
		memset(st->origin, MP_POISON, size);
		mp_lock(st);
		mp_rma(st, MP_GET, size);
		mp_unlock(st);
		bad = mp_check(st->origin, size, seed + 1);
		if (bad)
			fprintf(stderr, "mpi_put: get of %zu bytes: data wrong\n", size);
	}
	MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (any)
		mp_fail(2, "data check failed at %zu bytes", size);
}

static void mp_measure(struct mp_state *st, const struct mp_opts *o, enum mp_op op,
		       enum mp_sync sync, size_t size)
{
	uint32_t n = 1, iters;
	double dt, x;

	if (st->rank == 0) {
		for (;;) {
			dt = mp_phase(st, op, sync, size, n);
			if ((dt >= MP_CAL_MIN_S && (n >= 4 || dt >= 5 * MP_CAL_MIN_S)) ||
			    n >= MP_MAX_ITERS / 4)
				break;
			n *= 4;
		}
		x = dt > 0 ? o->target_s / (dt / n) : MP_MAX_ITERS;
		iters = x < 1 ? 1 : x > MP_MAX_ITERS ? MP_MAX_ITERS : (uint32_t)(x + 0.5);
		dt = mp_phase(st, op, sync, size, iters);
		printf("mpi_rma label=%s win=%s op=%s sync=%s size=%zu iters=%u usec=%.3f\n",
		       o->label, o->create ? "create" : "allocate", mp_op_names[op],
		       mp_sync_names[sync], size, iters, dt * 1e6 / iters);
		fflush(stdout);
	}
	/* The target progresses in here while rank 0 measures. */
	MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- options ------------------------------------------------------------- */

static void mp_parse_names(const char *s, const char *const *names, int n, int *set,
			   const char *what)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int i, any = 0;

	if (!copy)
		mp_fail(1, "out of memory");
	memset(set, 0, sizeof(*set) * (size_t)n);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < n; i++)
			if (!strcmp(tok, names[i]))
				break;
		if (i == n)
			mp_fail(1, "bad %s '%s'", what, tok);
		set[i] = any = 1;
	}
	free(copy);
	if (!any)
		mp_fail(1, "no %s given", what);
}

static void mp_parse_sizes(const char *s, struct mp_opts *o)
{
	char *copy = strdup(s), *tok, *save = NULL, *end;

	if (!copy)
		mp_fail(1, "out of memory");
	o->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long v = strtoul(tok, &end, 0);

		if (*end || !v || v > MP_MAX_SIZE || v > (unsigned long)INT32_MAX ||
		    o->nsizes == MP_MAX_SIZES)
			mp_fail(1, "bad size list '%s'", s);
		o->sizes[o->nsizes++] = v;
	}
	free(copy);
	if (!o->nsizes)
		mp_fail(1, "empty size list '%s'", s);
}

int main(int argc, char **argv)
{
	struct mp_opts o = { .label = "mpi", .create = 1, .ops = { 1, 1, 0 }, .syncs = { 1, 1 },
			     .target_s = 0.05, .timeout_s = 120 };
	struct mp_state st;
	int nranks, c, rc;
	char *end;

	MPI_Init(&argc, &argv);
	memset(&st, 0, sizeof(st));
	MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	mp_parse_sizes("8,64,512,4096,16384,65536,262144,1048576", &o);
	while ((c = getopt(argc, argv, "l:w:o:y:s:t:T:")) != -1) {
		switch (c) {
		case 'l': o.label = optarg; break;
		case 'w':
			if (strcmp(optarg, "create") && strcmp(optarg, "allocate"))
				mp_fail(1, "bad window flavour '%s' (create, allocate)", optarg);
			o.create = !strcmp(optarg, "create");
			break;
		case 'o': mp_parse_names(optarg, mp_op_names, MP_NOPS, o.ops, "op"); break;
		case 'y': mp_parse_names(optarg, mp_sync_names, MP_NSYNCS, o.syncs, "sync"); break;
		case 's': mp_parse_sizes(optarg, &o); break;
		case 't':
			o.target_s = strtod(optarg, &end);
			if (*end || !(o.target_s > 0 && o.target_s <= 10))
				mp_fail(1, "bad target '%s'", optarg);
			break;
		case 'T': o.timeout_s = (unsigned int)strtoul(optarg, NULL, 0); break;
		default:
			if (st.rank == 0)
				fprintf(stderr, "usage: mpirun -np 2 %s [-l LABEL] [-w create|allocate] "
					"[-o put,get] [-y flush,lock] [-s SIZES] [-t SECS] [-T SECS]\n",
					argv[0]);
			MPI_Finalize();
			return 1;
		}
	}
	if (nranks != 2)
		mp_fail(1, "needs exactly 2 ranks (got %d)", nranks);
	signal(SIGALRM, mp_on_alarm);
	alarm(o.timeout_s ? o.timeout_s : 120);

	for (int i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > st.max_size)
			st.max_size = o.sizes[i];
	st.origin = aligned_alloc(4096, (st.max_size + 4095) & ~(size_t)4095);
	if (!st.origin)
		mp_fail(1, "out of memory");
	memset(st.origin, 0, st.max_size);
	if (o.create) {
		st.base = aligned_alloc(4096, (st.max_size + 4095) & ~(size_t)4095);
		if (!st.base)
			mp_fail(1, "out of memory");
		memset(st.base, 0, st.max_size);
		rc = MPI_Win_create(st.base, (MPI_Aint)st.max_size, 1, MPI_INFO_NULL,
				    MPI_COMM_WORLD, &st.win);
	} else {
		rc = MPI_Win_allocate((MPI_Aint)st.max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
				      &st.base, &st.win);
	}
	if (rc != MPI_SUCCESS)
		mp_fail(1, "MPI_Win_%s failed", o.create ? "create" : "allocate");

	for (int i = 0; i < o.nsizes; i++) {
		size_t size = o.sizes[i];

		mp_check_size(&st, size);
		for (int op = 0; op < MP_NOPS; op++)
			for (int sync = 0; sync < MP_NSYNCS; sync++)
				if (o.ops[op] && o.syncs[sync])
					mp_measure(&st, &o, (enum mp_op)op, (enum mp_sync)sync,
						   size);
	}

	MPI_Win_free(&st.win);
	if (o.create)
		free(st.base);
	free(st.origin);
	MPI_Finalize();
	return 0;
}
