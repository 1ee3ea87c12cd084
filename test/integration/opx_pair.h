/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_pair.h - one endpoint of a two-process test and what such tests
 * repeat: opening the fabric, domain, AV (table), CQ and endpoint,
 * closing them, waiting for one completion (bounded), sending with
 * -FI_EAGAIN retried (bounded), and receiving a message whose every byte
 * is checked against a seeded pattern.  Header-only, for
 * opx_sockaddr_test.c and opx_svc_test.c.
 *
 * Sends and receives share one CQ (FI_CQ_FORMAT_TAGGED).  A test may have
 * one operation in flight per direction; a completion that is not the one
 * waited for is kept (up to PAIR_EARLY) and handed out when its context
 * is waited for.  A failure prints "FAIL <who>: ..." and returns -1.
 */
#ifndef OPX_PAIR_H
#define OPX_PAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define PAIR_WAIT_MS 20000 /* one completion, one send retried */
#define PAIR_EARLY 4

struct pair {
	const char *who;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer;
	uint8_t *sbuf, *rbuf; /* maxlen + 1 bytes each (pair_bufs) */
	size_t maxlen;
	struct fi_cq_tagged_entry early[PAIR_EARLY];
	fi_addr_t early_src[PAIR_EARLY];
	void *early_ctx[PAIR_EARLY];
};

#define PAIR_FAIL(s, ...)                                                                          \
	do {                                                                                       \
		fprintf(stderr, "FAIL %s: ", (s)->who);                                            \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		return -1;                                                                         \
	} while (0)

static inline int64_t pair_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Byte i of the pattern of seed. */
static inline uint8_t pair_byte(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + 1u);
}

static inline void pair_fill(struct pair *s, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		s->sbuf[i] = pair_byte(seed, i);
}

/* Everything but the endpoint, from s->info; the endpoint is separate
 * since opening it is where a server learns that its port is taken. */
static inline int pair_open_domain(struct pair *s)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	int ret;

	ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL);
	if (!ret)
		ret = fi_domain(s->fabric, s->info, &s->domain, NULL);
	if (!ret)
		ret = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	if (!ret)
		ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	if (ret)
		PAIR_FAIL(s, "open: %s", fi_strerror(-ret));
	return 0;
}

/* The endpoint, bound to the CQ and the AV, enabled: 0 or -FI_E*. */
static inline int pair_open_ep(struct pair *s)
{
	int ret = fi_endpoint(s->domain, s->info, &s->ep, NULL);

	if (ret)
		return ret;
	ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!ret)
		ret = fi_enable(s->ep);
	return ret;
}

static inline int pair_bufs(struct pair *s, size_t maxlen)
{
	s->maxlen = maxlen;
	s->sbuf = malloc(maxlen + 1);
	s->rbuf = malloc(maxlen + 1);
	if (!s->sbuf || !s->rbuf)
		PAIR_FAIL(s, "malloc");
	return 0;
}

/* Close what is open; s can be opened again (the buffers stay). */
static inline void pair_close(struct pair *s)
{
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	if (s->info)
		fi_freeinfo(s->info);
	s->ep = NULL;
	s->cq = NULL;
	s->av = NULL;
	s->domain = NULL;
	s->fabric = NULL;
	s->info = NULL;
	memset(s->early_ctx, 0, sizeof(s->early_ctx));
}

static inline void pair_free(struct pair *s)
{
	pair_close(s);
	free(s->sbuf);
	free(s->rbuf);
	s->sbuf = s->rbuf = NULL;
}

/* The completion of ctx, and its source (out, src may be NULL). */
static inline int pair_wait(struct pair *s, void *ctx, struct fi_cq_tagged_entry *out,
			    fi_addr_t *src)
{
	int64_t end = pair_now_ms() + PAIR_WAIT_MS;

	for (int i = 0; i < PAIR_EARLY; i++) {
		if (s->early_ctx[i] == ctx) {
			s->early_ctx[i] = NULL;
			if (out)
				*out = s->early[i];
			if (src)
				*src = s->early_src[i];
			return 0;
		}
	}
	while (pair_now_ms() <= end) {
		struct fi_cq_tagged_entry e;
		fi_addr_t from = FI_ADDR_NOTAVAIL;
		ssize_t n = fi_cq_readfrom(s->cq, &e, 1, &from);

		if (n == 1 && e.op_context == ctx) {
			if (out)
				*out = e;
			if (src)
				*src = from;
			return 0;
		}
		if (n == 1) { /* the other direction's: keep it */
			int i = 0;

			while (i < PAIR_EARLY && s->early_ctx[i])
				i++;
			if (i == PAIR_EARLY)
				PAIR_FAIL(s, "unexpected completion %p", e.op_context);
			s->early[i] = e;
			s->early_src[i] = from;
			s->early_ctx[i] = e.op_context;
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			fi_cq_readerr(s->cq, &ee, 0);
			PAIR_FAIL(s, "error completion: %s", fi_strerror(ee.err));
		}
		if (n != -FI_EAGAIN)
			PAIR_FAIL(s, "fi_cq_read: %s", fi_strerror((int)-n));
	}
	PAIR_FAIL(s, "no completion within %d ms", PAIR_WAIT_MS);
}

/* Post a send to the peer (tagged with tag, or untagged), -FI_EAGAIN
 * retried with progress; its completion is waited for separately. */
static inline int pair_post_send(struct pair *s, const void *buf, size_t len, bool tagged,
				 uint64_t tag, void *ctx)
{
	int64_t end = pair_now_ms() + PAIR_WAIT_MS;
	ssize_t ret;

	for (;;) {
		ret = tagged ? fi_tsend(s->ep, buf, len, NULL, s->peer, tag, ctx)
			     : fi_send(s->ep, buf, len, NULL, s->peer, ctx);
		if (ret != -FI_EAGAIN || pair_now_ms() > end)
			break;
		(void)fi_cq_read(s->cq, NULL, 0);
	}
	if (ret)
		PAIR_FAIL(s, "%s(%zu): %s", tagged ? "fi_tsend" : "fi_send", len,
			  fi_strerror((int)-ret));
	return 0;
}

/* Receive a message of exactly len bytes with seed's pattern, from src
 * (FI_ADDR_UNSPEC: anyone; tagged: with tag); *from (if not NULL) gets
 * the source the completion named. */
static inline int pair_recv_check(struct pair *s, size_t len, bool tagged, uint64_t tag,
				  fi_addr_t src, unsigned seed, fi_addr_t *from)
{
	struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	ssize_t ret;

	memset(s->rbuf, 0xee, len + 1);
	ret = tagged ? fi_trecv(s->ep, s->rbuf, s->maxlen, NULL, src, tag, 0, &ctx)
		     : fi_recv(s->ep, s->rbuf, s->maxlen, NULL, src, &ctx);
	if (ret)
		PAIR_FAIL(s, "%s: %s", tagged ? "fi_trecv" : "fi_recv", fi_strerror((int)-ret));
	if (pair_wait(s, &ctx, &e, from))
		return -1;
	if (e.len != len)
		PAIR_FAIL(s, "received %zu bytes, expected %zu", e.len, len);
	for (size_t i = 0; i < len; i++) {
		if (s->rbuf[i] != pair_byte(seed, i))
			PAIR_FAIL(s, "byte %zu of a %zu-byte message is wrong", i, len);
	}
	return 0;
}

#endif /* OPX_PAIR_H */
