/*
 * opx_fi_test.h - shared by the opx_fi_test harness (opx_fi_test.c: two
 * processes, control channel, setup, completion plumbing, generic send /
 * receive helpers, main) and its subtests (opx_fi_subtests.c,
 * opx_fi_subtests_large.c).
 *
 * A subtest is one function run by both sides in lock step: T.side says
 * which one it is (0 = A, the parent, mostly receives; 1 = B, the child,
 * mostly sends), t_sync() is the rendezvous between them, and a failure
 * is recorded with t_fail()/T_CHECK() and returned as -1.  The harness
 * cancels whatever a failed subtest left posted and reports both sides'
 * verdicts.
 */
#ifndef OPX_FI_TEST_H
#define OPX_FI_TEST_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define T_ALARM_S 300
#define T_WAIT_MS 10000 /* one completion */
#define T_SOCK_MS 30000 /* one control frame */
#define T_NOPS 2048
#define T_MAXENT 8
#define T_MIB ((size_t)1 << 20)
/* Each of sbuf/rbuf/rbuf2 holds the largest message (64 MiB + 1) plus a
 * guard; pages are only touched by the sizes a run actually uses. */
#define T_BUFSZ (64 * T_MIB + 4096)
#define T_TAGBASE(n) ((uint64_t)(n) << 32)

struct test_op {
	struct fi_context2 fctx; /* must be first: it is the op_context */
	int posted_rx;
	int n; /* completions seen (success or error) */
	int nerr;
	struct fi_cq_tagged_entry ent[T_MAXENT];
	fi_addr_t src[T_MAXENT];
	struct fi_cq_err_entry err;
};

enum { FR_SYNC = 1, FR_REPORT = 2 };
struct test_frame {
	uint32_t kind;
	uint32_t test;
	uint32_t step;
	int32_t ok;
	char text[240];
};

struct t_state {
	const char *prov;
	int side; /* 0 = A (parent), 1 = B (child) */
	int sock;
	int verbose;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep, *ep2;
	fi_addr_t peer, peer2; /* peer2: B's second endpoint (A only) */
	int have_source, have_multi;
	int setopt_crash; /* fi_setopt killed a throw-away probe process */
	size_t max_msg, inject, iov_limit, cq_data;
	struct test_op ops[T_NOPS];
	int nops;
	char *sbuf, *rbuf, *rbuf2;
	/* per-subtest state */
	unsigned test;
	unsigned step;
	int failed;
	char why[240];
	int have_pending;
	struct test_frame pending;
	int npass, nfail;
};
extern struct t_state T;

/* Record a failure of the running subtest; returns -1 so callers can write
 * "return t_fail(...)". */
__attribute__((format(printf, 1, 2))) int t_fail(const char *fmt, ...);

#define T_CHECK(cond, ...)                                                    \
	do {                                                                  \
		if (!(cond))                                                  \
			return t_fail(__VA_ARGS__);                           \
	} while (0)

/* like T_CHECK, but keeps going: the remaining checks are independent */
#define T_EXPECT(cond, ...)                                                   \
	do {                                                                  \
		if (!(cond))                                                  \
			t_fail(__VA_ARGS__);                                  \
	} while (0)

/* Issue an operation, retrying -FI_EAGAIN after progress, bounded. */
#define T_POST(ret, call)                                                     \
	do {                                                                  \
		int64_t end_ = t_now_ms() + T_WAIT_MS;                        \
		for (;;) {                                                    \
			(ret) = (call);                                       \
			if ((ret) != -FI_EAGAIN || t_now_ms() > end_)         \
				break;                                        \
			t_progress();                                         \
		}                                                             \
	} while (0)

/* ---- harness: clock, data pattern, completions, lock step ---------------- */
int64_t t_now_ms(void);
unsigned char t_byte(uint32_t seed, size_t off);
void t_fill(void *buf, size_t len, uint32_t seed);
long t_verify(const void *buf, size_t len, uint32_t seed); /* -1: all good */
struct test_op *t_op(void);
void t_progress(void);
int t_wait(struct test_op *op, int n, int ms); /* 0, or -1 on timeout */
void t_spin(int ms);
int t_sync(void);

/* ---- generic messaging helpers (harness) ----------------------------------- */
/* The size sweep: every protocol threshold +-1 from 0 B to 64 MiB. */
extern const size_t t_sweep[];
extern const size_t t_nsweep;
int t_size_ok(size_t len);
int t_check_rx(struct test_op *op, int idx, size_t len, uint64_t tag,
	       uint64_t flags, const void *buf, uint32_t seed,
	       const char *what);
struct test_op *t_post_rx(int tagged, size_t buflen, uint64_t tag,
			  uint64_t ignore, fi_addr_t src);
/* kind: 0 tsend, 1 send, 2 tsenddata, 3 senddata */
struct test_op *t_post_tx(struct fid_ep *ep, int kind, size_t len,
			  uint64_t tag, uint64_t data, uint32_t seed);
int t_wait_tx(struct test_op *op, size_t len);
int t_one(int kind, size_t len, int expected, uint32_t seed);
int t_sweep_kind(int kind);
ssize_t t_trecvmsg(void *buf, size_t len, uint64_t tag, struct test_op *op,
		   uint64_t flags);
int t_peek(uint64_t tag, uint64_t flags, struct test_op **opp);
struct iovec;
/* Split total into n parts in proportion to w (each >= 1 when total >= the
 * sum of w). */
void t_split(size_t total, size_t n, const unsigned *w, size_t *out);
/* Lay out iov entries of len[] in buf, gap bytes of fill between them;
 * returns the bytes spanned. */
size_t t_layout(char *buf, size_t n, const size_t *len, struct iovec *iov,
		size_t gap, int fill);

/* ---- subtests (opx_fi_subtests*.c) ----------------------------------------- */
struct subtest {
	const char *name;
	int (*fn)(void);
	int need_multi;
};
extern const struct subtest t_tests[];
/* the large-message subtests (opx_fi_subtests_large.c) */
int st_iov_large(void);
int st_cancel_large(void);
int st_peek_large(void);
int st_order_large(void);
extern const size_t t_ntests;

#endif /* OPX_FI_TEST_H */
