/*
 * Shared helpers for the opx MPI integration tests.
 *
 * Every test fills buffers with a pattern that depends on the sender, the
 * iteration and the byte offset, so a message delivered to the wrong
 * receive, delivered twice, truncated or shifted is detected, not just a
 * message that is missing.  Every program arms alarm() so a hang in the
 * provider turns into a clean non-zero exit instead of a stuck CI job.
 */
#ifndef OPX_MPI_COMMON_H
#define OPX_MPI_COMMON_H

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEST_ALARM_S 120

static int test_rank;
static int test_size;
static const char *test_name = "mpi_test";

/* Report and abort the whole job: a single failing rank must not leave its
 * peers waiting forever in a collective. */
#define TEST_FAIL(...)                                                        \
	do {                                                                  \
		fprintf(stderr, "FAIL %s rank %d (%s:%d): ", test_name,      \
			test_rank, __FILE__, __LINE__);                       \
		fprintf(stderr, __VA_ARGS__);                                 \
		fprintf(stderr, "\n");                                        \
		fflush(stderr);                                               \
		MPI_Abort(MPI_COMM_WORLD, 1);                                 \
		_exit(1);                                                     \
	} while (0)

#define TEST_MPI(call)                                                        \
	do {                                                                  \
		int rc_ = (call);                                             \
		if (rc_ != MPI_SUCCESS) {                                     \
			char es_[MPI_MAX_ERROR_STRING];                       \
			int el_ = 0;                                          \
			MPI_Error_string(rc_, es_, &el_);                     \
			TEST_FAIL("%s returned %d (%s)", #call, rc_, es_);    \
		}                                                             \
	} while (0)

/* MPI_Waitall whose failure names each request's own error (the
 * aggregate MPI_ERR_IN_STATUS alone does not say which, or what). */
#define TEST_WAITALL(n, req, st)                                              \
	do {                                                                  \
		int rc_ = MPI_Waitall((n), (req), (st));                      \
		if (rc_ == MPI_ERR_IN_STATUS) {                               \
			for (int i_ = 0; i_ < (n); i_++) {                    \
				char es_[MPI_MAX_ERROR_STRING];               \
				int el_ = 0;                                  \
				if ((st)[i_].MPI_ERROR == MPI_SUCCESS)        \
					continue;                             \
				MPI_Error_string((st)[i_].MPI_ERROR, es_, &el_); \
				fprintf(stderr,                               \
					"rank %d request %d: error %d (%s), " \
					"source %d tag %d\n",                 \
					test_rank, i_, (st)[i_].MPI_ERROR, es_, \
					(st)[i_].MPI_SOURCE, (st)[i_].MPI_TAG); \
			}                                                     \
		}                                                             \
		if (rc_ != MPI_SUCCESS)                                       \
			TEST_FAIL("MPI_Waitall(%d) returned %d", (int)(n), rc_); \
	} while (0)

static inline void test_alarm_handler(int sig)
{
	static const char msg[] = "FAIL: timeout (alarm) - test hung\n";
	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing more we can do from a signal handler */
	}
	_exit(2);
}

static inline void test_init(int *argc, char ***argv, const char *name)
{
	const char *env = getenv("OPX_MPI_TEST_ALARM");
	unsigned secs = env ? (unsigned)strtoul(env, NULL, 10) : 0;

	test_name = name;
	signal(SIGALRM, test_alarm_handler);
	alarm(secs ? secs : TEST_ALARM_S);
	TEST_MPI(MPI_Init(argc, argv));
	/* Errors must come back to us so we can print a useful message. */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	TEST_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &test_rank));
	TEST_MPI(MPI_Comm_size(MPI_COMM_WORLD, &test_size));
}

static inline void test_finish(void)
{
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (test_rank == 0) {
		printf("PASS %s (%d ranks)\n", test_name, test_size);
		fflush(stdout);
	}
	MPI_Finalize();
}

/* Byte at offset off of message (src, iter, salt).  The multiplier on off
 * is odd so consecutive bytes differ and a shift by any amount shows. */
static inline unsigned char test_byte(int src, int iter, int salt, size_t off)
{
	uint32_t v = (uint32_t)src * 131u + (uint32_t)iter * 29u +
		     (uint32_t)salt * 7u + (uint32_t)off * 251u +
		     (uint32_t)(off >> 8) * 17u;
	return (unsigned char)(v ^ (v >> 8));
}

static inline void test_fill(void *buf, size_t len, int src, int iter, int salt)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = test_byte(src, iter, salt, i);
}

/* Returns the first bad offset, or (size_t)-1 when the buffer is correct. */
static inline size_t test_check(const void *buf, size_t len, int src, int iter,
				int salt)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != test_byte(src, iter, salt, i))
			return i;
	return (size_t)-1;
}

#define TEST_CHECK_BUF(buf, len, src, iter, salt, what)                       \
	do {                                                                  \
		size_t bad_ = test_check((buf), (len), (src), (iter), (salt));\
		if (bad_ != (size_t)-1)                                       \
			TEST_FAIL("%s: data mismatch at offset %zu of %zu "   \
				  "(src %d iter %d salt %d): got 0x%02x "     \
				  "want 0x%02x", (what), bad_, (size_t)(len), \
				  (int)(src), (int)(iter), (int)(salt),       \
				  ((const unsigned char *)(buf))[bad_],       \
				  test_byte((src), (iter), (salt), bad_));    \
	} while (0)

static inline void *test_malloc(size_t len)
{
	void *p = malloc(len ? len : 1);
	if (!p)
		TEST_FAIL("malloc(%zu) failed", len);
	return p;
}

/* Small deterministic PRNG so every rank can compute the same shuffles. */
static inline uint32_t test_rand(uint32_t *state)
{
	uint32_t x = *state;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x ? x : 0x9e3779b9u;
	return *state;
}

#endif /* OPX_MPI_COMMON_H */
