/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_msgrate.c - small-message rate benchmark for any libfabric provider.
 *
 * Two processes, RDM endpoints, FI_TAGGED.  The client streams windows of
 * W non-blocking sends of S bytes; the server has all W receives of a
 * window pre-posted and answers each completed window with one small ack,
 * like osu_mbw_mr.  The ack is what makes the figure a *delivered* rate:
 * without it the client would only measure how fast it can queue.
 *
 *   server:  opx_msgrate -p opx [options]
 *   client:  opx_msgrate -p opx [options] 127.0.0.1
 *
 * Addresses are exchanged out of band over a TCP socket so the benchmark
 * does not depend on any provider feature beyond tagged send/receive.  The
 * client's size/window/iteration settings win, so the server can be
 * started with defaults.  The client prints one machine-parsable line:
 *
 *   msgrate prov=opx size=8 window=64 iters=1000 msgs_per_sec=... MBps=...
 *
 * This is a test program, not library code: it exits on fatal errors and
 * a SIGALRM deadline bounds every run, so a broken provider cannot hang a
 * benchmark script.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bench_common.h"

#define MR_DATA_TAG 0x1ULL
#define MR_ACK_TAG 0x2ULL
#define MR_ACK_SIZE 4
#define MR_CQ_BATCH 64

struct mr_opts {
	const char *prov;
	const char *server; /* NULL: act as server */
	uint16_t port;
	uint32_t size;
	uint32_t window;
	uint32_t iters;
	uint32_t warmup;
	unsigned int timeout_s;
	int verbose;
};

struct mr_state {
	struct bench_fabric fab;

	uint8_t *buf;            /* window * size data slots, then the ack slot */
	uint8_t *ack_buf;
	struct fi_context2 *ctx; /* window data contexts, then one for the ack */
	struct fi_context2 *ack_ctx;
	size_t data_done;        /* data completions (send or recv) seen */
	size_t ack_done;         /* ack completions seen */
};

/* ---- fabric setup ---------------------------------------------------- */

static void mr_fabric_open(struct mr_state *st, const struct mr_opts *o)
{
	struct bench_fabric *fab = &st->fab;
	size_t len;

	bench_fabric_getinfo(fab, o->prov);
	if (o->verbose)
		fprintf(stderr, "opx_msgrate: provider %s domain %s inject_size %zu\n",
			fab->info->fabric_attr->prov_name, fab->info->domain_attr->name,
			fab->info->tx_attr->inject_size);
	bench_fabric_open(fab, FI_CQ_FORMAT_CONTEXT, 4 * (size_t)o->window + 64);

	len = (size_t)o->window * o->size + MR_ACK_SIZE;
	st->buf = aligned_alloc(64, (len + 63) & ~(size_t)63);
	st->ctx = calloc((size_t)o->window + 1, sizeof(*st->ctx));
	if (!st->buf || !st->ctx)
		bench_die("out of memory", -FI_ENOMEM);
	memset(st->buf, 0xa5, len);
	st->ack_buf = st->buf + (size_t)o->window * o->size;
	st->ack_ctx = &st->ctx[o->window];
	bench_fabric_mr_reg(fab, st->buf, len);
}

static void mr_fabric_close(struct mr_state *st)
{
	bench_fabric_close(&st->fab);
	free(st->buf);
	free(st->ctx);
}

/* ---- data path ------------------------------------------------------- */

/* Drain the CQ once; completions are told apart by their context. */
static void mr_progress(struct mr_state *st)
{
	struct fi_cq_entry ent[MR_CQ_BATCH];
	ssize_t n, i;

	n = fi_cq_read(st->fab.cq, ent, MR_CQ_BATCH);
	if (n == -FI_EAGAIN)
		return;
	if (n < 0)
		bench_cq_fail(st->fab.cq, n);
	for (i = 0; i < n; i++) {
		if (ent[i].op_context == st->ack_ctx)
			st->ack_done++;
		else
			st->data_done++;
	}
}

static void mr_post_recv(struct mr_state *st, void *buf, size_t len, uint64_t tag, void *ctx)
{
	for (;;) {
		ssize_t ret = fi_trecv(st->fab.ep, buf, len, st->fab.desc, st->fab.peer, tag, 0,
				       ctx);

		if (!ret)
			return;
		if (ret != -FI_EAGAIN)
			bench_die("fi_trecv", (int)ret);
		mr_progress(st);
	}
}

/* Returns 1 when the send will produce a completion, 0 for an inject. */
static int mr_post_send(struct mr_state *st, void *buf, size_t len, uint64_t tag, void *ctx)
{
	struct bench_fabric *fab = &st->fab;
	int inject = len <= fab->info->tx_attr->inject_size;

	for (;;) {
		ssize_t ret = inject ? fi_tinject(fab->ep, buf, len, fab->peer, tag)
				     : fi_tsend(fab->ep, buf, len, fab->desc, fab->peer, tag, ctx);

		if (!ret)
			return !inject;
		if (ret != -FI_EAGAIN)
			bench_die(inject ? "fi_tinject" : "fi_tsend", (int)ret);
		mr_progress(st);
	}
}

static void mr_post_window_recvs(struct mr_state *st, const struct mr_opts *o)
{
	uint32_t i;

	for (i = 0; i < o->window; i++)
		mr_post_recv(st, st->buf + (size_t)i * o->size, o->size, MR_DATA_TAG, &st->ctx[i]);
}

static void mr_progress_cb(void *arg)
{
	mr_progress(arg);
}

/* One byte each way over the socket, progressing the endpoint meanwhile. */
static void mr_barrier(struct mr_state *st)
{
	uint8_t b = 0;

	bench_sock_sync(st->fab.sock, &b, 1, mr_progress_cb, st);
}

static void mr_run_server(struct mr_state *st, const struct mr_opts *o)
{
	uint32_t total = o->warmup + o->iters, w;
	size_t want = 0;
	int acks = 0;

	/* First window's receives are posted before the client may send. */
	mr_post_window_recvs(st, o);
	mr_barrier(st);
	for (w = 0; w < total; w++) {
		want += o->window;
		while (st->data_done < want)
			mr_progress(st);
		/* Post the next window before acking, so it lands on posted receives. */
		if (w + 1 < total)
			mr_post_window_recvs(st, o);
		acks += mr_post_send(st, st->ack_buf, MR_ACK_SIZE, MR_ACK_TAG, st->ack_ctx);
	}
	while (st->ack_done < (size_t)acks)
		mr_progress(st);
	mr_barrier(st);
}

static void mr_run_client(struct mr_state *st, const struct mr_opts *o)
{
	uint32_t total = o->warmup + o->iters, w, i;
	size_t want_sends = 0, want_acks = 0;
	double t0 = 0.0, dt, rate;

	mr_barrier(st);
	for (w = 0; w < total; w++) {
		if (w == o->warmup)
			t0 = bench_now();
		mr_post_recv(st, st->ack_buf, MR_ACK_SIZE, MR_ACK_TAG, st->ack_ctx);
		want_acks++;
		for (i = 0; i < o->window; i++)
			want_sends += (size_t)mr_post_send(st, st->buf + (size_t)i * o->size, o->size,
							   MR_DATA_TAG, &st->ctx[i]);
		while (st->data_done < want_sends || st->ack_done < want_acks)
			mr_progress(st);
	}
	dt = bench_now() - t0;
	mr_barrier(st);

	rate = (double)o->iters * o->window / dt;
	printf("msgrate prov=%s size=%u window=%u iters=%u msgs_per_sec=%.0f MBps=%.2f\n",
	       o->prov, o->size, o->window, o->iters, rate, rate * o->size / 1e6);
	fflush(stdout);
}

/* ---- main -------------------------------------------------------------- */

/* Settings travel client -> server before anything is sized. */
static void mr_settings_exchange(int sock, struct mr_opts *o)
{
	uint32_t cfg[4] = { htonl(o->size), htonl(o->window), htonl(o->iters), htonl(o->warmup) };

	if (o->server) {
		bench_sock_write(sock, cfg, sizeof(cfg));
		return;
	}
	bench_sock_read(sock, cfg, sizeof(cfg));
	o->size = ntohl(cfg[0]);
	o->window = ntohl(cfg[1]);
	o->iters = ntohl(cfg[2]);
	o->warmup = ntohl(cfg[3]);
	if (!o->size || o->size > (1u << 24) || !o->window || o->window > 4096 || !o->iters)
		bench_fail("bad settings from client");
}

static void mr_usage(const char *argv0)
{
	bench_usage(argv0, 47990,
		    "  -S SIZE   message size in bytes (default 8)\n"
		    "  -w W      messages per window (default 64)\n"
		    "  -n N      measured windows (default 1000)\n"
		    "  -W N      warm-up windows (default 100)\n");
}

int main(int argc, char **argv)
{
	struct mr_opts o = {
		.prov = "opx", .port = 47990, .size = 8, .window = 64,
		.iters = 1000, .warmup = 100, .timeout_s = 60,
	};
	struct mr_state st;
	int c;

	bench_init("opx_msgrate");
	while ((c = getopt(argc, argv, "p:P:S:w:n:W:T:vh")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'P': o.port = (uint16_t)bench_parse_ul(optarg, "port", 1, 65535); break;
		case 'S': o.size = (uint32_t)bench_parse_ul(optarg, "size", 1, 1u << 24); break;
		case 'w': o.window = (uint32_t)bench_parse_ul(optarg, "window", 1, 4096); break;
		case 'n': o.iters = (uint32_t)bench_parse_ul(optarg, "iterations", 1, 100000000); break;
		case 'W': o.warmup = (uint32_t)bench_parse_ul(optarg, "warm-up", 0, 100000000); break;
		case 'T': o.timeout_s = (unsigned)bench_parse_ul(optarg, "timeout", 1, 86400); break;
		case 'v': o.verbose = 1; break;
		default: mr_usage(argv[0]); return c == 'h' ? 0 : 1;
		}
	}
	if (optind < argc)
		o.server = argv[optind];

	bench_alarm_arm(o.timeout_s);

	memset(&st, 0, sizeof(st));
	/* The socket comes first: the client's settings size the buffers. */
	st.fab.sock = o.server ? bench_sock_client(o.server, o.port) : bench_sock_server(o.port);
	mr_settings_exchange(st.fab.sock, &o);
	mr_fabric_open(&st, &o);
	bench_addr_exchange(&st.fab);

	if (o.server)
		mr_run_client(&st, &o);
	else
		mr_run_server(&st, &o);

	mr_fabric_close(&st);
	close(st.fab.sock);
	return 0;
}
