/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_bw.c - large-message bandwidth and latency for any libfabric provider.
 *
 * Two processes, RDM endpoints, FI_TAGGED, three modes modelled on the OSU
 * micro-benchmarks:
 *
 *   -m bw    the client streams windows of W non-blocking sends of S bytes;
 *            the server has the window's W receives pre-posted and answers
 *            each completed window with one small ack (osu_bw).
 *   -m bibw  both sides post W receives and W sends per window and wait for
 *            all 2W completions (osu_bibw); the figure is both directions
 *            added together.
 *   -m lat   ping-pong of one S-byte message; usec is half the round trip
 *            (osu_latency).
 *
 *   server:  opx_bw -p opx [options]
 *   client:  opx_bw -p opx [options] 127.0.0.1
 *
 * The client's mode/size/window settings win, so the server can be started
 * with defaults.  The client prints one machine-parsable line per run:
 *
 *   bw prov=opx mode=bw size=1048576 window=64 iters=40 MBps=12345.6 usec=85.12
 *
 * MBps is 1e6 bytes per second of payload delivered; usec is the time per
 * message (bw, bibw: per message of one direction's stream) or the one-way
 * latency (lat).
 *
 * Iterations (windows, or round trips for lat) are not fixed: unless -n is
 * given, the client times the warm-up and picks a count that makes the
 * measured phase last about -t seconds, then tells the server.  That keeps
 * 16 KiB and 16 MiB runs equally short without per-size tables.
 *
 * Data is verified on a first and a last iteration that bracket the timed
 * phase (they are not timed, so filling and checking buffers does not
 * distort the figure): the sender writes a pattern seeded differently for
 * each, the receiver poisons its buffers first and checks every byte after.
 * A mismatch makes both sides exit with status 2.
 *
 * Buffers are one slot per in-flight message, capped at 64 MiB per
 * direction (-B): for large S, several messages of a window share a slot
 * (as in osu_bw, where all of them share one, which -B 0 reproduces).
 * Distinct buffers keep a window from running entirely out of a warm
 * cache, which would flatter any copy-based transport.  When slots are
 * shared the pattern does not encode the message index, because which of
 * the writers lands last is undefined.
 *
 * This is a test program, not library code: it exits on fatal errors and
 * a SIGALRM deadline bounds every run, so a broken provider cannot hang a
 * benchmark script.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bench_common.h"

#define BW_DATA_TAG 0x1ULL
#define BW_ACK_TAG 0x2ULL
#define BW_ACK_SIZE 4
#define BW_CQ_BATCH 64
#define BW_SLOT_BYTES (64UL << 20) /* default buffer cap per direction */
#define BW_WARM_BYTES (32UL << 20) /* warm-up volume for auto iterations */
#define BW_MAX_SIZE (256UL << 20)
#define BW_MAX_ITERS 1000000u
#define BW_POISON 0x5a
#define BW_CAL_MIN_S 0.05 /* shortest warm-up phase worth timing */

enum bw_mode { BW_MODE_BW, BW_MODE_BIBW, BW_MODE_LAT };

static const char *const bw_mode_names[] = { "bw", "bibw", "lat" };

struct bw_opts {
	const char *prov;
	const char *server; /* NULL: act as server */
	uint16_t port;
	enum bw_mode mode;
	size_t size;
	uint32_t window;
	uint32_t iters;  /* 0: calibrate */
	uint32_t warmup; /* UINT32_MAX: from BW_WARM_BYTES */
	size_t slot_cap; /* bytes of distinct buffers per direction */
	double target_s;
	unsigned int timeout_s;
	int verbose;
};

struct bw_state {
	struct bench_fabric fab;
	int client;

	uint32_t window;   /* messages per iteration (1 for lat) */
	uint32_t slots;    /* distinct buffers per direction */
	uint8_t *mem;      /* tx slots, rx slots, ack tx, ack rx */
	size_t mem_len;
	uint8_t *tx;
	uint8_t *rx;
	uint8_t *ack_tx;
	uint8_t *ack_rx;

	/* Completions are told apart by which context array they point into. */
	struct fi_context2 *tx_ctx;
	struct fi_context2 *rx_ctx;
	struct fi_context2 ack_tx_ctx;
	struct fi_context2 ack_rx_ctx;
	size_t tx_done;
	size_t rx_done;
	size_t ack_tx_done;
	size_t ack_rx_done;
	size_t tx_posted;
	size_t rx_posted;
	size_t ack_tx_posted;
	size_t ack_rx_posted;
	uint32_t idle_polls;
};

/* ---- fabric setup ---------------------------------------------------- */

static void bw_buffers_alloc(struct bw_state *st, const struct bw_opts *o)
{
	size_t slot_bytes, align_len;
	uint64_t cap = o->slot_cap / o->size;

	st->window = o->mode == BW_MODE_LAT ? 1 : o->window;
	st->slots = cap < 1 ? 1 : cap < st->window ? (uint32_t)cap : st->window;
	slot_bytes = ((size_t)st->slots * o->size + 63) & ~(size_t)63;
	st->mem_len = 2 * slot_bytes + 128;
	align_len = (st->mem_len + 4095) & ~(size_t)4095;
	st->mem = aligned_alloc(4096, align_len);
	st->tx_ctx = calloc(st->window, sizeof(*st->tx_ctx));
	st->rx_ctx = calloc(st->window, sizeof(*st->rx_ctx));
	if (!st->mem || !st->tx_ctx || !st->rx_ctx)
		bench_die("out of memory", -FI_ENOMEM);
	/* Touch every page now so first-touch faults stay out of the timing. */
	memset(st->mem, 0, align_len);
	st->tx = st->mem;
	st->rx = st->mem + slot_bytes;
	st->ack_tx = st->mem + 2 * slot_bytes;
	st->ack_rx = st->ack_tx + 64;
}

static void bw_fabric_open(struct bw_state *st, const struct bw_opts *o)
{
	struct bench_fabric *fab = &st->fab;

	bench_fabric_getinfo(fab, o->prov);
	if (fab->info->ep_attr->max_msg_size < o->size)
		bench_fail("%s max_msg_size %zu < %zu", o->prov, fab->info->ep_attr->max_msg_size,
			   o->size);
	if (o->verbose)
		fprintf(stderr, "opx_bw: provider %s domain %s inject_size %zu mr_mode 0x%x\n",
			fab->info->fabric_attr->prov_name, fab->info->domain_attr->name,
			fab->info->tx_attr->inject_size, (unsigned)fab->info->domain_attr->mr_mode);
	bench_fabric_open(fab, FI_CQ_FORMAT_TAGGED, 4 * (size_t)st->window + 64);
	bench_fabric_mr_reg(fab, st->mem, st->mem_len);
}

static void bw_fabric_close(struct bw_state *st)
{
	bench_fabric_close(&st->fab);
	free(st->mem);
	free(st->tx_ctx);
	free(st->rx_ctx);
}

/* ---- data path ------------------------------------------------------- */

static void bw_check_peer(struct bw_state *st)
{
	struct pollfd pfd = { .fd = st->fab.sock, .events = POLLRDHUP };

	if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		bench_fail("peer went away");
}

static void bw_progress(struct bw_state *st, size_t size)
{
	struct fi_cq_tagged_entry ent[BW_CQ_BATCH];
	ssize_t n, i;

	n = fi_cq_read(st->fab.cq, ent, BW_CQ_BATCH);
	if (n == -FI_EAGAIN) {
		/*
		 * A peer that died leaves us polling forever; look at the
		 * socket now and then (rarely enough to cost nothing) so
		 * a failed run ends in a moment rather than at the alarm.
		 */
		if (!(++st->idle_polls & 0xffff))
			bw_check_peer(st);
		return;
	}
	if (n < 0)
		bench_cq_fail(st->fab.cq, n);
	for (i = 0; i < n; i++) {
		struct fi_context2 *c = ent[i].op_context;

		if (c == &st->ack_tx_ctx) {
			st->ack_tx_done++;
		} else if (c == &st->ack_rx_ctx) {
			st->ack_rx_done++;
		} else if (c >= st->rx_ctx && c < st->rx_ctx + st->window) {
			/* A short receive would make the figure a lie: fail loudly. */
			if (ent[i].len != size) {
				fprintf(stderr, "opx_bw: received %zu bytes, expected %zu\n",
					ent[i].len, size);
				exit(2);
			}
			st->rx_done++;
		} else if (c >= st->tx_ctx && c < st->tx_ctx + st->window) {
			st->tx_done++;
		} else {
			bench_fail("completion with unknown context %p", (void *)c);
		}
	}
}

static void bw_post_recv(struct bw_state *st, void *buf, size_t len, uint64_t tag, void *ctx,
			 size_t size)
{
	for (;;) {
		ssize_t ret = fi_trecv(st->fab.ep, buf, len, st->fab.desc, st->fab.peer, tag, 0,
				       ctx);

		if (!ret)
			return;
		if (ret != -FI_EAGAIN)
			bench_die("fi_trecv", (int)ret);
		bw_progress(st, size);
	}
}

/* Returns 1 when the send will produce a completion, 0 for an inject. */
static int bw_post_send(struct bw_state *st, void *buf, size_t len, uint64_t tag, void *ctx,
			size_t size)
{
	struct bench_fabric *fab = &st->fab;
	int inject = len <= fab->info->tx_attr->inject_size && tag == BW_ACK_TAG;

	for (;;) {
		ssize_t ret = inject ? fi_tinject(fab->ep, buf, len, fab->peer, tag)
				     : fi_tsend(fab->ep, buf, len, fab->desc, fab->peer, tag, ctx);

		if (!ret)
			return !inject;
		if (ret != -FI_EAGAIN)
			bench_die(inject ? "fi_tinject" : "fi_tsend", (int)ret);
		bw_progress(st, size);
	}
}

static uint8_t *bw_slot(uint8_t *base, const struct bw_state *st, uint32_t i, size_t size)
{
	return base + (size_t)(i % st->slots) * size;
}

static void bw_post_data_recvs(struct bw_state *st, size_t size)
{
	uint32_t i;

	for (i = 0; i < st->window; i++)
		bw_post_recv(st, bw_slot(st->rx, st, i, size), size, BW_DATA_TAG, &st->rx_ctx[i],
			     size);
	st->rx_posted += st->window;
}

static void bw_post_data_sends(struct bw_state *st, size_t size)
{
	uint32_t i;

	for (i = 0; i < st->window; i++)
		st->tx_posted += (size_t)bw_post_send(st, bw_slot(st->tx, st, i, size), size,
						      BW_DATA_TAG, &st->tx_ctx[i], size);
}

static void bw_post_ack_recv(struct bw_state *st, size_t size)
{
	bw_post_recv(st, st->ack_rx, BW_ACK_SIZE, BW_ACK_TAG, &st->ack_rx_ctx, size);
	st->ack_rx_posted++;
}

static void bw_post_ack_send(struct bw_state *st, size_t size)
{
	/* The ack's one context may not be reused while it is in flight. */
	while (st->ack_tx_done < st->ack_tx_posted)
		bw_progress(st, size);
	st->ack_tx_posted += (size_t)bw_post_send(st, st->ack_tx, BW_ACK_SIZE, BW_ACK_TAG,
						  &st->ack_tx_ctx, size);
}

/* Progress until everything posted so far has completed. */
static void bw_wait_all(struct bw_state *st, size_t size)
{
	while (st->tx_done < st->tx_posted || st->rx_done < st->rx_posted ||
	       st->ack_tx_done < st->ack_tx_posted || st->ack_rx_done < st->ack_rx_posted)
		bw_progress(st, size);
}

static void bw_wait_rx(struct bw_state *st, size_t size)
{
	while (st->rx_done < st->rx_posted)
		bw_progress(st, size);
}

static void bw_wait_tx(struct bw_state *st, size_t size)
{
	while (st->tx_done < st->tx_posted)
		bw_progress(st, size);
}

/* Argument of bw_progress_cb: bw_progress() needs the message size too. */
struct bw_progress_arg {
	struct bw_state *st;
	size_t size;
};

static void bw_progress_cb(void *arg)
{
	struct bw_progress_arg *a = arg;

	bw_progress(a->st, a->size);
}

/*
 * Exchange one 32-bit value with the peer over the socket while still
 * progressing the endpoint (see bench_sock_sync).  Both sides write first,
 * so the call is symmetric.
 */
static uint32_t bw_sync(struct bw_state *st, uint32_t mine, size_t size)
{
	struct bw_progress_arg a = { .st = st, .size = size };
	uint32_t v = htonl(mine);

	bench_sock_sync(st->fab.sock, &v, sizeof(v), bw_progress_cb, &a);
	return ntohl(v);
}

/* ---- data pattern ------------------------------------------------------ */

/*
 * Byte k of a message is a function of (seed, k); the seed mixes in the
 * message index only when every message has its own slot (see the top
 * comment).  64-bit words keep filling 64 MiB cheap.
 */
static uint64_t bw_word(uint64_t seed, size_t k)
{
	uint64_t x = seed + (uint64_t)k * 0x9e3779b97f4a7c15ULL;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

static uint64_t bw_msg_seed(const struct bw_state *st, uint32_t seed, uint32_t i)
{
	uint64_t s = (uint64_t)seed << 32;

	return st->slots == st->window ? s | i : s;
}

static void bw_fill(uint8_t *p, size_t size, uint64_t seed)
{
	size_t k;

	for (k = 0; k + 8 <= size; k += 8) {
		uint64_t w = bw_word(seed, k / 8);

		memcpy(p + k, &w, 8);
	}
	for (; k < size; k++)
		p[k] = (uint8_t)bw_word(seed, k / 8 + (k % 8) * 0x10000000ULL);
}

/* Returns the offset of the first bad byte, or size when all are right. */
static size_t bw_check(const uint8_t *p, size_t size, uint64_t seed)
{
	size_t k;

	for (k = 0; k + 8 <= size; k += 8) {
		uint64_t w = bw_word(seed, k / 8);

		if (memcmp(p + k, &w, 8)) {
			while (p[k] == ((const uint8_t *)&w)[k % 8])
				k++;
			return k;
		}
	}
	for (; k < size; k++)
		if (p[k] != (uint8_t)bw_word(seed, k / 8 + (k % 8) * 0x10000000ULL))
			return k;
	return size;
}

static void bw_fill_tx(struct bw_state *st, size_t size, uint32_t seed)
{
	uint32_t i, n = st->slots < st->window ? st->slots : st->window;

	for (i = 0; i < n; i++)
		bw_fill(bw_slot(st->tx, st, i, size), size, bw_msg_seed(st, seed, i));
}

static void bw_poison_rx(struct bw_state *st, size_t size)
{
	memset(st->rx, BW_POISON, (size_t)st->slots * size);
}

/* Returns 0 when every received slot holds the expected pattern. */
static uint32_t bw_check_rx(struct bw_state *st, size_t size, uint32_t seed)
{
	uint32_t i, n = st->slots < st->window ? st->slots : st->window;

	for (i = 0; i < n; i++) {
		size_t bad = bw_check(bw_slot(st->rx, st, i, size), size, bw_msg_seed(st, seed, i));

		if (bad != size) {
			fprintf(stderr, "opx_bw: data mismatch in message %u at byte %zu of %zu\n",
				i, bad, size);
			return 1;
		}
	}
	return 0;
}

/* ---- modes ------------------------------------------------------------- */

/*
 * Runs `iters` iterations of the mode.  The receive side of the first
 * iteration was posted by bw_phase_prepare() before the sync that starts
 * the phase, so the first data always lands on posted receives; inside the
 * phase the receiver re-posts before it acks, for the same reason.
 */
static void bw_phase_run(struct bw_state *st, const struct bw_opts *o, uint32_t iters)
{
	size_t s = o->size;
	uint32_t it;

	for (it = 0; it < iters; it++) {
		int last = it + 1 == iters;

		switch (o->mode) {
		case BW_MODE_BW:
			if (st->client) {
				bw_post_ack_recv(st, s);
				bw_post_data_sends(st, s);
				bw_wait_all(st, s);
			} else {
				bw_wait_rx(st, s);
				if (!last)
					bw_post_data_recvs(st, s);
				bw_post_ack_send(st, s);
			}
			break;
		case BW_MODE_BIBW:
			if (it)
				bw_post_data_recvs(st, s);
			bw_post_data_sends(st, s);
			bw_wait_all(st, s);
			break;
		case BW_MODE_LAT:
			if (st->client) {
				if (it)
					bw_post_data_recvs(st, s);
				bw_post_data_sends(st, s);
				bw_wait_all(st, s);
			} else {
				bw_wait_rx(st, s);
				if (!last)
					bw_post_data_recvs(st, s);
				/*
				 * Blocking send, as in osu_latency: its context
				 * is reused by the next echo.
				 */
				bw_post_data_sends(st, s);
				bw_wait_tx(st, s);
			}
			break;
		}
	}
	bw_wait_all(st, s);
}

/* Who receives data in the first iteration of a phase. */
static int bw_receives_first(const struct bw_state *st, const struct bw_opts *o)
{
	return o->mode != BW_MODE_BW || !st->client;
}

/*
 * Make ready for a phase: fill/poison for a checked one (seed != 0) and
 * post the first iteration's receives.  In lat mode the server's echo is
 * its own pattern (seed + 1), so each side checks the other's data.
 */
static void bw_phase_prepare(struct bw_state *st, const struct bw_opts *o, uint32_t seed)
{
	int sends = o->mode != BW_MODE_BW || st->client;

	if (seed) {
		if (sends)
			bw_fill_tx(st, o->size,
				   o->mode == BW_MODE_LAT && !st->client ? seed + 1 : seed);
		if (bw_receives_first(st, o))
			bw_poison_rx(st, o->size);
	}
	if (bw_receives_first(st, o))
		bw_post_data_recvs(st, o->size);
}

/* After a checked phase: check, then agree with the peer on the verdict. */
static void bw_phase_verify(struct bw_state *st, const struct bw_opts *o, uint32_t seed)
{
	uint32_t bad = 0, peer_bad;

	if (o->mode == BW_MODE_LAT)
		bad = bw_check_rx(st, o->size, st->client ? seed + 1 : seed);
	else if (o->mode == BW_MODE_BIBW || !st->client)
		bad = bw_check_rx(st, o->size, seed);
	peer_bad = bw_sync(st, bad, o->size);
	if (bad || peer_bad) {
		if (!bad)
			fprintf(stderr, "opx_bw: peer reported a data mismatch\n");
		exit(2);
	}
}

static uint32_t bw_auto_warmup(const struct bw_opts *o)
{
	uint64_t per_iter = o->mode == BW_MODE_LAT ? o->size : (uint64_t)o->window * o->size;
	uint64_t n = BW_WARM_BYTES / per_iter;

	/*
	 * At least one untimed iteration, unless one is so big (16 MiB x 64)
	 * that the checked first iteration already is a fair sample.
	 */
	if (!n && per_iter <= 8 * BW_WARM_BYTES)
		n = 1;
	return n > 100 ? 100 : (uint32_t)n;
}

static void bw_run(struct bw_state *st, struct bw_opts *o)
{
	uint32_t warm = o->warmup == UINT32_MAX ? bw_auto_warmup(o) : o->warmup;
	uint32_t iters = o->iters;
	double t0, dt_cal, dt;
	uint32_t cal_iters, n, v;

	/* Checked first iteration; also the calibration when warm-up is 0. */
	bw_phase_prepare(st, o, 1);
	bw_sync(st, 0, o->size);
	t0 = bench_now();
	bw_phase_run(st, o, 1);
	dt_cal = bench_now() - t0;
	cal_iters = 1;
	bw_phase_verify(st, o, 1);

	/*
	 * Warm-up doubles as calibration.  A fixed count is either too short
	 * to time at 16 KiB or far too long at 16 MiB, so the client grows it
	 * (x4) until one warm-up phase lasts BW_CAL_MIN_S, telling the server
	 * each count; a count of 0 ends the warm-up, and the receives that
	 * were prepared for it carry over to the measured phase.
	 */
	n = warm;
	for (;;) {
		bw_phase_prepare(st, o, 0);
		v = bw_sync(st, st->client ? n : 0, o->size);
		if (!st->client)
			n = v;
		if (!n)
			break;
		if (n > BW_MAX_ITERS) {
			bench_fail("bad warm-up count %u", n);
		}
		t0 = bench_now();
		bw_phase_run(st, o, n);
		dt = bench_now() - t0;
		if (st->client) {
			dt_cal = dt;
			cal_iters = n;
			n = o->warmup != UINT32_MAX || dt >= BW_CAL_MIN_S || n > BW_MAX_ITERS / 4
				    ? 0 : n * 4;
		}
	}

	/* The client picks the count; the server takes whatever it says. */
	if (st->client && !iters) {
		double per = dt_cal / cal_iters, x = per > 0 ? o->target_s / per : BW_MAX_ITERS;

		iters = x < 1 ? 1 : x > BW_MAX_ITERS ? BW_MAX_ITERS : (uint32_t)(x + 0.5);
	}
	v = bw_sync(st, st->client ? iters : 0, o->size);
	if (!st->client)
		iters = v;
	if (!iters || iters > BW_MAX_ITERS) {
		bench_fail("bad iteration count %u", iters);
	}
	t0 = bench_now();
	bw_phase_run(st, o, iters);
	dt = bench_now() - t0;

	/* Checked last iteration, outside the timing. */
	bw_phase_prepare(st, o, 2);
	bw_sync(st, 0, o->size);
	bw_phase_run(st, o, 1);
	bw_phase_verify(st, o, 2);

	if (st->client) {
		double msgs = (double)iters * st->window, bytes, usec;

		if (o->mode == BW_MODE_LAT) {
			usec = dt * 1e6 / (2.0 * iters);
			bytes = (double)o->size;
			dt = usec * 1e-6;
		} else {
			usec = dt * 1e6 / msgs;
			bytes = msgs * (double)o->size * (o->mode == BW_MODE_BIBW ? 2 : 1);
		}
		printf("bw prov=%s mode=%s size=%zu window=%u iters=%u MBps=%.1f usec=%.2f\n",
		       o->prov, bw_mode_names[o->mode], o->size, st->window, iters,
		       bytes / dt / 1e6, usec);
		fflush(stdout);
	}
}

/* ---- main -------------------------------------------------------------- */

/* Settings travel client -> server before anything is sized. */
static void bw_settings_exchange(int sock, struct bw_opts *o)
{
	uint32_t cfg[6] = { htonl((uint32_t)o->mode), htonl((uint32_t)o->size), htonl(o->window),
			    htonl(o->iters), htonl(o->warmup), htonl((uint32_t)o->slot_cap) };

	if (o->server) {
		bench_sock_write(sock, cfg, sizeof(cfg));
		return;
	}
	bench_sock_read(sock, cfg, sizeof(cfg));
	o->mode = (enum bw_mode)ntohl(cfg[0]);
	o->size = ntohl(cfg[1]);
	o->window = ntohl(cfg[2]);
	o->iters = ntohl(cfg[3]);
	o->warmup = ntohl(cfg[4]);
	o->slot_cap = ntohl(cfg[5]);
	if (o->mode > BW_MODE_LAT || !o->size || o->size > BW_MAX_SIZE || !o->window ||
	    o->window > 4096 || o->iters > BW_MAX_ITERS)
		bench_fail("bad settings from client");
}

static enum bw_mode bw_parse_mode(const char *s)
{
	unsigned int m;

	for (m = 0; m <= BW_MODE_LAT; m++)
		if (!strcmp(s, bw_mode_names[m]))
			return (enum bw_mode)m;
	bench_fail("bad mode '%s' (bw, bibw or lat)", s);
}

static void bw_usage(const char *argv0)
{
	bench_usage(argv0, 47991,
		    "  -m MODE   bw | bibw | lat (default bw)\n"
		    "  -S SIZE   message size in bytes (default 1048576, max %lu)\n"
		    "  -w W      messages per window for bw/bibw (default 64)\n"
		    "  -n N      measured iterations (default: calibrated to -t)\n"
		    "  -W N      warm-up iterations (default: about 32 MiB of traffic)\n"
		    "  -B BYTES  distinct buffer bytes per direction (default 64 MiB;\n"
		    "            0 = one buffer shared by all messages, as osu_bw)\n"
		    "  -t SECS   target duration of the measured phase (default 0.3)\n",
		    BW_MAX_SIZE);
}

int main(int argc, char **argv)
{
	struct bw_opts o = {
		.prov = "opx", .port = 47991, .mode = BW_MODE_BW, .size = 1u << 20,
		.window = 64, .iters = 0, .warmup = UINT32_MAX, .slot_cap = BW_SLOT_BYTES,
		.target_s = 0.3,
		.timeout_s = 60,
	};
	struct bw_state st;
	char *end;
	int c;

	bench_init("opx_bw");
	while ((c = getopt(argc, argv, "p:P:m:S:w:n:W:B:t:T:vh")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'P': o.port = (uint16_t)bench_parse_ul(optarg, "port", 1, 65535); break;
		case 'm': o.mode = bw_parse_mode(optarg); break;
		case 'S': o.size = bench_parse_ul(optarg, "size", 1, BW_MAX_SIZE); break;
		case 'w': o.window = (uint32_t)bench_parse_ul(optarg, "window", 1, 4096); break;
		case 'n': o.iters = (uint32_t)bench_parse_ul(optarg, "iterations", 1, BW_MAX_ITERS); break;
		case 'W': o.warmup = (uint32_t)bench_parse_ul(optarg, "warm-up", 0, 100000); break;
		case 'B': o.slot_cap = bench_parse_ul(optarg, "buffer bytes", 0, 1UL << 30); break;
		case 't':
			o.target_s = strtod(optarg, &end);
			if (*end || !(o.target_s > 0 && o.target_s <= 60))
				bench_fail("bad target '%s' (0..60 s)", optarg);
			break;
		case 'T': o.timeout_s = (unsigned)bench_parse_ul(optarg, "timeout", 1, 86400); break;
		case 'v': o.verbose = 1; break;
		default: bw_usage(argv[0]); return c == 'h' ? 0 : 1;
		}
	}
	if (optind < argc)
		o.server = argv[optind];

	bench_alarm_arm(o.timeout_s);
	/* A peer that died should give a message and status 1, not SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);

	memset(&st, 0, sizeof(st));
	st.client = o.server != NULL;
	/* The socket comes first: the client's settings size the buffers. */
	st.fab.sock = o.server ? bench_sock_client(o.server, o.port) : bench_sock_server(o.port);
	bw_settings_exchange(st.fab.sock, &o);
	bw_buffers_alloc(&st, &o);
	bw_fabric_open(&st, &o);
	bench_addr_exchange(&st.fab);

	bw_run(&st, &o);

	/* Nothing may still be in flight when the endpoint goes away. */
	bw_sync(&st, 0, o.size);
	bw_fabric_close(&st);
	close(st.fab.sock);
	return 0;
}
