/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_peer_forged.c - peers that lie (issue 6, items 3 and 4):
 *
 *  - forged rendezvous packets: an RTS naming another process (or coming
 *    from a context whose owner died), DONE / CTW from a stranger or with
 *    guessed cookies; no victim's memory is ever read or written;
 *  - the split copy when the receiver refuses CMA writes (a re-executed
 *    copy of this binary that made itself non-dumpable).
 * Peers that die or go away are in test_peer.c, the split copy's other
 * choices in test_peer_split.c; what they share is peer_fixture.c.
 *
 * Everything runs through the provider on the fixture's unit, like
 * test_peer_split.  Every wait is bounded in time.
 */
#include <errno.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_fixture.h"

#include "../../driver-shim/shim_internal.h"
#include "opx_ep.h"

/* ---------------------------------------------------------------------
 * Forged rendezvous packets (item 3).
 */

/* The CTW payload as opx_rndv.c lays it out (wire format). */
struct tp_ctw {
	uint32_t pid;
	uint32_t iov_count;
	uint64_t off;
	uint64_t len;
	uint64_t rsvd;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct tp_ctw) == 96, "ctw payload layout");

/* A process holding len bytes of pattern seed at buf (the same address as
 * in this process, where the bytes differ).  It lives until *fd is
 * closed, then exits 0 if its bytes are untouched, 1 if someone wrote. */
static pid_t tp_victim(uint8_t *buf, size_t len, unsigned seed, int *fd)
{
	int up[2], down[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		tp_fill(buf, len, seed);
		c = 'r';
		if (write(up[1], &c, 1) != 1)
			_exit(2);
		struct pollfd pfd = {.fd = down[0], .events = POLLIN};
		poll(&pfd, 1, 60000);
		_exit(tp_intact(buf, len, seed) ? 0 : 1);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &c, 1), 1);
	close(up[0]);
	*fd = down[1];
	return pid;
}

static int tp_victim_end(pid_t pid, int fd)
{
	int st = 0;

	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* A process that opens a receive context on unit and dies (SIGKILL) with
 * it: the segment stays, valid-looking, its owner gone. */
static struct shim_addr tp_dead_ctx(int unit)
{
	struct shim_addr a;

	tp_kill(tp_live_ctx(unit, &a));
	return a;
}

/* Write one packet into the context fp maps, claiming to come from
 * (slid, sctx). */
static void tp_forge(struct shim_peer *fp, uint8_t op, uint16_t slid, uint16_t sctx, uint64_t tag,
		     uint64_t p0, uint64_t p1, const void *pay, uint32_t paylen)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;

	assert_int_equal(shim_pio_reserve(fp, 1, paylen, &r), 0);
	if (paylen)
		memcpy(r.egr, pay, paylen);
	e = shim_pio_entry(fp, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.opcode = op;
	e->hdr.flags = OPX_PF_TAGGED;
	e->hdr.jkey = fp->jkey;
	e->hdr.slid = slid;
	e->hdr.sctx = sctx;
	e->hdr.dlid = fp->lid;
	e->hdr.dctx = fp->ctx;
	e->hdr.paylen = paylen;
	e->hdr.tag = tag;
	e->hdr.p.u64[0] = p0;
	e->hdr.p.u64[1] = p1;
	shim_pio_publish(fp, &r, 0, paylen ? shim_rhf_egr(fp, &r, 0) : 0);
}

static struct opx_rts_payload tp_rts(const struct shim_addr *src, uint32_t pid, void *buf,
				     uint64_t len)
{
	struct opx_rts_payload rts;

	memset(&rts, 0, sizeof(rts));
	rts.src = *src;
	rts.pid = pid;
	rts.iov_count = 1;
	rts.iov_base[0] = (uint64_t)(uintptr_t)buf;
	rts.iov_len[0] = len;
	return rts;
}

/* An RTS whose pid names another process must never make us read that
 * process: the pid comes from the shim's record of the context the RTS
 * comes from, and a context whose owner died is not read at all (a
 * recycled pid would belong to a stranger). */
static void test_forged_rts(void **state)
{
	struct tp_env *t = *state;
	const size_t len = 64 * 1024;
	uint8_t *buf = malloc(len), *r1 = calloc(1, len), *r2 = calloc(1, len), *r3 = calloc(1, len);
	struct shim_dev_params dp = {.force_unit = -1};
	struct shim_addr ra = tp_name(t->fx.ep), a2, dead;
	struct opx_rts_payload rts;
	struct shim_dev *dev;
	struct shim_peer *fp;
	struct fx_comp c;
	int vfd;
	pid_t v;

	assert_true(buf && r1 && r2 && r3);
	tp_open_ep(t, &t->ep2, &t->a2);
	a2 = tp_name(t->ep2);
	tp_fill(buf, len, 21);
	v = tp_victim(buf, len, 99, &vfd); /* the secret: seed 99 at the same address */
	dead = tp_dead_ctx(ra.unit);
	assert_int_equal(shim_dev_open(&dp, &dev), 0);
	assert_int_equal(shim_peer_open(dev, &ra, &fp), 0);

	/* 1: from ep2's context, naming the victim's pid */
	assert_int_equal(fi_trecv(t->fx.ep, r1, len, NULL, FI_ADDR_UNSPEC, 0x71, 0, r1), 0);
	rts = tp_rts(&a2, (uint32_t)v, buf, len);
	tp_forge(fp, OPX_OP_RTS, a2.lid, a2.ctx, 0x71, len, 0x1234, &rts, sizeof(rts));
	assert_int_equal(tp_wait(t, r1, &c, TP_WAIT_MS), 0);
	assert_false(tp_intact(r1, len, 99)); /* never the victim's bytes */
	assert_int_equal(c.err, 0);
	assert_true(tp_intact(r1, len, 21)); /* ep2's owner is this process */

	/* 2: from a context whose owner died, naming the victim's pid */
	assert_int_equal(fi_trecv(t->fx.ep, r2, len, NULL, FI_ADDR_UNSPEC, 0x72, 0, r2), 0);
	rts = tp_rts(&dead, (uint32_t)v, buf, len);
	tp_forge(fp, OPX_OP_RTS, dead.lid, dead.ctx, 0x72, len, 0x1235, &rts, sizeof(rts));
	assert_int_equal(tp_wait(t, r2, &c, TP_WAIT_MS), 0);
	assert_false(tp_intact(r2, len, 99));
	assert_int_equal(c.err, FI_EIO);

	/* 3: iovec shorter than the message, and a source that is not the
	 * sender: both dropped, the receive stays posted */
	assert_int_equal(fi_trecv(t->fx.ep, r3, len, NULL, FI_ADDR_UNSPEC, 0x73, 0, r3), 0);
	rts = tp_rts(&a2, (uint32_t)v, buf, len / 2);
	tp_forge(fp, OPX_OP_RTS, a2.lid, a2.ctx, 0x73, len, 0x1236, &rts, sizeof(rts));
	rts = tp_rts(&a2, (uint32_t)v, buf, len);
	tp_forge(fp, OPX_OP_RTS, dead.lid, dead.ctx, 0x73, len, 0x1237, &rts, sizeof(rts));
	assert_int_equal(tp_wait(t, r3, &c, 300), -FI_ETIMEDOUT);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, r3), 0);
	assert_int_equal(tp_wait(t, r3, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, FI_ECANCELED);

	shim_peer_close(fp);
	shim_dev_close(dev);
	assert_int_equal(tp_victim_end(v, vfd), 0);
	free(buf);
	free(r1);
	free(r2);
	free(r3);
}

/* DONE, CTW from a stranger (with the right cookie) and from the right
 * peer with guessed cookies are dropped and counted; the rendezvous then
 * completes normally, once; the victim the forged CTW names is never
 * written. */
static void test_forged_ctl(void **state)
{
	struct tp_env *t = *state;
	const size_t len = 256 * 1024, vlen = 64 * 1024;
	uint8_t *src = malloc(len), *dst = calloc(1, len), *vbuf = malloc(vlen);
	struct shim_dev_params dp = {.force_unit = -1};
	struct shim_addr ra = tp_name(t->fx.ep), a2;
	struct tp_ctw w;
	struct shim_dev *dev;
	struct shim_peer *to_rx, *to_tx;
	uint64_t cookie = 0, stray0;
	uint16_t stranger;
	struct fx_comp c;
	int vfd;
	pid_t v;

	assert_true(src && dst && vbuf);
	tp_open_ep(t, &t->ep2, &t->a2);
	a2 = tp_name(t->ep2);
	tp_fill(vbuf, vlen, 5);
	v = tp_victim(vbuf, vlen, 77, &vfd);
	assert_int_equal(shim_dev_open(&dp, &dev), 0);
	assert_int_equal(shim_peer_open(dev, &ra, &to_rx), 0);
	assert_int_equal(shim_peer_open(dev, &a2, &to_tx), 0);
	stranger = (uint16_t)((ra.ctx + 100) % SHIM_MAX_CTXTS);

	tp_fill(src, len, 31);
	tp_tsend(t, t->ep2, src, len, t->fx.self, 0x81, src);
	/* the cookie, read from the RTS in the receiver's ring */
	uint32_t tail = (uint32_t)atomic_load(&to_rx->ctl->tail);
	bool found = false;
	for (uint32_t k = 1; k <= to_rx->hdrq_cnt && !found; k++) {
		const struct shim_rhq_entry *e = &to_rx->hdrq[(tail - k) & to_rx->hdrq_mask];

		if (e->hdr.opcode == OPX_OP_RTS && e->hdr.tag == 0x81) {
			cookie = opx_proto_pw(&e->hdr).rts.cookie;
			found = true;
		}
	}
	assert_true(found);
	stray0 = opx_ep_of(t->ep2)->rndv_st.rndv_stray;

	memset(&w, 0, sizeof(w));
	w.pid = (uint32_t)v;
	w.iov_count = 1;
	w.off = 0;
	w.len = vlen;
	w.iov_base[0] = (uint64_t)(uintptr_t)vbuf;
	w.iov_len[0] = vlen;
	tp_forge(to_tx, OPX_OP_CTW, ra.lid, stranger, 0, cookie, 0x99, &w, sizeof(w));
	tp_forge(to_tx, OPX_OP_DONE, ra.lid, stranger, 0, cookie, 0, NULL, 0);
	for (uint64_t g = 0; g < 4; g++)
		for (uint64_t i = 0; i < 4; i++)
			tp_forge(to_tx, OPX_OP_DONE, ra.lid, ra.ctx, 0, (g << 32) | i, 0, NULL, 0);
	assert_int_equal(tp_wait(t, src, &c, 300), -FI_ETIMEDOUT);
	assert_true(opx_ep_of(t->ep2)->rndv_st.rndv_stray >= stray0 + 18);

	assert_int_equal(fi_trecv(t->fx.ep, dst, len, NULL, FI_ADDR_UNSPEC, 0x81, 0, dst), 0);
	assert_int_equal(tp_wait(t, dst, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_true(tp_intact(dst, len, 31));
	assert_int_equal(tp_wait(t, src, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(tp_wait(t, src, &c, 200), -FI_ETIMEDOUT); /* once */

	shim_peer_close(to_rx);
	shim_peer_close(to_tx);
	shim_dev_close(dev);
	assert_int_equal(tp_victim_end(v, vfd), 0);
	free(src);
	free(dst);
	free(vbuf);
}

/* ---------------------------------------------------------------------
 * Split copy refused by the receiver (item 4).  The receiver is a
 * re-executed copy of this binary that made itself non-dumpable; the
 * sender (this process) gives up CAP_SYS_PTRACE for the test, so its
 * process_vm_writev into the receiver fails with EPERM even as root,
 * while the receiver may still read from the sender.
 */
#define TP_SPLIT_CHILD "--split-rx-child"
#define TP_SPLIT_LEN ((size_t)1 << 20)

static int tp_cap_ptrace(bool on)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	if (on)
		d[0].effective |= (d[0].permitted & (1u << CAP_SYS_PTRACE));
	else
		d[0].effective &= ~(1u << CAP_SYS_PTRACE);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/* The receiver: two messages of TP_SPLIT_LEN (the first proves CMA, the
 * second is split), both must arrive intact.  Exit code 0 or the step
 * that failed. */
static int tp_split_child(int up, int down)
{
	struct fx_env e;
	struct shim_addr me, peer;
	size_t len = sizeof(me);
	fi_addr_t from;
	uint8_t *buf[2];
	int done = 0;
	uint64_t end;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return 10;
	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		return 11;
	if (fi_getname(&e.ep->fid, &me, &len) || write(up, &me, sizeof(me)) != (ssize_t)sizeof(me))
		return 12;
	if (read(down, &peer, sizeof(peer)) != (ssize_t)sizeof(peer))
		return 13;
	if (fi_av_insert(e.av, &peer, 1, &from, 0, NULL) != 1)
		return 14;
	for (int i = 0; i < 2; i++) {
		buf[i] = calloc(1, TP_SPLIT_LEN);
		if (!buf[i] || fi_trecv(e.ep, buf[i], TP_SPLIT_LEN, NULL, from, (uint64_t)i + 1, 0,
					buf[i]))
			return 15;
	}
	end = fx_now_ms() + 20000;
	while (done < 2 && fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		ssize_t n = fi_cq_read(e.cq, &ent, 1);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};

			(void)fi_cq_readerr(e.cq, &ee, 0);
			fprintf(stderr, "split child: error completion %d\n", ee.err);
			return 16;
		}
		if (n == 1) {
			int i = ent.op_context == buf[0] ? 0 : 1;

			if (ent.len != TP_SPLIT_LEN || !tp_intact(buf[i], TP_SPLIT_LEN, 41u + i))
				return 17;
			done++;
		}
	}
	if (done < 2)
		return 18;
	/* stay until the sender has its completions (it closes the pipe) */
	char c;
	if (read(down, &c, 1) < 0)
		c = 0; /* EOF or error: either way the sender is done */
	free(buf[0]);
	free(buf[1]);
	fx_close(&e);
	return 0;
}

static void test_split_refused(void **state)
{
	struct tp_env *t = *state;
	struct shim_addr me = tp_name(t->fx.ep), child;
	uint8_t *src[2];
	char a1[16], a2[16];
	int up[2], down[2], st = 0;
	fi_addr_t to;
	struct fx_comp c;
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		snprintf(a1, sizeof(a1), "%d", up[1]);
		snprintf(a2, sizeof(a2), "%d", down[0]);
		char *argv[] = {"test_peer", TP_SPLIT_CHILD, a1, a2, NULL};
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &child, sizeof(child)), (ssize_t)sizeof(child));
	assert_int_equal(write(down[1], &me, sizeof(me)), (ssize_t)sizeof(me));
	assert_int_equal(fi_av_insert(t->fx.av, &child, 1, &to, 0, NULL), 1);

	assert_int_equal(tp_cap_ptrace(false), 0);
	for (int i = 0; i < 2; i++) {
		src[i] = malloc(TP_SPLIT_LEN);
		assert_non_null(src[i]);
		tp_fill(src[i], TP_SPLIT_LEN, 41u + (unsigned)i);
		tp_tsend(t, t->fx.ep, src[i], TP_SPLIT_LEN, to, (uint64_t)i + 1, src[i]);
		/* one at a time: the first must have proven CMA */
		int rc = tp_wait(t, src[i], &c, 20000);
		if (rc || c.err) {
			tp_cap_ptrace(true);
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			fail_msg("send %d: wait %d err %d (child status %#x)", i, rc, c.err, st);
		}
	}
	assert_int_equal(tp_cap_ptrace(true), 0);
	close(down[1]);
	close(up[0]);
	uint64_t end = fx_now_ms() + 20000;
	while (waitpid(pid, &st, WNOHANG) == 0 && fx_now_ms() < end)
		usleep(10000);
	if (fx_now_ms() >= end) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, &st, 0);
		fail_msg("split receiver hung");
	}
	free(src[0]);
	free(src[1]);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}


int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], TP_SPLIT_CHILD) == 0)
		return tp_split_child(atoi(argv[2]), atoi(argv[3]));
	/* the eager limit test_peer sets (these tests shared its process) */
	setenv("FI_OPX_EAGER_MAX", "32768", 0);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_forged_rts, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_forged_ctl, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_split_refused, tp_setup, tp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
