/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma.c - one-sided latency, bandwidth and atomic rate for any
 * libfabric provider.
 *
 * Two processes, RDM endpoints, FI_RMA | FI_ATOMIC.  The server is a
 * passive target: it registers one buffer (the largest size plus a 64-byte
 * slot for a counter) for remote read and write, sends its address
 * (virtual when the provider uses FI_MR_VIRT_ADDR, else 0) and key to the
 * client over the out-of-band TCP socket, and from then on only reads its
 * CQ (manual progress: a target moves nothing unless its owner polls)
 * while it answers the client's requests on the socket: check the buffer
 * against a pattern, fill it with one, reset or read the counter, done.
 *
 * The client measures, for each size (8 B .. 16 MiB, capped by -m, or the
 * one size of -s), every op asked for with -o:
 *
 *   put_lat  fi_write of S bytes, wait for its completion, next one;
 *            usec is the average time per write.
 *   get_lat  the same with fi_read.
 *   put_bw   windows of W (-w, default 64) fi_write posted back to back,
 *            then wait for all W completions; MBps is 1e6 bytes/s.
 *   get_bw   the same with fi_read.
 * and once, at 8 bytes:
 *   fadd     windows of W fi_fetch_atomic(FI_SUM, FI_UINT64) adding 1 to
 *            the target's counter; ops_per_sec.
 *
 * Every window targets offset 0 of the server's buffer and uses one local
 * buffer, as osu_put_bw does.  Puts complete at the provider's default
 * completion level, or with -D as fi_writemsg(FI_DELIVERY_COMPLETE), i.e.
 * once the data is placed in the target's memory (what MPI_Win_flush needs;
 * a provider may otherwise complete a put as soon as its source buffer is
 * free, which makes put_lat a local figure).  Each line says which.
 *
 * Data is checked, not assumed, outside the timing: before a size is
 * measured, the client writes a pattern with FI_DELIVERY_COMPLETE and the
 * server checks every byte; then the server fills its buffer with another
 * pattern and the client reads it into a poisoned buffer and checks it.
 * After fadd, the server's counter must equal the number of adds issued
 * and the values they fetched must add up to 0 + 1 + ... + (n - 1).  A
 * mismatch exits with status 2.
 *
 * Iterations are not fixed: for each point a warm-up phase grows (x4)
 * until it lasts 10 ms over at least 4 iterations (or 50 ms over fewer:
 * one window of 64 x 16 MiB is already longer), and the measured phase is sized from it to last
 * about -t seconds (default 0.1), so 8 B and 16 MiB points are equally
 * short.  One line per point on stdout:
 *
 *   rma prov=opx op=put_bw size=65536 window=64 compl=default iters=60 usec=4.210 MBps=15567.2 ops_per_sec=237529
 *
 * usec is the time per operation (for windows: per operation of the
 * stream), MBps payload bytes per second / 1e6, ops_per_sec operations
 * per second.  -FI_EAGAIN from a post is answered by reading the CQ and
 * posting again.
 *
 *   server:  opx_rma -p opx [-P PORT]
 *   client:  opx_rma -p opx [-P PORT] [-m MAX] [-s SIZE] [-o OPS] 127.0.0.1
 *
 * The provider is -p, else FI_PROVIDER, else opx.  This is a test program, not library code: it exits on
 * any error, naming the op and size it was at, and a SIGALRM deadline (-T)
 * bounds every run, so a broken provider cannot hang a benchmark script.
 */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "bench_common.h"

#define RMA_MAX_SIZE (256UL << 20)
#define RMA_DEF_MAX (16UL << 20)
#define RMA_MAX_WINDOW 1024u
#define RMA_MAX_ITERS 10000000u
#define RMA_CAL_MIN_S 0.01 /* a warm-up shorter than this is not timed */
#define RMA_CQ_BATCH 64
#define RMA_CTR_SLOT 64    /* bytes after the data area: the fadd counter */
#define RMA_KEY 0x0a5eedULL /* requested key, for providers without PROV_KEY */
#define RMA_POISON 0xa5

/* Sizes measured by default (bytes); -m caps them, -s replaces them. */
static const size_t rma_sizes[] = {
	8, 64, 512, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
};

enum rma_op { OP_PUT_LAT, OP_GET_LAT, OP_PUT_BW, OP_GET_BW, OP_FADD, OP_COUNT };

static const char *const rma_op_names[] = { "put_lat", "get_lat", "put_bw", "get_bw", "fadd" };

/* Requests on the socket, client -> server; each gets one 64-bit answer. */
enum rma_cmd { CMD_CHECK = 1, CMD_FILL, CMD_CTR_RESET, CMD_CTR_READ, CMD_DONE };

struct rma_req {
	uint32_t cmd;
	uint32_t pad;
	uint64_t size;
	uint64_t seed;
};

struct rma_opts {
	const char *prov;
	const char *server; /* NULL: act as server */
	uint16_t port;
	size_t max_size;
	size_t one_size;    /* 0: the table of sizes */
	unsigned int ops;   /* bit per enum rma_op */
	uint32_t window;
	int delivery;       /* -D: puts with FI_DELIVERY_COMPLETE */
	double target_s;
	unsigned int timeout_s;
	int verbose;
};

struct rma_state {
	struct bench_fabric fab;
	int client;
	size_t max_size;    /* largest size measured */
	size_t data_len;    /* max_size rounded up to RMA_CTR_SLOT */
	uint8_t *buf;       /* server: data area + counter;
			       client: data area + fadd results + operand */
	size_t buf_len;
	struct fid_mr *target_mr; /* server */

	/* client */
	uint64_t raddr;     /* server's data area, as the provider addresses it */
	uint64_t rkey;
	uint64_t *fadd_res; /* one result slot per window entry */
	uint64_t *fadd_one; /* operand: 1 */
	struct fi_context2 *ctx; /* one per window entry */
	uint64_t posted;
	uint64_t done;
	uint64_t fadd_sum;  /* of the values fetch-add returned */
	char where[96];     /* message prefix: "opx_rma: put_bw 65536" */
};

/* ---- setup ----------------------------------------------------------- */

static void rma_getinfo(struct rma_state *st, const struct rma_opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		bench_die("fi_allocinfo", -FI_ENOMEM);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(o->prov);
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &st->fab.info);
	if (ret == -FI_ENODATA) {
		/* Only a provider that insists gets local descriptors. */
		hints->domain_attr->mr_mode |= FI_MR_LOCAL;
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &st->fab.info);
	}
	fi_freeinfo(hints);
	if (ret)
		bench_die("fi_getinfo", ret);
	if (st->fab.info->domain_attr->mr_key_size > sizeof(uint64_t))
		bench_fail("%s uses raw keys (%zu bytes), not supported here", o->prov,
			   st->fab.info->domain_attr->mr_key_size);
	if (o->verbose)
		fprintf(stderr, "opx_rma: provider %s domain %s mr_mode 0x%x inject_size %zu\n",
			st->fab.info->fabric_attr->prov_name, st->fab.info->domain_attr->name,
			(unsigned)st->fab.info->domain_attr->mr_mode,
			st->fab.info->tx_attr->inject_size);
}

/*
 * One buffer per side, so that a provider that wants local descriptors
 * needs one registration.  Both sides compute data_len the same way: the
 * client finds the server's counter at raddr + data_len.
 */
static void rma_buffers_alloc(struct rma_state *st)
{
	size_t extra = st->client ? (RMA_MAX_WINDOW + 1) * sizeof(uint64_t) : RMA_CTR_SLOT;

	st->data_len = (st->max_size + RMA_CTR_SLOT - 1) / RMA_CTR_SLOT * RMA_CTR_SLOT;
	st->buf_len = (st->data_len + extra + 4095) & ~(size_t)4095;
	st->buf = aligned_alloc(4096, st->buf_len);
	st->ctx = calloc(RMA_MAX_WINDOW, sizeof(*st->ctx));
	if (!st->buf || !st->ctx)
		bench_die("out of memory", -FI_ENOMEM);
	/* Touch every page now so first-touch faults stay out of the timing. */
	memset(st->buf, 0, st->buf_len);
	if (st->client) {
		st->fadd_res = (uint64_t *)(st->buf + st->data_len);
		st->fadd_one = st->fadd_res + RMA_MAX_WINDOW;
		*st->fadd_one = 1;
	}
}

/* Server: the fetch-add target. */
static uint64_t *rma_counter(struct rma_state *st)
{
	return (uint64_t *)(st->buf + st->data_len);
}

static void rma_fabric_open(struct rma_state *st)
{
	struct bench_fabric *fab = &st->fab;
	uint64_t access = st->client ? FI_READ | FI_WRITE : FI_REMOTE_READ | FI_REMOTE_WRITE;
	struct fid_mr *mr;
	int ret;

	bench_fabric_open(fab, FI_CQ_FORMAT_CONTEXT, 4 * RMA_MAX_WINDOW);
	if (!st->client || (fab->info->domain_attr->mr_mode & FI_MR_LOCAL)) {
		ret = fi_mr_reg(fab->domain, st->buf, st->buf_len, access, 0, RMA_KEY, 0, &mr, NULL);
		if (ret)
			bench_die("fi_mr_reg", ret);
		if (st->client) {
			/* bench_fabric_close() closes it. */
			fab->mr = mr;
			fab->desc = fi_mr_desc(mr);
		} else {
			st->target_mr = mr;
		}
	}
}

/*
 * The client tells the server the largest size (so it can size its
 * buffer); the server answers with the buffer's address and key.  The
 * socket is loopback only (bench_sock_server), so both ends share one
 * byte order and 64-bit values travel as they are.
 */
static void rma_settings_exchange(struct rma_state *st)
{
	uint64_t v;

	if (st->client) {
		v = st->max_size;
		bench_sock_write(st->fab.sock, &v, sizeof(v));
		return;
	}
	bench_sock_read(st->fab.sock, &v, sizeof(v));
	if (!v || v > RMA_MAX_SIZE)
		bench_fail("bad size %llu from client", (unsigned long long)v);
	st->max_size = v;
}

static void rma_target_exchange(struct rma_state *st)
{
	uint64_t v[2];

	if (st->client) {
		bench_sock_read(st->fab.sock, v, sizeof(v));
		st->raddr = v[0];
		st->rkey = v[1];
		return;
	}
	v[0] = (st->fab.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)st->buf : 0;
	v[1] = fi_mr_key(st->target_mr);
	if (v[1] == FI_KEY_NOTAVAIL)
		bench_fail("fi_mr_key: no key");
	bench_sock_write(st->fab.sock, v, sizeof(v));
}

/* ---- data pattern ------------------------------------------------------ */

/* Byte k of a pattern is a function of (seed, k); filled 8 bytes a step. */
static uint64_t rma_word(uint64_t seed, uint64_t k)
{
	uint64_t x = (seed ^ 0x2545f4914f6cdd1dULL) + k * 0xd1342543de82ef95ULL;

	x = (x ^ (x >> 32)) * 0xda942042e4dd58b5ULL;
	return x ^ (x >> 29);
}

static void rma_fill(uint8_t *p, size_t len, uint64_t seed)
{
	size_t k;

	for (k = 0; k < len; k += 8) {
		uint64_t w = rma_word(seed, k / 8);

		memcpy(p + k, &w, len - k < 8 ? len - k : 8);
	}
}

/* Offset of the first byte that differs from the pattern, or len. */
static size_t rma_check(const uint8_t *p, size_t len, uint64_t seed)
{
	size_t k, j;

	for (k = 0; k < len; k += 8) {
		uint64_t w = rma_word(seed, k / 8);
		size_t n = len - k < 8 ? len - k : 8;

		if (memcmp(p + k, &w, n))
			for (j = 0; j < n; j++)
				if (p[k + j] != ((const uint8_t *)&w)[j])
					return k + j;
	}
	return len;
}

/* ---- server ------------------------------------------------------------ */

static void rma_serve(struct rma_state *st)
{
	struct fi_cq_entry ent[RMA_CQ_BATCH];
	struct pollfd pfd = { .fd = st->fab.sock, .events = POLLIN };
	uint64_t *ctr = rma_counter(st);
	unsigned int spins = 0;

	for (;;) {
		struct rma_req rq;
		uint64_t answer = 0;
		ssize_t n = fi_cq_read(st->fab.cq, ent, RMA_CQ_BATCH);

		/* A target gets no completions unless it asked for events. */
		if (n < 0 && n != -FI_EAGAIN)
			bench_cq_fail(st->fab.cq, n);
		/* A syscall per poll would slow the target down: look rarely. */
		if (++spins & 0xff)
			continue;
		if (poll(&pfd, 1, 0) <= 0)
			continue;
		bench_sock_read(st->fab.sock, &rq, sizeof(rq));
		if ((rq.cmd == CMD_CHECK || rq.cmd == CMD_FILL) && rq.size > st->max_size)
			bench_fail("request for %llu bytes, buffer has %zu",
				   (unsigned long long)rq.size, st->max_size);
		switch (rq.cmd) {
		case CMD_CHECK:
			answer = rma_check(st->buf, rq.size, rq.seed);
			break;
		case CMD_FILL:
			rma_fill(st->buf, rq.size, rq.seed);
			break;
		case CMD_CTR_RESET:
			__atomic_store_n(ctr, 0, __ATOMIC_SEQ_CST);
			break;
		case CMD_CTR_READ:
			answer = __atomic_load_n(ctr, __ATOMIC_SEQ_CST);
			break;
		case CMD_DONE:
			break;
		default:
			bench_fail("bad request %u from client", rq.cmd);
		}
		bench_sock_write(st->fab.sock, &answer, sizeof(answer));
		if (rq.cmd == CMD_DONE)
			return;
	}
}

/* ---- client: data path ---------------------------------------------- */

static void rma_progress(struct rma_state *st)
{
	struct fi_cq_entry ent[RMA_CQ_BATCH];
	ssize_t n, i;

	n = fi_cq_read(st->fab.cq, ent, RMA_CQ_BATCH);
	if (n == -FI_EAGAIN)
		return;
	if (n < 0)
		bench_cq_fail(st->fab.cq, n);
	for (i = 0; i < n; i++) {
		struct fi_context2 *c = ent[i].op_context;

		if (c < st->ctx || c >= st->ctx + RMA_MAX_WINDOW)
			bench_fail("completion with unknown context %p", (void *)c);
		/* fadd's result lands in the slot of its context. */
		st->fadd_sum += st->fadd_res[c - st->ctx];
		st->done++;
	}
}

static void rma_wait_all(struct rma_state *st)
{
	while (st->done < st->posted)
		rma_progress(st);
}

/* Post one operation (slot i of the window), progressing on -FI_EAGAIN. */
static void rma_post(struct rma_state *st, enum rma_op op, size_t size, uint32_t i, int delivery)
{
	struct bench_fabric *fab = &st->fab;
	struct fi_context2 *ctx = &st->ctx[i];
	const char *what = "fi_write";
	ssize_t ret;

	for (;;) {
		switch (op) {
		case OP_PUT_LAT:
		case OP_PUT_BW:
			if (delivery) {
				struct iovec iov = { .iov_base = st->buf, .iov_len = size };
				struct fi_rma_iov rma = { .addr = st->raddr, .len = size,
							  .key = st->rkey };
				struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &fab->desc,
							  .iov_count = 1, .addr = fab->peer,
							  .rma_iov = &rma, .rma_iov_count = 1,
							  .context = ctx };

				what = "fi_writemsg";
				ret = fi_writemsg(fab->ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
			} else {
				ret = fi_write(fab->ep, st->buf, size, fab->desc, fab->peer, st->raddr,
					       st->rkey, ctx);
			}
			break;
		case OP_GET_LAT:
		case OP_GET_BW:
			what = "fi_read";
			ret = fi_read(fab->ep, st->buf, size, fab->desc, fab->peer, st->raddr, st->rkey,
				      ctx);
			break;
		default:
			what = "fi_fetch_atomic";
			ret = fi_fetch_atomic(fab->ep, st->fadd_one, 1, fab->desc, &st->fadd_res[i],
					      fab->desc, fab->peer, st->raddr + st->data_len, st->rkey,
					      FI_UINT64, FI_SUM, ctx);
			break;
		}
		if (!ret) {
			st->posted++;
			return;
		}
		if (ret != -FI_EAGAIN)
			bench_die(what, (int)ret);
		rma_progress(st);
	}
}

/* Run iters iterations of op (a window each, or one op for latency). */
static void rma_phase(struct rma_state *st, enum rma_op op, size_t size, uint32_t window,
		      uint32_t iters, int delivery)
{
	uint32_t it, i;

	for (it = 0; it < iters; it++) {
		for (i = 0; i < window; i++)
			rma_post(st, op, size, i, delivery);
		rma_wait_all(st);
	}
}

/* One request to the server; its CQ keeps moving while we wait. */
static uint64_t rma_request(struct rma_state *st, uint32_t cmd, uint64_t size, uint64_t seed)
{
	struct rma_req rq = { .cmd = cmd, .size = size, .seed = seed };
	struct pollfd pfd = { .fd = st->fab.sock, .events = POLLIN };
	uint64_t answer;

	bench_sock_write(st->fab.sock, &rq, sizeof(rq));
	while (poll(&pfd, 1, 0) == 0)
		rma_progress(st);
	bench_sock_read(st->fab.sock, &answer, sizeof(answer));
	return answer;
}

/* ---- client: checks and measurements ---------------------------------- */

static void rma_set_where(struct rma_state *st, const char *what, size_t size)
{
	snprintf(st->where, sizeof(st->where), "opx_rma: %s %zu", what, size);
}

/*
 * A put with FI_DELIVERY_COMPLETE, then the server checks its memory; the
 * server fills its memory, then a get into a poisoned buffer is checked.
 */
static void rma_check_size(struct rma_state *st, size_t size)
{
	uint64_t seed = 0x100000000ULL | size, bad;

	rma_set_where(st, "put check", size);
	rma_fill(st->buf, size, seed);
	rma_post(st, OP_PUT_LAT, size, 0, 1);
	rma_wait_all(st);
	bad = rma_request(st, CMD_CHECK, size, seed);
	if (bad != size) {
		fprintf(stderr, "%s: put data mismatch at byte %llu of %zu\n", st->where,
			(unsigned long long)bad, size);
		exit(2);
	}

	rma_set_where(st, "get check", size);
	rma_request(st, CMD_FILL, size, seed + 1);
	memset(st->buf, RMA_POISON, size);
	rma_post(st, OP_GET_LAT, size, 0, 0);
	rma_wait_all(st);
	bad = rma_check(st->buf, size, seed + 1);
	if (bad != size) {
		fprintf(stderr, "%s: get data mismatch at byte %zu of %zu\n", st->where, (size_t)bad,
			size);
		exit(2);
	}
}

/* Checks the counter after n fetch-adds of 1 that started from 0. */
static void rma_check_fadd(struct rma_state *st, uint64_t n)
{
	uint64_t ctr = rma_request(st, CMD_CTR_READ, 0, 0);

	if (ctr != n) {
		fprintf(stderr, "%s: counter is %llu after %llu adds\n", st->where,
			(unsigned long long)ctr, (unsigned long long)n);
		exit(2);
	}
	if (st->fadd_sum != n * (n - 1) / 2) {
		fprintf(stderr, "%s: fetched values add up to %llu, expected %llu\n", st->where,
			(unsigned long long)st->fadd_sum, (unsigned long long)(n * (n - 1) / 2));
		exit(2);
	}
}

static void rma_measure(struct rma_state *st, const struct rma_opts *o, enum rma_op op,
			size_t size)
{
	uint32_t window = op == OP_PUT_LAT || op == OP_GET_LAT ? 1 : o->window;
	int delivery = (op == OP_PUT_LAT || op == OP_PUT_BW) && o->delivery;
	uint32_t n = 1, iters;
	double t0, dt, per, x, ops;

	rma_set_where(st, rma_op_names[op], size);
	if (op == OP_FADD) {
		st->fadd_sum = 0;
		rma_request(st, CMD_CTR_RESET, 0, 0);
	}
	st->posted = st->done = 0;
	/* Warm-up, growing until it is long enough to time. */
	for (;;) {
		t0 = bench_now();
		rma_phase(st, op, size, window, n, delivery);
		dt = bench_now() - t0;
		if ((dt >= RMA_CAL_MIN_S && (n >= 4 || dt >= 5 * RMA_CAL_MIN_S)) ||
		    n >= RMA_MAX_ITERS / 4)
			break;
		n *= 4;
	}
	per = dt / n;
	x = per > 0 ? o->target_s / per : RMA_MAX_ITERS;
	iters = x < 1 ? 1 : x > RMA_MAX_ITERS ? RMA_MAX_ITERS : (uint32_t)(x + 0.5);

	t0 = bench_now();
	rma_phase(st, op, size, window, iters, delivery);
	dt = bench_now() - t0;

	if (op == OP_FADD)
		rma_check_fadd(st, st->done);
	ops = (double)iters * window;
	printf("rma prov=%s op=%s size=%zu window=%u compl=%s iters=%u usec=%.3f MBps=%.1f "
	       "ops_per_sec=%.0f\n",
	       o->prov, rma_op_names[op], size, window, delivery ? "delivery" : "default", iters,
	       dt * 1e6 / ops, ops * (double)size / dt / 1e6, ops / dt);
	fflush(stdout);
}

static void rma_client_run(struct rma_state *st, const struct rma_opts *o)
{
	size_t k, nsizes = sizeof(rma_sizes) / sizeof(rma_sizes[0]);
	const size_t *sizes = rma_sizes;
	int op;

	if (o->one_size) {
		sizes = &o->one_size;
		nsizes = 1;
	}
	for (k = 0; k < nsizes && sizes[k] <= st->max_size; k++) {
		if (!(o->ops & ((1u << OP_FADD) - 1)))
			break;
		rma_check_size(st, sizes[k]);
		for (op = 0; op < OP_FADD; op++)
			if (o->ops & (1u << op))
				rma_measure(st, o, (enum rma_op)op, sizes[k]);
	}
	if (o->ops & (1u << OP_FADD))
		rma_measure(st, o, OP_FADD, sizeof(uint64_t));
	rma_set_where(st, "done", 0);
	rma_request(st, CMD_DONE, 0, 0);
}

/* ---- main -------------------------------------------------------------- */

static unsigned int rma_parse_ops(const char *s)
{
	unsigned int ops = 0;
	char *copy = strdup(s), *tok, *save = NULL;
	int op;

	if (!copy)
		bench_die("out of memory", -FI_ENOMEM);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			ops |= (1u << OP_COUNT) - 1;
			continue;
		}
		for (op = 0; op < OP_COUNT; op++)
			if (!strcmp(tok, rma_op_names[op]))
				break;
		if (op == OP_COUNT)
			bench_fail("bad op '%s' (put_lat, get_lat, put_bw, get_bw, fadd, all)", tok);
		ops |= 1u << op;
	}
	free(copy);
	if (!ops)
		bench_fail("no op in '%s'", s);
	return ops;
}

static void rma_usage(const char *argv0)
{
	bench_usage(argv0, 47993,
		    "            (-p: without it, $FI_PROVIDER if set, else opx)\n"
		    "  -m MAX    largest size measured (default %lu, max %lu)\n"
		    "  -s SIZE   measure this size only\n"
		    "  -o OPS    comma list of put_lat,get_lat,put_bw,get_bw,fadd (default all)\n"
		    "  -w W      operations per window for put_bw/get_bw/fadd (default 64)\n"
		    "  -D        puts with FI_DELIVERY_COMPLETE (default: provider's default)\n"
		    "  -t SECS   target duration of each measured phase (default 0.1)\n",
		    RMA_DEF_MAX, RMA_MAX_SIZE);
}

int main(int argc, char **argv)
{
	struct rma_opts o = {
		.prov = getenv("FI_PROVIDER") ? getenv("FI_PROVIDER") : "opx", .port = 47993, .max_size = RMA_DEF_MAX,
		.ops = (1u << OP_COUNT) - 1, .window = 64, .target_s = 0.1, .timeout_s = 60,
	};
	struct rma_state st;
	char *end;
	int c;

	bench_init("opx_rma");
	while ((c = getopt(argc, argv, "p:P:m:s:o:w:Dt:T:vh")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'P': o.port = (uint16_t)bench_parse_ul(optarg, "port", 1, 65535); break;
		case 'm': o.max_size = bench_parse_ul(optarg, "max size", 8, RMA_MAX_SIZE); break;
		case 's': o.one_size = bench_parse_ul(optarg, "size", 1, RMA_MAX_SIZE); break;
		case 'o': o.ops = rma_parse_ops(optarg); break;
		case 'w': o.window = (uint32_t)bench_parse_ul(optarg, "window", 1, RMA_MAX_WINDOW); break;
		case 'D': o.delivery = 1; break;
		case 't':
			o.target_s = strtod(optarg, &end);
			if (*end || !(o.target_s > 0 && o.target_s <= 10))
				bench_fail("bad target '%s' (0..10 s)", optarg);
			break;
		case 'T': o.timeout_s = (unsigned)bench_parse_ul(optarg, "timeout", 1, 86400); break;
		case 'v': o.verbose = 1; break;
		default: rma_usage(argv[0]); return c == 'h' ? 0 : 1;
		}
	}
	if (optind < argc)
		o.server = argv[optind];

	bench_alarm_arm(o.timeout_s);
	/* A peer that died should give a message and status 1, not SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);

	memset(&st, 0, sizeof(st));
	st.client = o.server != NULL;
	st.max_size = o.one_size ? o.one_size : o.max_size;
	st.fab.sock = o.server ? bench_sock_client(o.server, o.port) : bench_sock_server(o.port);
	rma_settings_exchange(&st);
	rma_buffers_alloc(&st);
	rma_getinfo(&st, &o);
	rma_fabric_open(&st);
	bench_addr_exchange(&st.fab);
	rma_target_exchange(&st);
	/* From here on every message names the op and size being run. */
	if (st.client) {
		rma_set_where(&st, "setup", 0);
		bench_init(st.where);
		rma_client_run(&st, &o);
	} else {
		rma_serve(&st);
	}

	if (st.target_mr)
		fi_close(&st.target_mr->fid);
	bench_fabric_close(&st.fab);
	close(st.fab.sock);
	free(st.buf);
	free(st.ctx);
	return 0;
}
