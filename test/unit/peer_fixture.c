/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * peer_fixture.c - see peer_fixture.h.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_fixture.h"

#include "../../driver-shim/shim_internal.h"

static uint8_t tp_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + (i >> 16));
}

void tp_fill(void *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = tp_pat(seed, i);
}

bool tp_intact(const void *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (((const uint8_t *)buf)[i] != tp_pat(seed, i))
			return false;
	return true;
}

void tp_poll(struct tp_env *t)
{
	fx_stash_poll(t->fx.cq, &t->stash);
}

int tp_wait(struct tp_env *t, void *ctx, struct fx_comp *out, unsigned ms)
{
	return fx_stash_wait(t->fx.cq, &t->stash, ctx, out, ms);
}

void tp_open_ep(struct tp_env *t, struct fid_ep **ep, fi_addr_t *addr)
{
	fx_open_peer_ep(&t->fx, NULL, NULL, ep, addr);
}

int tp_setup(void **state)
{
	struct tp_env *t = calloc(1, sizeof(*t));

	if (!t)
		return -1;
	if (fx_open(&t->fx, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED)) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

int tp_teardown(void **state)
{
	struct tp_env *t = *state;

	if (t->ep2)
		(void)fi_close(&t->ep2->fid);
	fx_close(&t->fx);
	free(t);
	*state = NULL;
	return 0;
}

void tp_tsend(struct tp_env *t, struct fid_ep *ep, const void *buf, size_t len,
		     fi_addr_t dest, uint64_t tag, void *ctx)
{
	uint64_t end = fx_now_ms() + TP_WAIT_MS;
	ssize_t rc;

	for (;;) {
		rc = fi_tsend(ep, buf, len, NULL, dest, tag, ctx);
		if (rc != -FI_EAGAIN || fx_now_ms() > end)
			break;
		tp_poll(t);
	}
	assert_int_equal(rc, 0);
}

void tp_ep_on(struct tp_env *t, struct fid_cq *cq, struct fid_ep **ep)
{
	assert_int_equal(fi_endpoint(t->fx.domain, t->fx.info, ep, NULL), 0);
	assert_int_equal(fi_ep_bind(*ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(*ep, &t->fx.av->fid, 0), 0);
	assert_int_equal(fi_enable(*ep), 0);
}

int tp_cq_one(struct fid_cq *cq, void **ctx, unsigned ms)
{
	uint64_t end = fx_now_ms() + ms;
	struct fi_cq_tagged_entry ent;

	while (fx_now_ms() < end) {
		ssize_t n = fi_cq_read(cq, &ent, 1);

		if (n == 1) {
			*ctx = ent.op_context;
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};

			assert_int_equal(fi_cq_readerr(cq, &ee, 0), 1);
			*ctx = ee.op_context;
			return ee.err;
		}
		assert_int_equal(n, -FI_EAGAIN);
	}
	return -FI_ETIMEDOUT;
}

void tp_kill(pid_t pid)
{
	int st = 0;

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
}

struct shim_addr tp_name(struct fid_ep *ep)
{
	struct shim_addr a;
	size_t len = sizeof(a);

	assert_int_equal(fi_getname(&ep->fid, &a, &len), 0);
	assert_int_equal(len, sizeof(a));
	return a;
}

pid_t tp_live_ctx(int unit, struct shim_addr *a)
{
	int up[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params p = {.force_unit = -1};
		struct shim_dev *dev;
		struct shim_ctx *c;

		memset(a, 0, sizeof(*a));
		if (shim_dev_open(&p, &dev) == 0 && shim_ctx_open(dev, unit, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, a);
		if (write(up[1], a, sizeof(*a)) != (ssize_t)sizeof(*a))
			_exit(2);
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(3);
	}
	close(up[1]);
	assert_int_equal(read(up[0], a, sizeof(*a)), (ssize_t)sizeof(*a));
	close(up[0]);
	assert_int_not_equal(a->lid, 0);
	return pid;
}
