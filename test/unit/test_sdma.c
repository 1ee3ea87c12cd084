/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_sdma.c - unit tests of the software SuperNIC's SDMA engine: its
 * state machine (every valid step, every other one refused), and the
 * engine sending requests into TID registrations (1 MiB through a
 * 16 KiB eager ring, iovecs, argument checks and a full ring, completion
 * and packet order, zero-length requests, a receiver that dies).  The
 * TID table the packets land in is tested in test_tid.c; what both share
 * is shim_fixture.c.
 *
 * Rings are tiny (see shim_fixture.h) so that a 1 MiB transfer has to
 * wait for credits hundreds of times.  Contexts are opened on unit 6 of
 * 8 (test_shim uses unit 7, the provider unit 0) so concurrent suites do
 * not collide.  Sender and receiver run interleaved in one thread, except
 * for the peer-death test, which forks.  Every loop is bounded in count
 * and in time.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_fixture.h"
#include "../../driver-shim/shim_sdma.h"

const int t_unit = T_UNITS - 2;
const uint16_t t_jkey = 0x5344;

/* ---------------------------------------------------------------------
 * Helpers
 */
/* Optional per-packet observer of t_drain. */
struct t_log {
	uint32_t n;
	uint32_t max;
	uint32_t *tid;
	uint64_t *off;
	uint32_t *msgid;
};

/* Consume every waiting packet: TID packets are placed, their place()
 * results counted.  Returns packets consumed. */
static uint32_t t_drain(struct t_pair *t, int *place_err, struct t_log *log)
{
	struct shim_rhq_entry *e;
	uint32_t n = 0;

	while (n < 4 * T_HDRQ && (e = shim_rx_peek(t->rx))) {
		if (e->rhf & SHIM_RHF_TID) {
			if (shim_tid_place(t->ctx, e))
				(*place_err)++;
			if (e->hdr.paylen > T_MTU)
				(*place_err)++;
			if (log && log->n < log->max) {
				log->tid[log->n] = e->hdr.p.u32[0];
				log->off[log->n] = e->hdr.p.u64[1];
				log->msgid[log->n] = e->hdr.msgid;
				log->n++;
			}
		}
		shim_rx_release(t->rx, e);
		n++;
	}
	return n;
}

/* Run the engine and the consumer until `want` requests are reaped (or
 * the deadline passes); cookies and statuses in reap order. */
static uint32_t t_run(struct t_pair *t, struct shim_sdma *eng, uint32_t want, uint64_t *cookies,
		      int *statuses, int *place_err, struct t_log *log)
{
	double end = t_now() + T_DEADLINE_S;
	uint32_t got = 0;

	while (got < want && t_now() < end) {
		uint64_t c;
		int st;

		assert_true(shim_sdma_progress(eng) >= 0);
		t_drain(t, place_err, log);
		while (got < want && shim_sdma_reap(eng, &c, &st) == 1) {
			cookies[got] = c;
			statuses[got] = st;
			got++;
		}
	}
	return got;
}

static struct shim_sdma_req t_req(const struct shim_peer *p, uint32_t tid, uint64_t tid_off,
				  void *src, size_t len, uint64_t cookie)
{
	struct shim_sdma_req r;

	memset(&r, 0, sizeof(r));
	r.tmpl = t_tmpl(p, (uint32_t)cookie);
	r.iovcnt = len ? 1 : 0;
	r.iov[0].iov_base = src;
	r.iov[0].iov_len = len;
	r.tid = tid;
	r.tid_off = tid_off;
	r.len = len;
	r.cookie = cookie;
	return r;
}

/* ---------------------------------------------------------------------
 * SDMA state machine
 */
static void test_sdma_states(void **state)
{
	static const struct {
		enum shim_sdma_state from;
		enum shim_sdma_event ev;
		enum shim_sdma_state to;
	} ok[] = {
		{SHIM_SDMA_S0_FREE, SHIM_SDMA_E0_SUBMIT, SHIM_SDMA_S1_QUEUED},
		{SHIM_SDMA_S1_QUEUED, SHIM_SDMA_E1_START, SHIM_SDMA_S2_RUNNING},
		{SHIM_SDMA_S1_QUEUED, SHIM_SDMA_E6_PEER_GONE, SHIM_SDMA_S5_ERROR},
		{SHIM_SDMA_S2_RUNNING, SHIM_SDMA_E2_PKT_SENT, SHIM_SDMA_S2_RUNNING},
		{SHIM_SDMA_S2_RUNNING, SHIM_SDMA_E3_NO_CREDIT, SHIM_SDMA_S3_WAIT_CREDIT},
		{SHIM_SDMA_S2_RUNNING, SHIM_SDMA_E5_LAST_SENT, SHIM_SDMA_S4_DONE},
		{SHIM_SDMA_S2_RUNNING, SHIM_SDMA_E6_PEER_GONE, SHIM_SDMA_S5_ERROR},
		{SHIM_SDMA_S3_WAIT_CREDIT, SHIM_SDMA_E3_NO_CREDIT, SHIM_SDMA_S3_WAIT_CREDIT},
		{SHIM_SDMA_S3_WAIT_CREDIT, SHIM_SDMA_E4_CREDIT_BACK, SHIM_SDMA_S2_RUNNING},
		{SHIM_SDMA_S3_WAIT_CREDIT, SHIM_SDMA_E6_PEER_GONE, SHIM_SDMA_S5_ERROR},
		{SHIM_SDMA_S4_DONE, SHIM_SDMA_E7_REAPED, SHIM_SDMA_S0_FREE},
		{SHIM_SDMA_S5_ERROR, SHIM_SDMA_E7_REAPED, SHIM_SDMA_S0_FREE},
	};
	struct shim_sdma_desc d;
	unsigned int nvalid = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		memset(&d, 0, sizeof(d));
		d.state = ok[i].from;
		assert_int_equal(shim_sdma_step(&d, ok[i].ev), 0);
		assert_int_equal(d.state, ok[i].to);
		assert_int_equal(d.status, 0);
	}
	/* every pair not in the list is refused and parks the descriptor */
	for (int s = 0; s < SHIM_SDMA_NSTATES; s++) {
		for (int e = 0; e < SHIM_SDMA_NEVENTS; e++) {
			bool valid = false;

			for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
				valid |= (int)ok[i].from == s && (int)ok[i].ev == e;
			memset(&d, 0, sizeof(d));
			d.state = (enum shim_sdma_state)s;
			if (valid) {
				nvalid++;
				assert_int_equal(shim_sdma_step(&d, (enum shim_sdma_event)e), 0);
				continue;
			}
			assert_int_equal(shim_sdma_step(&d, (enum shim_sdma_event)e), -EPROTO);
			assert_int_equal(d.state, SHIM_SDMA_S5_ERROR);
			assert_int_equal(d.status, -EPROTO);
		}
	}
	assert_int_equal(nvalid, sizeof(ok) / sizeof(ok[0]));
	/* out-of-range state or event */
	memset(&d, 0, sizeof(d));
	assert_int_equal(shim_sdma_step(&d, (enum shim_sdma_event)99), -EPROTO);
	d.state = (enum shim_sdma_state)42;
	assert_int_equal(shim_sdma_step(&d, SHIM_SDMA_E0_SUBMIT), -EPROTO);
	assert_int_equal(d.state, SHIM_SDMA_S5_ERROR);
	assert_int_equal(shim_sdma_step(NULL, SHIM_SDMA_E0_SUBMIT), -EINVAL);
}

/* ---------------------------------------------------------------------
 * SDMA engine
 */

/* 1 MiB through a 16 KiB eager ring: hundreds of credit waits. */
static void test_sdma_large(void **state)
{
	const size_t len = 1u << 20;
	uint8_t *src = malloc(len), *dst = malloc(len + 128);
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie = 0, nocredit;
	int status = 1, perr = 0;
	uint32_t h;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	t_fill(src, len, 3);
	memset(dst, T_GUARD, len + 128);
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 0, &eng), 0);
	assert_int_equal(shim_tid_register(t.ctx, dst + 64, len, &h), 0);
	req = t_req(t.peer, h, 0, src, len, 0xabcdef);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(shim_sdma_busy(eng), 1);
	nocredit = atomic_load(&t.rx->ctl->tx_nocredit);
	assert_int_equal(t_run(&t, eng, 1, &cookie, &status, &perr, NULL), 1);
	assert_int_equal(cookie, 0xabcdef);
	assert_int_equal(status, 0);
	assert_int_equal(perr, 0);
	assert_int_equal(shim_sdma_busy(eng), 0);
	/* it really had to wait for credits */
	assert_true(atomic_load(&t.rx->ctl->tx_nocredit) - nocredit > 10);
	assert_memory_equal(dst + 64, src, len);
	for (size_t i = 0; i < 64; i++) {
		assert_int_equal(dst[i], T_GUARD);
		assert_int_equal(dst[64 + len + i], T_GUARD);
	}
	/* nothing left: progress is a no-op */
	assert_int_equal(shim_sdma_progress(eng), 0);
	assert_null(shim_rx_peek(t.rx));
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 0);
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	shim_sdma_close(eng);
	t_pair_close(&t);
	free(src);
	free(dst);
}

/* Three source iovecs of odd sizes into a TID at a nonzero offset. */
static void test_sdma_iov(void **state)
{
	static uint8_t s0[1001], s1[3007], s2[77], dst[8192];
	const uint64_t off = 123;
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie;
	int status, perr = 0;
	uint32_t h;
	size_t total = sizeof(s0) + sizeof(s1) + sizeof(s2);

	(void)state;
	t_fill(s0, sizeof(s0), 10);
	t_fill(s1, sizeof(s1), 11);
	t_fill(s2, sizeof(s2), 12);
	memset(dst, T_GUARD, sizeof(dst));
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 4, &eng), 0);
	assert_int_equal(shim_tid_register(t.ctx, dst, sizeof(dst), &h), 0);
	memset(&req, 0, sizeof(req));
	req.tmpl = t_tmpl(t.peer, 5);
	req.iov[0] = (struct iovec){.iov_base = s0, .iov_len = sizeof(s0)};
	req.iov[1] = (struct iovec){.iov_base = s1, .iov_len = sizeof(s1)};
	req.iov[2] = (struct iovec){.iov_base = s2, .iov_len = sizeof(s2)};
	req.iovcnt = 3;
	req.tid = h;
	req.tid_off = off;
	req.len = total;
	req.cookie = 5;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(t_run(&t, eng, 1, &cookie, &status, &perr, NULL), 1);
	assert_int_equal(status, 0);
	assert_int_equal(perr, 0);
	assert_memory_equal(dst + off, s0, sizeof(s0));
	assert_memory_equal(dst + off + sizeof(s0), s1, sizeof(s1));
	assert_memory_equal(dst + off + sizeof(s0) + sizeof(s1), s2, sizeof(s2));
	for (size_t i = 0; i < off; i++)
		assert_int_equal(dst[i], T_GUARD);
	for (size_t i = off + total; i < sizeof(dst); i++)
		assert_int_equal(dst[i], T_GUARD);

	/* a request that runs past the TID: every packet is refused by the
	 * receiver, nothing is written outside the registration */
	memset(dst, T_GUARD, sizeof(dst));
	req.tid_off = sizeof(dst) - 1000;
	req.cookie = 6;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(t_run(&t, eng, 1, &cookie, &status, &perr, NULL), 1);
	assert_int_equal(status, 0); /* the sender cannot know */
	assert_true(perr > 0);
	for (size_t i = 0; i < sizeof(dst); i++)
		assert_int_equal(dst[i], T_GUARD);
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	shim_sdma_close(eng);
	t_pair_close(&t);
}

static void test_sdma_args_full(void **state)
{
	static uint8_t src[4096];
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie;
	int status;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(NULL, 4, &eng), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 4, NULL), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 3, &eng), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 1u << 20, &eng), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 4, &eng), 0);

	req = t_req(t.peer, 0, 0, src, 100, 1);
	assert_int_equal(shim_sdma_submit(NULL, t.peer, &req), -EINVAL);
	assert_int_equal(shim_sdma_submit(eng, NULL, &req), -EINVAL);
	assert_int_equal(shim_sdma_submit(eng, t.peer, NULL), -EINVAL);
	req.len = 99; /* len != sum of iov lens */
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.len = 100;
	req.iovcnt = SHIM_SDMA_IOV_MAX + 1;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.iovcnt = 1;
	req.iov[0].iov_base = NULL;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.iov[0].iov_base = src;
	req.tid_off = UINT64_MAX - 50;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.tid_off = 0;
	assert_int_equal(shim_sdma_busy(eng), 0);
	assert_int_equal(shim_sdma_progress(NULL), -EINVAL);
	assert_int_equal(shim_sdma_reap(NULL, &cookie, &status), -EINVAL);
	assert_int_equal(shim_sdma_reap(eng, NULL, &status), -EINVAL);
	assert_int_equal(shim_sdma_reap(eng, &cookie, NULL), -EINVAL);
	assert_int_equal(shim_sdma_busy(NULL), 0);

	/* ring full: -EAGAIN until a completion is reaped, even when the
	 * engine has finished them all */
	for (uint32_t i = 0; i < 4; i++) {
		req.cookie = i;
		assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	}
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EAGAIN);
	assert_int_equal(shim_sdma_busy(eng), 4);
	assert_int_equal(shim_sdma_progress(eng), 4);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EAGAIN);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
	assert_int_equal(cookie, 0);
	assert_int_equal(shim_sdma_busy(eng), 3);
	req.cookie = 4;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EAGAIN);
	shim_sdma_close(eng); /* with requests outstanding */
	shim_sdma_close(NULL);
	t_pair_close(&t);
}

/* Completions in submit order, zero-length ones included; packets of
 * requests to one peer arrive in submit order. */
static void test_sdma_fifo(void **state)
{
	enum { N = 8, LOGMAX = 256 };
	static const size_t lens[N] = {5000, 0, 1024, 1, 0, 3333, 64, 2048};
	static uint8_t src[N][5000], dst[N][5000];
	uint32_t h[N], ltid[LOGMAX], lmsg[LOGMAX];
	uint64_t loff[LOGMAX], cookies[N];
	struct t_log log = {.max = LOGMAX, .tid = ltid, .off = loff, .msgid = lmsg};
	int statuses[N], perr = 0;
	struct shim_sdma *eng;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 8, &eng), 0);
	for (uint32_t i = 0; i < N; i++) {
		struct shim_sdma_req req;

		t_fill(src[i], sizeof(src[i]), 100 + i);
		memset(dst[i], 0, sizeof(dst[i]));
		assert_int_equal(shim_tid_register(t.ctx, dst[i], sizeof(dst[i]), &h[i]), 0);
		req = t_req(t.peer, h[i], 0, src[i], lens[i], 1000 + i);
		assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	}
	/* a zero-length request behind others is not completed early */
	uint64_t c;
	int st;
	assert_int_equal(shim_sdma_reap(eng, &c, &st), 0);
	assert_int_equal(t_run(&t, eng, N, cookies, statuses, &perr, &log), N);
	assert_int_equal(perr, 0);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(cookies[i], 1000 + i);
		assert_int_equal(statuses[i], 0);
		assert_memory_equal(dst[i], src[i], lens[i]);
		if (lens[i] < sizeof(dst[i]))
			assert_int_equal(dst[i][lens[i]], 0);
	}
	/* packet order: by request, then by offset, and MTU-sized */
	uint32_t expect = 0;
	for (uint32_t i = 0; i < N; i++)
		expect += (uint32_t)((lens[i] + T_MTU - 1) / T_MTU);
	assert_int_equal(log.n, expect);
	for (uint32_t k = 1; k < log.n; k++) {
		assert_true(lmsg[k] >= lmsg[k - 1]);
		if (lmsg[k] == lmsg[k - 1]) {
			assert_int_equal(ltid[k], ltid[k - 1]);
			assert_int_equal(loff[k], loff[k - 1] + T_MTU);
		} else {
			assert_int_equal(loff[k], 0);
		}
	}
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(shim_tid_release(t.ctx, h[i]), 0);
	shim_sdma_close(eng);
	t_pair_close(&t);
}

/* A zero-length request at the head completes with no packet and no
 * progress call. */
static void test_sdma_zero(void **state)
{
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie = 0;
	int status = 1;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 2, &eng), 0);
	req = t_req(t.peer, SHIM_TID_NONE, 0, NULL, 0, 77);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(shim_sdma_busy(eng), 1);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
	assert_int_equal(cookie, 77);
	assert_int_equal(status, 0);
	assert_int_equal(shim_sdma_busy(eng), 0);
	assert_null(shim_rx_peek(t.rx));
	assert_int_equal(shim_sdma_progress(eng), 0);
	assert_null(shim_rx_peek(t.rx));
	/* many laps of a 2-entry ring */
	for (uint32_t i = 0; i < 100; i++) {
		req.cookie = i;
		assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
		assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
		assert_int_equal(cookie, i);
	}
	shim_sdma_close(eng);
	t_pair_close(&t);
}

/* The receiving process dies while a request waits for credits: the
 * request ends with -EPIPE within a bounded time instead of hanging. */
static void test_sdma_peer_death(void **state)
{
	const size_t len = 256u << 10;
	uint8_t *src = malloc(len);
	struct shim_dev *dev;
	struct shim_ctx *mine;
	struct shim_sdma *eng;
	struct shim_peer *peer;
	struct shim_sdma_req req;
	struct shim_addr addr;
	int up[2], down[2], status = 0;
	uint64_t cookie = 0;
	pid_t pid;

	(void)state;
	assert_non_null(src);
	t_fill(src, len, 5);
	dev = t_dev_open();
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &mine, NULL, NULL), 0);
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* child: own a receive context, never drain it, die when told
		 * (without closing it, like a crash) */
		struct pollfd pfd = {.fd = down[0], .events = POLLIN};
		struct shim_ctx *c = NULL;
		struct shim_addr a;

		close(down[1]);
		close(up[0]);
		memset(&a, 0, sizeof(a));
		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, &a);
		if (write(up[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
		poll(&pfd, 1, (int)(T_DEADLINE_S * 1000));
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &addr, sizeof(addr)), (ssize_t)sizeof(addr));
	close(up[0]);
	assert_int_equal(addr.pid, (uint32_t)pid);
	assert_int_equal(shim_peer_open(dev, &addr, &peer), 0);
	assert_int_equal(shim_sdma_open(mine, 4, &eng), 0);
	req = t_req(peer, 1u << 16, 0, src, len, 99);
	assert_int_equal(shim_sdma_submit(eng, peer, &req), 0);
	/* fill the peer's queue; while its owner lives the request waits */
	for (int i = 0; i < 4096; i++)
		shim_sdma_progress(eng);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 0);
	assert_true(shim_peer_alive(peer));

	close(down[1]); /* the child exits */
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	double end = t_now() + T_DEADLINE_S;
	int got = 0;
	while (!got && t_now() < end) {
		shim_sdma_progress(eng);
		got = shim_sdma_reap(eng, &cookie, &status);
	}
	assert_int_equal(got, 1);
	assert_int_equal(cookie, 99);
	assert_int_equal(status, -EPIPE);
	assert_int_equal(shim_sdma_busy(eng), 0);

	/* the engine is still usable for live peers */
	struct shim_peer *self;
	struct shim_addr me;
	shim_ctx_addr(mine, &me);
	assert_int_equal(shim_peer_open(dev, &me, &self), 0);
	req = t_req(self, 0, 0, NULL, 0, 100);
	assert_int_equal(shim_sdma_submit(eng, self, &req), 0);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
	assert_int_equal(cookie, 100);
	assert_int_equal(status, 0);

	/* the child's segment is abandoned: remove it */
	char name[SHIM_NAME_MAX];
	assert_int_equal(shim_dev_name_segment(name, sizeof(name), addr.uid, addr.unit, addr.ctx),
			 0);
	shm_unlink(name);
	shim_sdma_close(eng);
	shim_peer_close(self);
	shim_peer_close(peer);
	shim_ctx_close(mine);
	shim_dev_close(dev);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sdma_states),
		cmocka_unit_test(test_sdma_large),
		cmocka_unit_test(test_sdma_iov),
		cmocka_unit_test(test_sdma_args_full),
		cmocka_unit_test(test_sdma_fifo),
		cmocka_unit_test(test_sdma_zero),
		cmocka_unit_test(test_sdma_peer_death),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
