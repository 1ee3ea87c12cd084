/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * match_fixture.h - what test_match and test_match_queue share: a loopback
 * environment with room for two extra senders, a CQ reader that stashes completions
 * until a test asks for their context, bounded waits and sends, byte
 * patterns, and the sizes at every protocol threshold.
 *
 * Messages go from an endpoint to itself (the fixture's loopback) or
 * between extra endpoints opened on the same domain, AV and CQ, so one
 * fi_cq_read drives progress for all of them.  Every wait is bounded.
 *
 * Sizes above the advertised max_msg_size cannot be sent at all, so the
 * sweeps skip them (saying so once); test_rndv_reachable (test_match) is
 * the one test that insists the rendezvous sizes are reachable.
 */
#ifndef OPX_TEST_MATCH_FIXTURE_H
#define OPX_TEST_MATCH_FIXTURE_H

#include <stdbool.h>

#include "fixture.h"

#define TM_WAIT_MS 2000
#define TM_MIB ((size_t)1 << 20)

/* Thresholds: inline <= 16, one packet <= 8192 (MTU), multi-packet eager
 * <= FI_OPX_EAGER_MAX (8192 by default, so the sizes between one packet
 * and 64 KiB cover it when a test raises it), rendezvous above. */
static const size_t tm_sizes[] = {0,	 1,	15,    16,    17,    63,    64,    65,    8191,
				  8192,	 8193,	16383, 16384, 16385, 32767, 32768, 32769, 65535, 65536, 65537, TM_MIB};
#define TM_NSIZES (sizeof(tm_sizes) / sizeof(tm_sizes[0]))

struct tm_env {
	struct fx_env fx;
	struct fid_ep *ep2, *ep3; /* extra senders, opened on demand */
	fi_addr_t a2, a3;
	size_t max_msg;
	struct fx_stash stash; /* completions not yet claimed */
};

#define TM_RECV_TAGGED (FI_RECV | FI_TAGGED)
#define TM_FLAG_MASK (FI_RECV | FI_SEND | FI_TAGGED | FI_MSG | FI_REMOTE_CQ_DATA | FI_MULTI_RECV)

/* Fill buf with the pattern of seed; tm_check returns the index of the
 * first wrong byte, or len when all are right.  The pattern differs per
 * message (seed) and per offset, so a shifted, truncated or swapped copy
 * is detected. */
void tm_fill(void *buf, size_t len, unsigned seed);
size_t tm_check(const void *buf, size_t len, unsigned seed);
/* len <= max_msg_size; notes once that larger sizes are skipped. */
bool tm_size_ok(struct tm_env *t, size_t len);
/* Drive progress once and stash whatever completed. */
void tm_poll(struct tm_env *t);
/* The completion for ctx, polling up to ms milliseconds.  Returns 0 and
 * fills *out, or -FI_ETIMEDOUT. */
int tm_wait_ms(struct tm_env *t, void *ctx, struct fx_comp *out, unsigned ms);
/* The same within TM_WAIT_MS, failing the test otherwise. */
void tm_wait(struct tm_env *t, void *ctx, struct fx_comp *out);
/* Drive progress a few times so sent packets reach the unexpected queue
 * before a receive is posted. */
void tm_progress(struct tm_env *t, int rounds);
/* ctx must not complete within ms. */
void tm_expect_none(struct tm_env *t, void *ctx, unsigned ms);
/* Sends retry on -FI_EAGAIN with progress, bounded in time. */
void tm_tsend(struct tm_env *t, struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
	      uint64_t tag, uint64_t data, bool with_data, void *ctx);

/* cmocka fixtures: *state becomes a heap struct tm_env whose fx is opened
 * with FI_AV_TABLE and FI_CQ_FORMAT_TAGGED; teardown also closes ep2/ep3. */
int tm_setup(void **state);
int tm_teardown(void **state);

#endif /* OPX_TEST_MATCH_FIXTURE_H */
