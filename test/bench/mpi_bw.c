/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_bw.c - osu_bw / osu_bibw / osu_latency-style measurements between
 * two MPI ranks, so opx under Open MPI (pml cm + mtl ofi) can be compared
 * with Open MPI's own shared-memory path (pml ob1 + btl vader) in one run.
 *
 *   mpirun -np 2 mpi_bw [-l LABEL] [-m bw|bibw|lat|all] [-s SIZES] [options]
 *
 * Built by scripts/bench-large.sh with mpicc (automake does not know about
 * MPI).  Rank 0 prints one line per mode and size:
 *
 *   mpi label=opx mode=bw size=1048576 window=64 iters=12 MBps=7890.1 usec=132.9
 *
 * The methods match test/bench/opx_bw.c, so the MPI and libfabric tables
 * can be read side by side:
 *   bw    rank 0 posts W MPI_Isend, waits, then waits for a 4-byte ack that
 *         rank 1 sends once its W MPI_Irecv completed.
 *   bibw  both ranks post W MPI_Irecv and W MPI_Isend and wait for all;
 *         MBps adds both directions.
 *   lat   MPI_Send / MPI_Recv ping-pong; usec is half the round trip.
 * usec for bw/bibw is the time per message of one direction's stream.
 * The warm-up grows until it lasts 50 ms and times the iteration count of
 * the measured phase (about -t seconds).  A first and a last iteration,
 * outside the timing, carry a pattern that the receiver checks after
 * poisoning its buffers; a mismatch makes the program exit 2.  Buffers are
 * distinct per message of a window up to 64 MiB per direction (-B), as in
 * opx_bw.
 *
 * A test program: it aborts the job on errors, and an alarm (-T) bounds
 * the run so a broken transport cannot hang a benchmark script.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#define MB_DATA_TAG 1
#define MB_ACK_TAG 2
#define MB_MAX_SIZE (256UL << 20)
#define MB_MAX_ITERS 1000000u
#define MB_MAX_SIZES 64
#define MB_CAL_MIN_S 0.05
#define MB_WARM_BYTES (32UL << 20)
#define MB_POISON 0x5a

enum mb_mode { MB_BW, MB_BIBW, MB_LAT, MB_NMODES };

static const char *const mb_mode_names[] = { "bw", "bibw", "lat" };

struct mb_opts {
	const char *label;
	int modes[MB_NMODES];
	size_t sizes[MB_MAX_SIZES];
	int nsizes;
	int window;
	size_t slot_cap;
	double target_s;
	unsigned int timeout_s;
};

struct mb_state {
	int rank;
	int peer;
	enum mb_mode mode;
	size_t size;
	int window; /* messages per iteration (1 for lat) */
	int slots;  /* distinct buffers per direction */
	uint8_t *tx;
	uint8_t *rx;
	MPI_Request *reqs; /* 2 * window */
};

static void mb_on_alarm(int sig)
{
	static const char msg[] = "mpi_bw: timeout, giving up\n";
	ssize_t n;

	(void)sig;
	n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)n;
	_exit(3);
}

static void mb_fail(const char *what)
{
	fprintf(stderr, "mpi_bw: %s\n", what);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void mb_check_mpi(int rc, const char *what)
{
	if (rc != MPI_SUCCESS)
		mb_fail(what);
}

/* ---- data pattern (same scheme as opx_bw) ------------------------------ */

static uint64_t mb_word(uint64_t seed, size_t k)
{
	uint64_t x = seed + (uint64_t)k * 0x9e3779b97f4a7c15ULL;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

/* Message index is part of the seed only when every message has a slot. */
static uint64_t mb_msg_seed(const struct mb_state *st, uint32_t seed, int i)
{
	uint64_t s = (uint64_t)seed << 32;

	return st->slots == st->window ? s | (uint32_t)i : s;
}

static void mb_fill(uint8_t *p, size_t size, uint64_t seed)
{
	size_t k;

	for (k = 0; k + 8 <= size; k += 8) {
		uint64_t w = mb_word(seed, k / 8);

		memcpy(p + k, &w, 8);
	}
	for (; k < size; k++)
		p[k] = (uint8_t)mb_word(seed, k);
}

static int mb_check(const uint8_t *p, size_t size, uint64_t seed)
{
	size_t k;

	for (k = 0; k + 8 <= size; k += 8) {
		uint64_t w = mb_word(seed, k / 8);

		if (memcmp(p + k, &w, 8))
			return 1;
	}
	for (; k < size; k++)
		if (p[k] != (uint8_t)mb_word(seed, k))
			return 1;
	return 0;
}

static uint8_t *mb_slot(uint8_t *base, const struct mb_state *st, int i)
{
	return base + (size_t)(i % st->slots) * st->size;
}

static int mb_nslots_used(const struct mb_state *st)
{
	return st->slots < st->window ? st->slots : st->window;
}

/* ---- one iteration of each mode --------------------------------------- */

static void mb_iter(struct mb_state *st)
{
	int n = st->window, i, cnt = (int)st->size;
	uint32_t ack = 0;

	switch (st->mode) {
	case MB_BW:
		if (st->rank == 0) {
			for (i = 0; i < n; i++)
				MPI_Isend(mb_slot(st->tx, st, i), cnt, MPI_BYTE, st->peer,
					  MB_DATA_TAG, MPI_COMM_WORLD, &st->reqs[i]);
			MPI_Waitall(n, st->reqs, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 4, MPI_BYTE, st->peer, MB_ACK_TAG, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		} else {
			for (i = 0; i < n; i++)
				MPI_Irecv(mb_slot(st->rx, st, i), cnt, MPI_BYTE, st->peer,
					  MB_DATA_TAG, MPI_COMM_WORLD, &st->reqs[i]);
			MPI_Waitall(n, st->reqs, MPI_STATUSES_IGNORE);
			MPI_Send(&ack, 4, MPI_BYTE, st->peer, MB_ACK_TAG, MPI_COMM_WORLD);
		}
		break;
	case MB_BIBW:
		for (i = 0; i < n; i++)
			MPI_Irecv(mb_slot(st->rx, st, i), cnt, MPI_BYTE, st->peer, MB_DATA_TAG,
				  MPI_COMM_WORLD, &st->reqs[i]);
		for (i = 0; i < n; i++)
			MPI_Isend(mb_slot(st->tx, st, i), cnt, MPI_BYTE, st->peer, MB_DATA_TAG,
				  MPI_COMM_WORLD, &st->reqs[n + i]);
		MPI_Waitall(2 * n, st->reqs, MPI_STATUSES_IGNORE);
		break;
	case MB_LAT:
	default:
		if (st->rank == 0) {
			MPI_Send(st->tx, cnt, MPI_BYTE, st->peer, MB_DATA_TAG, MPI_COMM_WORLD);
			MPI_Recv(st->rx, cnt, MPI_BYTE, st->peer, MB_DATA_TAG, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(st->rx, cnt, MPI_BYTE, st->peer, MB_DATA_TAG, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			MPI_Send(st->tx, cnt, MPI_BYTE, st->peer, MB_DATA_TAG, MPI_COMM_WORLD);
		}
		break;
	}
}

static double mb_phase(struct mb_state *st, uint32_t iters)
{
	double t0;
	uint32_t it;

	t0 = MPI_Wtime();
	for (it = 0; it < iters; it++)
		mb_iter(st);
	return MPI_Wtime() - t0;
}

/*
 * One untimed iteration carrying a pattern.  In lat mode rank 1 echoes its
 * own pattern (seed + 1), so both directions are checked; in bw mode only
 * rank 1 receives data.  Returns 1 on either rank's mismatch.
 */
static int mb_checked_iter(struct mb_state *st, uint32_t seed)
{
	int sends = st->mode != MB_BW || st->rank == 0;
	int recvs = st->mode != MB_BW || st->rank == 1;
	uint32_t tx_seed = st->mode == MB_LAT && st->rank == 1 ? seed + 1 : seed;
	uint32_t rx_seed = st->mode == MB_LAT && st->rank == 0 ? seed + 1 : seed;
	int i, bad = 0, any_bad = 0;

	for (i = 0; sends && i < mb_nslots_used(st); i++)
		mb_fill(mb_slot(st->tx, st, i), st->size, mb_msg_seed(st, tx_seed, i));
	if (recvs)
		memset(st->rx, MB_POISON, (size_t)st->slots * st->size);
	MPI_Barrier(MPI_COMM_WORLD);
	mb_iter(st);
	for (i = 0; recvs && !bad && i < mb_nslots_used(st); i++)
		bad = mb_check(mb_slot(st->rx, st, i), st->size, mb_msg_seed(st, rx_seed, i));
	if (bad)
		fprintf(stderr, "mpi_bw: rank %d: data mismatch, mode %s size %zu\n", st->rank,
			mb_mode_names[st->mode], st->size);
	MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return any_bad;
}

static uint32_t mb_bcast_u32(uint32_t v)
{
	mb_check_mpi(MPI_Bcast(&v, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
	return v;
}

/* Runs one mode at one size; returns nonzero on a data mismatch. */
static int mb_run_one(struct mb_state *st, const struct mb_opts *o)
{
	uint64_t per_iter = st->mode == MB_LAT ? st->size : (uint64_t)st->window * st->size;
	/*
	 * At least one untimed iteration, unless one is so big (16 MiB x 64)
	 * that the checked iteration already is a fair sample.
	 */
	uint32_t n = MB_WARM_BYTES / per_iter > 100 ? 100 : (uint32_t)(MB_WARM_BYTES / per_iter);
	uint32_t iters = 1;
	double dt, per;

	if (!n && per_iter <= 8 * MB_WARM_BYTES)
		n = 1;

	MPI_Barrier(MPI_COMM_WORLD);
	dt = MPI_Wtime();
	if (mb_checked_iter(st, 1))
		return 1;
	per = MPI_Wtime() - dt;

	/* Warm-up grows x4 until a phase is long enough to time (rank 0 decides). */
	for (;;) {
		n = mb_bcast_u32(n);
		if (!n)
			break;
		dt = mb_phase(st, n);
		per = dt / n;
		n = dt >= MB_CAL_MIN_S || n > MB_MAX_ITERS / 4 ? 0 : n * 4;
	}
	if (st->rank == 0) {
		double x = per > 0 ? o->target_s / per : MB_MAX_ITERS;

		iters = x < 1 ? 1 : x > MB_MAX_ITERS ? MB_MAX_ITERS : (uint32_t)(x + 0.5);
	}
	iters = mb_bcast_u32(iters);

	MPI_Barrier(MPI_COMM_WORLD);
	dt = mb_phase(st, iters);
	if (mb_checked_iter(st, 2))
		return 1;

	if (st->rank == 0) {
		double msgs = (double)iters * st->window, usec, mbps;

		if (st->mode == MB_LAT) {
			usec = dt * 1e6 / (2.0 * iters);
			mbps = (double)st->size / usec;
		} else {
			usec = dt * 1e6 / msgs;
			mbps = msgs * (double)st->size * (st->mode == MB_BIBW ? 2 : 1) / dt / 1e6;
		}
		printf("mpi label=%s mode=%s size=%zu window=%d iters=%u MBps=%.1f usec=%.2f\n",
		       o->label, mb_mode_names[st->mode], st->size, st->window, iters, mbps, usec);
		fflush(stdout);
	}
	return 0;
}

/* ---- options ------------------------------------------------------------ */

static void mb_usage(void)
{
	fprintf(stderr,
		"usage: mpirun -np 2 mpi_bw [options]\n"
		"  -l LABEL  label printed on every line (default mpi)\n"
		"  -m MODE   bw | bibw | lat | all (default all)\n"
		"  -s LIST   comma-separated sizes (default 16 KiB .. 16 MiB, x4)\n"
		"  -w W      messages per window (default 64)\n"
		"  -B BYTES  distinct buffer bytes per direction (default 64 MiB)\n"
		"  -t SECS   target duration of each measured phase (default 0.3)\n"
		"  -T SECS   give up after SECS seconds (default 120)\n");
}

static int mb_parse(int argc, char **argv, struct mb_opts *o)
{
	static const size_t defaults[] = { 16384, 65536, 262144, 1048576, 4194304, 16777216 };
	char *end, *tok, *save;
	int c, m;

	o->label = "mpi";
	for (m = 0; m < MB_NMODES; m++)
		o->modes[m] = 1;
	o->nsizes = 0;
	o->window = 64;
	o->slot_cap = 64UL << 20;
	o->target_s = 0.3;
	o->timeout_s = 120;
	while ((c = getopt(argc, argv, "l:m:s:w:B:t:T:h")) != -1) {
		switch (c) {
		case 'l': o->label = optarg; break;
		case 'm':
			if (strcmp(optarg, "all")) {
				for (m = 0; m < MB_NMODES; m++)
					o->modes[m] = !strcmp(optarg, mb_mode_names[m]);
				if (!o->modes[0] && !o->modes[1] && !o->modes[2])
					return -1;
			}
			break;
		case 's':
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				unsigned long v = strtoul(tok, &end, 0);

				if (*end || !v || v > MB_MAX_SIZE || o->nsizes == MB_MAX_SIZES)
					return -1;
				o->sizes[o->nsizes++] = v;
			}
			break;
		case 'w':
			o->window = (int)strtol(optarg, &end, 0);
			if (*end || o->window < 1 || o->window > 4096)
				return -1;
			break;
		case 'B':
			o->slot_cap = strtoul(optarg, &end, 0);
			if (*end || o->slot_cap > (1UL << 30))
				return -1;
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
	if (!o->nsizes) {
		for (o->nsizes = 0; o->nsizes < (int)(sizeof(defaults) / sizeof(defaults[0]));
		     o->nsizes++)
			o->sizes[o->nsizes] = defaults[o->nsizes];
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct mb_opts o;
	struct mb_state st;
	struct sigaction sa;
	size_t max_size = 0, slot_bytes;
	int nprocs, i, m, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	if (mb_parse(argc, argv, &o)) {
		if (st.rank == 0)
			mb_usage();
		MPI_Finalize();
		return 1;
	}
	if (nprocs != 2) {
		if (st.rank == 0)
			fprintf(stderr, "mpi_bw: needs exactly 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = mb_on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(o.timeout_s);

	/* Size the buffers once for the largest size: no allocation per run. */
	for (i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > max_size)
			max_size = o.sizes[i];
	slot_bytes = o.slot_cap > max_size ? o.slot_cap : max_size;
	st.peer = 1 - st.rank;
	st.tx = aligned_alloc(4096, (slot_bytes + 4095) & ~(size_t)4095);
	st.rx = aligned_alloc(4096, (slot_bytes + 4095) & ~(size_t)4095);
	st.reqs = calloc(2 * (size_t)o.window, sizeof(*st.reqs));
	if (!st.tx || !st.rx || !st.reqs)
		mb_fail("out of memory");
	/* Touch every page now so first-touch faults stay out of the timing. */
	memset(st.tx, 0, slot_bytes);
	memset(st.rx, 0, slot_bytes);

	for (i = 0; i < o.nsizes && !bad; i++) {
		for (m = 0; m < MB_NMODES && !bad; m++) {
			uint64_t cap;

			if (!o.modes[m])
				continue;
			st.mode = (enum mb_mode)m;
			st.size = o.sizes[i];
			st.window = st.mode == MB_LAT ? 1 : o.window;
			cap = o.slot_cap / st.size;
			st.slots = cap < 1 ? 1 : cap < (uint64_t)st.window ? (int)cap : st.window;
			bad = mb_run_one(&st, &o);
		}
	}

	free(st.tx);
	free(st.rx);
	free(st.reqs);
	MPI_Finalize();
	return bad ? 2 : 0;
}
