/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_prefix.c - FI_MSG_PREFIX (issue 31, item 4): asked for, fi_getinfo
 * gives the mode and msg_prefix_size (a multiple of 8); every send and
 * receive buffer then starts with that much space and the data follows
 * it: loopback sends and receives, msg and tagged, single buffers and
 * iovecs whose first entries are the prefix, inject at inject_size (the
 * prefix does not count), completions whose length counts the prefix,
 * data checked byte by byte; buffers shorter than the prefix and
 * multi-receive are refused.  Without the mode nothing changes.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "opx.h"

#define TP_WAIT_MS 20000u

static int tp_open(struct fx_env *e, uint64_t mode)
{
	struct fi_info *hints = fx_hints(FI_MSG | FI_TAGGED);
	int rc;

	memset(e, 0, sizeof(*e));
	if (!hints)
		return -FI_ENOMEM;
	hints->mode = mode;
	rc = fx_open_hints(e, hints);
	fi_freeinfo(hints);
	return rc ? -1 : 0;
}

static uint8_t tp_pat(size_t seed, size_t i)
{
	return (uint8_t)(seed * 31u + i * 5u + 1u);
}

static void test_prefix_info(void **state)
{
	struct fx_env e;

	(void)state;
	assert_int_equal(tp_open(&e, FI_MSG_PREFIX), 0);
	assert_true(e.info->mode & FI_MSG_PREFIX);
	assert_true(e.info->ep_attr->msg_prefix_size > 0);
	assert_int_equal(e.info->ep_attr->msg_prefix_size % 8, 0);
	fx_close(&e);
	assert_int_equal(tp_open(&e, 0), 0);
	assert_false(e.info->mode & FI_MSG_PREFIX);
	assert_int_equal(e.info->ep_attr->msg_prefix_size, 0);
	fx_close(&e);
	/* FI_OPX_MSG_PREFIX off (the default): offered, not required */
	opx_env.msg_prefix = false;
	assert_int_equal(tp_open(&e, FI_MSG_PREFIX), 0);
	assert_false(e.info->mode & FI_MSG_PREFIX);
	assert_int_equal(e.info->ep_attr->msg_prefix_size, 0);
	fx_close(&e);
	opx_env.msg_prefix = true;
}

/* One message of len data bytes through the prefix, tagged or not,
 * as one buffer or split after the prefix. */
static void tp_one(struct fx_env *e, size_t len, bool tagged, bool split)
{
	size_t p = e->info->ep_attr->msg_prefix_size;
	uint8_t *out = malloc(p + len + 1), *in = malloc(p + len + 64);
	struct fi_cq_tagged_entry ent;
	struct iovec siov[2], riov[2];
	uint64_t until = fx_now_ms() + TP_WAIT_MS;
	ssize_t rc;

	assert_non_null(out);
	assert_non_null(in);
	memset(out, 0xa5, p); /* the sender's prefix space: not sent */
	for (size_t i = 0; i < len; i++)
		out[p + i] = tp_pat(len, i);
	memset(in, 0x3c, p + len + 64);
	siov[0] = (struct iovec){out, split ? p : p + len};
	siov[1] = (struct iovec){out + p, len};
	riov[0] = (struct iovec){in, split ? p : p + len + 64};
	riov[1] = (struct iovec){in + p, len + 64};
	if (tagged)
		assert_int_equal(fi_trecvv(e->ep, riov, NULL, split ? 2 : 1, e->self, 7, 0, in), 0);
	else
		assert_int_equal(fi_recvv(e->ep, riov, NULL, split ? 2 : 1, e->self, in), 0);
	do {
		rc = tagged ? fi_tsendv(e->ep, siov, NULL, split ? 2 : 1, e->self, 7, out)
			    : fi_sendv(e->ep, siov, NULL, split ? 2 : 1, e->self, out);
		if (rc == -FI_EAGAIN)
			fi_cq_read(e->cq, NULL, 0);
	} while (rc == -FI_EAGAIN && fx_now_ms() < until);
	assert_int_equal(rc, 0);
	/* both completions, in whichever order */
	{
		uint64_t end = fx_now_ms() + TP_WAIT_MS;
		bool got_in = false, got_out = false;

		while (!(got_in && got_out) && fx_now_ms() < end) {
			struct fi_cq_tagged_entry c;

			if (fi_cq_read(e->cq, &c, 1) != 1)
				continue;
			if (c.op_context == in) {
				got_in = true;
				ent = c;
			} else if (c.op_context == out) {
				got_out = true;
			}
		}
		assert_true(got_in && got_out);
	}
	assert_int_equal(ent.len, p + len);
	for (size_t i = 0; i < len; i++)
		if (in[p + i] != tp_pat(len, i))
			fail_msg("%zu-byte message differs at %zu", len, i);
	for (size_t i = p + len; i < p + len + 64; i++)
		assert_int_equal(in[i], 0x3c);
	free(out);
	free(in);
}

static void test_prefix_data(void **state)
{
	static const size_t sizes[] = {0, 1, 7, 8, 9, 63, 64, 65, 4095, 4096, 4097, 65536, 1 << 20};
	struct fx_env e;

	(void)state;
	assert_int_equal(tp_open(&e, FI_MSG_PREFIX), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (int k = 0; k < 4; k++)
			tp_one(&e, sizes[i], k & 1, k & 2);
	fx_close(&e);
}

static void test_prefix_inject_and_refusals(void **state)
{
	struct fx_env e;
	size_t p, inj;
	uint8_t *buf, in[512];
	struct fi_cq_tagged_entry ent;
	struct iovec v;
	struct fi_msg m = {0};

	(void)state;
	assert_int_equal(tp_open(&e, FI_MSG_PREFIX), 0);
	p = e.info->ep_attr->msg_prefix_size;
	inj = e.info->tx_attr->inject_size;
	buf = malloc(p + inj);
	assert_non_null(buf);
	for (size_t i = 0; i < inj; i++)
		buf[p + i] = tp_pat(9, i);
	/* inject_size bytes of data: the prefix does not count */
	uint8_t *big = malloc(p + inj);
	assert_non_null(big);
	assert_int_equal(fi_trecv(e.ep, big, p + inj, NULL, e.self, 9, 0, big), 0);
	assert_int_equal(fi_tinject(e.ep, buf, p + inj, e.self, 9), 0);
	assert_int_equal(fx_cq_wait(e.cq, big, TP_WAIT_MS, &ent), 0);
	assert_int_equal(ent.len, p + inj);
	assert_memory_equal(big + p, buf + p, inj);
	assert_int_equal(fi_tinject(e.ep, buf, p + inj + 1, e.self, 9), -FI_EMSGSIZE);
	/* shorter than the prefix */
	assert_int_equal(fi_send(e.ep, buf, p - 1, NULL, e.self, NULL), -FI_EINVAL);
	assert_int_equal(fi_recv(e.ep, in, p - 1, NULL, e.self, NULL), -FI_EINVAL);
	assert_int_equal(fi_tsend(e.ep, buf, 0, NULL, e.self, 1, NULL), -FI_EINVAL);
	/* multi-receive: every message would need a prefix of its own */
	v = (struct iovec){in, sizeof(in)};
	m.msg_iov = &v;
	m.iov_count = 1;
	m.addr = FI_ADDR_UNSPEC;
	assert_int_equal(fi_recvmsg(e.ep, &m, FI_MULTI_RECV), -FI_EINVAL);
	free(big);
	free(buf);
	fx_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_info),
		cmocka_unit_test(test_prefix_data),
		cmocka_unit_test(test_prefix_inject_and_refusals),
	};

	setenv("FI_OPX_MSG_PREFIX", "1", 1); /* before the provider reads it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
