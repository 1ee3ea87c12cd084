/*
 * mpi_probe: the "probe, size, receive exactly that much" pattern that
 * OpenFOAM and many other codes use, in four flavours:
 *   1. MPI_Probe + MPI_Get_count + MPI_Recv(count)
 *   2. MPI_Iprobe polling loop + MPI_Recv(count)
 *   3. MPI_Mprobe + MPI_Mrecv
 *   4. MPI_Improbe polling loop + MPI_Mrecv
 * each with a specific source and with MPI_ANY_SOURCE, for sizes
 * 0 B .. 256 KiB, in a ring (one sender per receiver) and in a fan-in to
 * rank 0 (many senders, so ANY_SOURCE really has a choice).
 *
 * A provider that reports the wrong length on a peek, or loses / duplicates
 * the probed message, shows up as a count or data mismatch.
 */
#include "mpi_common.h"

#define PROBE_MAX (256 * 1024)
#define PROBE_POLL_S 60.0

enum probe_mode { PROBE_BLOCK, PROBE_POLL, PROBE_MPROBE, PROBE_IMPROBE,
		  PROBE_NMODES };

static const char *probe_mode_name[] = { "Probe", "Iprobe", "Mprobe",
					 "Improbe" };

static size_t probe_sizes[64];
static int probe_nsizes;

static void probe_build_sizes(void)
{
	static const size_t extra[] = { 15, 17, 4095, 4097, 8191, 8193,
					16383, 16385, 32767, 32769, 65535, 65537,
					100000 };

	probe_sizes[probe_nsizes++] = 0;
	for (size_t s = 1; s <= PROBE_MAX; s <<= 2)
		probe_sizes[probe_nsizes++] = s;
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		probe_sizes[probe_nsizes++] = extra[i];
	probe_sizes[probe_nsizes++] = PROBE_MAX;
}

/* Find the next message (src may be MPI_ANY_SOURCE), allocate exactly its
 * size and receive it; returns the buffer, its size and the true source. */
static char *probe_get(enum probe_mode mode, int src, int tag, int *count,
		       int *from)
{
	MPI_Status st;
	MPI_Message msg = MPI_MESSAGE_NULL;
	double deadline = MPI_Wtime() + PROBE_POLL_S;
	int flag = 0;
	char *buf;

	switch (mode) {
	case PROBE_BLOCK:
		TEST_MPI(MPI_Probe(src, tag, MPI_COMM_WORLD, &st));
		break;
	case PROBE_POLL:
		while (!flag) {
			TEST_MPI(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag,
					    &st));
			if (!flag && MPI_Wtime() > deadline)
				TEST_FAIL("Iprobe: nothing after %.0f s",
					  PROBE_POLL_S);
		}
		break;
	case PROBE_MPROBE:
		TEST_MPI(MPI_Mprobe(src, tag, MPI_COMM_WORLD, &msg, &st));
		break;
	case PROBE_IMPROBE:
		while (!flag) {
			TEST_MPI(MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag,
					     &msg, &st));
			if (!flag && MPI_Wtime() > deadline)
				TEST_FAIL("Improbe: nothing after %.0f s",
					  PROBE_POLL_S);
		}
		break;
	default:
		TEST_FAIL("bad mode");
	}
	TEST_MPI(MPI_Get_count(&st, MPI_BYTE, count));
	if (*count < 0 || *count > PROBE_MAX)
		TEST_FAIL("%s: implausible count %d", probe_mode_name[mode],
			  *count);
	if (st.MPI_TAG != tag)
		TEST_FAIL("%s: probed tag %d, want %d", probe_mode_name[mode],
			  st.MPI_TAG, tag);
	if (src != MPI_ANY_SOURCE && st.MPI_SOURCE != src)
		TEST_FAIL("%s: probed source %d, want %d",
			  probe_mode_name[mode], st.MPI_SOURCE, src);
	*from = st.MPI_SOURCE;
	/* One guard byte detects a receive longer than the probed count. */
	buf = test_malloc((size_t)*count + 1);
	buf[*count] = (char)0xa5;
	if (mode == PROBE_MPROBE || mode == PROBE_IMPROBE)
		TEST_MPI(MPI_Mrecv(buf, *count, MPI_BYTE, &msg, &st));
	else
		TEST_MPI(MPI_Recv(buf, *count, MPI_BYTE, st.MPI_SOURCE, tag,
				  MPI_COMM_WORLD, &st));
	if ((unsigned char)buf[*count] != 0xa5)
		TEST_FAIL("%s: receive overran probed count %d",
			  probe_mode_name[mode], *count);
	{
		int rc;
		TEST_MPI(MPI_Get_count(&st, MPI_BYTE, &rc));
		if (rc != *count || st.MPI_SOURCE != *from)
			TEST_FAIL("%s: recv count %d src %d after probe "
				  "count %d src %d", probe_mode_name[mode], rc,
				  st.MPI_SOURCE, *count, *from);
	}
	return buf;
}

/* Ring: each rank sends to the right, probes/receives from the left. */
static void probe_ring(enum probe_mode mode, int any, size_t len, int salt)
{
	int right = (test_rank + 1) % test_size;
	int left = (test_rank + test_size - 1) % test_size;
	char *sbuf = test_malloc(len);
	MPI_Request req;
	int count, from;
	char *rbuf;
	/* A fresh tag per round: a fast rank may already be sending the next
	 * round while we still receive this one. */
	int tag = 2 * salt;

	test_fill(sbuf, len, test_rank, (int)len, salt);
	TEST_MPI(MPI_Isend(sbuf, (int)len, MPI_BYTE, right, tag,
			   MPI_COMM_WORLD, &req));
	rbuf = probe_get(mode, any ? MPI_ANY_SOURCE : left, tag, &count,
			 &from);
	if (from != left || (size_t)count != len)
		TEST_FAIL("ring %s%s len %zu: got count %d from %d",
			  probe_mode_name[mode], any ? "(ANY)" : "", len,
			  count, from);
	TEST_CHECK_BUF(rbuf, len, left, (int)len, salt, "probe ring");
	TEST_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	free(rbuf);
	free(sbuf);
}

/* Fan-in: everyone else sends two messages of different sizes to rank 0,
 * which probes with ANY_SOURCE (or walks the sources in order). */
static void probe_fanin(enum probe_mode mode, int any, size_t len, int salt)
{
	int tag = 2 * salt + 1;

	if (test_rank != 0) {
		size_t len2 = len / 2 + (size_t)test_rank;
		char *a = test_malloc(len), *b = test_malloc(len2);
		MPI_Request req[2];

		test_fill(a, len, test_rank, 0, salt);
		test_fill(b, len2, test_rank, 1, salt);
		TEST_MPI(MPI_Isend(a, (int)len, MPI_BYTE, 0, tag,
				   MPI_COMM_WORLD, &req[0]));
		TEST_MPI(MPI_Isend(b, (int)len2, MPI_BYTE, 0, tag,
				   MPI_COMM_WORLD, &req[1]));
		TEST_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
		free(a);
		free(b);
		return;
	}
	int *seen = calloc((size_t)test_size, sizeof(int));
	if (!seen)
		TEST_FAIL("calloc failed");
	for (int i = 0; i < 2 * (test_size - 1); i++) {
		int src = any ? MPI_ANY_SOURCE : 1 + i / 2;
		int count, from, nth;
		size_t want;
		char *rbuf = probe_get(mode, src, tag, &count, &from);

		if (from <= 0 || from >= test_size || seen[from] >= 2)
			TEST_FAIL("fan-in %s: unexpected source %d",
				  probe_mode_name[mode], from);
		nth = seen[from]++;
		/* Non-overtaking: first message from a source comes first. */
		want = nth == 0 ? len : len / 2 + (size_t)from;
		if ((size_t)count != want)
			TEST_FAIL("fan-in %s%s: msg %d from %d count %d want "
				  "%zu", probe_mode_name[mode],
				  any ? "(ANY)" : "", nth, from, count, want);
		TEST_CHECK_BUF(rbuf, want, from, nth, salt, "probe fan-in");
		free(rbuf);
	}
	free(seen);
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv, "mpi_probe");
	if (test_size < 2)
		TEST_FAIL("needs at least 2 ranks");
	probe_build_sizes();
	for (int m = 0; m < PROBE_NMODES; m++) {
		for (int any = 0; any < 2; any++) {
			for (int i = 0; i < probe_nsizes; i++) {
				int salt = (m * 2 + any) * 64 + i;
				probe_ring((enum probe_mode)m, any,
					   probe_sizes[i], salt);
				probe_fanin((enum probe_mode)m, any,
					    probe_sizes[i], salt);
				if (getenv("MPI_PROBE_VERBOSE") && !test_rank)
					printf("  %s%s %zu ok\n",
					       probe_mode_name[m],
					       any ? "(ANY)" : "",
					       probe_sizes[i]);
				fflush(stdout);
			}
			TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		}
	}
	if (test_rank == 0)
		printf("mpi_probe: %d sizes x %d modes x {source, ANY}, ring "
		       "and fan-in, ok\n", probe_nsizes, PROBE_NMODES);
	test_finish();
	return 0;
}
