/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_collbench.c - small collectives and a neighbour exchange, timed the
 * way osu_allreduce / osu_alltoall / osu_bcast and IMB Exchange time them,
 * so opx under Open MPI (pml cm + mtl ofi) can be compared with Open MPI's
 * own shared memory (pml ob1 + btl vader) in one run.
 *
 *   mpirun -np N mpi_collbench [-l LABEL] [-o OPS] [-s SIZES] [-t SECS] [-T SECS]
 *
 * Built by scripts/bench-mpi.sh with mpicc.  Rank 0 prints one line per
 * operation and size:
 *
 *   coll label=opx op=allreduce np=2 size=128 iters=52000 usec=0.331
 *
 * size is the bytes each rank contributes (allreduce: size/4 MPI_INT summed;
 * alltoall: size bytes to every rank; bcast: size bytes from rank 0;
 * exchange: size bytes to each of the two ring neighbours and from them).
 * usec is the slowest rank's time per operation, the fastest of three
 * measured phases lasting about -t seconds together (the iteration count
 * is calibrated by a warm-up).  Every
 * operation and size first runs once untimed with checked data: a wrong
 * result makes the program exit 2.  An alarm (-T) bounds the run.
 *
 * First of all rank 0 prints how long MPI_Init took (the slowest rank),
 * which is most of what a job's start costs:
 *
 *   start label=opx np=2 init_s=0.4312
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#define CB_MAX_SIZES 64
#define CB_MAX_SIZE (16UL << 20)
#define CB_MAX_ITERS 10000000u

enum cb_op { CB_ALLREDUCE, CB_ALLTOALL, CB_BCAST, CB_EXCHANGE, CB_NOPS };

static const char *const cb_op_names[] = { "allreduce", "alltoall", "bcast", "exchange" };

struct cb_opts {
	const char *label;
	int ops[CB_NOPS];
	size_t sizes[CB_MAX_SIZES];
	int nsizes;
	double target_s;
	unsigned int timeout_s;
};

struct cb_state {
	int rank;
	int np;
	size_t size;
	uint8_t *tx; /* np * max size */
	uint8_t *rx; /* np * max size */
};

static void cb_on_alarm(int sig)
{
	static const char msg[] = "mpi_collbench: timeout, giving up\n";
	ssize_t n;

	(void)sig;
	n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)n;
	_exit(3);
}

static void cb_fail(const char *what)
{
	fprintf(stderr, "mpi_collbench: %s\n", what);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static int cb_ints(size_t size)
{
	return size < 4 ? 1 : (int)(size / 4);
}

static void cb_run(struct cb_state *st, enum cb_op op)
{
	int left = (st->rank + st->np - 1) % st->np, right = (st->rank + 1) % st->np;
	int cnt = (int)st->size;
	MPI_Request r[4];

	switch (op) {
	case CB_ALLREDUCE:
		MPI_Allreduce(st->tx, st->rx, cb_ints(st->size), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case CB_ALLTOALL:
		MPI_Alltoall(st->tx, cnt, MPI_BYTE, st->rx, cnt, MPI_BYTE, MPI_COMM_WORLD);
		break;
	case CB_BCAST:
		MPI_Bcast(st->rank == 0 ? st->tx : st->rx, cnt, MPI_BYTE, 0, MPI_COMM_WORLD);
		break;
	case CB_EXCHANGE:
	default:
		/* IMB Exchange: both neighbours, both directions, at once. */
		MPI_Irecv(st->rx, cnt, MPI_BYTE, left, 1, MPI_COMM_WORLD, &r[0]);
		MPI_Irecv(st->rx + st->size, cnt, MPI_BYTE, right, 2, MPI_COMM_WORLD, &r[1]);
		MPI_Isend(st->tx, cnt, MPI_BYTE, right, 1, MPI_COMM_WORLD, &r[2]);
		MPI_Isend(st->tx + st->size, cnt, MPI_BYTE, left, 2, MPI_COMM_WORLD, &r[3]);
		MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
		break;
	}
}

/* Byte j of what rank src sends to rank dst. */
static uint8_t cb_byte(int src, int dst, size_t j)
{
	return (uint8_t)(src * 131 + dst * 17 + j * 7 + 1);
}

/* One untimed run with known data; returns nonzero on any rank's mismatch. */
static int cb_checked(struct cb_state *st, enum cb_op op)
{
	int left = (st->rank + st->np - 1) % st->np, right = (st->rank + 1) % st->np;
	int32_t *in = (int32_t *)st->tx, *out = (int32_t *)st->rx;
	int i, n = cb_ints(st->size), bad = 0, any = 0;
	size_t j;

	memset(st->rx, 0xa5, (size_t)st->np * st->size + 8);
	switch (op) {
	case CB_ALLREDUCE:
		for (i = 0; i < n; i++)
			in[i] = (st->rank + 1) * (i + 1);
		cb_run(st, op);
		for (i = 0; i < n && !bad; i++)
			bad = out[i] != (int32_t)(st->np * (st->np + 1) / 2 * (i + 1));
		break;
	case CB_ALLTOALL:
		for (i = 0; i < st->np; i++)
			for (j = 0; j < st->size; j++)
				st->tx[(size_t)i * st->size + j] = cb_byte(st->rank, i, j);
		cb_run(st, op);
		for (i = 0; i < st->np && !bad; i++)
			for (j = 0; j < st->size && !bad; j++)
				bad = st->rx[(size_t)i * st->size + j] != cb_byte(i, st->rank, j);
		break;
	case CB_BCAST:
		for (j = 0; j < st->size; j++)
			st->tx[j] = cb_byte(0, 0, j);
		cb_run(st, op);
		for (j = 0; st->rank && j < st->size && !bad; j++)
			bad = st->rx[j] != cb_byte(0, 0, j);
		break;
	case CB_EXCHANGE:
	default:
		for (j = 0; j < st->size; j++) {
			st->tx[j] = cb_byte(st->rank, right, j);
			st->tx[st->size + j] = cb_byte(st->rank, left, j);
		}
		cb_run(st, op);
		for (j = 0; j < st->size && !bad; j++)
			bad = st->rx[j] != cb_byte(left, st->rank, j) ||
			      st->rx[st->size + j] != cb_byte(right, st->rank, j);
		break;
	}
	if (bad)
		fprintf(stderr, "mpi_collbench: rank %d: wrong data, %s size %zu\n", st->rank,
			cb_op_names[op], st->size);
	MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return any;
}

/* The slowest rank's seconds for iters operations. */
static double cb_phase(struct cb_state *st, enum cb_op op, uint32_t iters)
{
	double t0, t, tmax = 0;
	uint32_t it;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (it = 0; it < iters; it++)
		cb_run(st, op);
	t = MPI_Wtime() - t0;
	MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return tmax;
}

/*
 * Calibrate on the fastest warm-up round (a descheduled round only makes
 * an estimate slower), then time three phases of about target_s / 3 and
 * report the fastest: on a shared machine interference only adds time.
 */
static int cb_measure(struct cb_state *st, enum cb_op op, const struct cb_opts *o)
{
	uint32_t warm = 8, iters;
	double t, best = 0, spent = 0;
	int round;

	if (cb_checked(st, op))
		return 1;
	while (spent < 0.03 && warm < CB_MAX_ITERS / 2) {
		t = cb_phase(st, op, warm);
		spent += t;
		if (best == 0 || t / warm < best)
			best = t / warm;
		if (t < 0.005)
			warm *= 4;
	}
	iters = best > 0 ? (uint32_t)(o->target_s / 3 / best) : CB_MAX_ITERS;
	if (iters < 1)
		iters = 1;
	if (iters > CB_MAX_ITERS)
		iters = CB_MAX_ITERS;
	best = 0;
	for (round = 0; round < 3; round++) {
		t = cb_phase(st, op, iters) / iters;
		if (best == 0 || t < best)
			best = t;
	}
	if (st->rank == 0)
		printf("coll label=%s op=%s np=%d size=%zu iters=%u usec=%.3f\n", o->label,
		       cb_op_names[op], st->np, st->size, iters, best * 1e6);
	fflush(stdout);
	return 0;
}

static int cb_parse(int argc, char **argv, struct cb_opts *o)
{
	static const size_t defaults[] = { 8, 64, 128, 1024, 65536 };
	char *end, *tok, *save;
	int c, k;

	memset(o, 0, sizeof(*o));
	o->label = "mpi";
	for (k = 0; k < CB_NOPS; k++)
		o->ops[k] = 1;
	o->target_s = 0.2;
	o->timeout_s = 120;
	while ((c = getopt(argc, argv, "l:o:s:t:T:h")) != -1) {
		switch (c) {
		case 'l': o->label = optarg; break;
		case 'o':
			memset(o->ops, 0, sizeof(o->ops));
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				for (k = 0; k < CB_NOPS && strcmp(tok, cb_op_names[k]); k++)
					;
				if (k == CB_NOPS)
					return -1;
				o->ops[k] = 1;
			}
			break;
		case 's':
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				unsigned long v = strtoul(tok, &end, 0);

				if (*end || !v || v > CB_MAX_SIZE || o->nsizes == CB_MAX_SIZES)
					return -1;
				o->sizes[o->nsizes++] = v;
			}
			break;
		case 't':
			o->target_s = strtod(optarg, &end);
			if (*end || !(o->target_s > 0 && o->target_s <= 60))
				return -1;
			break;
		case 'T':
			o->timeout_s = (unsigned int)strtoul(optarg, &end, 0);
			if (*end || !o->timeout_s)
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (!o->nsizes)
		for (k = 0; k < (int)(sizeof(defaults) / sizeof(defaults[0])); k++)
			o->sizes[o->nsizes++] = defaults[k];
	return 0;
}

int main(int argc, char **argv)
{
	struct cb_opts o;
	struct cb_state st;
	struct sigaction sa;
	size_t max_size = 0, bytes;
	int i, k, bad = 0;
	struct timespec t0, t1;
	double init_s, slowest;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	MPI_Init(&argc, &argv);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	init_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &st.np);
	MPI_Reduce(&init_s, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (cb_parse(argc, argv, &o)) {
		if (st.rank == 0)
			fprintf(stderr, "usage: mpirun -np N mpi_collbench [-l LABEL] "
					"[-o allreduce,alltoall,bcast,exchange] [-s SIZES] "
					"[-t SECS] [-T SECS]\n");
		MPI_Finalize();
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cb_on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(o.timeout_s);
	if (st.rank == 0) {
		printf("start label=%s np=%d init_s=%.4f\n", o.label, st.np, slowest);
		fflush(stdout);
	}

	for (i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > max_size)
			max_size = o.sizes[i];
	bytes = (size_t)(st.np < 2 ? 2 : st.np) * (max_size < 8 ? 8 : max_size) + 64;
	st.tx = malloc(bytes);
	st.rx = malloc(bytes);
	if (!st.tx || !st.rx)
		cb_fail("out of memory");
	memset(st.tx, 0, bytes);
	memset(st.rx, 0, bytes);

	for (k = 0; k < CB_NOPS && !bad; k++) {
		if (!o.ops[k])
			continue;
		for (i = 0; i < o.nsizes && !bad; i++) {
			st.size = o.sizes[i];
			bad = cb_measure(&st, (enum cb_op)k, &o);
		}
	}
	free(st.tx);
	free(st.rx);
	MPI_Finalize();
	return bad ? 2 : 0;
}
