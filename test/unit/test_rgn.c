/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_rgn.c - one-sided copies the initiator makes by itself
 * (driver-shim/shim_rgn.c, the direct path of prov/opx_rma.c).
 *
 * The shim: a region is copied only inside its published range and
 * access, by key; a retracted region is never written once the retract
 * returns, even with a peer copying into it in a loop at that moment; a
 * dead copier does not hold a retract up; entries a hostile process of
 * the uid rewrote in shared memory are refused, not followed.  The
 * provider: a target that never calls into libfabric after registering
 * still has its memory written and read, completed at the initiator; a
 * message sent after a direct write finds the data in place; closing a
 * region stops direct writes (the operation then fails through the
 * target, and its memory stays as it was).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "fixture.h"
#include "opx.h"
#include "../../driver-shim/shim_internal.h"

#define T_UNITS ((int)SHIM_MAX_UNITS)
#define T_UNIT (T_UNITS - 4)
#define T_JKEY 0x7267
#define T_WAIT_MS 20000u

static struct shim_dev *t_dev_open(void)
{
	struct shim_dev_params p = {
		.num_units = T_UNITS,
		.force_unit = -1,
		.mtu = 1024,
		.hdrq_cnt = 64,
		.egr_bytes = 16 * 1024,
		.jkey = T_JKEY,
	};
	struct shim_dev *dev = NULL;

	assert_int_equal(shim_dev_open(&p, &dev), 0);
	return dev;
}

struct t_pair {
	struct shim_dev *dev;
	struct shim_ctx *owner;
	struct shim_peer *peer;
	struct shim_addr addr;
};

static void t_pair_open(struct t_pair *t)
{
	memset(t, 0, sizeof(*t));
	t->dev = t_dev_open();
	assert_int_equal(shim_ctx_open(t->dev, T_UNIT, &t->owner, NULL, NULL), 0);
	shim_ctx_addr(t->owner, &t->addr);
	assert_int_equal(shim_peer_open(t->dev, &t->addr, &t->peer), 0);
}

static void t_pair_close(struct t_pair *t)
{
	shim_peer_close(t->peer);
	shim_ctx_close(t->owner);
	shim_dev_close(t->dev);
}

static ssize_t t_copy(struct t_pair *t, uint64_t key, uint64_t raddr, void *buf, size_t len,
		      bool write)
{
	struct iovec v = {buf, len};

	return shim_rgn_peer_copy(t->peer, key, raddr, &v, 1, len, write);
}

/* Range, access and key, swept +-1 byte around the region's ends. */
static void test_rgn_checked(void **state)
{
	(void)state;
	enum { N = 4096 };
	static uint8_t region[N], ro[N], other[N], buf[N + 1];
	const uint64_t base = 0x10000;
	struct t_pair t;

	t_pair_open(&t);
	assert_int_equal(
		shim_rgn_publish(t.owner, 7, base, region, N, SHIM_RGN_READ | SHIM_RGN_WRITE), 0);
	assert_int_equal(shim_rgn_publish(t.owner, 7, base, region, N, SHIM_RGN_READ), -EEXIST);
	assert_int_equal(shim_rgn_publish(t.owner, 8, 0, ro, N, SHIM_RGN_READ), 0);
	assert_int_equal(shim_rgn_publish(t.owner, 9, 0, ro, N, 0), -EINVAL);
	assert_int_equal(shim_rgn_publish(t.owner, 9, 0, ro, 0, SHIM_RGN_READ), -EINVAL);

	/* inside: every byte lands where it should, nothing else moves */
	memset(buf, 0xa5, sizeof(buf));
	assert_int_equal(t_copy(&t, 7, base + 10, buf, 100, true), 100);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(region[i], i >= 10 && i < 110 ? 0xa5 : 0);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(t_copy(&t, 7, base, buf, N, false), N);
	assert_memory_equal(buf, region, N);

	const struct {
		uint64_t raddr;
		size_t len;
		ssize_t want;
	} cases[] = {
		{base, N, N},          {base, N + 1, -ERANGE},     {base + 1, N - 1, N - 1},
		{base + 1, N, -ERANGE}, {base + N, 0, 0},          {base + N, 1, -ERANGE},
		{base + N - 1, 1, 1},  {base - 1, 1, -ERANGE},    {base - 1, 0, -ERANGE},
		{UINT64_MAX, 1, -ERANGE}, {base + N + 1, 0, -ERANGE},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(region, 0, N);
		memset(buf, 0x5a, sizeof(buf));
		ssize_t n = t_copy(&t, 7, cases[i].raddr, buf, cases[i].len, true);
		if (n != cases[i].want)
			fail_msg("case %zu: raddr 0x%llx len %zu: %zd, want %zd", i,
				 (unsigned long long)cases[i].raddr, cases[i].len, n, cases[i].want);
		for (size_t j = 0; j < N; j++) {
			bool in = n > 0 && j >= cases[i].raddr - base && j < cases[i].raddr - base + (size_t)n;
			assert_int_equal(region[j], in ? 0x5a : 0);
		}
	}

	/* access: a read-only region is never written, and no key is no region */
	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(t_copy(&t, 8, 0, buf, 8, true), -EACCES);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(ro[i], 0);
	assert_int_equal(t_copy(&t, 8, 0, buf, 8, false), 8);
	assert_int_equal(t_copy(&t, 6, 0, buf, 8, true), -ENOENT);

	/* retracted: gone; published again elsewhere: the new memory only */
	assert_int_equal(shim_rgn_retract(t.owner, 7), 0);
	assert_int_equal(shim_rgn_retract(t.owner, 7), -ENOENT);
	memset(region, 0, N);
	assert_int_equal(t_copy(&t, 7, base, buf, 8, true), -ENOENT);
	assert_int_equal(shim_rgn_publish(t.owner, 7, base, other, N, SHIM_RGN_WRITE), 0);
	assert_int_equal(t_copy(&t, 7, base, buf, 8, true), 8);
	assert_int_equal(t_copy(&t, 7, base, buf, 8, false), -EACCES);
	assert_memory_equal(other, buf, 8);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(region[i], 0);
	t_pair_close(&t);
}

/* More keys than slots: the ones published copy, the others say so. */
static void test_rgn_full(void **state)
{
	(void)state;
	enum { K = 2 * SHIM_RGN_SLOTS };
	static uint64_t cell[K];
	static bool pub[K];
	struct t_pair t;
	size_t npub = 0;

	t_pair_open(&t);
	for (size_t k = 0; k < K; k++) {
		int rc = shim_rgn_publish(t.owner, 1000 + k, 0, &cell[k], sizeof(cell[k]),
					  SHIM_RGN_WRITE);
		assert_true(rc == 0 || rc == -ENOSPC);
		pub[k] = rc == 0;
		npub += pub[k];
	}
	assert_true(npub > SHIM_RGN_SLOTS / 2 && npub <= SHIM_RGN_SLOTS);
	for (size_t k = 0; k < K; k++) {
		uint64_t v = k + 1;

		assert_int_equal(t_copy(&t, 1000 + k, 0, &v, sizeof(v), true),
				 pub[k] ? (ssize_t)sizeof(v) : -ENOENT);
		assert_int_equal(cell[k], pub[k] ? k + 1 : 0);
	}
	for (size_t k = 0; k < K; k++)
		assert_int_equal(shim_rgn_retract(t.owner, 1000 + k), pub[k] ? 0 : -ENOENT);
	t_pair_close(&t);
}

/* Another process of the uid rewrote the shared entries: the peer checks
 * its copy of them and copies nothing where they do not add up. */
static void test_rgn_hostile_entry(void **state)
{
	(void)state;
	static uint8_t region[256];
	uint8_t buf[16] = {1};
	struct t_pair t;
	struct shim_rgn *tab, *e = NULL;

	t_pair_open(&t);
	assert_int_equal(shim_rgn_publish(t.owner, 5, 0, region, sizeof(region),
					  SHIM_RGN_READ | SHIM_RGN_WRITE),
			 0);
	tab = (struct shim_rgn *)((uint8_t *)t.peer->ctl + t.owner->rgn_off);
	for (uint32_t i = 0; i < SHIM_RGN_SLOTS; i++)
		if (atomic_load(&tab[i].key) == 5 && atomic_load(&tab[i].seq))
			e = &tab[i];
	assert_non_null(e);
	/* vaddr + len past 2^64 */
	atomic_store(&e->vaddr, UINT64_MAX - 8);
	assert_int_equal(t_copy(&t, 5, 0, buf, 1, true), -ERANGE);
	/* a length reaching past 2^64 from the region's start */
	atomic_store(&e->vaddr, (uint64_t)(uintptr_t)region);
	atomic_store(&e->len, UINT64_MAX);
	assert_int_equal(t_copy(&t, 5, 0, buf, 1, true), -ERANGE);
	/* remote addresses near 2^64: offset arithmetic does not wrap */
	atomic_store(&e->len, sizeof(region));
	atomic_store(&e->raddr, UINT64_MAX - 4);
	assert_int_equal(t_copy(&t, 5, 3, buf, 1, true), -ERANGE);
	assert_int_equal(t_copy(&t, 5, UINT64_MAX, buf, sizeof(region) - 3, true), -ERANGE);
	/* an odd seq: being changed, not used */
	atomic_store(&e->raddr, 0);
	atomic_fetch_add(&e->seq, 1);
	assert_int_equal(t_copy(&t, 5, 0, buf, 1, true), -ENOENT);
	/* the owner goes by its private copy: the retract still finds it */
	assert_int_equal(shim_rgn_retract(t.owner, 5), 0);
	for (size_t i = 0; i < sizeof(region); i++)
		assert_int_equal(region[i], 0);
	t_pair_close(&t);
}

/* A peer copying into a region in a loop while the owner retracts it:
 * once the retract has returned, the memory does not change any more. */
struct t_copier {
	struct t_pair *t;
	struct shim_peer *peer;
	_Atomic bool stop;
	_Atomic uint64_t done;
	_Atomic uint64_t refused;
};

static void *t_copier_main(void *arg)
{
	struct t_copier *c = arg;
	static uint8_t src[65536];
	uint64_t n = 0;

	while (!atomic_load(&c->stop)) {
		struct iovec v = {src, sizeof(src)};

		memset(src, (int)(++n & 0xff) | 1, sizeof(src));
		if (shim_rgn_peer_copy(c->peer, 11, 0, &v, 1, sizeof(src), true) ==
		    (ssize_t)sizeof(src))
			atomic_fetch_add(&c->done, 1);
		else
			atomic_fetch_add(&c->refused, 1);
	}
	return NULL;
}

static void test_rgn_retract_race(void **state)
{
	(void)state;
	static uint8_t region[65536], snap[65536];
	struct t_pair t;
	struct t_copier c = {0};
	pthread_t th;

	t_pair_open(&t);
	c.t = &t;
	/* its own mapping and claim slot, like another process */
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &c.peer), 0);
	assert_int_equal(pthread_create(&th, NULL, t_copier_main, &c), 0);
	for (int round = 0; round < 2000; round++) {
		uint64_t start = fx_now_ms(), before, refused;

		memset(region, 0, sizeof(region));
		assert_int_equal(
			shim_rgn_publish(t.owner, 11, 0, region, sizeof(region), SHIM_RGN_WRITE),
			0);
		before = atomic_load(&c.done);
		while (atomic_load(&c.done) < before + 3)
			assert_true(fx_now_ms() - start < T_WAIT_MS);
		assert_int_equal(shim_rgn_retract(t.owner, 11), 0);
		memcpy(snap, region, sizeof(region));
		refused = atomic_load(&c.refused);
		while (atomic_load(&c.refused) < refused + 3)
			assert_true(fx_now_ms() - start < T_WAIT_MS);
		assert_memory_equal(snap, region, sizeof(region));
		assert_int_not_equal(region[0], 0); /* it was written before */
	}
	atomic_store(&c.stop, true);
	pthread_join(th, NULL);
	shim_peer_close(c.peer);
	t_pair_close(&t);
}

/* A copier that died in the middle (its rgn_busy still names the region)
 * does not hold the retract: its claim slot's lock went with it. */
static void test_rgn_dead_copier(void **state)
{
	(void)state;
	static uint8_t region[64];
	struct t_pair t;
	struct shim_rgn *tab;
	uint64_t busy = 0, t0;
	int fds[2];
	char ok;
	pid_t pid;

	t_pair_open(&t);
	assert_int_equal(shim_rgn_publish(t.owner, 21, 0, region, sizeof(region), SHIM_RGN_WRITE),
			 0);
	tab = (struct shim_rgn *)((uint8_t *)t.owner->map + t.owner->rgn_off);
	for (uint32_t i = 0; i < SHIM_RGN_SLOTS; i++)
		if (atomic_load(&tab[i].key) == 21 && atomic_load(&tab[i].seq))
			busy = ((uint64_t)(i + 1) << 32) | atomic_load(&tab[i].seq);
	assert_int_not_equal(busy, 0);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_peer *p;

		close(fds[0]);
		if (shim_peer_open(t.dev, &t.addr, &p))
			_exit(1);
		atomic_store(&p->claim->rgn_busy, busy);
		(void)!write(fds[1], "x", 1);
		_exit(0); /* dies "copying" */
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &ok, 1), 1);
	close(fds[0]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	t0 = fx_now_ms();
	assert_int_equal(shim_rgn_retract(t.owner, 21), 0);
	assert_true(fx_now_ms() - t0 < 5000);
	t_pair_close(&t);
}

/* Another user on the host: it cannot open the context (the segment is
 * 0600 and the uid is the trust boundary), and writing into the owner by
 * hand, knowing the address, is refused by the kernel.  Runs as root
 * only (it must become someone else). */
static void test_rgn_other_user(void **state)
{
	(void)state;
	static uint8_t region[4096];
	struct t_pair t;
	int status;
	pid_t pid;

	if (geteuid() != 0)
		skip();
	t_pair_open(&t);
	assert_int_equal(shim_rgn_publish(t.owner, 31, 0, region, sizeof(region),
					  SHIM_RGN_READ | SHIM_RGN_WRITE),
			 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_peer *p = NULL;
		struct shim_addr a = t.addr;
		uint8_t evil[64];
		struct iovec l = {evil, sizeof(evil)}, r = {region, sizeof(evil)};
		int bad = 0;

		memset(evil, 0x66, sizeof(evil));
		if (setgid(59998) || setuid(59998))
			_exit(3);
		a.uid = 59998; /* as if it were its own: the name then is not ours */
		bad += shim_peer_open(t.dev, &t.addr, &p) == 0;
		bad += shim_peer_open(t.dev, &a, &p) == 0;
		bad += process_vm_writev(getppid(), &l, 1, &r, 1, 0) >= 0;
		_exit(bad ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	for (size_t i = 0; i < sizeof(region); i++)
		assert_int_equal(region[i], 0);
	assert_int_equal(shim_rgn_retract(t.owner, 31), 0);
	t_pair_close(&t);
}

/* ---------------------------------------------------------------------
 * The provider: a target that never progresses.
 */
struct t_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static void t_ep_open(struct t_ep *e)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};

	memset(e, 0, sizeof(*e));
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_TAGGED, &e->info), 0);
	e->info->domain_attr->mr_mode = 0; /* offsets, requested keys */
	assert_int_equal(fx_prov()->fabric(e->info->fabric_attr, &e->fabric, NULL), 0);
	assert_int_equal(fi_domain(e->fabric, e->info, &e->domain, NULL), 0);
	assert_int_equal(fi_av_open(e->domain, &av_attr, &e->av, NULL), 0);
	assert_int_equal(fi_cq_open(e->domain, &cq_attr, &e->cq, NULL), 0);
	assert_int_equal(fi_endpoint(e->domain, e->info, &e->ep, NULL), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->av->fid, 0), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_enable(e->ep), 0);
}

static void t_ep_close(struct t_ep *e)
{
	fi_close(&e->ep->fid);
	fi_close(&e->cq->fid);
	fi_close(&e->av->fid);
	fi_close(&e->domain->fid);
	fi_close(&e->fabric->fid);
	fi_freeinfo(e->info);
}

#define T_BIG (1u << 20)
#define T_KEY 0x51

static uint8_t t_pat(size_t i, int seed)
{
	return (uint8_t)(i * 7 + (size_t)seed * 13 + (i >> 9));
}

/* The target: register, say where, then only answer the test's questions
 * on the pipe (never touching libfabric) until told to progress. */
static int t_target(int cmd, int rsp)
{
	struct t_ep e;
	struct fid_mr *mr;
	uint8_t *mem = calloc(1, T_BIG);
	char name[64];
	size_t len = sizeof(name);
	char c;
	int bad = 0;

	t_ep_open(&e);
	if (!mem || fi_mr_reg(e.domain, mem, T_BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, T_KEY,
			      0, &mr, NULL) ||
	    fi_getname(&e.ep->fid, name, &len))
		return 2;
	for (size_t i = 0; i < T_BIG; i++)
		mem[i] = t_pat(i, 1);
	if (write(rsp, &len, sizeof(len)) != sizeof(len) || write(rsp, name, len) != (ssize_t)len)
		return 2;
	while (read(cmd, &c, 1) == 1) {
		switch (c) {
		case 'w': /* the initiator wrote seed 2 over all of it */
			for (size_t i = 0; i < T_BIG; i++)
				bad += mem[i] != t_pat(i, 2);
			break;
		case 'c': /* close the region, then progress until told */
			fi_close(&mr->fid);
			memset(mem, 0, T_BIG);
			break;
		case 'p': { /* progress: receive one message, then check seed 3 */
			uint8_t m[8];
			struct fi_cq_tagged_entry ce;
			uint64_t t0 = fx_now_ms();

			if (fi_trecv(e.ep, m, sizeof(m), NULL, FI_ADDR_UNSPEC, 9, 0, NULL))
				return 2;
			while (fi_cq_read(e.cq, &ce, 1) != 1)
				if (fx_now_ms() - t0 > T_WAIT_MS)
					return 3;
			for (size_t i = 0; i < 65536; i++)
				bad += mem[i] != t_pat(i, 3);
			break;
		}
		case 'z': /* closed: nothing written since */
			for (size_t i = 0; i < T_BIG; i++)
				bad += mem[i] != 0;
			break;
		case 's': { /* serve requests (the refused write) until 'e' */
			struct fi_cq_tagged_entry ce;
			struct pollfd pf = {.fd = cmd, .events = POLLIN};
			uint64_t t0 = fx_now_ms();

			while (poll(&pf, 1, 0) == 0)
				if (fi_cq_read(e.cq, &ce, 1) == -FI_EAGAIN && fx_now_ms() - t0 > T_WAIT_MS)
					return 3;
			if (read(cmd, &c, 1) != 1 || c != 'e')
				return 2;
			break;
		}
		case 'q':
			t_ep_close(&e);
			free(mem);
			return 0;
		}
		if (write(rsp, &bad, sizeof(bad)) != sizeof(bad))
			return 2;
	}
	return 2;
}

static int t_ask(int cmd, int rsp, char c)
{
	int bad = -1;

	assert_int_equal(write(cmd, &c, 1), 1);
	assert_int_equal(read(rsp, &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	return bad;
}

static void test_rgn_passive_target(void **state)
{
	(void)state;
	int cp[2], rp[2], status, ctx;
	char name[64];
	size_t len;
	struct t_ep e;
	fi_addr_t tgt;
	uint8_t *buf = malloc(T_BIG);
	struct fi_cq_tagged_entry ce;
	pid_t pid;

	assert_non_null(buf);
	assert_int_equal(pipe(cp), 0);
	assert_int_equal(pipe(rp), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(cp[1]);
		close(rp[0]);
		_exit(t_target(cp[0], rp[1]));
	}
	close(cp[0]);
	close(rp[1]);
	assert_int_equal(read(rp[0], &len, sizeof(len)), (ssize_t)sizeof(len));
	assert_true(len <= sizeof(name));
	assert_int_equal(read(rp[0], name, len), (ssize_t)len);
	t_ep_open(&e);
	if (!opx_env.rma_direct_write || !opx_env.rma_direct_read || !opx_env.rma_direct_idle_ms) {
		/* FI_OPX_RMA_DIRECT_*=0: nothing to test */
		assert_int_equal(write(cp[1], "q", 1), 1);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		t_ep_close(&e);
		free(buf);
		skip();
	}
	assert_int_equal(fi_av_insert(e.av, name, 1, &tgt, 0, NULL), 1);

	/* reads and writes complete without the target ever calling
	 * libfabric: at and above the threshold always, below it because the
	 * target does not poll (FI_OPX_RMA_DIRECT_IDLE_MS: it last polled, if
	 * ever, before it registered, and that is over 1 ms ago now) */
	const size_t thr = opx_env.rma_direct_write;
	const size_t sizes[] = {1, 8, thr - 1, thr, thr + 1, 65536, T_BIG};
	struct timespec idle = {0, 20 * 1000 * 1000};
	nanosleep(&idle, NULL);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], off = s == 4 ? 3 : 0;

		if (n + off > T_BIG)
			continue;
		memset(buf, 0xee, T_BIG);
		assert_int_equal(fi_read(e.ep, buf, n, NULL, tgt, off, T_KEY, &ctx), 0);
		assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, NULL), 0);
		for (size_t i = 0; i < n; i++)
			if (buf[i] != t_pat(i + off, 1))
				fail_msg("read of %zu at %zu: byte %zu differs", n, off, i);
	}
	for (size_t i = 0; i < T_BIG; i++)
		buf[i] = t_pat(i, 2);
	/* small writes first (they are overwritten by the big one) */
	assert_int_equal(fi_write(e.ep, buf, 1, NULL, tgt, 0, T_KEY, &ctx), 0);
	assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, NULL), 0);
	assert_int_equal(fi_write(e.ep, buf + 5, thr - 1, NULL, tgt, 5, T_KEY, &ctx), 0);
	assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, NULL), 0);
	assert_int_equal(fi_write(e.ep, buf, T_BIG, NULL, tgt, 0, T_KEY, &ctx), 0);
	assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, NULL), 0);
	assert_int_equal(t_ask(cp[1], rp[0], 'w'), 0);

	/* a direct write, then a message: the data is there when it arrives */
	for (size_t i = 0; i < 65536; i++)
		buf[i] = t_pat(i, 3);
	assert_int_equal(fi_write(e.ep, buf, 65536, NULL, tgt, 0, T_KEY, &ctx), 0);
	assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, NULL), 0);
	assert_int_equal(write(cp[1], "p", 1), 1);
	assert_int_equal(fi_tsend(e.ep, buf, 8, NULL, tgt, 9, &ctx), 0);
	assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, NULL), 0);
	int bad = -1;
	assert_int_equal(read(rp[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	assert_int_equal(bad, 0);

	/* closed: a write goes through the target, which refuses it, and
	 * the memory it gave back is not written */
	assert_int_equal(t_ask(cp[1], rp[0], 'c'), 0);
	assert_int_equal(write(cp[1], "s", 1), 1);
	assert_int_equal(fi_write(e.ep, buf, 65536, NULL, tgt, 0, T_KEY, &ctx), 0);
	assert_int_equal(fx_cq_wait(e.cq, &ctx, T_WAIT_MS, &ce), FI_EACCES);
	assert_int_equal(write(cp[1], "e", 1), 1);
	assert_int_equal(read(rp[0], &bad, sizeof(bad)), (ssize_t)sizeof(bad));
	assert_int_equal(t_ask(cp[1], rp[0], 'z'), 0);

	assert_int_equal(write(cp[1], "q", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	t_ep_close(&e);
	close(cp[1]);
	close(rp[0]);
	free(buf);
}

/* One endpoint writing to itself: a small write waits in its own ring
 * for progress; a large write posted behind it must not overtake it by
 * copying directly (WAW), nor may a fenced one.  Then the direct path
 * with nothing outstanding: its completion comes with no progress, and
 * a write to a read-only region or out of range is refused by the
 * target with the memory unchanged. */
static void test_rgn_order(void **state)
{
	(void)state;
	const size_t big = opx_env.rma_direct_write ? opx_env.rma_direct_write + 100 : 65536;
	uint8_t *mem = calloc(1, big), *ro = calloc(1, big), *src = malloc(big), small[8];
	struct fid_mr *mr, *mr_ro;
	struct t_ep e;
	fi_addr_t self;
	char name[64];
	size_t len = sizeof(name);
	int c1, c2, c3;

	/* small writes through the ring even to an endpoint that is not
	 * polling (itself, here): what is tested is the order behind them */
	int idle_ms = opx_env.rma_direct_idle_ms;
	opx_env.rma_direct_idle_ms = 0;
	assert_non_null(mem);
	assert_non_null(ro);
	assert_non_null(src);
	t_ep_open(&e);
	assert_int_equal(fi_getname(&e.ep->fid, name, &len), 0);
	assert_int_equal(fi_av_insert(e.av, name, 1, &self, 0, NULL), 1);
	assert_int_equal(fi_mr_reg(e.domain, mem, big, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0x61,
				   0, &mr, NULL),
			 0);
	assert_int_equal(fi_mr_reg(e.domain, ro, big, FI_REMOTE_READ, 0, 0x62, 0, &mr_ro, NULL),
			 0);
	for (int round = 0; round < 2; round++) {
		memset(small, 0xaa, sizeof(small));
		memset(src, 0xbb, big);
		memset(mem, 0, big);
		assert_int_equal(fi_write(e.ep, small, sizeof(small), NULL, self, 0, 0x61, &c1), 0);
		if (round == 0) {
			assert_int_equal(fi_write(e.ep, src, big, NULL, self, 0, 0x61, &c2), 0);
		} else {
			struct iovec v = {src, big};
			struct fi_rma_iov r = {.addr = 0, .len = big, .key = 0x61};
			struct fi_msg_rma m = {.msg_iov = &v, .iov_count = 1, .addr = self,
					       .rma_iov = &r, .rma_iov_count = 1, .context = &c2};
			/* fenced behind the outstanding write (the call progresses
			 * until that one completes) */
			assert_int_equal(fi_writemsg(e.ep, &m, FI_FENCE | FI_COMPLETION), 0);
		}
		/* completions in posting order (fx_cq_wait drops others) */
		assert_int_equal(fx_cq_wait(e.cq, &c1, T_WAIT_MS, NULL), 0);
		assert_int_equal(fx_cq_wait(e.cq, &c2, T_WAIT_MS, NULL), 0);
		for (size_t i = 0; i < big; i++)
			if (mem[i] != 0xbb)
				fail_msg("round %d: byte %zu is 0x%02x: the later write was overtaken",
					 round, i, mem[i]);
	}
	/* refused by the target, whichever path was tried first */
	assert_int_equal(fi_write(e.ep, src, big, NULL, self, 0, 0x62, &c3), 0);
	assert_int_equal(fx_cq_wait(e.cq, &c3, T_WAIT_MS, NULL), FI_EACCES);
	assert_int_equal(fi_write(e.ep, src, big, NULL, self, 1, 0x61, &c3), 0);
	assert_int_equal(fx_cq_wait(e.cq, &c3, T_WAIT_MS, NULL), FI_EINVAL);
	for (size_t i = 0; i < big; i++)
		assert_int_equal(ro[i], 0);
	fi_close(&mr->fid);
	fi_close(&mr_ro->fid);
	t_ep_close(&e);
	free(mem);
	free(ro);
	free(src);
	opx_env.rma_direct_idle_ms = idle_ms;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* first: forks before this process holds any libfabric object */
		cmocka_unit_test(test_rgn_passive_target),
		cmocka_unit_test(test_rgn_checked),
		cmocka_unit_test(test_rgn_full),
		cmocka_unit_test(test_rgn_hostile_entry),
		cmocka_unit_test(test_rgn_retract_race),
		cmocka_unit_test(test_rgn_dead_copier),
		cmocka_unit_test(test_rgn_order),
		cmocka_unit_test(test_rgn_other_user),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
