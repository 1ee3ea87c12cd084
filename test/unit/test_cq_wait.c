/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_cq_wait.c - waiting on completion queues and counters: blocking
 * reads (timeout, wake-up by another thread, fi_cq_signal, thresholds),
 * FI_WAIT_FD, fi_trywait; counter add/set/read/wait.  What a CQ holds
 * (formats, errors, growth, arguments) is in test_cq.c; what both share
 * is cq_fixture.c.
 *
 * Completions are produced with opx_complete_report_locked directly, so no
 * traffic is needed.  Every blocking call has a bounded timeout.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cq_fixture.h"
#include "opx_cq.h"

/* ---------------------------------------------------------------------
 * Blocking reads.
 */
static void test_cq_sread_timeout(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct fi_cq_entry e;
	uint64_t t0 = fx_now_ms();

	(void)state;
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 100), -FI_EAGAIN);
	uint64_t dt = fx_now_ms() - t0;
	assert_true(dt >= 90);
	assert_true(dt < 3000);

	/* zero timeout: a poll */
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 0), -FI_EAGAIN);
	report(cq, 1, FI_SEND, 0, 0, 0, 0);
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 0), 1);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_sread_wait_none(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fi_cq_entry e;

	(void)state;
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 10), -FI_EINVAL);
	assert_int_equal(fi_cq_signal(cq), -FI_EINVAL);
	assert_int_equal(fi_close(&cq->fid), 0);
}

struct delayed {
	struct fid_cq *cq;
	int delay_ms;
	bool signal;
};

static void *delayed_thread(void *arg)
{
	struct delayed *d = arg;

	poll(NULL, 0, d->delay_ms);
	if (d->signal)
		fi_cq_signal(d->cq);
	else
		report(d->cq, 99, FI_RECV, 1, 0, 0, 0);
	return NULL;
}

static void test_cq_sread_wakes(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct delayed d = {.cq = cq, .delay_ms = 50, .signal = false};
	struct fi_cq_entry e;
	pthread_t t;

	(void)state;
	assert_true(opx_of(cq)->domain->lock.on); /* the reporter really races us */
	assert_int_equal(pthread_create(&t, NULL, delayed_thread, &d), 0);
	uint64_t t0 = fx_now_ms();
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 5000), 1);
	assert_true(fx_now_ms() - t0 < 4000);
	assert_ptr_equal(e.op_context, (void *)99);
	pthread_join(t, NULL);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_signal(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct delayed d = {.cq = cq, .delay_ms = 50, .signal = true};
	struct fi_cq_entry e;
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, delayed_thread, &d), 0);
	uint64_t t0 = fx_now_ms();
	/* man fi_cq: a signaled sread with nothing to read returns -FI_EAGAIN */
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 5000), -FI_EAGAIN);
	assert_true(fx_now_ms() - t0 < 4000);
	pthread_join(t, NULL);
	/* the signal was consumed: the next sread times out normally */
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 20), -FI_EAGAIN);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_sread_threshold(void **state)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = FI_WAIT_UNSPEC,
				  .wait_cond = FI_CQ_COND_THRESHOLD};
	struct fid_cq *cq = NULL;
	struct fi_cq_entry e[4];
	size_t thr = 3;

	(void)state;
	assert_int_equal(fi_cq_open(g_domain, &attr, &cq, NULL), 0);
	report(cq, 1, FI_SEND, 0, 0, 0, 0);
	report(cq, 2, FI_SEND, 0, 0, 0, 0);
	/* below the threshold: waits out the timeout, then returns what is there */
	uint64_t t0 = fx_now_ms();
	assert_int_equal(fi_cq_sread(cq, e, 4, &thr, 50), 2);
	assert_true(fx_now_ms() - t0 >= 40);
	report(cq, 3, FI_SEND, 0, 0, 0, 0);
	report(cq, 4, FI_SEND, 0, 0, 0, 0);
	report(cq, 5, FI_SEND, 0, 0, 0, 0);
	assert_int_equal(fi_cq_sread(cq, e, 4, &thr, 5000), 3);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_wait_fd(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 0);
	struct fi_cq_entry e;
	struct pollfd pfd;
	enum fi_wait_obj wo = FI_WAIT_NONE;
	int fd = -1;

	(void)state;
	assert_int_equal(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
	assert_int_equal(wo, FI_WAIT_FD);
	assert_int_equal(fi_control(&cq->fid, FI_GETWAIT, NULL), -FI_EINVAL);

	pfd.fd = fd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	/* fi_cq_signal makes the fd readable; the next read re-arms it */
	assert_int_equal(fi_cq_signal(cq), 0);
	assert_int_equal(poll(&pfd, 1, 1000), 1);
	assert_int_equal(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 10), -FI_EAGAIN); /* signal consumed */
	assert_int_equal(fi_close(&cq->fid), 0);

	/* no fd without FI_WAIT_FD */
	cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	assert_int_equal(fi_control(&cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_trywait(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 0);
	struct fid_cq *cq_none = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fid *fids[1] = {&cq->fid};
	struct fi_cq_entry e;

	(void)state;
	assert_int_equal(fi_trywait(g_fabric, fids, 1), 0);
	report(cq, 1, FI_SEND, 0, 0, 0, 0);
	assert_int_equal(fi_trywait(g_fabric, fids, 1), -FI_EAGAIN);
	assert_int_equal(fi_cq_read(cq, &e, 1), 1);
	assert_int_equal(fi_trywait(g_fabric, fids, 1), 0);
	report_err(cq, 2, FI_EIO, 0);
	assert_int_equal(fi_trywait(g_fabric, fids, 1), -FI_EAGAIN);

	fids[0] = &g_domain->fid;
	assert_int_equal(fi_trywait(g_fabric, fids, 1), -FI_EINVAL);
	fids[0] = &cq_none->fid;
	assert_int_equal(fi_trywait(g_fabric, fids, 1), -FI_EINVAL);
	assert_int_equal(fi_close(&cq_none->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* ---------------------------------------------------------------------
 * Counters.
 */
static struct fid_cntr *open_cntr(enum fi_wait_obj wait)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = wait};
	struct fid_cntr *c = NULL;

	assert_int_equal(fi_cntr_open(g_domain, &attr, &c, NULL), 0);
	assert_non_null(c);
	return c;
}

static void test_cntr_basic(void **state)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE);

	(void)state;
	assert_int_equal(fi_cntr_read(c), 0);
	assert_int_equal(fi_cntr_add(c, 5), 0);
	assert_int_equal(fi_cntr_read(c), 5);
	opx_cq_cntr_inc(OPX_CONTAINER_OF(c, struct opx_cntr, cntr_fid));
	assert_int_equal(fi_cntr_read(c), 6);
	assert_int_equal(fi_cntr_set(c, 100), 0);
	assert_int_equal(fi_cntr_read(c), 100);
	assert_int_equal(fi_cntr_readerr(c), 0);
	assert_int_equal(fi_cntr_adderr(c, 2), 0);
	assert_int_equal(fi_cntr_readerr(c), 2);
	assert_int_equal(fi_cntr_seterr(c, 0), 0);
	assert_int_equal(fi_cntr_readerr(c), 0);
	assert_int_equal(fi_cntr_read(c), 100);
	/* no wait object: fi_cntr_wait still waits, by progress */
	assert_int_equal(fi_cntr_wait(c, 100, 10), 0);
	assert_int_equal(fi_cntr_wait(c, 101, 10), -FI_ETIMEDOUT);
	assert_int_equal(fi_close(&c->fid), 0);
}

static void test_cntr_open_attr(void **state)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *c = NULL;

	(void)state;
	attr.flags = 1;
	assert_int_equal(fi_cntr_open(g_domain, &attr, &c, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.wait_obj = FI_WAIT_SET;
	assert_int_equal(fi_cntr_open(g_domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.wait_obj = (enum fi_wait_obj)42;
	assert_int_equal(fi_cntr_open(g_domain, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_FD;
	assert_int_equal(fi_cntr_open(g_domain, &attr, &c, NULL), 0);
	int fd = -1;
	assert_int_equal(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(fi_close(&c->fid), 0);
	assert_int_equal(fi_cntr_open(g_domain, NULL, &c, NULL), 0);
	assert_int_equal(fi_close(&c->fid), 0);
}

struct cntr_bump {
	struct fid_cntr *c;
	bool err;
};

static void *cntr_bump_thread(void *arg)
{
	struct cntr_bump *b = arg;

	poll(NULL, 0, 50);
	if (b->err)
		fi_cntr_adderr(b->c, 1);
	else
		fi_cntr_add(b->c, 3);
	return NULL;
}

static void test_cntr_wait(void **state)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC);
	struct cntr_bump b = {.c = c, .err = false};
	pthread_t t;

	(void)state;
	/* already met: immediate */
	assert_int_equal(fi_cntr_wait(c, 0, 1000), 0);
	assert_int_equal(fi_cntr_set(c, 4), 0);
	assert_int_equal(fi_cntr_wait(c, 4, 0), 0);

	/* timeout */
	uint64_t t0 = fx_now_ms();
	assert_int_equal(fi_cntr_wait(c, 5, 60), -FI_ETIMEDOUT);
	uint64_t dt = fx_now_ms() - t0;
	assert_true(dt >= 50 && dt < 3000);
	assert_int_equal(fi_cntr_readerr(c), 0); /* unchanged by a timeout */

	/* another thread reaches the threshold */
	assert_int_equal(pthread_create(&t, NULL, cntr_bump_thread, &b), 0);
	assert_int_equal(fi_cntr_wait(c, 7, 5000), 0);
	pthread_join(t, NULL);
	assert_int_equal(fi_cntr_read(c), 7);

	/* an error unblocks the waiter */
	b.err = true;
	assert_int_equal(pthread_create(&t, NULL, cntr_bump_thread, &b), 0);
	t0 = fx_now_ms();
	assert_int_equal(fi_cntr_wait(c, 100, 5000), -FI_EAVAIL);
	assert_true(fx_now_ms() - t0 < 4000);
	pthread_join(t, NULL);
	assert_int_equal(fi_cntr_readerr(c), 1);

	struct fid *fids[1] = {&c->fid};
	assert_int_equal(fi_trywait(g_fabric, fids, 1), 0);
	assert_int_equal(fi_cntr_add(c, 1), 0);
	assert_int_equal(fi_trywait(g_fabric, fids, 1), -FI_EAGAIN);
	assert_int_equal(fi_cntr_read(c), 8);
	assert_int_equal(fi_trywait(g_fabric, fids, 1), 0);
	assert_int_equal(fi_close(&c->fid), 0);
}

/* Issue 31 item 3: fi_cntr_wait on a FI_WAIT_NONE counter (the default)
 * drives the progress of the endpoints bound to it until the threshold,
 * an error or the timeout, as libfabric's util providers do: fi_cntr(3)
 * calls the use invalid, but applications and fabtests rely on it. */
static void test_cntr_wait_none(void **state)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fid_cntr *scntr = NULL, *rcntr = NULL;
	struct fi_context rctx[3], sctx[3];
	char sbuf[32] = "counted", rbuf[32], tiny[4];
	char name[64];
	size_t namelen = sizeof(name);
	struct fid_ep *ep = NULL;
	struct fx_env e;
	fi_addr_t peer;
	uint64_t t0, dt;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_cntr_open(e.domain, &attr, &rcntr, NULL), 0);
	assert_int_equal(fi_cntr_open(e.domain, &attr, &scntr, NULL), 0);
	assert_int_equal(fi_endpoint(e.domain, e.info, &ep, NULL), 0);
	assert_int_equal(fi_ep_bind(ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(ep, &e.av->fid, 0), 0);
	assert_int_equal(fi_ep_bind(ep, &rcntr->fid, FI_RECV), 0);
	assert_int_equal(fi_ep_bind(ep, &scntr->fid, FI_SEND), 0);
	assert_int_equal(fi_enable(ep), 0);
	assert_int_equal(fi_getname(&ep->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(e.av, name, 1, &peer, 0, NULL), 1);

	/* a message to ep arrives only when ep progresses: the wait must */
	memset(rbuf, 0, sizeof(rbuf));
	assert_int_equal(fi_trecv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x42, 0, &rctx[0]),
			 0);
	assert_int_equal(fi_tsend(e.ep, sbuf, sizeof(sbuf), NULL, peer, 0x42, &sctx[0]), 0);
	assert_int_equal(fi_cntr_wait(rcntr, 1, 5000), 0);
	assert_string_equal(rbuf, sbuf);
	assert_int_equal(fi_cntr_read(rcntr), 1);

	/* ep's own send completes under the send counter's wait */
	assert_int_equal(fi_trecv(e.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x43, 0, &rctx[1]),
			 0);
	assert_int_equal(fi_tsend(ep, sbuf, sizeof(sbuf), NULL, e.self, 0x43, &sctx[1]), 0);
	assert_int_equal(fi_cntr_wait(scntr, 1, 5000), 0);

	/* never reached: -FI_ETIMEDOUT after about the timeout */
	t0 = fx_now_ms();
	assert_int_equal(fi_cntr_wait(rcntr, 2, 100), -FI_ETIMEDOUT);
	dt = fx_now_ms() - t0;
	assert_true(dt >= 90 && dt < 3000);
	assert_int_equal(fi_cntr_readerr(rcntr), 0);

	/* an error (a truncated receive, found by the wait's progress)
	 * ends the wait with -FI_EAVAIL */
	assert_int_equal(fi_trecv(ep, tiny, sizeof(tiny), NULL, FI_ADDR_UNSPEC, 0x44, 0, &rctx[2]),
			 0);
	assert_int_equal(fi_tsend(e.ep, sbuf, sizeof(sbuf), NULL, peer, 0x44, &sctx[2]), 0);
	t0 = fx_now_ms();
	assert_int_equal(fi_cntr_wait(rcntr, 2, 5000), -FI_EAVAIL);
	assert_true(fx_now_ms() - t0 < 4000);
	assert_int_equal(fi_cntr_readerr(rcntr), 1);
	assert_int_equal(fi_cntr_read(rcntr), 1);

	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_close(&scntr->fid), 0);
	assert_int_equal(fi_close(&rcntr->fid), 0);
	fx_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cq_sread_timeout),
		cmocka_unit_test(test_cq_sread_wait_none),
		cmocka_unit_test(test_cq_sread_wakes),
		cmocka_unit_test(test_cq_signal),
		cmocka_unit_test(test_cq_sread_threshold),
		cmocka_unit_test(test_cq_wait_fd),
		cmocka_unit_test(test_cq_trywait),
		cmocka_unit_test(test_cntr_basic),
		cmocka_unit_test(test_cntr_open_attr),
		cmocka_unit_test(test_cntr_wait),
		cmocka_unit_test(test_cntr_wait_none),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
