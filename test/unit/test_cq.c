/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_cq.c - completion queues and counters: every CQ format, source
 * addresses, error ordering and readerr's err_data rules, ring growth,
 * blocking reads (timeout, wake-up by another thread, fi_cq_signal),
 * FI_WAIT_FD, fi_trywait, argument checks; counter add/set/read/wait.
 *
 * Completions are produced with opx_cq_report_locked directly (it is a
 * library-internal function the test reaches through libopx_core), so
 * no traffic is needed; only the cancel and peek-miss error entries come
 * from a loopback endpoint.  Every blocking call has a bounded timeout.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "opx.h"

static struct fi_info *g_info;
static struct fid_fabric *g_fabric;
static struct fid_domain *g_domain; /* FI_THREAD_SAFE: tests use threads */

static struct fx_env g_env;

static int group_setup(void **state)
{
	int ret;

	(void)state;
	ret = fx_open_domain(&g_env, "safe");
	if (ret) {
		fprintf(stderr, "fabric/domain: %d\n", ret);
		return -1;
	}
	g_info = g_env.info;
	g_fabric = g_env.fabric;
	g_domain = g_env.domain;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	fx_close(&g_env);
	return 0;
}

static struct fid_cq *open_cq(enum fi_cq_format format, enum fi_wait_obj wait, size_t size)
{
	struct fi_cq_attr attr = {.format = format, .wait_obj = wait, .size = size};
	struct fid_cq *cq = NULL;

	assert_int_equal(fi_cq_open(g_domain, &attr, &cq, NULL), 0);
	assert_non_null(cq);
	return cq;
}

static struct opx_cq *opx_of(struct fid_cq *cq)
{
	return OPX_CONTAINER_OF(cq, struct opx_cq, cq_fid);
}

/* Report as the endpoint would: under the domain lock. */
static void report(struct fid_cq *cq, uintptr_t ctx, uint64_t flags, size_t len, uint64_t data,
		   uint64_t tag, fi_addr_t src)
{
	struct opx_cq *c = opx_of(cq);

	opx_lock_acquire(&c->domain->lock);
	assert_int_equal(opx_cq_report_locked(c, (void *)ctx, flags, len, (void *)(ctx * 2), data,
					      tag, src),
			 0);
	opx_lock_release(&c->domain->lock);
}

static void report_err(struct fid_cq *cq, uintptr_t ctx, int err, int prov_errno)
{
	struct opx_cq *c = opx_of(cq);

	opx_lock_acquire(&c->domain->lock);
	assert_int_equal(opx_cq_report_err_locked(c, (void *)ctx, FI_RECV | FI_TAGGED, 10, NULL, 5,
						  0x77, 3, err, prov_errno, FI_ADDR_NOTAVAIL),
			 0);
	opx_lock_release(&c->domain->lock);
}

/* ---------------------------------------------------------------------
 * Formats.
 */
static void test_cq_format_context(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fi_cq_entry e[4];

	(void)state;
	assert_int_equal(fi_cq_read(cq, e, 4), -FI_EAGAIN);
	report(cq, 1, FI_SEND | FI_TAGGED, 0, 0, 0, FI_ADDR_NOTAVAIL);
	report(cq, 2, FI_RECV | FI_MSG, 8, 0, 0, 3);
	report(cq, 3, FI_RECV | FI_MSG | FI_MULTI_RECV, 8, 0, 0, 3);
	assert_int_equal(fi_cq_read(cq, e, 2), 2);
	assert_ptr_equal(e[0].op_context, (void *)1);
	assert_ptr_equal(e[1].op_context, (void *)2);
	assert_int_equal(fi_cq_read(cq, e, 4), 1);
	assert_ptr_equal(e[0].op_context, (void *)3);
	assert_int_equal(fi_cq_read(cq, e, 4), -FI_EAGAIN);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_format_msg(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_MSG, FI_WAIT_NONE, 0);
	struct fi_cq_msg_entry e[2];

	(void)state;
	report(cq, 5, FI_RECV | FI_MSG | FI_MULTI_RECV, 123, 9, 9, 0);
	assert_int_equal(fi_cq_read(cq, e, 2), 1);
	assert_ptr_equal(e[0].op_context, (void *)5);
	assert_int_equal(e[0].flags, FI_RECV | FI_MSG | FI_MULTI_RECV);
	assert_int_equal(e[0].len, 123);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_format_data(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 0);
	struct fi_cq_data_entry e[2];

	(void)state;
	report(cq, 6, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA, 64, 0xdada, 1, 0);
	report(cq, 7, FI_SEND | FI_MSG, 32, 0, 1, 0);
	assert_int_equal(fi_cq_read(cq, e, 2), 2);
	assert_ptr_equal(e[0].op_context, (void *)6);
	assert_int_equal(e[0].flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	assert_int_equal(e[0].len, 64);
	assert_ptr_equal(e[0].buf, (void *)12);
	assert_int_equal(e[0].data, 0xdada);
	assert_ptr_equal(e[1].op_context, (void *)7);
	assert_int_equal(e[1].len, 32);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_format_tagged(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	struct fi_cq_tagged_entry e[2];

	(void)state;
	report(cq, 8, FI_RECV | FI_TAGGED, 4096, 0x1111, 0xabcdef0123ULL, 2);
	assert_int_equal(fi_cq_read(cq, e, 2), 1);
	assert_ptr_equal(e[0].op_context, (void *)8);
	assert_int_equal(e[0].flags, FI_RECV | FI_TAGGED);
	assert_int_equal(e[0].len, 4096);
	assert_ptr_equal(e[0].buf, (void *)16);
	assert_int_equal(e[0].data, 0x1111);
	assert_int_equal(e[0].tag, 0xabcdef0123ULL);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* FI_CQ_FORMAT_UNSPEC and a NULL attr both give the context format. */
static void test_cq_format_default(void **state)
{
	struct fid_cq *cq = NULL;
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_UNSPEC};
	struct fi_cq_entry e[2] = {{0}};

	(void)state;
	assert_int_equal(fi_cq_open(g_domain, NULL, &cq, NULL), 0);
	assert_int_equal(opx_of(cq)->format, FI_CQ_FORMAT_CONTEXT);
	assert_int_equal(fi_close(&cq->fid), 0);
	assert_int_equal(fi_cq_open(g_domain, &attr, &cq, NULL), 0);
	report(cq, 9, FI_SEND, 0, 0, 0, 0);
	report(cq, 10, FI_SEND, 0, 0, 0, 0);
	assert_int_equal(fi_cq_read(cq, e, 2), 2);
	/* entries are packed as fi_cq_entry, not as a larger format */
	assert_ptr_equal(e[1].op_context, (void *)10);
	assert_int_equal(fi_close(&cq->fid), 0);
}

static void test_cq_readfrom(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	struct fi_cq_tagged_entry e[3];
	fi_addr_t src[3];

	(void)state;
	report(cq, 1, FI_RECV | FI_TAGGED, 1, 0, 1, 42);
	report(cq, 2, FI_RECV | FI_TAGGED, 1, 0, 2, FI_ADDR_NOTAVAIL);
	report(cq, 3, FI_SEND | FI_TAGGED, 1, 0, 3, 7);
	assert_int_equal(fi_cq_readfrom(cq, e, 3, src), 3);
	assert_int_equal(src[0], 42);
	assert_int_equal(src[1], FI_ADDR_NOTAVAIL);
	assert_int_equal(src[2], 7);
	assert_int_equal(e[2].tag, 3);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* ---------------------------------------------------------------------
 * Errors.
 */
static void test_cq_error_order(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	struct fi_cq_tagged_entry e[8];
	struct fi_cq_err_entry err;

	(void)state;
	report(cq, 1, FI_SEND, 0, 0, 0, 0);
	report(cq, 2, FI_SEND, 0, 0, 0, 0);
	report_err(cq, 3, FI_ETRUNC, -5);
	report(cq, 4, FI_SEND, 0, 0, 0, 0);

	/* the successful completions before the error come first */
	assert_int_equal(fi_cq_read(cq, e, 8), 2);
	assert_ptr_equal(e[1].op_context, (void *)2);
	/* now the error is topmost */
	assert_int_equal(fi_cq_read(cq, e, 8), -FI_EAVAIL);
	assert_int_equal(fi_cq_read(cq, e, 0), -FI_EAVAIL);

	memset(&err, 0, sizeof(err));
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_ptr_equal(err.op_context, (void *)3);
	assert_int_equal(err.flags, FI_RECV | FI_TAGGED);
	assert_int_equal(err.len, 10);
	assert_int_equal(err.data, 5);
	assert_int_equal(err.tag, 0x77);
	assert_int_equal(err.olen, 3);
	assert_int_equal(err.err, FI_ETRUNC);
	assert_int_equal(err.prov_errno, -5);
	assert_int_equal(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);

	assert_int_equal(fi_cq_read(cq, e, 8), 1);
	assert_ptr_equal(e[0].op_context, (void *)4);
	assert_int_equal(fi_cq_read(cq, e, 8), -FI_EAGAIN);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* A FI_SOURCE_ERR entry, reported as the endpoint would: its err_data is
 * the source address, the one kind of provider data opx has. */
static void report_src_err(struct fid_cq *cq, uintptr_t ctx, const struct shim_addr *a)
{
	struct opx_cq *c = opx_of(cq);

	opx_lock_acquire(&c->domain->lock);
	assert_int_equal(opx_cq_report_src_err_locked(c, (void *)ctx, FI_RECV | FI_TAGGED, 8,
						      NULL, 0, 0x55, a, sizeof(*a)),
			 0);
	opx_lock_release(&c->domain->lock);
}

static struct shim_addr test_addr(uint16_t lid, uint16_t ctx)
{
	struct shim_addr a;

	memset(&a, 0, sizeof(a));
	a.host_id = 0x1234567890abcdefULL;
	a.lid = lid;
	a.ctx = ctx;
	a.pid = 4242;
	return a;
}

/* Issue 31 item 2: an entry with no provider data (cancel, peek miss,
 * truncation, I/O errors) leaves the caller's err_data alone whatever
 * err_data_size says - the caller may pass an uninitialised entry, as
 * libfabric's tagged peek test does - and answers err_data_size 0. */
static void readerr_no_data(struct fid_cq *cq, int want_err, void *ctx)
{
	struct fi_cq_err_entry err;

	memset(&err, 0xa5, sizeof(err));
	err.err_data = (void *)(uintptr_t)0x1;
	err.err_data_size = 64;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_int_equal(err.err, want_err);
	assert_ptr_equal(err.op_context, ctx);
	assert_int_equal(err.err_data_size, 0);
	assert_ptr_equal(err.err_data, (void *)(uintptr_t)0x1);
}

/* The same on real cancel and peek-miss completions of an endpoint. */
static void test_cq_err_no_data_ep(void **state)
{
	struct fx_env e;
	struct fi_context rctx, pctx;
	struct fi_cq_tagged_entry ce;
	struct fi_msg_tagged msg;
	char buf[64];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	uint64_t t0;
	ssize_t n;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);

	assert_int_equal(fi_trecv(e.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x31, 0, &rctx), 0);
	assert_int_equal(fi_cancel(&e.ep->fid, &rctx), 0);
	assert_int_equal(fi_cq_read(e.cq, &ce, 1), -FI_EAVAIL);
	readerr_no_data(e.cq, FI_ECANCELED, &rctx);

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.iov_count = 1;
	msg.addr = FI_ADDR_UNSPEC;
	msg.tag = 0x32;
	msg.context = &pctx;
	assert_int_equal(fi_trecvmsg(e.ep, &msg, FI_PEEK), 0);
	t0 = fx_now_ms();
	while ((n = fi_cq_read(e.cq, &ce, 1)) == -FI_EAGAIN && fx_now_ms() - t0 < 2000)
		;
	assert_int_equal(n, -FI_EAVAIL);
	readerr_no_data(e.cq, FI_ENOMSG, &pctx);

	fx_close(&e);
}

/* err_data rules of man fi_cq for API >= 1.5.  Entries without provider
 * data: the caller's buffer is untouched, err_data_size 0; with size 0
 * there is no provider buffer to hand out either (NULL).  fi_cq_strerror
 * works from prov_errno and never reads err_data.  Entries with data
 * (FI_SOURCE_ERR's address): a user buffer is filled (err_data_size says
 * how much), size 0 gets provider memory. */
static void test_cq_err_data(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct shim_addr a = test_addr(7, 3), got;
	struct fi_cq_err_entry err;
	char small[4];
	char str[256];
	const char *s;

	(void)state;
	report_err(cq, 1, -FI_ECANCELED, 0); /* a negative code is normalised */
	report_err(cq, 2, FI_ETRUNC, 0);
	report_err(cq, 3, FI_EIO, -110);
	report_err(cq, 4, FI_EIO, -111);
	report_src_err(cq, 5, &a);
	report_src_err(cq, 6, &a);
	report_src_err(cq, 7, &a);

	readerr_no_data(cq, FI_ECANCELED, (void *)1);
	readerr_no_data(cq, FI_ETRUNC, (void *)2);

	memset(&err, 0xa5, sizeof(err));
	err.err_data = (void *)(uintptr_t)0x1;
	err.err_data_size = 64;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_int_equal(err.prov_errno, -110);
	assert_int_equal(err.err_data_size, 0);
	/* the caller's pointer comes back as it went in: strerror ignores it */
	s = fi_cq_strerror(cq, err.prov_errno, err.err_data, str, sizeof(str));
	assert_ptr_equal(s, str);
	assert_non_null(strstr(str, "110"));
	assert_non_null(fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0));
	assert_non_null(fi_cq_strerror(cq, 0, NULL, str, sizeof(str)));

	/* size 0 on an entry without data: nothing to point to */
	memset(&err, 0, sizeof(err));
	err.err_data = (void *)(uintptr_t)0x1;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_int_equal(err.prov_errno, -111);
	assert_null(err.err_data);
	assert_int_equal(err.err_data_size, 0);

	/* FI_SOURCE_ERR: the address into the caller's buffer */
	memset(&err, 0, sizeof(err));
	memset(&got, 0, sizeof(got));
	err.err_data = &got;
	err.err_data_size = sizeof(got) + 16;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_int_equal(err.err, FI_EADDRNOTAVAIL);
	assert_ptr_equal(err.err_data, &got);
	assert_int_equal(err.err_data_size, sizeof(got));
	assert_memory_equal(&got, &a, sizeof(a));

	/* small user buffer: truncated to its size */
	memset(&err, 0, sizeof(err));
	memset(small, 0x5a, sizeof(small));
	err.err_data = small;
	err.err_data_size = sizeof(small);
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_ptr_equal(err.err_data, small);
	assert_int_equal(err.err_data_size, sizeof(small));
	assert_memory_equal(small, &a, sizeof(small));

	/* size 0: provider-owned buffer */
	memset(&err, 0, sizeof(err));
	err.err_data = small;
	err.err_data_size = 0;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_non_null(err.err_data);
	assert_ptr_not_equal(err.err_data, small);
	assert_memory_equal(err.err_data, &a, sizeof(a));
	assert_int_equal(err.err_data_size, 0); /* nothing copied to the caller */

	assert_int_equal(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
	assert_int_equal(fi_cq_readerr(cq, &err, 1), -FI_EBADFLAGS);
	assert_int_equal(fi_cq_readerr(cq, NULL, 0), -FI_EINVAL);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* fi_cq(3), API < 1.5: the entry ends before err_data_size and err_data
 * is always the provider's: the caller's fields are never read, and
 * nothing past the 1.0 entry is written. */
static void test_cq_err_data_api_1_4(void **state)
{
	struct fi_info *info = NULL;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cq *cq = NULL;
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
	struct shim_addr a = test_addr(9, 4);
	struct fi_cq_err_entry err;

	(void)state;
	assert_int_equal(fx_prov()->getinfo(FI_VERSION(1, 4), NULL, NULL, 0, NULL, &info), 0);
	assert_int_equal(fx_prov()->fabric(info->fabric_attr, &fabric, NULL), 0);
	assert_int_equal(fi_domain(fabric, info, &domain, NULL), 0);
	assert_int_equal(fi_cq_open(domain, &attr, &cq, NULL), 0);
	report_err(cq, 1, FI_ECANCELED, 0);
	report_src_err(cq, 2, &a);

	memset(&err, 0xa5, sizeof(err));
	err.err_data = (void *)(uintptr_t)0x1;
	err.err_data_size = 64;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_int_equal(err.err, FI_ECANCELED);
	assert_null(err.err_data);
	assert_int_equal(err.err_data_size, 64); /* not part of the 1.0 entry */

	memset(&err, 0xa5, sizeof(err));
	err.err_data = (void *)(uintptr_t)0x1;
	err.err_data_size = 64;
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_int_equal(err.err, FI_EADDRNOTAVAIL);
	assert_non_null(err.err_data);
	assert_ptr_not_equal(err.err_data, (void *)(uintptr_t)0x1);
	assert_memory_equal(err.err_data, &a, sizeof(a));
	assert_int_equal(err.err_data_size, 64);

	assert_int_equal(fi_close(&cq->fid), 0);
	assert_int_equal(fi_close(&domain->fid), 0);
	assert_int_equal(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

/* Issue 10 item 6: an entry read with err_data_size 0 gets provider
 * memory; reusing that entry as is for the next readerr (here of another
 * CQ) must not make the provider write through the pointer it handed out
 * as if the caller owned it: the first CQ's data stays valid until that
 * CQ's next read, and the second error gets its own buffer. */
static void test_cq_err_data_reuse(void **state)
{
	struct fid_cq *cq1 = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fid_cq *cq2 = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct shim_addr a1 = test_addr(1, 7), a2 = test_addr(2, 1234);
	struct fi_cq_err_entry err;
	const void *first;

	(void)state;
	report_src_err(cq1, 1, &a1);
	report_src_err(cq2, 2, &a2);

	memset(&err, 0, sizeof(err));
	assert_int_equal(fi_cq_readerr(cq1, &err, 0), 1);
	assert_non_null(err.err_data);
	first = err.err_data;
	assert_memory_equal(first, &a1, sizeof(a1));

	/* the same entry again, untouched */
	assert_int_equal(fi_cq_readerr(cq2, &err, 0), 1);
	assert_int_equal(err.err, FI_EADDRNOTAVAIL);
	assert_ptr_equal(err.op_context, (void *)2);
	assert_non_null(err.err_data);
	assert_ptr_not_equal(err.err_data, first);
	assert_memory_equal(first, &a1, sizeof(a1)); /* cq1's buffer untouched */
	assert_memory_equal(err.err_data, &a2, sizeof(a2));

	assert_int_equal(fi_close(&cq2->fid), 0);
	assert_int_equal(fi_close(&cq1->fid), 0);
}

/* ---------------------------------------------------------------------
 * Growth: far past the initial size, order preserved, nothing dropped,
 * also with the ring wrapped when it grows.
 */
static void test_cq_growth(void **state)
{
	enum { N = 10000 };
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 16);
	struct fi_cq_tagged_entry e[64];
	uintptr_t next = 1;
	uintptr_t want = 1;

	(void)state;
	/* wrap the ring first: head and tail mid-array */
	for (int i = 0; i < 10; i++)
		report(cq, next++, FI_SEND, 0, 0, 0, 0);
	assert_int_equal(fi_cq_read(cq, e, 7), 7);
	want += 7;
	for (int i = 0; i < N; i++)
		report(cq, next++, FI_SEND, 0, 0, 0, 0);
	assert_true(opx_of(cq)->mask + 1 >= N);

	for (int guard = 0; guard < N; guard++) {
		ssize_t n = fi_cq_read(cq, e, 64);

		if (n == -FI_EAGAIN)
			break;
		assert_true(n > 0);
		for (ssize_t i = 0; i < n; i++)
			assert_ptr_equal(e[i].op_context, (void *)want++);
	}
	assert_int_equal(want, next);
	assert_int_equal(fi_close(&cq->fid), 0);
}

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
 * Arguments.
 */
static void test_cq_bad_args(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct fi_cq_attr attr;
	struct fid_cq *bad = NULL;
	struct fi_cq_entry e;

	(void)state;
	assert_int_equal(fi_cq_read(cq, NULL, 1), -FI_EINVAL);
	assert_int_equal(fi_cq_sread(cq, NULL, 1, NULL, 0), -FI_EINVAL);
	assert_int_equal(fi_cq_read(cq, &e, 0), 0); /* drives progress only */
	/* still usable */
	report(cq, 1, FI_SEND, 0, 0, 0, 0);
	assert_int_equal(fi_cq_read(cq, &e, 1), 1);
	assert_ptr_equal(e.op_context, (void *)1);
	assert_int_equal(fi_close(&cq->fid), 0);

	memset(&attr, 0, sizeof(attr));
	attr.format = (enum fi_cq_format)77;
	assert_int_equal(fi_cq_open(g_domain, &attr, &bad, NULL), -FI_EINVAL);
	memset(&attr, 0, sizeof(attr));
	attr.wait_obj = FI_WAIT_SET;
	assert_int_equal(fi_cq_open(g_domain, &attr, &bad, NULL), -FI_ENOSYS);
	memset(&attr, 0, sizeof(attr));
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	assert_int_equal(fi_cq_open(g_domain, &attr, &bad, NULL), -FI_ENOSYS);
	memset(&attr, 0, sizeof(attr));
	attr.wait_cond = (enum fi_cq_wait_cond)9;
	assert_int_equal(fi_cq_open(g_domain, &attr, &bad, NULL), -FI_EINVAL);
	memset(&attr, 0, sizeof(attr));
	attr.flags = FI_SEND;
	assert_int_equal(fi_cq_open(g_domain, &attr, &bad, NULL), -FI_EBADFLAGS);
	attr.flags = FI_AFFINITY;
	attr.signaling_vector = 3;
	attr.wait_obj = FI_WAIT_YIELD;
	assert_int_equal(fi_cq_open(g_domain, &attr, &bad, NULL), 0);
	assert_int_equal(fi_close(&bad->fid), 0);
}

/* A CQ with a bound endpoint cannot close. */
static void test_cq_close_busy(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_FD, 0);
	struct fid_ep *ep = NULL;

	(void)state;
	if (fi_endpoint(g_domain, g_info, &ep, NULL) != 0)
		skip();
	assert_int_equal(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(opx_of(cq)->pset.count, 1);
	assert_int_equal(fi_close(&cq->fid), -FI_EBUSY);
	/* progress and trywait with a real endpoint attached */
	struct fi_cq_tagged_entry e;
	struct fid *fids[1] = {&cq->fid};
	assert_int_equal(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
	assert_int_equal(fi_trywait(g_fabric, fids, 1), 0);
	assert_int_equal(fi_cq_sread(cq, &e, 1, NULL, 30), -FI_EAGAIN);
	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(opx_of(cq)->pset.count, 0);
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
	opx_cntr_inc(OPX_CONTAINER_OF(c, struct opx_cntr, cntr_fid));
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
		cmocka_unit_test(test_cq_format_context),
		cmocka_unit_test(test_cq_format_msg),
		cmocka_unit_test(test_cq_format_data),
		cmocka_unit_test(test_cq_format_tagged),
		cmocka_unit_test(test_cq_format_default),
		cmocka_unit_test(test_cq_readfrom),
		cmocka_unit_test(test_cq_error_order),
		cmocka_unit_test(test_cq_err_data),
		cmocka_unit_test(test_cq_err_no_data_ep),
		cmocka_unit_test(test_cq_err_data_api_1_4),
		cmocka_unit_test(test_cq_err_data_reuse),
		cmocka_unit_test(test_cq_growth),
		cmocka_unit_test(test_cq_sread_timeout),
		cmocka_unit_test(test_cq_sread_wait_none),
		cmocka_unit_test(test_cq_sread_wakes),
		cmocka_unit_test(test_cq_signal),
		cmocka_unit_test(test_cq_sread_threshold),
		cmocka_unit_test(test_cq_wait_fd),
		cmocka_unit_test(test_cq_trywait),
		cmocka_unit_test(test_cq_bad_args),
		cmocka_unit_test(test_cq_close_busy),
		cmocka_unit_test(test_cntr_basic),
		cmocka_unit_test(test_cntr_open_attr),
		cmocka_unit_test(test_cntr_wait),
		cmocka_unit_test(test_cntr_wait_none),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
