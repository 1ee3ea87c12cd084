/*
 * mpi_large: large messages through every rendezvous-sized path.
 *
 *  - ring exchange for sizes from the eager limit up to 64 MiB + 1, each
 *    size +-1 around the thresholds a provider has (16 KiB eager maximum,
 *    64 KiB, 1 MiB, 64 MiB), with blocking and non-blocking calls;
 *  - non-contiguous datatypes (MPI_Type_vector) on the send side and on
 *    the receive side, so the MTL packs/unpacks multi-MiB messages;
 *  - small-after-large ordering: a 4 MiB message followed by small ones
 *    with the same tag to the same peer must match wildcard receives in
 *    the order they were sent (MPI non-overtaking), whether the receives
 *    are posted before the messages arrive or after.
 *
 * OPX_MPI_LARGE_MAX_MB caps the largest size (default 64) for machines
 * with little memory; the sizes above the cap are skipped, and rank 0
 * says so.
 */
#include "mpi_common.h"

#define LARGE_MIB ((size_t)1 << 20)
#define LARGE_ITERS 2

static const size_t large_sizes[] = {
	16383,		  16384,	    16385,	      32767,
	32768,		  32769,	    65535,
	65536,		  65537,	    LARGE_MIB - 1,    LARGE_MIB,
	LARGE_MIB + 1,	  4 * LARGE_MIB,    16 * LARGE_MIB,   64 * LARGE_MIB - 1,
	64 * LARGE_MIB,	  64 * LARGE_MIB + 1,
};
#define LARGE_NSIZES ((int)(sizeof(large_sizes) / sizeof(large_sizes[0])))

static size_t large_max;
static char *sbuf, *rbuf;

static void large_setup(void)
{
	const char *env = getenv("OPX_MPI_LARGE_MAX_MB");
	size_t mb = env ? (size_t)strtoul(env, NULL, 10) : 64;

	if (mb < 1)
		mb = 1;
	/* +1 so 64 MiB + 1 still fits when the cap is 64 MiB */
	large_max = mb * LARGE_MIB + 1;
	/* one guard byte past the largest message */
	sbuf = test_malloc(large_max + 1);
	rbuf = test_malloc(large_max + 1);
	if (test_rank == 0 && mb < 64)
		printf("mpi_large: sizes capped at %zu MiB + 1 "
		       "(OPX_MPI_LARGE_MAX_MB)\n", mb);
}

/* Checks status source, tag and byte count of a completed receive. */
static void large_check_status(const MPI_Status *st, int src, int tag,
			       size_t len, const char *what)
{
	int count = -1;

	TEST_MPI(MPI_Get_count(st, MPI_BYTE, &count));
	if (st->MPI_SOURCE != src || st->MPI_TAG != tag ||
	    (size_t)count != len)
		TEST_FAIL("%s len %zu: status source %d tag %d count %d, "
			  "want %d %d %zu", what, len, st->MPI_SOURCE,
			  st->MPI_TAG, count, src, tag, len);
}

/* Rank 0 sends first and everyone else receives first, so the blocking
 * ring cannot deadlock even though a rendezvous send only completes once
 * the peer has matched it. */
static void large_ring_blocking(size_t len, int iter)
{
	int right = (test_rank + 1) % test_size;
	int left = (test_rank + test_size - 1) % test_size;
	int tag = 1000 + iter;
	MPI_Status st;

	test_fill(sbuf, len, test_rank, iter, (int)(len & 0xffff));
	memset(rbuf, 0xee, len + 1);
	if (test_rank == 0) {
		TEST_MPI(MPI_Send(sbuf, (int)len, MPI_BYTE, right, tag,
				  MPI_COMM_WORLD));
		TEST_MPI(MPI_Recv(rbuf, (int)len, MPI_BYTE, left, tag,
				  MPI_COMM_WORLD, &st));
	} else {
		TEST_MPI(MPI_Recv(rbuf, (int)len, MPI_BYTE, left, tag,
				  MPI_COMM_WORLD, &st));
		TEST_MPI(MPI_Send(sbuf, (int)len, MPI_BYTE, right, tag,
				  MPI_COMM_WORLD));
	}
	large_check_status(&st, left, tag, len, "blocking ring");
	TEST_CHECK_BUF(rbuf, len, left, iter, (int)(len & 0xffff),
		       "blocking ring");
	if ((unsigned char)rbuf[len] != 0xee)
		TEST_FAIL("blocking ring len %zu: receive wrote past the end",
			  len);
}

/* Non-blocking ring; odd iterations post the send before the receive so
 * both orders of RTS arrival and receive posting are exercised. */
static void large_ring_nonblocking(size_t len, int iter)
{
	int right = (test_rank + 1) % test_size;
	int left = (test_rank + test_size - 1) % test_size;
	int tag = 2000 + iter;
	MPI_Request req[2];
	MPI_Status st[2];

	test_fill(sbuf, len, test_rank, iter, (int)(len & 0xffff) + 1);
	memset(rbuf, 0xee, len + 1);
	if (iter & 1) {
		TEST_MPI(MPI_Isend(sbuf, (int)len, MPI_BYTE, right, tag,
				   MPI_COMM_WORLD, &req[1]));
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		TEST_MPI(MPI_Irecv(rbuf, (int)len, MPI_BYTE, left, tag,
				   MPI_COMM_WORLD, &req[0]));
	} else {
		TEST_MPI(MPI_Irecv(rbuf, (int)len, MPI_BYTE, left, tag,
				   MPI_COMM_WORLD, &req[0]));
		TEST_MPI(MPI_Isend(sbuf, (int)len, MPI_BYTE, right, tag,
				   MPI_COMM_WORLD, &req[1]));
	}
	TEST_WAITALL(2, req, st);
	large_check_status(&st[0], left, tag, len, "non-blocking ring");
	TEST_CHECK_BUF(rbuf, len, left, iter, (int)(len & 0xffff) + 1,
		       "non-blocking ring");
	if ((unsigned char)rbuf[len] != 0xee)
		TEST_FAIL("non-blocking ring len %zu: receive wrote past the "
			  "end", len);
}

static void large_ring(void)
{
	for (int i = 0; i < LARGE_NSIZES; i++) {
		size_t len = large_sizes[i];

		if (len > large_max)
			continue;
		for (int iter = 0; iter < LARGE_ITERS; iter++) {
			large_ring_blocking(len, iter);
			large_ring_nonblocking(len, iter);
		}
	}
}

/*
 * Vector datatypes: nblk blocks of blk bytes every stride bytes.  Packed
 * byte k of the message is test_byte(src, ..., k) wherever it lives, so a
 * contiguous receive of a vector send (and the reverse) checks the
 * provider moved exactly the packed stream.
 */
static void large_vector_one(size_t nblk, size_t blk, size_t stride,
			     int vec_on_send, int salt)
{
	int right = (test_rank + 1) % test_size;
	int left = (test_rank + test_size - 1) % test_size;
	size_t packed = nblk * blk, extent = (nblk - 1) * stride + blk;
	int tag = 3000 + salt;
	MPI_Datatype vec;
	MPI_Request req[2];
	MPI_Status st[2];
	unsigned char *s = (unsigned char *)sbuf, *r = (unsigned char *)rbuf;

	if (extent + 1 > large_max)
		return;
	TEST_MPI(MPI_Type_vector((int)nblk, (int)blk, (int)stride, MPI_BYTE,
				 &vec));
	TEST_MPI(MPI_Type_commit(&vec));
	if (vec_on_send) {
		/* gaps hold a different value: a packer that sends them
		 * shifts every later byte */
		memset(s, 0x5a, extent);
		for (size_t b = 0; b < nblk; b++)
			for (size_t k = 0; k < blk; k++)
				s[b * stride + k] = test_byte(test_rank, 0,
							      salt, b * blk + k);
		memset(r, 0xee, packed + 1);
		TEST_MPI(MPI_Irecv(r, (int)packed, MPI_BYTE, left, tag,
				   MPI_COMM_WORLD, &req[0]));
		TEST_MPI(MPI_Isend(s, 1, vec, right, tag, MPI_COMM_WORLD,
				   &req[1]));
	} else {
		test_fill(s, packed, test_rank, 0, salt);
		memset(r, 0xee, extent + 1);
		TEST_MPI(MPI_Irecv(r, 1, vec, left, tag, MPI_COMM_WORLD,
				   &req[0]));
		TEST_MPI(MPI_Isend(s, (int)packed, MPI_BYTE, right, tag,
				   MPI_COMM_WORLD, &req[1]));
	}
	TEST_WAITALL(2, req, st);
	large_check_status(&st[0], left, tag, packed, "vector");
	if (vec_on_send) {
		TEST_CHECK_BUF(r, packed, left, 0, salt,
			       "vector send -> contiguous receive");
		if (r[packed] != 0xee)
			TEST_FAIL("vector send: receive wrote past the end");
	} else {
		for (size_t b = 0; b < nblk; b++) {
			for (size_t k = 0; k < blk; k++) {
				unsigned char want = test_byte(left, 0, salt,
							       b * blk + k);
				if (r[b * stride + k] != want)
					TEST_FAIL("contiguous send -> vector "
						  "receive: block %zu byte %zu "
						  "got 0x%02x want 0x%02x", b,
						  k, r[b * stride + k], want);
			}
			/* the receive must not write into the gaps */
			for (size_t k = blk; b + 1 < nblk && k < stride; k++)
				if (r[b * stride + k] != 0xee)
					TEST_FAIL("vector receive wrote into "
						  "the gap after block %zu", b);
		}
		if (r[extent] != 0xee)
			TEST_FAIL("vector receive wrote past its extent");
	}
	TEST_MPI(MPI_Type_free(&vec));
}

static void large_vector(void)
{
	/* ~4 MiB packed (odd block), ~16 MiB + change packed, and one just
	 * over the eager limit so the MTL's pack path meets rendezvous at
	 * its smallest. */
	large_vector_one(4099, 1023, 1536, 1, 1);
	large_vector_one(4099, 1023, 1536, 0, 2);
	large_vector_one(16411, 1025, 1031, 1, 3);
	large_vector_one(16411, 1025, 1031, 0, 4);
	large_vector_one(17, 1021, 4096, 1, 5);
	large_vector_one(17, 1021, 4096, 0, 6);
}

/*
 * Small-after-large: the message sequence below goes to the right
 * neighbour with one tag; the receiver posts MPI_ANY_SOURCE receives of
 * the largest size with that tag.  MPI's non-overtaking rule says the
 * k-th receive gets the k-th message, whatever protocol each one used.
 * posted_first selects receives posted before the sends (expected) or
 * after a barrier that follows the sends (unexpected).
 */
static void large_order(int posted_first, int seqno)
{
	static const size_t seq_a[] = { 4 * LARGE_MIB, 8 };
	static const size_t seq_b[] = { 65537,	       16,   4 * LARGE_MIB,
					8193,	       0,    16385,
					LARGE_MIB + 1, 8,    4 * LARGE_MIB - 1,
					15 };
	const size_t *seq = seqno ? seq_b : seq_a;
	int n = seqno ? (int)(sizeof(seq_b) / sizeof(seq_b[0])) : 2;
	size_t slot = 4 * LARGE_MIB + 64;
	int right = (test_rank + 1) % test_size;
	int left = (test_rank + test_size - 1) % test_size;
	int tag = 4000 + seqno * 2 + posted_first;
	MPI_Request rreq[16], sreq[16];
	MPI_Status st[16];
	size_t soff = 0;

	if ((size_t)n * slot + 1 > large_max)
		return;
	/* every message in flight keeps its own send region */
	for (int k = 0; k < n; k++) {
		test_fill(sbuf + soff, seq[k], test_rank, k, tag);
		soff += seq[k];
	}
	memset(rbuf, 0xee, (size_t)n * slot);
	if (posted_first) {
		for (int k = 0; k < n; k++)
			TEST_MPI(MPI_Irecv(rbuf + (size_t)k * slot, (int)slot,
					   MPI_BYTE, MPI_ANY_SOURCE, tag,
					   MPI_COMM_WORLD, &rreq[k]));
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	}
	soff = 0;
	for (int k = 0; k < n; k++) {
		TEST_MPI(MPI_Isend(sbuf + soff, (int)seq[k], MPI_BYTE, right,
				   tag, MPI_COMM_WORLD, &sreq[k]));
		soff += seq[k];
	}
	if (!posted_first) {
		/* the whole sequence is now in flight or queued unexpected */
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		for (int k = 0; k < n; k++)
			TEST_MPI(MPI_Irecv(rbuf + (size_t)k * slot, (int)slot,
					   MPI_BYTE, MPI_ANY_SOURCE, tag,
					   MPI_COMM_WORLD, &rreq[k]));
	}
	TEST_WAITALL(n, rreq, st);
	TEST_MPI(MPI_Waitall(n, sreq, MPI_STATUSES_IGNORE));
	for (int k = 0; k < n; k++) {
		char what[96];
		int count = -1;

		TEST_MPI(MPI_Get_count(&st[k], MPI_BYTE, &count));
		if ((size_t)count != seq[k] || st[k].MPI_SOURCE != left)
			TEST_FAIL("order seq %d (%s): receive %d got %d bytes "
				  "from %d, want message %d (%zu bytes) from "
				  "%d: small overtook large", seqno,
				  posted_first ? "posted first" : "unexpected",
				  k, count, st[k].MPI_SOURCE, k, seq[k], left);
		snprintf(what, sizeof(what), "order seq %d %s receive %d",
			 seqno, posted_first ? "posted" : "unexpected", k);
		TEST_CHECK_BUF(rbuf + (size_t)k * slot, seq[k], left, k, tag,
			       what);
	}
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv, "mpi_large");
	large_setup();
	large_ring();
	if (test_rank == 0)
		printf("mpi_large: ring blocking/non-blocking up to %zu bytes "
		       "ok\n", large_max);
	large_vector();
	for (int seqno = 0; seqno < 2; seqno++)
		for (int pf = 1; pf >= 0; pf--)
			large_order(pf, seqno);
	if (test_rank == 0)
		printf("mpi_large: vector datatypes, small-after-large "
		       "ordering ok\n");
	free(sbuf);
	free(rbuf);
	test_finish();
	return 0;
}
