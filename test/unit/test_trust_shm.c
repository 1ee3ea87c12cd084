/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_trust_shm.c - the shim's shared receive contexts against
 * processes of our own uid that rewrite a context's control block or are
 * killed with their contexts open: senders mapping a context with a
 * hostile geometry (driver-shim/shim_shm.c), the owner filling the holes
 * of dead senders also when the segment's name was replaced by another
 * context (shim_claim.c), and the sweep of killed endpoints' segments at
 * the next open (shim_ctx.c).
 *
 * Shim tests use unit 5 of 8 (test_shim uses 7, test_sdma 6, the
 * provider 0).  A sender that could crash runs in a child, every loop is
 * bounded in count and time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trust_fixture.h"

/* ---------------------------------------------------------------------
 * Issue 28 item 8: a process of our own uid rewrites a live context's
 * control block; endpoints killed with their contexts open.
 */
#define T_WRAP(len) ((uint64_t)0 - (uint64_t)(len)) /* 2^64 - len: + len wraps to 0 */

/* A child of ours the teardown kills if the test fails before it ends. */
static void t_track(pid_t pid)
{
	for (size_t i = 0; i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++) {
		if (!t_squatters[i]) {
			t_squatters[i] = pid;
			return;
		}
	}
}

static void t_untrack(pid_t pid)
{
	for (size_t i = 0; i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++)
		if (t_squatters[i] == pid)
			t_squatters[i] = 0;
}

/* The segment of a context, mapped a second time as another process of
 * our uid would: whatever is written here, the owner's mapping sees. */
static struct shim_rcv_ctl *t_ctl_map(const struct shim_addr *a)
{
	char name[SHIM_NAME_MAX];
	struct shim_rcv_ctl *ctl;
	int fd;

	shim_dev_name_segment(name, sizeof(name), a->uid, a->unit, a->ctx);
	fd = shm_open(name, O_RDWR | O_NOFOLLOW, 0);
	assert_true(fd >= 0);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(ctl != MAP_FAILED);
	return ctl;
}

/* The geometry fields of the control block, as the owner wrote them or
 * as the attacker sets them. */
struct t_geom {
	uint64_t hdrq_off, egr_off, seg_size, claim_off;
	uint32_t claim_cnt;
};

static void t_geom_get(const struct shim_rcv_ctl *ctl, struct t_geom *g)
{
	g->hdrq_off = ctl->hdrq_off;
	g->egr_off = ctl->egr_off;
	g->seg_size = ctl->seg_size;
	g->claim_off = ctl->claim_off;
	g->claim_cnt = ctl->claim_cnt;
}

static void t_geom_set(struct shim_rcv_ctl *ctl, const struct t_geom *g)
{
	ctl->hdrq_off = g->hdrq_off;
	ctl->egr_off = g->egr_off;
	ctl->seg_size = g->seg_size;
	ctl->claim_off = g->claim_off;
	ctl->claim_cnt = g->claim_cnt;
}

/* One header-only packet with tag.  0, or the reservation's -errno. */
static int t_send1(struct shim_peer *p, uint64_t tag)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	int ret = shim_pio_reserve(p, 1, 0, &r);

	if (ret)
		return ret;
	e = shim_pio_entry(p, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.jkey = p->jkey;
	e->hdr.dlid = p->lid;
	e->hdr.dctx = p->ctx;
	e->hdr.tag = tag;
	shim_pio_publish(p, &r, 0, 0);
	return 0;
}

/* Bit 0: the open returned what it should; bit 1: an opened peer's claim
 * slot lies inside its mapping; bit 2: a send through it went in. */
#define T_PEER_OK 7
static int t_peer_try(struct shim_dev *dev, const struct shim_addr *a, int want)
{
	struct shim_peer *p = NULL;
	int ret = shim_peer_open(dev, a, &p), res = 0;

	if (ret == want)
		res |= 1;
	if (ret == 0) {
		const uint8_t *base = (const uint8_t *)p->ctl, *c = (const uint8_t *)p->claim;

		if (c >= base && c + sizeof(struct shim_claim) <= base + p->map_len)
			res |= 2;
		if (t_send1(p, 0x5e4d) == 0)
			res |= 4;
		shim_peer_close(p);
	} else {
		res |= 6;
	}
	return res;
}

/* In a child that runs a sender against a hostile block: a crash must
 * kill it, not be caught by cmocka's handlers, which would go on running
 * the suite in the child. */
static void t_child_crash_plainly(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	alarm(T_HANG_S);
}

/* Run t_peer_try in a child, so that a sender that crashes fails this
 * case by name instead of taking the suite with it.  Returns the child's
 * T_PEER_OK bits, or 128 + the signal that killed it. */
static int t_peer_try_child(struct shim_dev *dev, const struct shim_addr *a, int want)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		t_child_crash_plainly();
		_exit(t_peer_try(dev, a, want));
	}
	return t_wait(pid);
}

/* Take the packets of t_send1 (and anything else) off the ring. */
static unsigned int t_drain_all(struct shim_ctx *c)
{
	struct shim_rx *rx = shim_ctx_rx(c);
	struct shim_rhq_entry *e;
	unsigned int n = 0;

	while ((e = shim_rx_peek(rx))) {
		shim_rx_release(rx, e);
		n++;
	}
	return n;
}

/* A child that maps a (before the attack), waits for a byte on go[0],
 * then reserves npkts header entries and nbytes of eager space without
 * publishing them, says so on up[1] and waits to be killed. */
static pid_t t_reserver(const struct shim_addr *a, uint32_t npkts, uint32_t nbytes, int *go)
{
	int up[2], dn[2];
	pid_t pid;
	char b;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(dn), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params prm = {.force_unit = -1};
		struct shim_pio_resv r = {0};
		struct shim_dev *dev;
		struct shim_peer *p;

		close(up[0]);
		close(dn[1]);
		alarm(T_DEADLINE_S);
		if (shim_dev_open(&prm, &dev) || shim_peer_open(dev, a, &p))
			_exit(2);
		b = 'o';
		if (write(up[1], &b, 1) != 1 || read(dn[0], &b, 1) != 1)
			_exit(3);
		if (shim_pio_reserve(p, npkts, nbytes, &r))
			_exit(4);
		b = 'r';
		if (write(up[1], &b, 1) != 1)
			_exit(5);
		pause();
		_exit(6);
	}
	close(up[1]);
	close(dn[0]);
	assert_int_equal(read(up[0], &b, 1), 1); /* mapped */
	go[0] = up[0];
	go[1] = dn[1];
	return pid;
}

/* Let a t_reserver child reserve, then kill it: its hole stays. */
static void t_reserver_kill(pid_t pid, int *go)
{
	char b = 'g';
	int st = 0;

	assert_int_equal(write(go[1], &b, 1), 1);
	assert_int_equal(read(go[0], &b, 1), 1);
	assert_int_equal(b, 'r');
	close(go[0]);
	close(go[1]);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
}

/* Consume until a packet with tag arrives or T_HANG_S pass, driving the
 * dead-sender recovery while the ring is idle; *dead counts the entries
 * the recovery filled.  True when the tagged packet arrived. */
static bool t_recv_tag(struct shim_ctx *c, uint64_t tag, unsigned int *dead)
{
	struct shim_rx *rx = shim_ctx_rx(c);
	double end = t_now() + T_HANG_S;

	while (t_now() < end) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);
		bool hit;

		if (!e) {
			shim_claim_rx_recover(c);
			usleep(1000);
			continue;
		}
		hit = !(e->rhf & SHIM_RHF_ERR_DEAD) && e->hdr.tag == tag;
		if (e->rhf & SHIM_RHF_ERR_DEAD)
			(*dead)++;
		shim_rx_release(rx, e);
		if (hit)
			return true;
	}
	return false;
}

/* While a live sender holds an unpublished reservation for several grace
 * periods, the recovery must find it alive and fill nothing. */
static void t_live_hole_waits(struct shim_ctx *c, struct shim_peer *slow)
{
	struct shim_rx *rx = shim_ctx_rx(c);
	uint64_t waits = c->hole.waits, skipped = atomic_load(&rx->ctl->holes_skipped);
	double end = t_now() + 4.0 * SHIM_HOLE_GRACE_NS / 1e9 + 0.05;
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	unsigned int dead = 0;

	assert_int_equal(shim_pio_reserve(slow, 1, 0, &r), 0);
	while (t_now() < end) {
		assert_int_equal(shim_claim_rx_recover(c), 0);
		assert_null(shim_rx_peek(rx));
		usleep(2000);
	}
	assert_true(c->hole.waits > waits);
	assert_int_equal(atomic_load(&rx->ctl->holes_skipped), skipped);
	e = shim_pio_entry(slow, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.tag = 0x510;
	shim_pio_publish(slow, &r, 0, 0);
	assert_true(t_recv_tag(c, 0x510, &dead));
	assert_int_equal(dead, 0);
}

static void test_hostile_geometry(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_peer *live;
	struct shim_rcv_ctl *evil;
	struct shim_addr a;
	struct shim_ctx *c;
	struct t_geom v;
	unsigned int dead = 0;
	int go[2];
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	evil = t_ctl_map(&a);
	t_geom_get(evil, &v);

	const uint64_t hdrq_bytes = (uint64_t)T_HDRQ * sizeof(struct shim_rhq_entry);
	const uint64_t egr_end = v.egr_off + T_EGR;
	const uint64_t slot = sizeof(struct shim_claim);
	const uint32_t slots = SHIM_CLAIM_SLOTS;
	/* the owner's layout: the claim table, then the region table ends
	 * the segment */
	const uint64_t rgn_off = v.claim_off + slots * slot;
	assert_int_equal(v.claim_off, egr_end);
	assert_int_equal(rgn_off + SHIM_RGN_SLOTS * sizeof(struct shim_rgn), v.seg_size);
	const struct {
		const char *what;
		struct t_geom g;
		int want;
	} cases[] = {
		{"as the owner wrote it", v, 0},
		{"issue 28: claim_off 2^64 - 64 KiB, 1024 slots",
		 {v.hdrq_off, v.egr_off, v.seg_size, T_WRAP(65536), 1024}, -EPROTO},
		{"claim_off 2^64 - 64, 1 slot", {v.hdrq_off, v.egr_off, v.seg_size, T_WRAP(64), 1},
		 -EPROTO},
		{"no slots", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off, 0}, -EPROTO},
		{"one slot more than SHIM_CLAIM_SLOTS",
		 {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off, slots + 1}, -EPROTO},
		{"2^32 - 1 slots", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off, UINT32_MAX},
		 -EPROTO},
		{"claim_off + 1", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off + 1, slots - 1},
		 -EPROTO},
		{"claim_off - 1", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off - 1, slots},
		 -EPROTO},
		{"claim_off half a slot on",
		 {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off + slot / 2, slots - 1}, -EPROTO},
		{"claim table one slot into the eager ring",
		 {v.hdrq_off, v.egr_off, v.seg_size, egr_end - slot, slots}, -EPROTO},
		{"claim table over the eager ring",
		 {v.hdrq_off, v.egr_off, v.seg_size, v.egr_off, slots}, -EPROTO},
		{"claim table one slot past the end",
		 {v.hdrq_off, v.egr_off, v.seg_size, egr_end + slot, slots}, -EPROTO},
		{"claim table one slot shorter, ending at the end",
		 {v.hdrq_off, v.egr_off, v.seg_size, egr_end + slot, slots - 1}, 0},
		{"one slot, the last one before the region table",
		 {v.hdrq_off, v.egr_off, v.seg_size, rgn_off - slot, 1}, 0},
		{"one slot, the region table's first", {v.hdrq_off, v.egr_off, v.seg_size, rgn_off, 1},
		 -EPROTO},
		{"one slot at the end", {v.hdrq_off, v.egr_off, v.seg_size, v.seg_size, 1}, -EPROTO},
		{"seg_size one slot past the mapping",
		 {v.hdrq_off, v.egr_off, v.seg_size + slot, v.claim_off, slots}, -EPROTO},
		{"seg_size 2^64 - 1, claim_off 2^64 - 64 KiB",
		 {v.hdrq_off, v.egr_off, UINT64_MAX, T_WRAP(65536), 1024}, -EPROTO},
		{"hdrq_off wraps to 0", {T_WRAP(hdrq_bytes), v.egr_off, v.seg_size, v.claim_off, slots},
		 -EPROTO},
		{"egr_off wraps to 0", {v.hdrq_off, T_WRAP(T_EGR), v.seg_size, v.claim_off, slots},
		 -EPROTO},
		{"hdrq_off inside the control block", {0, v.egr_off, v.seg_size, v.claim_off, slots},
		 -EPROTO},
		{"eager ring over the header queue",
		 {v.hdrq_off, v.hdrq_off + hdrq_bytes - SHIM_BLOCK, v.seg_size, v.claim_off, slots},
		 -EPROTO},
	};

	/* Senders: refused, never a crash; the valid edges still work. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int res;

		t_geom_set(evil, &cases[i].g);
		res = t_peer_try_child(dev, &a, cases[i].want);
		t_geom_set(evil, &v);
		if (res != T_PEER_OK)
			fail_msg("case '%s': sender %s %d (want open %d)", cases[i].what,
				 res >= 128 ? "killed by signal" : "got result bits", res & 127,
				 cases[i].want);
		assert_int_equal(t_drain_all(c), cases[i].want ? 0 : 1);
	}

	/* A sender checks one snapshot: the block flipping between the valid
	 * and the geometry while it opens never gets through. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		double end = t_now() + 2.0;

		t_child_crash_plainly();
		for (int n = 0; n < 2000 && t_now() < end; n++) {
			struct shim_peer *p = NULL;
			int ret = shim_peer_open(dev, &a, &p);

			if (ret && ret != -EPROTO)
				_exit(1);
			if (!ret) {
				const uint8_t *base = (const uint8_t *)p->ctl;

				if ((const uint8_t *)p->claim < base ||
				    (const uint8_t *)(p->claim + 1) > base + p->map_len)
					_exit(2);
				shim_peer_close(p);
			}
		}
		_exit(0);
	}
	double end = t_now() + T_DEADLINE_S;
	pid_t w = 0;
	int st = 0;
	for (uint64_t n = 0; !w && t_now() < end; n++) {
		t_geom_set(evil, n & 1 ? &cases[1].g : &v);
		if (!(n % 64))
			w = waitpid(pid, &st, WNOHANG);
	}
	t_geom_set(evil, &v);
	if (!w)
		(void)t_wait(pid); /* past its alarm: reap it, fail below */
	assert_int_equal(w, pid);
	if (WIFSIGNALED(st))
		fail_msg("a sender died of signal %d while the block flipped", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* The owner: a sender killed with a reservation open while the block
	 * says the claim table is elsewhere.  Its own geometry finds the
	 * claim, the hole is filled and the live sender's packet behind it
	 * arrives; a live sender's hole is waited for. */
	assert_int_equal(shim_peer_open(dev, &a, &live), 0);
	pid = t_reserver(&a, 2, 200, go);
	t_reserver_kill(pid, go);
	t_geom_set(evil, &cases[1].g);
	assert_int_equal(t_send1(live, 0x1e9), 0);
	assert_true(t_recv_tag(c, 0x1e9, &dead));
	assert_int_equal(dead, 2);
	assert_int_equal(atomic_load(&shim_ctx_rx(c)->ctl->holes_skipped), 2);
	t_live_hole_waits(c, live);
	/* the same with no slots at all, as far as the block says */
	t_geom_set(evil, &cases[3].g);
	t_live_hole_waits(c, live);
	t_geom_set(evil, &v);
	assert_int_equal(t_peer_try_child(dev, &a, 0), T_PEER_OK);
	assert_int_equal(t_drain_all(c), 1);

	shim_peer_close(live);
	munmap(evil, sizeof(*evil));
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* The owner tests the senders' claim locks on its own segment, not on
 * whatever its name opens now: with the name unlinked and taken by
 * another context, a live sender's hole is still waited for, and with
 * the name gone a dead sender's hole is still filled. */
static void test_hole_name_replaced(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_peer *slow, *other;
	struct shim_ctx *c, *c2;
	struct shim_addr a, a2;
	char name[SHIM_NAME_MAX];
	unsigned int dead = 0;
	int go[2];
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(shim_peer_open(dev, &a, &slow), 0);
	assert_int_equal(shim_peer_open(dev, &a, &other), 0);
	pid = t_reserver(&a, 1, 100, go);
	t_track(pid);
	shim_dev_name_segment(name, sizeof(name), a.uid, a.unit, a.ctx);
	assert_int_equal(shm_unlink(name), 0);
	t_cursor(dev, a.ctx);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c2, NULL, NULL), 0);
	shim_ctx_addr(c2, &a2);
	assert_int_equal(a2.ctx, a.ctx); /* the name is another segment's now */

	t_live_hole_waits(c, slow);
	assert_int_equal(t_send1(other, 0x2e9), 0);
	assert_true(t_recv_tag(c, 0x2e9, &dead));
	assert_int_equal(dead, 0);

	shim_ctx_close(c2); /* and now no segment has the name */
	t_reserver_kill(pid, go);
	t_untrack(pid);
	assert_int_equal(t_send1(other, 0x3e9), 0);
	assert_true(t_recv_tag(c, 0x3e9, &dead));
	assert_int_equal(dead, 1);

	shim_peer_close(slow);
	shim_peer_close(other);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* A child with a context on T_UNIT: reports its address on up, then
 * lives until dn closes (or it is killed). */
static pid_t t_ctx_child(struct shim_dev *dev, struct shim_addr *a, int *dn_w)
{
	int up[2], dn[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(dn), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pollfd pfd = {.fd = dn[0], .events = POLLIN};
		struct shim_ctx *c = NULL;

		close(up[0]);
		close(dn[1]);
		alarm(T_DEADLINE_S);
		memset(a, 0, sizeof(*a));
		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, a);
		if (write(up[1], a, sizeof(*a)) != (ssize_t)sizeof(*a))
			_exit(1);
		poll(&pfd, 1, T_DEADLINE_S * 1000);
		if (c)
			shim_ctx_close(c);
		_exit(0);
	}
	close(up[1]);
	close(dn[0]);
	assert_int_equal(read(up[0], a, sizeof(*a)), (ssize_t)sizeof(*a));
	close(up[0]);
	assert_int_not_equal(a->lid, 0); /* it has its context */
	*dn_w = dn[1];
	return pid;
}

/* How many segment names of our uid on T_UNIT /dev/shm holds. */
static unsigned int t_seg_count(void)
{
	char prefix[32];
	struct dirent *de;
	unsigned int n = 0;
	DIR *d = opendir("/dev/shm");

	assert_non_null(d);
	snprintf(prefix, sizeof(prefix), "opx.%u.%d.", (unsigned int)geteuid(), T_UNIT);
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static bool t_seg_exists(unsigned int ctx)
{
	char p[96];
	struct stat st;

	t_seg_path(p, sizeof(p), (uint32_t)geteuid(), ctx);
	return lstat(p, &st) == 0;
}

#define T_KILLED 4
/* Endpoints killed with their contexts open leave their segments; the
 * next open reclaims them all, even with a search that never passes
 * their names, and leaves the live ones (another process's, its own). */
static void test_sweep_killed(void **state)
{
	struct shim_addr dead[T_KILLED], live, mine, fresh;
	struct shim_dev *dev = t_dev_open();
	struct shim_ctx *c, *c2;
	struct shim_peer *peer;
	pid_t pid[T_KILLED], live_pid;
	int dn[T_KILLED], live_dn;
	unsigned int before, after, left = 0;
	uint64_t reclaimed;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &mine);
	live_pid = t_ctx_child(dev, &live, &live_dn);
	t_track(live_pid);
	/* all open before any dies: each child's own open would sweep the
	 * ones killed before it */
	for (int i = 0; i < T_KILLED; i++)
		pid[i] = t_ctx_child(dev, &dead[i], &dn[i]);
	for (int i = 0; i < T_KILLED; i++) {
		int st = 0;

		assert_int_equal(kill(pid[i], SIGKILL), 0);
		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFSIGNALED(st));
		close(dn[i]);
		assert_true(t_seg_exists(dead[i].ctx)); /* left behind */
	}
	before = t_seg_count();
	reclaimed = atomic_load(&dev->stale_reclaimed);
	/* a free number to start from: the search itself passes no name */
	t_cursor(dev, t_free_number());
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c2, NULL, NULL), 0);
	shim_ctx_addr(c2, &fresh);
	after = t_seg_count();
	fprintf(stderr, "# unit %d segments: %u before the open, %u after\n", T_UNIT, before,
		after);
	for (int i = 0; i < T_KILLED; i++) {
		assert_int_not_equal(fresh.ctx, dead[i].ctx);
		left += t_seg_exists(dead[i].ctx);
	}
	assert_int_equal(left, 0);
	assert_true(atomic_load(&dev->stale_reclaimed) >= reclaimed + T_KILLED);
	/* the live ones stay, and stay usable */
	assert_true(t_seg_exists(live.ctx));
	assert_true(t_seg_exists(mine.ctx));
	assert_int_equal(shim_peer_open(dev, &live, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);
	assert_int_equal(shim_peer_open(dev, &mine, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);

	close(live_dn);
	assert_int_equal(t_wait(live_pid), 0);
	t_untrack(live_pid);
	shim_ctx_close(c2);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_hostile_geometry, t_teardown),
		cmocka_unit_test_teardown(test_hole_name_replaced, t_teardown),
		cmocka_unit_test_teardown(test_sweep_killed, t_teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	/* test_trust squats and fills every context name of unit T_UNIT, and
	 * this suite counts and sweeps its segments: a concurrent run of
	 * either (another build tree's make check, or this one's in parallel)
	 * waits for this one instead of meeting its names */
	if (fx_exclusive("trust-unit", 15 * 60 * 1000) < 0) {
		fprintf(stderr, "test_trust_shm: another run held the unit for 15 minutes\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
