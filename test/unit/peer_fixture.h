/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * peer_fixture.h - what the peer suites (test_peer: peers that die or go
 * away; test_peer_forged: peers that lie; test_peer_split: the split
 * copy's choices) share: a byte pattern, the provider-level environment
 * (the fixture's endpoint, one more on demand, completions stashed until
 * claimed) and the processes that play dead or live peers.
 */
#ifndef OPX_TEST_PEER_FIXTURE_H
#define OPX_TEST_PEER_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fixture.h"
#include "shim_abi.h"

#define TP_WAIT_MS 5000u

/* len bytes of the pattern of seed; whether buf holds exactly that */
void tp_fill(void *buf, size_t len, unsigned seed);
bool tp_intact(const void *buf, size_t len, unsigned seed);

struct tp_env {
	struct fx_env fx;
	struct fid_ep *ep2;
	fi_addr_t a2;
	struct fx_stash stash; /* completions not yet claimed */
};

void tp_poll(struct tp_env *t);
/* The completion of ctx within ms: 0 and *out, or -FI_ETIMEDOUT. */
int tp_wait(struct tp_env *t, void *ctx, struct fx_comp *out, unsigned ms);
/* Another endpoint on the fixture's CQ and AV, inserted as *addr. */
void tp_open_ep(struct tp_env *t, struct fid_ep **ep, fi_addr_t *addr);
/* Another endpoint on cq and the fixture's AV, not inserted. */
void tp_ep_on(struct tp_env *t, struct fid_cq *cq, struct fid_ep **ep);
/* Read one completion of cq within ms (any context); its error or 0. */
int tp_cq_one(struct fid_cq *cq, void **ctx, unsigned ms);
/* fi_tsend retried on -FI_EAGAIN with progress, bounded in time. */
void tp_tsend(struct tp_env *t, struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
	      uint64_t tag, void *ctx);
/* SIGKILL pid, reap it, and check that the signal killed it. */
void tp_kill(pid_t pid);
/* The shim address (fi_getname) of ep. */
struct shim_addr tp_name(struct fid_ep *ep);
/* A process with a bare receive context on unit, alive until tp_kill;
 * *a is the context's address. */
pid_t tp_live_ctx(int unit, struct shim_addr *a);
int tp_setup(void **state);
int tp_teardown(void **state);

#endif /* OPX_TEST_PEER_FIXTURE_H */
