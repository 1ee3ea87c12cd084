/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * match_fixture.c - the helpers test_match and test_match_queue share
 * (see match_fixture.h).
 */
#include <stdlib.h>
#include <string.h>

#include "match_fixture.h"

static bool tm_skip_noted;

/* Byte patterns that differ per message (seed) and per offset, so a
 * shifted, truncated or swapped copy is detected. */
static uint8_t tm_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + (i >> 16));
}

void tm_fill(void *buf, size_t len, unsigned seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = tm_pat(seed, i);
}

/* Index of the first wrong byte, or len when all are right. */
size_t tm_check(const void *buf, size_t len, unsigned seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != tm_pat(seed, i))
			return i;
	return len;
}

bool tm_size_ok(struct tm_env *t, size_t len)
{
	if (len <= t->max_msg)
		return true;
	if (!tm_skip_noted) {
		print_message("note: sizes above max_msg_size=%zu skipped in sweeps\n", t->max_msg);
		tm_skip_noted = true;
	}
	return false;
}

/* Drive progress once and stash whatever completed. */
void tm_poll(struct tm_env *t)
{
	fx_stash_poll(t->fx.cq, &t->stash);
}

/* The completion for ctx, polling up to ms milliseconds.  Returns 0 and
 * fills *out, or -FI_ETIMEDOUT. */
int tm_wait_ms(struct tm_env *t, void *ctx, struct fx_comp *out, unsigned ms)
{
	return fx_stash_wait(t->fx.cq, &t->stash, ctx, out, ms);
}

void tm_wait(struct tm_env *t, void *ctx, struct fx_comp *out)
{
	int rc = tm_wait_ms(t, ctx, out, TM_WAIT_MS);

	if (rc)
		fail_msg("no completion for context %p within %d ms", ctx, TM_WAIT_MS);
}

/* Drive progress a few times so sent packets reach the unexpected queue
 * before a receive is posted. */
void tm_progress(struct tm_env *t, int rounds)
{
	for (int i = 0; i < rounds; i++)
		tm_poll(t);
}

/* ctx must not complete within ms. */
void tm_expect_none(struct tm_env *t, void *ctx, unsigned ms)
{
	if (tm_wait_ms(t, ctx, NULL, ms) == 0)
		fail_msg("unexpected completion for context %p", ctx);
}

/* Sends retry on -FI_EAGAIN with progress, bounded in time. */
void tm_tsend(struct tm_env *t, struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
		     uint64_t tag, uint64_t data, bool with_data, void *ctx)
{
	uint64_t end = fx_now_ms() + TM_WAIT_MS;
	ssize_t rc;

	for (;;) {
		rc = with_data ? fi_tsenddata(ep, buf, len, NULL, data, dest, tag, ctx)
			       : fi_tsend(ep, buf, len, NULL, dest, tag, ctx);
		if (rc != -FI_EAGAIN || fx_now_ms() > end)
			break;
		tm_poll(t);
	}
	assert_int_equal(rc, 0);
}

int tm_setup(void **state)
{
	struct tm_env *t = calloc(1, sizeof(*t));

	if (!t)
		return -1;
	if (fx_open(&t->fx, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED)) {
		free(t);
		return -1;
	}
	t->max_msg = t->fx.info->ep_attr->max_msg_size;
	*state = t;
	return 0;
}

int tm_teardown(void **state)
{
	struct tm_env *t = *state;

	if (t->ep2)
		(void)fi_close(&t->ep2->fid);
	if (t->ep3)
		(void)fi_close(&t->ep3->fid);
	fx_close(&t->fx);
	free(t);
	*state = NULL;
	return 0;
}

