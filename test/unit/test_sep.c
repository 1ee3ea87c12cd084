/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_sep.c - scalable endpoints (prov/opx_sep.c): fi_getinfo's context
 * counts and refusals, fi_scalable_ep with 4 transmit and 4 receive
 * contexts sending tagged messages from every transmit context to every
 * receive context (fi_rx_addr), each receive context's CQ seeing only its
 * own, plain endpoint <-> scalable endpoint both ways, out-of-range
 * indices, and the close order.  test_sep_udp.sh runs it again with every
 * peer on the udp wire (FI_OPX_WIRE=udp): then each context is its own
 * UDP socket on loopback.  A last test forks a process that talks to a
 * scalable endpoint of this one.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "fixture.h"

#define TS_N 4          /* contexts of each kind */
#define TS_BITS 4       /* rx_ctx_bits of the AVs */
#define TS_WAIT_MS 20000
#define TS_BIG (64u << 10) /* above eager: rendezvous, DONE to the transmit context */

struct ts_sep {
	struct fx_env e;
	struct fid_ep *sep;
	struct fid_ep *tx[TS_N];
	struct fid_ep *rx[TS_N];
	struct fid_cq *txcq[TS_N];
	struct fid_cq *rxcq[TS_N];
	fi_addr_t self; /* the sep's own name in its AV */
};

static struct fi_info *ts_hints(size_t tx, size_t rx)
{
	struct fi_info *h = fi_allocinfo();

	assert_non_null(h);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_MSG | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV | FI_NAMED_RX_CTX | FI_RMA |
		  FI_ATOMIC;
	h->ep_attr->tx_ctx_cnt = tx;
	h->ep_attr->rx_ctx_cnt = rx;
	return h;
}

static int ts_getinfo(size_t tx, size_t rx, struct fi_info **fi)
{
	struct fi_info *h = ts_hints(tx, rx);
	int ret = fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, h, fi);

	fi_freeinfo(h);
	return ret;
}

static struct fid_cq *ts_cq(struct fid_domain *d)
{
	struct fi_cq_attr a = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *cq;

	assert_int_equal(fi_cq_open(d, &a, &cq, NULL), 0);
	return cq;
}

static struct fid_av *ts_av(struct fid_domain *d, int bits)
{
	struct fi_av_attr a = {.type = FI_AV_TABLE, .rx_ctx_bits = bits};
	struct fid_av *av;

	assert_int_equal(fi_av_open(d, &a, &av, NULL), 0);
	return av;
}

/* A scalable endpoint with TS_N contexts of each kind, each with its CQ,
 * enabled, its own name inserted in its AV (rx_ctx_bits TS_BITS). */
static void ts_open(struct ts_sep *s)
{
	char name[64];
	size_t len = sizeof(name);

	memset(s, 0, sizeof(*s));
	assert_int_equal(ts_getinfo(TS_N, TS_N, &s->e.info), 0);
	assert_int_equal(fx_prov()->fabric(s->e.info->fabric_attr, &s->e.fabric, NULL), 0);
	assert_int_equal(fi_domain(s->e.fabric, s->e.info, &s->e.domain, NULL), 0);
	s->e.av = ts_av(s->e.domain, TS_BITS);
	assert_int_equal(fi_scalable_ep(s->e.domain, s->e.info, &s->sep, NULL), 0);
	assert_int_equal(fi_enable(s->sep), -FI_ENOAV);
	assert_int_equal(fi_scalable_ep_bind(s->sep, &s->e.av->fid, 0), 0);
	assert_int_equal(fi_enable(s->sep), 0);
	for (int i = 0; i < TS_N; i++) {
		/* the last pair as MPICH's ch4:ofi asks for its contexts: its
		 * own capability sets, FI_NAMED_RX_CTX in both */
		struct fi_tx_attr ta = {.caps = FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MSG |
						FI_NAMED_RX_CTX,
					.op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE};
		struct fi_rx_attr ra = {.caps = FI_TAGGED | FI_DIRECTED_RECV | FI_RMA |
						FI_REMOTE_READ | FI_REMOTE_WRITE | FI_ATOMIC |
						FI_MSG | FI_MULTI_RECV | FI_NAMED_RX_CTX};
		bool mpich = i == TS_N - 1;

		assert_int_equal(fi_tx_context(s->sep, i, mpich ? &ta : NULL, &s->tx[i], NULL), 0);
		assert_int_equal(fi_rx_context(s->sep, i, mpich ? &ra : NULL, &s->rx[i], NULL), 0);
		s->txcq[i] = ts_cq(s->e.domain);
		s->rxcq[i] = ts_cq(s->e.domain);
		assert_int_equal(fi_ep_bind(s->tx[i], &s->txcq[i]->fid, FI_TRANSMIT), 0);
		assert_int_equal(fi_ep_bind(s->rx[i], &s->rxcq[i]->fid, FI_RECV), 0);
		assert_int_equal(fi_enable(s->tx[i]), 0);
		assert_int_equal(fi_enable(s->rx[i]), 0);
	}
	assert_int_equal(fi_getname(&s->sep->fid, name, &len), 0);
	assert_int_equal(len, 32);
	assert_int_equal(fi_av_insert(s->e.av, name, 1, &s->self, 0, NULL), 1);
}

static void ts_close(struct ts_sep *s)
{
	for (int i = 0; i < TS_N; i++) {
		assert_int_equal(fi_close(&s->tx[i]->fid), 0);
		assert_int_equal(fi_close(&s->rx[i]->fid), 0);
	}
	assert_int_equal(fi_close(&s->sep->fid), 0);
	for (int i = 0; i < TS_N; i++) {
		assert_int_equal(fi_close(&s->txcq[i]->fid), 0);
		assert_int_equal(fi_close(&s->rxcq[i]->fid), 0);
	}
	fx_close(&s->e);
}

/* Read every CQ once: progress for all contexts (a transmit context's
 * answers arrive only while its CQ is read). */
static void ts_poll_tx(struct ts_sep *s)
{
	struct fi_cq_tagged_entry e;

	for (int i = 0; i < TS_N; i++) {
		ssize_t n = fi_cq_read(s->txcq[i], &e, 1);

		assert_true(n == 1 || n == -FI_EAGAIN);
	}
}

/* ---------------------------------------------------------------------
 * fi_getinfo.
 */
static void test_sep_getinfo(void **state)
{
	struct fi_info *fi = NULL;
	struct fi_info *h;

	(void)state;
	assert_int_equal(ts_getinfo(4, 4, &fi), 0);
	assert_int_equal(fi->ep_attr->tx_ctx_cnt, 4);
	assert_int_equal(fi->ep_attr->rx_ctx_cnt, 4);
	assert_true(fi->caps & FI_NAMED_RX_CTX);
	assert_int_equal(fi->domain_attr->max_ep_tx_ctx, 15);
	assert_int_equal(fi->domain_attr->max_ep_rx_ctx, 16);
	assert_true(fi->domain_attr->tx_ctx_cnt >= fi->domain_attr->max_ep_tx_ctx);
	assert_true(fi->domain_attr->rx_ctx_cnt >= fi->domain_attr->max_ep_rx_ctx);
	assert_int_equal(fi->domain_attr->max_ep_stx_ctx, 0);
	assert_int_equal(fi->domain_attr->max_ep_srx_ctx, 0);
	fi_freeinfo(fi);

	/* the maxima themselves, and without hints one of each */
	assert_int_equal(ts_getinfo(15, 16, &fi), 0);
	fi_freeinfo(fi);
	assert_int_equal(ts_getinfo(0, 0, &fi), 0);
	assert_int_equal(fi->ep_attr->tx_ctx_cnt, 1);
	assert_int_equal(fi->ep_attr->rx_ctx_cnt, 1);
	fi_freeinfo(fi);

	/* more than the maxima, and shared contexts, are refused */
	fi = (struct fi_info *)(uintptr_t)0x1;
	assert_int_equal(ts_getinfo(16, 1, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(1, 17, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(FI_SHARED_CONTEXT, 1, &fi), -FI_ENODATA);
	assert_int_equal(ts_getinfo(1, FI_SHARED_CONTEXT, &fi), -FI_ENODATA);
	h = ts_hints(1, 1);
	h->domain_attr->max_ep_stx_ctx = 1;
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	fi_freeinfo(h);
	/* socket names carry one socket, not contexts */
	h = ts_hints(2, 2);
	h->addr_format = FI_SOCKADDR_IN;
	assert_int_equal(fx_prov()->getinfo(FX_VERSION, NULL, NULL, 0, h, &fi), -FI_ENODATA);
	fi_freeinfo(h);
}

/* fi_endpoint from an info of several contexts, shared contexts, AV bits. */
static void test_sep_refusals(void **state)
{
	struct fx_env e;
	struct fid_ep *ep;
	struct fid_stx *stx;
	struct fi_av_attr aa = {.type = FI_AV_TABLE, .rx_ctx_bits = 17};
	struct fid_av *av;
	struct fi_info *fi;

	(void)state;
	assert_int_equal(fx_open_domain(&e, NULL), 0);
	assert_int_equal(ts_getinfo(2, 2, &fi), 0);
	assert_int_equal(fi_endpoint(e.domain, fi, &ep, NULL), -FI_EINVAL);
	fi->ep_attr->rx_ctx_cnt = 17;
	assert_int_equal(fi_scalable_ep(e.domain, fi, &ep, NULL), -FI_EINVAL);
	fi->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	assert_int_equal(fi_scalable_ep(e.domain, fi, &ep, NULL), -FI_EOPNOTSUPP);
	fi_freeinfo(fi);
	assert_int_equal(fi_stx_context(e.domain, NULL, &stx, NULL), -FI_ENOSYS);
	assert_int_equal(fi_av_open(e.domain, &aa, &av, NULL), -FI_EINVAL);
	fx_close(&e);
}

/* ---------------------------------------------------------------------
 * Traffic between the contexts of one scalable endpoint.
 */
static uint8_t ts_byte(int i, int j, size_t k)
{
	return (uint8_t)(i * 31 + j * 7 + k);
}

static void test_sep_all_pairs(void **state)
{
	static uint8_t rbuf[TS_N][TS_N][TS_BIG];
	static uint8_t sbuf[TS_N][TS_N][TS_BIG];
	int rctx[TS_N][TS_N], sctx[TS_N][TS_N];
	int got[TS_N] = {0}, sent = 0;
	struct ts_sep s;
	uint64_t deadline;

	(void)state;
	ts_open(&s);
	/* receive context j posts one receive per sender i, directed at tag */
	for (int j = 0; j < TS_N; j++)
		for (int i = 0; i < TS_N; i++)
			assert_int_equal(fi_trecv(s.rx[j], rbuf[i][j], TS_BIG, NULL, FI_ADDR_UNSPEC,
						  (uint64_t)(i << 8 | j), 0, &rctx[i][j]),
					 0);
	/* every transmit context to every receive context; the diagonal
	 * by rendezvous, the rest eager (sizes 1 .. 4 KiB) */
	for (int i = 0; i < TS_N; i++) {
		for (int j = 0; j < TS_N; j++) {
			size_t len = i == j ? TS_BIG : (size_t)1 << (i * 4 + j);
			ssize_t rc;

			for (size_t k = 0; k < len; k++)
				sbuf[i][j][k] = ts_byte(i, j, k);
			deadline = fx_now_ms() + TS_WAIT_MS;
			do {
				rc = fi_tsend(s.tx[i], sbuf[i][j], len, NULL,
					      fi_rx_addr(s.self, j, TS_BITS), (uint64_t)(i << 8 | j),
					      &sctx[i][j]);
				if (rc == -FI_EAGAIN)
					ts_poll_tx(&s);
			} while (rc == -FI_EAGAIN && fx_now_ms() < deadline);
			assert_int_equal(rc, 0);
		}
	}
	/* each receive CQ sees exactly its own four, from the sep itself */
	deadline = fx_now_ms() + TS_WAIT_MS;
	while (fx_now_ms() < deadline) {
		int done = 1;

		for (int j = 0; j < TS_N; j++) {
			struct fi_cq_tagged_entry e;
			fi_addr_t src;
			ssize_t n = fi_cq_readfrom(s.rxcq[j], &e, 1, &src);

			assert_true(n == 1 || n == -FI_EAGAIN);
			if (n == 1) {
				int i = (int)(e.tag >> 8);

				assert_int_equal((int)(e.tag & 0xff), j);
				assert_true(i >= 0 && i < TS_N);
				assert_ptr_equal(e.op_context, &rctx[i][j]);
				assert_int_equal(e.len, i == j ? TS_BIG : (size_t)1 << (i * 4 + j));
				assert_int_equal(src, s.self);
				for (size_t k = 0; k < e.len; k++)
					if (rbuf[i][j][k] != ts_byte(i, j, k))
						fail_msg("tx %d -> rx %d: byte %zu wrong", i, j, k);
				got[j]++;
			}
			done &= got[j] == TS_N;
		}
		/* the transmit side: every send completes once */
		for (int i = 0; i < TS_N; i++) {
			struct fi_cq_tagged_entry e;
			ssize_t n = fi_cq_read(s.txcq[i], &e, 1);

			assert_true(n == 1 || n == -FI_EAGAIN);
			if (n == 1) {
				int *c = e.op_context;

				assert_true(c >= &sctx[i][0] && c < &sctx[i][TS_N]);
				sent++;
			}
		}
		if (done && sent == TS_N * TS_N)
			break;
	}
	for (int j = 0; j < TS_N; j++)
		assert_int_equal(got[j], TS_N);
	assert_int_equal(sent, TS_N * TS_N);
	ts_close(&s);
}

/* ---------------------------------------------------------------------
 * A plain endpoint and a scalable one, both ways.
 */
static void test_sep_plain_both_ways(void **state)
{
	struct ts_sep s;
	struct fid_av *pav;
	struct fid_cq *pcq;
	struct fid_ep *ep;
	char name[64], buf[64];
	size_t len = sizeof(name);
	fi_addr_t sep_at_plain, plain_at_sep;
	struct fi_cq_tagged_entry ce;
	fi_addr_t src;
	int c1, c2, c3;
	uint64_t deadline;
	ssize_t n;

	(void)state;
	ts_open(&s);
	/* the plain endpoint: its own AV with the sep's bits, its own CQ */
	pav = ts_av(s.e.domain, TS_BITS);
	pcq = ts_cq(s.e.domain);
	{
		struct fi_info *fi;

		assert_int_equal(ts_getinfo(1, 1, &fi), 0);
		assert_int_equal(fi_endpoint(s.e.domain, fi, &ep, NULL), 0);
		fi_freeinfo(fi);
	}
	assert_int_equal(fi_ep_bind(ep, &pcq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(ep, &pav->fid, 0), 0);
	assert_int_equal(fi_enable(ep), 0);
	assert_int_equal(fi_getname(&s.sep->fid, name, &len), 0);
	assert_int_equal(fi_av_insert(pav, name, 1, &sep_at_plain, 0, NULL), 1);
	len = sizeof(name);
	assert_int_equal(fi_getname(&ep->fid, name, &len), 0);
	assert_int_equal(fi_av_insert(s.e.av, name, 1, &plain_at_sep, 0, NULL), 1);

	/* plain -> receive context 2 (fi_rx_addr), and -> the bare name:
	 * receive context 0 */
	assert_int_equal(fi_trecv(s.rx[2], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 7, 0, &c1), 0);
	assert_int_equal(fi_tinject(ep, "two", 4, fi_rx_addr(sep_at_plain, 2, TS_BITS), 7), 0);
	assert_int_equal(fx_cq_wait(s.rxcq[2], &c1, TS_WAIT_MS, &ce), 0);
	assert_string_equal(buf, "two");
	assert_int_equal(fi_trecv(s.rx[0], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 8, 0, &c2), 0);
	assert_int_equal(fi_tinject(ep, "zero", 5, sep_at_plain, 8), 0);
	assert_int_equal(fx_cq_wait(s.rxcq[0], &c2, TS_WAIT_MS, &ce), 0);
	assert_string_equal(buf, "zero");
	/* nothing for the other receive contexts */
	for (int j = 1; j < TS_N; j++)
		assert_int_equal(fi_cq_read(s.rxcq[j], &ce, 1), -FI_EAGAIN);

	/* transmit context 3 -> plain; the plain side names the source by
	 * the sep's one fi_addr_t, and a receive directed at it matches */
	assert_int_equal(fi_trecv(ep, buf, sizeof(buf), NULL, sep_at_plain, 9, 0, &c3), 0);
	assert_int_equal(fi_tsend(s.tx[3], "three", 6, NULL, plain_at_sep, 9, &c1), 0);
	deadline = fx_now_ms() + TS_WAIT_MS;
	{
		bool sent = false;

		n = -FI_EAGAIN;
		do {
			struct fi_cq_tagged_entry te;

			if (fi_cq_read(s.txcq[3], &te, 1) == 1) {
				assert_ptr_equal(te.op_context, &c1);
				sent = true;
			}
			if (n == -FI_EAGAIN)
				n = fi_cq_readfrom(pcq, &ce, 1, &src);
		} while ((n == -FI_EAGAIN || !sent) && fx_now_ms() < deadline);
		assert_true(sent);
	}
	assert_int_equal(n, 1);
	assert_ptr_equal(ce.op_context, &c3);
	assert_int_equal(src, sep_at_plain);
	assert_string_equal(buf, "three");

	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_close(&pcq->fid), 0);
	assert_int_equal(fi_close(&pav->fid), 0);
	ts_close(&s);
}

/* ---------------------------------------------------------------------
 * One-sided operations from a transmit context to a receive context: the
 * target is the receive context's endpoint (it runs them while its CQ is
 * read), the answers go back to the transmit context that asked.
 */
static void ts_rma_wait(struct ts_sep *s, int tx, int rx, void *ctx)
{
	uint64_t deadline = fx_now_ms() + TS_WAIT_MS;
	struct fi_cq_tagged_entry ce;
	ssize_t n;

	do {
		(void)fi_cq_read(s->rxcq[rx], &ce, 1); /* the target progresses */
		n = fi_cq_read(s->txcq[tx], &ce, 1);
	} while (n == -FI_EAGAIN && fx_now_ms() < deadline);
	assert_int_equal(n, 1);
	assert_ptr_equal(ce.op_context, ctx);
}

static void test_sep_rma(void **state)
{
	static uint8_t target[TS_BIG], src[TS_BIG], back[TS_BIG];
	uint64_t counter = 5, add = 37, old = 0;
	struct fid_mr *mr, *cmr;
	struct ts_sep s;
	int c;

	(void)state;
	ts_open(&s);
	assert_int_equal(fi_mr_reg(s.e.domain, target, sizeof(target),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 42, 0, &mr, NULL),
			 0);
	assert_int_equal(fi_mr_reg(s.e.domain, &counter, sizeof(counter),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 43, 0, &cmr, NULL),
			 0);
	for (size_t k = 0; k < sizeof(src); k++)
		src[k] = ts_byte(1, 2, k);
	assert_int_equal(fi_write(s.tx[1], src, sizeof(src), NULL, fi_rx_addr(s.self, 2, TS_BITS),
				  0, 42, &c),
			 0);
	ts_rma_wait(&s, 1, 2, &c);
	assert_memory_equal(target, src, sizeof(src));
	assert_int_equal(fi_read(s.tx[3], back, sizeof(back), NULL, fi_rx_addr(s.self, 1, TS_BITS),
				 0, 42, &c),
			 0);
	ts_rma_wait(&s, 3, 1, &c);
	assert_memory_equal(back, src, sizeof(src));
	assert_int_equal(fi_fetch_atomic(s.tx[0], &add, 1, NULL, &old, NULL,
					 fi_rx_addr(s.self, 3, TS_BITS), 0, 43, FI_UINT64, FI_SUM,
					 &c),
			 0);
	ts_rma_wait(&s, 0, 3, &c);
	assert_int_equal(old, 5);
	assert_int_equal(counter, 42);
	/* a receive context initiates nothing */
	assert_int_equal(fi_write(s.rx[0], src, 8, NULL, s.self, 0, 42, &c), -FI_EOPNOTSUPP);
	/* a receive context without CQ (Open MPI's btl ofi enables one so):
	 * a one-sided target, progressed through the transmit contexts'
	 * CQs; it refuses receives, which could complete nowhere */
	assert_int_equal(fi_close(&s.rx[3]->fid), 0);
	assert_int_equal(fi_rx_context(s.sep, 3, NULL, &s.rx[3], NULL), 0);
	assert_int_equal(fi_enable(s.rx[3]), 0);
	assert_int_equal(fi_trecv(s.rx[3], back, 8, NULL, FI_ADDR_UNSPEC, 0, 0, &c), -FI_ENOCQ);
	assert_int_equal(fi_fetch_atomic(s.tx[2], &add, 1, NULL, &old, NULL,
					 fi_rx_addr(s.self, 3, TS_BITS), 0, 43, FI_UINT64, FI_SUM,
					 &c),
			 0);
	{
		uint64_t deadline = fx_now_ms() + TS_WAIT_MS;
		struct fi_cq_tagged_entry ce;
		ssize_t n;

		do /* only the initiator's CQ is read */
			n = fi_cq_read(s.txcq[2], &ce, 1);
		while (n == -FI_EAGAIN && fx_now_ms() < deadline);
		assert_int_equal(n, 1);
		assert_ptr_equal(ce.op_context, &c);
	}
	assert_int_equal(old, 42);
	assert_int_equal(counter, 79);
	/* its old CQ was unbound by the close, so it may go */
	assert_int_equal(fi_close(&s.rxcq[3]->fid), 0);
	s.rxcq[3] = ts_cq(s.e.domain);
	assert_int_equal(fi_close(&mr->fid), 0);
	assert_int_equal(fi_close(&cmr->fid), 0);
	ts_close(&s);
}

/* ---------------------------------------------------------------------
 * Indices out of range, calls on the wrong side, close order.
 */
static void test_sep_errors(void **state)
{
	struct ts_sep s;
	struct fid_ep *ep;
	struct fid_cq *cq;
	char buf[8];
	int c;

	(void)state;
	ts_open(&s);
	assert_int_equal(fi_tx_context(s.sep, TS_N, NULL, &ep, NULL), -FI_EINVAL);
	assert_int_equal(fi_tx_context(s.sep, -1, NULL, &ep, NULL), -FI_EINVAL);
	assert_int_equal(fi_rx_context(s.sep, TS_N, NULL, &ep, NULL), -FI_EINVAL);
	assert_int_equal(fi_rx_context(s.sep, -1, NULL, &ep, NULL), -FI_EINVAL);
	assert_int_equal(fi_tx_context(s.sep, 0, NULL, NULL, NULL), -FI_EINVAL);
	assert_int_equal(fi_tx_context(s.sep, 0, NULL, &ep, NULL), -FI_EBUSY); /* open */
	/* the peer has TS_N receive contexts: index TS_N fails the send */
	assert_int_equal(fi_tinject(s.tx[0], "x", 1, fi_rx_addr(s.self, TS_N, TS_BITS), 1),
			 -FI_EINVAL);
	assert_int_equal(fi_tsend(s.tx[0], "x", 1, NULL, fi_rx_addr(s.self, 15, TS_BITS), 1, &c),
			 -FI_EINVAL);
	assert_int_equal(fi_tsend(s.tx[0], "x", 1, NULL, s.self + 1, 1, &c), -FI_EINVAL);
	/* each side only its own operations and bindings */
	assert_int_equal(fi_trecv(s.tx[0], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 1, 0, &c),
			 -FI_EOPNOTSUPP);
	assert_int_equal(fi_tinject(s.rx[0], "x", 1, s.self, 1), -FI_EOPNOTSUPP);
	assert_int_equal(fi_tsend(s.sep, "x", 1, NULL, s.self, 1, &c), -FI_EOPBADSTATE);
	cq = ts_cq(s.e.domain);
	assert_int_equal(fi_ep_bind(s.tx[1], &cq->fid, FI_RECV), -FI_EBADFLAGS);
	assert_int_equal(fi_ep_bind(s.rx[1], &cq->fid, FI_TRANSMIT), -FI_EBADFLAGS);
	assert_int_equal(fi_scalable_ep_bind(s.sep, &cq->fid, FI_TRANSMIT), -FI_EINVAL);
	assert_int_equal(fi_scalable_ep_bind(s.sep, &s.e.av->fid, 0), -FI_EINVAL); /* twice */
	assert_int_equal(fi_close(&cq->fid), 0);

	/* close order: contexts first */
	assert_int_equal(fi_close(&s.sep->fid), -FI_EBUSY);
	assert_int_equal(fi_close(&s.rx[1]->fid), 0);
	assert_int_equal(fi_close(&s.sep->fid), -FI_EBUSY);
	/* a closed context's CQ may go, and the context can be taken again */
	assert_int_equal(fi_close(&s.rxcq[1]->fid), 0);
	s.rxcq[1] = ts_cq(s.e.domain);
	assert_int_equal(fi_rx_context(s.sep, 1, NULL, &s.rx[1], NULL), 0);
	assert_int_equal(fi_ep_bind(s.rx[1], &s.rxcq[1]->fid, FI_RECV), 0);
	assert_int_equal(fi_enable(s.rx[1]), 0);
	assert_int_equal(fi_trecv(s.rx[1], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 5, 0, &c), 0);
	assert_int_equal(fi_tinject(s.tx[2], "again", 6, fi_rx_addr(s.self, 1, TS_BITS), 5), 0);
	{
		uint64_t deadline = fx_now_ms() + TS_WAIT_MS;
		struct fi_cq_tagged_entry ce;
		ssize_t n;

		do {
			ts_poll_tx(&s);
			n = fi_cq_read(s.rxcq[1], &ce, 1);
		} while (n == -FI_EAGAIN && fx_now_ms() < deadline);
		assert_int_equal(n, 1);
		assert_string_equal(buf, "again");
	}
	/* the domain and AV outlive the sep */
	assert_int_equal(fi_close(&s.e.av->fid), -FI_EBUSY);
	ts_close(&s);
}

/* ---------------------------------------------------------------------
 * Another process: a plain endpoint that sends to every receive context
 * of our scalable endpoint and receives one message from each of its
 * transmit contexts.  Names go through pipes.
 */
static _Noreturn void ts_child(int rfd, int wfd)
{
	struct fx_env e;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fi_info *fi;
	char name[32], mine[32], buf[TS_N][16];
	size_t len = sizeof(mine);
	fi_addr_t sep;
	int c[TS_N], ok = 1;

	if (fx_open_domain(&e, NULL) || ts_getinfo(1, 1, &fi))
		_exit(2);
	{
		struct fi_av_attr a = {.type = FI_AV_TABLE, .rx_ctx_bits = TS_BITS};
		struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};

		if (fi_av_open(e.domain, &a, &av, NULL) || fi_cq_open(e.domain, &ca, &cq, NULL) ||
		    fi_endpoint(e.domain, fi, &ep, NULL) ||
		    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(ep, &av->fid, 0) ||
		    fi_enable(ep) || fi_getname(&ep->fid, mine, &len))
			_exit(3);
	}
	if (write(wfd, mine, sizeof(mine)) != (ssize_t)sizeof(mine) ||
	    read(rfd, name, sizeof(name)) != (ssize_t)sizeof(name) ||
	    fi_av_insert(av, name, 1, &sep, 0, NULL) != 1)
		_exit(4);
	(void)fcntl(rfd, F_SETFL, O_NONBLOCK);
	for (int k = 0; k < TS_N; k++)
		if (fi_trecv(ep, buf[k], sizeof(buf[k]), NULL, sep, (uint64_t)(0x100 + k), 0, &c[k]))
			_exit(5);
	for (int j = 0; j < TS_N; j++) {
		char msg[16];
		ssize_t rc;
		uint64_t deadline = fx_now_ms() + TS_WAIT_MS;

		snprintf(msg, sizeof(msg), "to rx %d", j);
		do {
			struct fi_cq_tagged_entry ce;

			rc = fi_tinject(ep, msg, sizeof(msg), fi_rx_addr(sep, j, TS_BITS),
					(uint64_t)j);
			if (rc == -FI_EAGAIN)
				(void)fi_cq_read(cq, &ce, 1);
		} while (rc == -FI_EAGAIN && fx_now_ms() < deadline);
		if (rc)
			_exit(6);
	}
	for (int k = 0; k < TS_N; k++) {
		struct fi_cq_tagged_entry ce;
		char want[16];

		snprintf(want, sizeof(want), "from tx %d", k);
		if (fx_cq_wait(cq, &c[k], TS_WAIT_MS, &ce) || strcmp(buf[k], want))
			ok = 0;
	}
	/* done: tell the parent, wait until it has read it (bounded) */
	if (write(wfd, &ok, sizeof(ok)) != (ssize_t)sizeof(ok))
		_exit(7);
	{
		char b;
		struct fi_cq_tagged_entry ce;
		uint64_t deadline = fx_now_ms() + TS_WAIT_MS;

		/* progress until the parent closes its end (acks on udp) */
		while (read(rfd, &b, 1) < 0 && fx_now_ms() < deadline)
			(void)fi_cq_read(cq, &ce, 1);
	}
	fi_close(&ep->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_freeinfo(fi);
	fx_close(&e);
	_exit(ok ? 0 : 8);
}

static void test_sep_two_processes(void **state)
{
	int to_child[2], from_child[2];
	struct ts_sep s;
	char name[32], peer[32];
	size_t len = sizeof(name);
	fi_addr_t child;
	int c[TS_N], ok = 0, status;
	char buf[TS_N][16];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(from_child), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* a fresh process, not a copy of this one's provider */
		char r[16], w[16];

		close(to_child[1]);
		close(from_child[0]);
		snprintf(r, sizeof(r), "%d", to_child[0]);
		snprintf(w, sizeof(w), "%d", from_child[1]);
		execl("/proc/self/exe", "test_sep", "child", r, w, (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	ts_open(&s);
	assert_int_equal(fi_getname(&s.sep->fid, name, &len), 0);
	assert_int_equal(read(from_child[0], peer, sizeof(peer)), (ssize_t)sizeof(peer));
	assert_int_equal(fcntl(from_child[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fi_av_insert(s.e.av, peer, 1, &child, 0, NULL), 1);
	for (int j = 0; j < TS_N; j++)
		assert_int_equal(fi_trecv(s.rx[j], buf[j], sizeof(buf[j]), NULL, child, (uint64_t)j,
					  0, &c[j]),
				 0);
	assert_int_equal(write(to_child[1], name, sizeof(name)), (ssize_t)sizeof(name));
	for (int k = 0; k < TS_N; k++) {
		char msg[16];

		snprintf(msg, sizeof(msg), "from tx %d", k);
		assert_int_equal(fi_tinject(s.tx[k], msg, sizeof(msg), child, (uint64_t)(0x100 + k)),
				 0);
	}
	for (int j = 0; j < TS_N; j++) {
		struct fi_cq_tagged_entry ce;
		char want[16];
		uint64_t deadline = fx_now_ms() + TS_WAIT_MS;
		ssize_t n;

		do {
			ts_poll_tx(&s);
			n = fi_cq_read(s.rxcq[j], &ce, 1);
		} while (n == -FI_EAGAIN && fx_now_ms() < deadline);
		assert_int_equal(n, 1);
		snprintf(want, sizeof(want), "to rx %d", j);
		assert_string_equal(buf[j], want);
	}
	{
		uint64_t deadline = fx_now_ms() + TS_WAIT_MS;
		ssize_t n;

		/* the child's verdict; keep our transmit contexts answering */
		do {
			ts_poll_tx(&s);
			n = read(from_child[0], &ok, sizeof(ok));
		} while (n < 0 && fx_now_ms() < deadline);
	}
	close(to_child[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(ok, 1);
	close(from_child[0]);
	ts_close(&s);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "child"))
		ts_child(atoi(argv[2]), atoi(argv[3]));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sep_getinfo),
		cmocka_unit_test(test_sep_refusals),
		cmocka_unit_test(test_sep_all_pairs),
		cmocka_unit_test(test_sep_plain_both_ways),
		cmocka_unit_test(test_sep_rma),
		cmocka_unit_test(test_sep_errors),
		cmocka_unit_test(test_sep_two_processes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
