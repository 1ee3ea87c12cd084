/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_cq.c - what a completion queue holds and hands out: every CQ
 * format, source addresses, error ordering and readerr's err_data rules,
 * ring growth, argument checks, closing a CQ still bound.  Blocking reads
 * and counters are in test_cq_wait.c; what both share is cq_fixture.c.
 *
 * Completions are produced with opx_complete_report_locked directly (it is a
 * library-internal function the test reaches through libopx_core), so
 * no traffic is needed; only the cancel and peek-miss error entries come
 * from a loopback endpoint.  Every blocking call has a bounded timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cq_fixture.h"
#include "opx_cq.h"

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
	assert_int_equal(opx_complete_report_src_err_locked(c, (void *)ctx, FI_RECV | FI_TAGGED, 8,
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

/* A ring the reader empties starts again at slot 0 (the same few cache
 * lines for an application that keeps up), but not while an error entry
 * waits: its position is absolute.  Order and contents hold across it. */
static void test_cq_rewind(void **state)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 16);
	struct opx_cq *c = opx_of(cq);
	struct fi_cq_tagged_entry e[8];
	struct fi_cq_err_entry err;

	(void)state;
	for (uintptr_t i = 1; i <= 5; i++)
		report(cq, i, FI_SEND, 0, 0, i, 0);
	/* partly read: not rewound */
	assert_int_equal(fi_cq_read(cq, e, 3), 3);
	assert_int_equal(c->head, 3);
	assert_int_equal(c->tail, 5);
	/* emptied: back to slot 0, and the next entry is written there */
	assert_int_equal(fi_cq_read(cq, e, 8), 2);
	assert_ptr_equal(e[1].op_context, (void *)5);
	assert_int_equal(c->head, 0);
	assert_int_equal(c->tail, 0);
	report(cq, 6, FI_SEND, 0, 0, 6, 0);
	assert_ptr_equal(c->ring[0].e.op_context, (void *)6);

	/* an error waits behind entry 7: emptying the ring before it must
	 * not rewind, or entry 9 (reported after it) would come before it */
	report(cq, 7, FI_SEND, 0, 0, 7, 0);
	report_err(cq, 8, FI_ETRUNC, -5);
	assert_int_equal(fi_cq_read(cq, e, 8), 2);
	assert_ptr_equal(e[0].op_context, (void *)6);
	assert_ptr_equal(e[1].op_context, (void *)7);
	assert_int_equal(c->head, 2);
	assert_int_equal(c->tail, 2);
	report(cq, 9, FI_SEND, 0, 0, 9, 0);
	assert_int_equal(fi_cq_read(cq, e, 8), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	assert_int_equal(fi_cq_readerr(cq, &err, 0), 1);
	assert_ptr_equal(err.op_context, (void *)8);
	assert_int_equal(fi_cq_read(cq, e, 8), 1);
	assert_ptr_equal(e[0].op_context, (void *)9);
	assert_int_equal(e[0].tag, 9);
	/* no error left and the ring empty: rewound */
	assert_int_equal(c->head, 0);
	assert_int_equal(c->tail, 0);
	assert_int_equal(fi_cq_read(cq, e, 8), -FI_EAGAIN);
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
		cmocka_unit_test(test_cq_rewind),
		cmocka_unit_test(test_cq_bad_args),
		cmocka_unit_test(test_cq_close_busy),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
