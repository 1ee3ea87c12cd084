/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_shim.c - unit tests of the driver shim (software SuperNIC, shm
 * wire) as a device: its units and parameters, assigning context numbers
 * and segments (owner-only, reclaimed from dead owners and old garbage,
 * never from a live owner), opening peers (every refusal: stale, gone,
 * other host, ABI, not ready) and the hfi1 ABI structures a context
 * fills.  The rings, credits and producers are tested in
 * test_shim_ring.c; what both share is shim_fixture.c.
 *
 * Contexts are opened on the last unit (unit 7 of 8), which no other
 * suite uses, so that other suites running on the same host (unit 0 by
 * default) do not disturb the context-number assertions.  Every loop is
 * bounded in count and in time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim_fixture.h"

const int t_unit = T_UNITS - 1;
const uint16_t t_jkey = 0x4a4b;

/* ---------------------------------------------------------------------
 * Helpers
 */
/* Where the next context-number search on T_UNIT starts (normally
 * random per process, then just past the last number taken). */
static void t_cursor(struct shim_dev *dev, unsigned int n)
{
	atomic_store(&dev->ctx_next[T_UNIT], n % SHIM_MAX_CTXTS);
}

static bool t_seg_exists(unsigned int unit, unsigned int ctx)
{
	char name[SHIM_NAME_MAX];
	int fd;

	shim_dev_name_segment(name, sizeof(name), (uint32_t)getuid(), unit, ctx);
	fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ---------------------------------------------------------------------
 * Device model
 */
static void test_dev_refcount(void **state)
{
	struct shim_dev *a = t_dev_open(), *b = t_dev_open();
	struct shim_unit_info ui;

	(void)state;
	assert_ptr_equal(a, b);
	assert_int_equal(shim_dev_num_units(a), T_UNITS);
	assert_int_not_equal(shim_dev_host_id(a), 0);
	for (int u = 0; u < T_UNITS; u++) {
		assert_int_equal(shim_dev_unit_info(a, u, &ui), 0);
		assert_int_equal(ui.unit, u);
		assert_int_equal(ui.port, 1);
		assert_int_equal(ui.state, 1);
		assert_int_equal(ui.mtu, T_MTU);
		assert_true(ui.lid > 0 && ui.lid < 0xC000);
		assert_true(ui.numa_node >= 0);
	}
	/* LIDs: distinct between units, and between hosts of one subnet up
	 * to a /16: the low 16 bits of the host's IPv4 address, times the
	 * unit count, plus the unit */
	uint32_t ip = ntohl(shim_dev_host_ipv4());
	for (int u = 0; u < T_UNITS; u++) {
		struct shim_unit_info uj;

		assert_int_equal(shim_dev_unit_info(a, u, &ui), 0);
		for (int v = u + 1; v < T_UNITS; v++) {
			assert_int_equal(shim_dev_unit_info(a, v, &uj), 0);
			assert_int_not_equal(ui.lid, uj.lid);
		}
		if ((ip >> 24) != 127)
			assert_int_equal(ui.lid, 1 + ((ip & 0xffffu) * T_UNITS + (uint32_t)u) % 0xBFFEu);
	}
	assert_int_equal(shim_dev_unit_info(a, T_UNITS, &ui), -EINVAL);
	assert_int_equal(shim_dev_unit_info(a, -1, &ui), -EINVAL);
	assert_int_equal(shim_dev_unit_info(a, 0, NULL), -EINVAL);
	assert_int_equal(shim_dev_num_units(NULL), -EINVAL);
	int sel = shim_dev_select_unit(a);
	assert_true(sel >= 0 && sel < T_UNITS);
	shim_dev_close(b);
	shim_dev_close(a);
	shim_dev_close(NULL);
}

static void test_dev_params(void **state)
{
	struct shim_dev_params p;
	struct shim_dev *dev = NULL;

	(void)state;
	assert_int_equal(shim_dev_open(NULL, &dev), -EINVAL);
	p = t_params();
	assert_int_equal(shim_dev_open(&p, NULL), -EINVAL);
#define T_BAD(field, val)                                                                          \
	do {                                                                                       \
		p = t_params();                                                                    \
		p.field = (val);                                                                   \
		assert_int_equal(shim_dev_open(&p, &dev), -EINVAL);                                \
	} while (0)
	T_BAD(num_units, T_UNITS + 1);
	T_BAD(num_units, -1);
	T_BAD(mtu, 100);
	T_BAD(mtu, 32);
	T_BAD(mtu, SHIM_MTU_MAX + 64);
	T_BAD(hdrq_cnt, 100);
	T_BAD(hdrq_cnt, 32);
	T_BAD(hdrq_cnt, 131072);
	T_BAD(egr_bytes, 3 * 4096);
	T_BAD(egr_bytes, 2048); /* < 4 MTU */
	T_BAD(egr_bytes, 1u << 31);
#undef T_BAD
	/* zero means default */
	memset(&p, 0, sizeof(p));
	p.force_unit = -1;
	assert_int_equal(shim_dev_open(&p, &dev), 0);
	struct shim_unit_info ui;
	assert_int_equal(shim_dev_num_units(dev), 1);
	assert_int_equal(shim_dev_unit_info(dev, 0, &ui), 0);
	assert_int_equal(ui.mtu, SHIM_MTU_DEFAULT);
	assert_int_equal(shim_dev_select_unit(dev), 0);
	shim_dev_close(dev);
}

static void test_dev_force_unit(void **state)
{
	struct shim_dev_params p = t_params();
	struct shim_dev *dev;

	(void)state;
	p.force_unit = 2;
	assert_int_equal(shim_dev_open(&p, &dev), 0);
	assert_int_equal(shim_dev_select_unit(dev), 2);
	shim_dev_close(dev);
	p.num_units = 2;
	p.force_unit = 5;
	assert_int_equal(shim_dev_open(&p, &dev), 0);
	assert_int_equal(shim_dev_select_unit(dev), -EINVAL);
	shim_dev_close(dev);
	assert_int_equal(shim_dev_select_unit(NULL), -EINVAL);
}

/* ---------------------------------------------------------------------
 * Context assignment
 */
static void test_ctx_assign(void **state)
{
	struct shim_ctx *a, *b;
	struct shim_dev *dev = t_dev_open();
	struct shim_addr aa, ba;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &a, NULL, NULL), 0);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &b, NULL, NULL), 0);
	shim_ctx_addr(a, &aa);
	shim_ctx_addr(b, &ba);
	assert_int_not_equal(aa.ctx, ba.ctx);
	assert_int_not_equal(aa.nonce, ba.nonce);
	assert_int_equal(aa.unit, T_UNIT);
	assert_int_equal(aa.uid, getuid());
	assert_int_equal(aa.pid, getpid());
	assert_int_equal(aa.host_id, shim_dev_host_id(dev));
	assert_true(t_seg_exists(T_UNIT, aa.ctx));

	/* owner-only permissions whatever the umask */
	char name[SHIM_NAME_MAX];
	struct stat st;
	shim_dev_name_segment(name, sizeof(name), aa.uid, aa.unit, aa.ctx);
	int fd = shm_open(name, O_RDONLY, 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	close(fd);

	/* a forked child closing its inherited copy leaves it alone */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shim_ctx_close(a);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_true(t_seg_exists(T_UNIT, aa.ctx));
	assert_int_equal(atomic_load(&shim_ctx_rx(a)->ctl->ready), 1);

	shim_ctx_close(a);
	assert_false(t_seg_exists(T_UNIT, aa.ctx));
	errno = 0;
	assert_true(shm_open(name, O_RDONLY, 0) < 0 && errno == ENOENT);
	/* a freed number is handed out again when the search reaches it */
	uint16_t freed = aa.ctx;
	t_cursor(dev, freed);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &a, NULL, NULL), 0);
	shim_ctx_addr(a, &aa);
	assert_int_equal(aa.ctx, freed);
	shim_ctx_close(a);
	shim_ctx_close(b);
	assert_false(t_seg_exists(T_UNIT, ba.ctx));

	assert_int_equal(shim_ctx_open(dev, T_UNITS, &a, NULL, NULL), -EINVAL);
	assert_int_equal(shim_ctx_open(dev, -1, &a, NULL, NULL), -EINVAL);
	assert_int_equal(shim_ctx_open(NULL, 0, &a, NULL, NULL), -EINVAL);
	assert_int_equal(shim_ctx_open(dev, 0, NULL, NULL, NULL), -EINVAL);
	shim_dev_close(dev);
}

/* A child opens a context and reports its address.  With stay NULL it
 * dies at once without closing (a stale segment stays behind); else it
 * lives until *stay, the write end of a pipe, is written or closed, then
 * closes the context properly.  Returns the child's pid. */
static pid_t t_child_ctx(struct shim_dev *dev, int *stay, struct shim_addr *out)
{
	int up[2], down[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pollfd pfd = {.fd = down[0], .events = POLLIN};
		struct shim_ctx *c = NULL;
		struct shim_addr a;

		close(down[1]);
		memset(&a, 0, sizeof(a));
		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, &a);
		if (write(up[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
		if (!stay)
			_exit(0);
		poll(&pfd, 1, T_DEADLINE_S * 1000);
		shim_ctx_close(c);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], out, sizeof(*out)), (ssize_t)sizeof(*out));
	close(up[0]);
	assert_int_equal(out->pid, (uint32_t)pid);
	assert_true(t_seg_exists(T_UNIT, out->ctx));
	if (stay) {
		*stay = down[1];
	} else {
		close(down[1]);
		assert_int_equal(waitpid(pid, NULL, 0), pid);
	}
	return pid;
}

static void test_ctx_stale_owner(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_addr dead, mine;
	struct shim_peer *peer;
	struct shim_ctx *c;
	uint64_t reclaimed;

	(void)state;
	t_child_ctx(dev, NULL, &dead);
	/* a peer that mapped it sees the owner gone */
	assert_int_equal(shim_peer_open(dev, &dead, &peer), 0);
	assert_false(shim_peer_alive(peer));
	shim_peer_wake(peer); /* nobody listens: ignored */
	shim_peer_close(peer);

	reclaimed = atomic_load(&dev->stale_reclaimed);
	t_cursor(dev, dead.ctx);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &mine);
	assert_int_equal(mine.ctx, dead.ctx); /* reclaimed, not skipped */
	assert_int_not_equal(mine.nonce, dead.nonce);
	assert_int_equal(atomic_load(&dev->stale_reclaimed), reclaimed + 1);
	/* the old address is now stale */
	assert_int_equal(shim_peer_open(dev, &dead, &peer), -ESTALE);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* Hand-made leftovers: a garbage segment is reclaimed only once old;
 * a valid-looking ctl naming an exited pid is reclaimed at once.  (A live
 * owner is never reclaimed: test_ctx_live_not_reused.) */
static void test_ctx_stale_garbage(void **state)
{
	struct shim_dev *dev = t_dev_open();
	char name[SHIM_NAME_MAX], junk[SHIM_CTL_PAD];
	struct shim_ctx *c;
	struct shim_addr a;
	unsigned int n;
	int fd;

	(void)state;
	/* find a free number */
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	n = a.ctx;
	shim_ctx_close(c);
	t_cursor(dev, n);
	shim_dev_name_segment(name, sizeof(name), (uint32_t)getuid(), T_UNIT, n);

	/* young garbage: skipped */
	memset(junk, 0xa5, sizeof(junk));
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_not_equal(a.ctx, n);
	shim_ctx_close(c);

	/* the same garbage, one minute old: reclaimed */
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 60;
	ts[1] = ts[0];
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
	t_cursor(dev, n);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(a.ctx, n);
	shim_ctx_close(c);

	/* a fake but well-formed ctl whose owner pid has exited */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	struct shim_rcv_ctl *ctl;
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SHIM_CTL_PAD), 0);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(ctl != MAP_FAILED);
	ctl->owner_pid = (uint32_t)pid;
	ctl->magic = SHIM_CTL_MAGIC;
	munmap(ctl, sizeof(*ctl));
	close(fd);
	t_cursor(dev, n);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(a.ctx, n);

	shim_ctx_close(c);
	shim_dev_close(dev);
}

static void test_ctx_live_not_reused(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_addr live, mine;
	struct shim_peer *peer;
	struct shim_ctx *c;
	int stay, st = 0;
	pid_t pid;

	(void)state;
	pid = t_child_ctx(dev, &stay, &live);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
		shim_ctx_addr(c, &mine);
		assert_int_not_equal(mine.ctx, live.ctx);
		shim_ctx_close(c);
	}
	assert_int_equal(shim_peer_open(dev, &live, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);

	close(stay);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_false(t_seg_exists(T_UNIT, live.ctx)); /* its close removed it */
	assert_int_equal(shim_peer_open(dev, &live, &peer), -ENOENT);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Peers and ABI structures
 */
static void test_peer_errors(void **state)
{
	struct shim_peer *peer = NULL;
	struct shim_addr bad;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(t.peer->lid, t.addr.lid);
	assert_int_equal(t.peer->ctx, t.addr.ctx);
	assert_int_equal(t.peer->jkey, T_JKEY);
	assert_int_equal(t.peer->mtu, T_MTU);
	assert_int_equal(t.peer->hdrq_cnt, T_HDRQ);
	assert_int_equal(t.peer->egr_blocks, T_EGR_BLOCKS);
	assert_int_equal(t.peer->refcnt, 1);
	assert_true(shim_peer_alive(t.peer));

	bad = t.addr;
	bad.nonce ^= 0x5a5a;
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -ESTALE);
	bad = t.addr;
	bad.ctx = SHIM_MAX_CTXTS - 1;
	assert_false(t_seg_exists(T_UNIT, bad.ctx));
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -ENOENT);
	bad = t.addr;
	bad.host_id ^= 1;
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -EHOSTUNREACH);
	bad = t.addr;
	bad.ctx = SHIM_MAX_CTXTS;
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -EINVAL);
	assert_int_equal(shim_peer_open(NULL, &t.addr, &peer), -EINVAL);
	assert_int_equal(shim_peer_open(t.dev, NULL, &peer), -EINVAL);
	assert_int_equal(shim_peer_open(t.dev, &t.addr, NULL), -EINVAL);

	/* ABI major mismatch, then not ready */
	uint32_t ver = t.rx->ctl->abi_version;
	t.rx->ctl->abi_version = (SHIM_ABI_MAJOR + 1) << 16;
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), -EPROTO);
	t.rx->ctl->abi_version = ver | 7; /* any minor is fine */
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), 0);
	shim_peer_close(peer);
	t.rx->ctl->abi_version = ver;
	uint64_t seg = t.rx->ctl->seg_size;
	t.rx->ctl->seg_size = seg * 2; /* larger than the segment */
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), -EPROTO);
	t.rx->ctl->seg_size = seg;
	atomic_store(&t.rx->ctl->ready, 0);
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), -EAGAIN);
	assert_false(shim_peer_alive(t.peer));
	atomic_store(&t.rx->ctl->ready, 1);
	assert_true(shim_peer_alive(t.peer));

	/* shared peer: the last close unmaps */
	t.peer->refcnt++;
	shim_peer_close(t.peer);
	assert_int_equal(t.peer->refcnt, 1);
	shim_peer_close(NULL);
	assert_false(shim_peer_alive(NULL));

	assert_non_null(shim_dev_strerror(-ESTALE));
	assert_string_not_equal(shim_dev_strerror(-ESTALE), shim_dev_strerror(-ENOENT));
	assert_string_equal(shim_dev_strerror(-12345), "unknown shim error");
	t_pair_close(&t);
}

static void test_hfi1_info(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct hfi1_ctxt_info ci;
	struct hfi1_base_info bi;
	struct shim_unit_info ui;
	struct shim_ctx *c;
	struct shim_rx *rx;

	(void)state;
	memset(&ci, 0xff, sizeof(ci));
	memset(&bi, 0xff, sizeof(bi));
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, &ci, &bi), 0);
	rx = shim_ctx_rx(c);
	assert_int_equal(shim_dev_unit_info(dev, T_UNIT, &ui), 0);
	assert_true(ci.runtime_flags & HFI1_CAP_SDMA);
	assert_true(ci.runtime_flags & HFI1_CAP_NODROP_RHQ_FULL);
	assert_int_equal(ci.rcvegr_size, T_MTU);
	assert_int_equal(ci.num_active, T_UNITS);
	assert_int_equal(ci.unit, T_UNIT);
	assert_int_equal(ci.ctxt, rx->ctx);
	assert_int_equal(ci.subctxt, 0);
	assert_int_equal(ci.credits, T_EGR_BLOCKS);
	assert_int_equal(ci.numa_node, ui.numa_node);
	assert_int_equal(ci.rec_cpu, 0xffff);
	assert_int_equal(ci.send_ctxt, rx->ctx);
	assert_int_equal(ci.egrtids, T_EGR / T_MTU);
	assert_int_equal(ci.rcvhdrq_cnt, T_HDRQ);
	assert_int_equal(ci.rcvhdrq_entsize, 64);
	assert_int_equal(ci.sdma_ring_size, SHIM_SDMA_RING_DEFAULT);
	assert_int_equal(ci.rcvtids, SHIM_TID_MAX);

	assert_int_equal(bi.hw_version, SHIM_ABI_VERSION);
	assert_int_equal(bi.sw_version, (HFI1_USER_SWMAJOR << 16) | HFI1_USER_SWMINOR);
	assert_int_equal(bi.jkey, T_JKEY);
	assert_int_equal(bi.bthqp, 0x80);
	assert_int_equal(bi.sc_credits_addr, (uintptr_t)&rx->ctl->hdr_head);
	assert_int_equal(bi.rcvhdr_bufbase, (uintptr_t)rx->hdrq);
	assert_int_equal(bi.rcvegr_bufbase, (uintptr_t)rx->egr);
	assert_int_equal(bi.status_bufbase, (uintptr_t)rx->ctl);
	assert_int_equal(bi.pio_bufbase, 0);
	assert_int_equal(bi.user_regbase, 0);

	/* the fast-path view agrees with the control block */
	assert_int_equal(rx->lid, ui.lid);
	assert_int_equal(rx->ctl->lid, ui.lid);
	assert_int_equal(rx->egr_mask, T_EGR_BLOCKS - 1);
	assert_int_not_equal(rx->ctl->owner_start, 0);
	assert_int_equal(rx->ctl->seg_size, SHIM_CTL_PAD + T_HDRQ * 64 + T_EGR +
						    SHIM_CLAIM_SLOTS * sizeof(struct shim_claim) +
						    SHIM_RGN_SLOTS * sizeof(struct shim_rgn));
	assert_int_equal(rx->ctl->claim_off, SHIM_CTL_PAD + T_HDRQ * 64 + T_EGR);
	assert_int_equal(rx->ctl->claim_cnt, SHIM_CLAIM_SLOTS);
	assert_int_equal(rx->ctl->rgn_off,
			 rx->ctl->claim_off + SHIM_CLAIM_SLOTS * sizeof(struct shim_claim));
	assert_int_equal(rx->ctl->rgn_cnt, SHIM_RGN_SLOTS);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dev_refcount),
		cmocka_unit_test(test_dev_params),
		cmocka_unit_test(test_dev_force_unit),
		cmocka_unit_test(test_ctx_assign),
		cmocka_unit_test(test_ctx_stale_owner),
		cmocka_unit_test(test_ctx_stale_garbage),
		cmocka_unit_test(test_ctx_live_not_reused),
		cmocka_unit_test(test_peer_errors),
		cmocka_unit_test(test_hfi1_info),
	};

	/* a producer writing to a context whose owner died must not kill us */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
