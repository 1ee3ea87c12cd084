/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_stats.c - endpoint telemetry: a known exchange gives exactly its
 * counts, per protocol and per size bucket, both live (fi_open_ops with
 * OPX_STATS_OPS_NAME) and in the FI_OPX_STATS file written at close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "rdma/opx_ext.h"

#define TS_WAIT_MS 10000

static char ts_dir[] = "/tmp/opx-test-stats.XXXXXX";
static char ts_pattern[256];

/* The exchange: sizes and the protocol each takes with default settings
 * (inline <= 16 B, eager <= 8 KiB, rendezvous pull below 32 KiB, split
 * copy from 32 KiB). */
static const struct {
	size_t len;
	enum opx_proto proto;
	unsigned int bucket; /* [2^(b-1), 2^b) */
} ts_msgs[] = {
	{8, OPX_PROTO_INJECT, 4},      {8, OPX_PROTO_INJECT, 4},
	{8, OPX_PROTO_INJECT, 4},      {1000, OPX_PROTO_EAGER, 10},
	{1000, OPX_PROTO_EAGER, 10},   {20000, OPX_PROTO_RNDV_PULL, 15},
	{100000, OPX_PROTO_RNDV_SPLIT, 17},
};
#define TS_N (sizeof(ts_msgs) / sizeof(ts_msgs[0]))

static int ts_group_setup(void **state)
{
	(void)state;
	if (!mkdtemp(ts_dir))
		return -1;
	snprintf(ts_pattern, sizeof(ts_pattern), "%s/opx.%%h.%%p.json", ts_dir);
	/* read once, when the provider initialises (fx_prov) */
	setenv("FI_OPX_STATS", ts_pattern, 1);
	return fx_prov() ? 0 : -1;
}

static int ts_group_teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ts_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Wait until n completions arrived; bounded. */
static void ts_drain(struct fid_cq *cq, size_t n)
{
	struct fi_cq_tagged_entry ce;
	struct timespec t0, t;
	size_t got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		ssize_t r = fi_cq_read(cq, &ce, 1);

		if (r == 1) {
			got++;
			continue;
		}
		assert_int_equal(r, -FI_EAGAIN);
		clock_gettime(CLOCK_MONOTONIC, &t);
		assert_true((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 <
			    TS_WAIT_MS);
	}
}

static void ts_check_side(const struct opx_stats_proto *by, const uint64_t *hist)
{
	uint64_t msgs[OPX_PROTO_MAX] = {0}, bytes[OPX_PROTO_MAX] = {0};
	uint64_t h[OPX_STATS_BUCKETS] = {0};

	for (size_t i = 0; i < TS_N; i++) {
		msgs[ts_msgs[i].proto]++;
		bytes[ts_msgs[i].proto] += ts_msgs[i].len;
		h[ts_msgs[i].bucket]++;
		assert_int_equal(opx_stats_bucket(ts_msgs[i].len), ts_msgs[i].bucket);
	}
	for (int p = 0; p < OPX_PROTO_MAX; p++) {
		assert_int_equal(by[p].msgs, msgs[p]);
		assert_int_equal(by[p].bytes, bytes[p]);
	}
	for (int b = 0; b < OPX_STATS_BUCKETS; b++)
		assert_int_equal(hist[b], h[b]);
}

static void test_stats_exchange(void **state)
{
	struct fx_env env, *e = &env;
	struct opx_stats_ops *ops = NULL;
	struct opx_stats st;
	uint8_t *sbuf[TS_N], *rbuf[TS_N];
	char line[4096], *doc = NULL;
	size_t doc_len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(fx_open(e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_open_ops(&e->ep->fid, "no_such_ops", 0, (void **)&ops, NULL),
			 -FI_ENOSYS);
	assert_int_equal(fi_open_ops(&e->ep->fid, OPX_STATS_OPS_NAME, 0, (void **)&ops, NULL), 0);
	assert_non_null(ops);
	assert_true(ops->size >= sizeof(*ops));
	assert_non_null(ops->drop_name(0));

	/* receives first: nothing is unexpected */
	for (size_t i = 0; i < TS_N; i++) {
		sbuf[i] = malloc(ts_msgs[i].len);
		rbuf[i] = malloc(ts_msgs[i].len);
		assert_true(sbuf[i] && rbuf[i]);
		memset(sbuf[i], (int)i + 1, ts_msgs[i].len);
		assert_int_equal(fi_trecv(e->ep, rbuf[i], ts_msgs[i].len, NULL, e->self, i, 0, rbuf[i]),
				 0);
	}
	for (size_t i = 0; i < TS_N; i++)
		assert_int_equal(fi_tsend(e->ep, sbuf[i], ts_msgs[i].len, NULL, e->self, i, sbuf[i]),
				 0);
	ts_drain(e->cq, 2 * TS_N);
	for (size_t i = 0; i < TS_N; i++)
		assert_memory_equal(rbuf[i], sbuf[i], ts_msgs[i].len);

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	assert_int_equal(ops->read(&e->ep->fid, &st), 0);
	assert_int_equal(st.version, OPX_STATS_VERSION);
	ts_check_side(st.tx, st.tx_hist);
	ts_check_side(st.rx, st.rx_hist);
	assert_int_equal(st.ux_msgs, 0);
	assert_true(st.posted_peak >= TS_N);
	assert_int_equal(st.tx_eagain, 0);

	/* a caller built against a shorter struct gets only its part */
	{
		struct opx_stats small;

		memset(&small, 0xee, sizeof(small));
		small.size = offsetof(struct opx_stats, rx);
		assert_int_equal(ops->read(&e->ep->fid, &small), 0);
		assert_int_equal(small.tx[OPX_PROTO_INJECT].msgs, 3);
		assert_int_equal(small.rx[0].msgs, 0xeeeeeeeeeeeeeeeeULL);
	}
	/* an unexpected message is counted as such */
	assert_int_equal(fi_tsend(e->ep, sbuf[0], 8, NULL, e->self, 99, sbuf[0]), 0);
	ts_drain(e->cq, 1);
	/* a message nobody posted for waits a few drains in the ring before
	 * it becomes unexpected (opx_rx_defer): drain more than that */
	for (int i = 0; i < 16; i++) {
		struct fi_cq_tagged_entry ce;

		assert_int_equal(fi_cq_read(e->cq, &ce, 1), -FI_EAGAIN);
	}
	assert_int_equal(fi_trecv(e->ep, rbuf[0], 8, NULL, e->self, 99, 0, rbuf[0]), 0);
	ts_drain(e->cq, 1);
	assert_int_equal(ops->read(&e->ep->fid, &st), 0);
	assert_int_equal(st.ux_msgs, 1);
	assert_true(st.ux_peak >= 1 && st.ux_bytes_peak >= 8);

	assert_int_equal(ops->reset(&e->ep->fid), 0);
	assert_int_equal(ops->read(&e->ep->fid, &st), 0);
	assert_int_equal(st.tx[OPX_PROTO_INJECT].msgs, 0);
	assert_int_equal(st.rx_hist[4], 0);

	/* the FI_OPX_STATS file at close: one more exchange, known counts */
	for (size_t i = 0; i < TS_N; i++)
		assert_int_equal(fi_trecv(e->ep, rbuf[i], ts_msgs[i].len, NULL, e->self, i, 0, rbuf[i]),
				 0);
	for (size_t i = 0; i < TS_N; i++)
		assert_int_equal(fi_tsend(e->ep, sbuf[i], ts_msgs[i].len, NULL, e->self, i, sbuf[i]),
				 0);
	ts_drain(e->cq, 2 * TS_N);
	fx_close(e);

	snprintf(line, sizeof(line), "%s/opx.", ts_dir);
	{
		char host[256], path[512];

		assert_int_equal(gethostname(host, sizeof(host)), 0);
		snprintf(path, sizeof(path), "%s/opx.%s.%ld.json", ts_dir, host, (long)getpid());
		f = fopen(path, "r");
		assert_non_null(f);
	}
	{
		FILE *m = open_memstream(&doc, &doc_len);

		assert_non_null(m);
		while (fgets(line, sizeof(line), f))
			fputs(line, m);
		fclose(m);
		fclose(f);
	}
	assert_non_null(strstr(doc, "\"opx_stats_version\": 1"));
	assert_non_null(strstr(doc, "\"inject\": {\"msgs\": 3, \"bytes\": 24}"));
	assert_non_null(strstr(doc, "\"eager\": {\"msgs\": 2, \"bytes\": 2000}"));
	assert_non_null(strstr(doc, "\"rndv_pull\": {\"msgs\": 1, \"bytes\": 20000}"));
	assert_non_null(strstr(doc, "\"rndv_split\": {\"msgs\": 1, \"bytes\": 100000}"));
	assert_non_null(strstr(doc, "\"tx_hist\": [0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 1,"));
	assert_non_null(strstr(doc, "\"rx_hist\": [0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 1,"));
	free(doc);
	for (size_t i = 0; i < TS_N; i++) {
		free(sbuf[i]);
		free(rbuf[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_exchange),
	};

	return cmocka_run_group_tests(tests, ts_group_setup, ts_group_teardown);
}
