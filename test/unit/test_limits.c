/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_limits.c - the provider's limits at its edges, across modules
 * (no single source file): the FI_OPX_* parameters (prov/opx_param.c:
 * bad values fall back to the defaults, the documented maxima are taken,
 * the oversubscription defaults of spin count and split copy), the
 * advertised inject_size against FI_OPX_EAGER_MAX (opx_info.c,
 * opx_msg.c), two processes with different settings exchanging every
 * size around both sides' thresholds, iovec lengths whose sum wraps
 * size_t on every v/msg call (opx_msg.c), and a completion queue that
 * cannot grow, on the receiving and the sending side: progress leaves
 * packets queued instead of losing completions (opx_progress.c's receive
 * budget, opx_cq.c).
 *
 * Parameters are read once per process, so the tests that need other
 * FI_OPX_* values run this binary again as a child with the environment
 * set (TL_CHILD mode); the parent bounds every child in time.  Every loop
 * is bounded in count and time.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "opx_cq.h"
#include "opx_ep.h"

#define TL_CHILD "--limits-child"
#define TL_WAIT_MS 5000

static uint8_t tl_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 29u + i * 11u + (i >> 9));
}

static void tl_fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = tl_pat(seed, i);
}

static size_t tl_check(const uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != tl_pat(seed, i))
			return i;
	return len;
}

/* Run this binary as a child in mode `mode`, with env ("NAME=value", NULL
 * terminated) added; returns its exit status (-1: killed at the deadline
 * or by a signal). */
static int tl_run_child(const char *mode, const char *const *env, unsigned deadline_ms)
{
	int status = 0;
	uint64_t end;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {"test_limits", TL_CHILD, (char *)mode, NULL};

		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	end = fx_now_ms() + deadline_ms;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		assert_int_not_equal(w, -1);
		if (fx_now_ms() > end) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &status, 0);
			print_message("child '%s' killed at its deadline\n", mode);
			return -1;
		}
		usleep(10000);
	}
	if (!WIFEXITED(status)) {
		print_message("child '%s' died with signal %d\n", mode, WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status);
}

/* ---------------------------------------------------------------------
 * Child side helpers: no cmocka asserts (not inside a test), return
 * codes instead.
 */
#define TL_FAIL(code, ...)                                                                         \
	do {                                                                                       \
		fprintf(stderr, "limits child: " __VA_ARGS__);                                     \
		return (code);                                                                     \
	} while (0)

/* Wait for the completion of ctx on cq (others are skipped). */
static int tl_wait(struct fid_cq *cq, void *ctx, struct fi_cq_tagged_entry *out)
{
	uint64_t end = fx_now_ms() + TL_WAIT_MS;
	struct fi_cq_tagged_entry ent;

	while (fx_now_ms() <= end) {
		ssize_t n = fi_cq_read(cq, &ent, 1);

		if (n == 1 && ent.op_context == ctx) {
			if (out)
				*out = ent;
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			(void)fi_cq_readerr(cq, &ee, 0);
			fprintf(stderr, "limits child: error completion %d (%s)\n", ee.err,
				fi_strerror(ee.err));
			return -ee.err;
		}
	}
	return -FI_ETIMEDOUT;
}

/* Item 15, with FI_OPX_EAGER_MAX=4096 (below the default inject_size):
 * the advertised inject_size fits the eager limit, and an inject of
 * inject_size or of 6000 bytes never delivers a buffer changed after
 * the call returned. */
static int tl_child_inject(void)
{
	const size_t sizes[] = {4096, 6000};
	struct fx_env e;
	size_t inj;

	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		TL_FAIL(2, "fx_open\n");
	inj = e.info->tx_attr->inject_size;
	for (size_t k = 0; k < 2; k++) {
		size_t len = sizes[k];
		uint8_t *buf = malloc(len), *rbuf = calloc(1, len);
		struct fi_context rctx;
		struct fi_cq_tagged_entry ce = {0};
		ssize_t rc;

		if (!buf || !rbuf)
			TL_FAIL(4, "malloc\n");
		tl_fill(buf, len, (unsigned)k + 1);
		if (fi_trecv(e.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, 10 + k, 0, &rctx))
			TL_FAIL(5, "trecv\n");
		rc = fi_tinject(e.ep, buf, len, e.self, 10 + k);
		if (len > inj) {
			/* refused is fine; accepted must keep the promise */
			if (rc == -FI_EMSGSIZE) {
				(void)fi_cancel(&e.ep->fid, &rctx);
				free(buf);
				free(rbuf);
				continue;
			}
		}
		if (rc)
			TL_FAIL(6, "tinject %zu: %zd\n", len, rc);
		memset(buf, 0xee, len); /* reuse the buffer at once */
		if (tl_wait(e.cq, &rctx, &ce))
			TL_FAIL(7, "no completion for the %zu-byte inject\n", len);
		if (ce.len != len || tl_check(rbuf, len, (unsigned)k + 1) != len)
			TL_FAIL(8, "%zu-byte inject delivered the overwritten buffer (byte %zu)\n", len,
				tl_check(rbuf, len, (unsigned)k + 1));
		free(buf);
		free(rbuf);
	}
	if (inj > 4096)
		TL_FAIL(3, "inject_size %zu above FI_OPX_EAGER_MAX=4096\n", inj);
	fx_close(&e);
	return 0;
}

/* Item 18: the provider is there, with defaults in place of bad values. */
static int tl_child_params(void)
{
	struct fi_info *info = NULL;
	int ret = fx_getinfo(NULL, 0, &info);

	if (ret || !info)
		TL_FAIL(2, "fi_getinfo: %d (%s): the provider vanished\n", ret, fi_strerror(-ret));
	if (info->tx_attr->inject_size != 8192)
		TL_FAIL(3, "inject_size %zu, expected the default 8192\n",
			info->tx_attr->inject_size);
	if (opx_env.hdrq_entries != 1024 || opx_env.mtu != 8192 || opx_env.units != 1)
		TL_FAIL(4, "hdrq %zu mtu %zu units %d, expected the defaults\n",
			opx_env.hdrq_entries, opx_env.mtu, opx_env.units);
	fi_freeinfo(info);
	return 0;
}

/* Item 18: values inside the documented ranges are taken and work. */
static int tl_child_params_max(void)
{
	struct fx_env e;

	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		TL_FAIL(2, "fx_open with the largest documented HDRQ_ENTRIES failed\n");
	if (opx_env.hdrq_entries != 65536)
		TL_FAIL(3, "hdrq %zu, expected 65536\n", opx_env.hdrq_entries);
	if (opx_env.inject_size != 100)
		TL_FAIL(4, "inject_size %zu, expected 0x64\n", opx_env.inject_size);
	fx_close(&e);
	return 0;
}

/* Item 17: two processes with different settings exchange every size
 * around both sides' thresholds, both ways.  Each child writes its name
 * to fd 4 and reads the other's from fd 3. */
static const size_t tl_xsizes[] = {0,	  1,	 16,	17,    255,   256,    257,    1023,
				   1024,  1025,	 2049,	4095,  4096,  4097,   8191,   8192,
				   8193,  16383, 16384, 16385, 32767, 32768, 32769, 65535,  65536,  65537,
				   100000, 262144, 1 << 20};
#define TL_NX (sizeof(tl_xsizes) / sizeof(tl_xsizes[0]))

static int tl_child_xchg(void)
{
	struct fx_env e;
	char name[64], peer_name[64];
	size_t namelen = sizeof(name);
	fi_addr_t peer;
	uint8_t *sbuf[TL_NX], *rbuf[TL_NX];
	struct fi_context sctx[TL_NX], rctx[TL_NX];
	bool sdone[TL_NX] = {0}, rdone[TL_NX] = {0};
	size_t left = 2 * TL_NX, next = 0;
	uint64_t end;

	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		TL_FAIL(2, "fx_open\n");
	if (fi_getname(&e.ep->fid, name, &namelen) || namelen > sizeof(name))
		TL_FAIL(3, "getname\n");
	if (write(4, &namelen, sizeof(namelen)) != sizeof(namelen) ||
	    write(4, name, namelen) != (ssize_t)namelen)
		TL_FAIL(4, "write name\n");
	if (read(3, &namelen, sizeof(namelen)) != sizeof(namelen) || namelen > sizeof(peer_name) ||
	    read(3, peer_name, namelen) != (ssize_t)namelen)
		TL_FAIL(5, "read peer name\n");
	if (fi_av_insert(e.av, peer_name, 1, &peer, 0, NULL) != 1)
		TL_FAIL(6, "av_insert\n");
	/* the closing handshake polls fd 3 while it progresses */
	if (fcntl(3, F_SETFL, O_NONBLOCK))
		TL_FAIL(6, "fcntl\n");
	for (size_t i = 0; i < TL_NX; i++) {
		size_t len = tl_xsizes[i];

		sbuf[i] = malloc(len + 1);
		rbuf[i] = calloc(1, len + 1);
		if (!sbuf[i] || !rbuf[i])
			TL_FAIL(7, "malloc\n");
		tl_fill(sbuf[i], len, (unsigned)i + 3);
		if (fi_trecv(e.ep, rbuf[i], len, NULL, peer, 0x500 + i, 0, &rctx[i]))
			TL_FAIL(8, "trecv %zu\n", len);
	}
	end = fx_now_ms() + 20000;
	while (left && fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent[8];
		ssize_t n;

		if (next < TL_NX) {
			ssize_t rc = fi_tsend(e.ep, sbuf[next], tl_xsizes[next], NULL, peer,
					      0x500 + next, &sctx[next]);
			if (rc == 0)
				next++;
			else if (rc != -FI_EAGAIN)
				TL_FAIL(9, "tsend %zu bytes: %zd (%s)\n", tl_xsizes[next], rc,
					fi_strerror((int)-rc));
		}
		n = fi_cq_read(e.cq, ent, 8);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			(void)fi_cq_readerr(e.cq, &ee, 0);
			TL_FAIL(10, "error completion %d (%s), len %zu\n", ee.err, fi_strerror(ee.err),
				ee.len);
		}
		for (ssize_t k = 0; k < n; k++) {
			struct fi_context *c = ent[k].op_context;

			if (c >= sctx && c < sctx + TL_NX && !sdone[c - sctx]) {
				sdone[c - sctx] = true;
				left--;
			} else if (c >= rctx && c < rctx + TL_NX && !rdone[c - rctx]) {
				size_t i = (size_t)(c - rctx);

				if (ent[k].len != tl_xsizes[i] ||
				    tl_check(rbuf[i], tl_xsizes[i], (unsigned)i + 3) != tl_xsizes[i])
					TL_FAIL(11, "%zu-byte message: got %zu bytes, wrong at %zu\n",
						tl_xsizes[i], ent[k].len,
						tl_check(rbuf[i], tl_xsizes[i], (unsigned)i + 3));
				rdone[i] = true;
				left--;
			} else {
				TL_FAIL(12, "unknown or repeated completion\n");
			}
		}
	}
	if (left)
		TL_FAIL(13, "%zu operations did not complete (sent %zu of %zu)\n", left, next,
			TL_NX);
	/* let the peer finish pulling from us before we close */
	(void)!write(4, "x", 1);
	end = fx_now_ms() + TL_WAIT_MS;
	while (fx_now_ms() < end) {
		char c;
		struct fi_cq_tagged_entry ent;

		(void)fi_cq_read(e.cq, &ent, 1);
		if (read(3, &c, 1) == 1)
			break;
	}
	fprintf(stderr, "limits child: mtu %zu hdrq %zu eager ring %zu eager_max %zu checksum %d: "
			"%zu sizes both ways, data intact\n",
		opx_env.mtu, opx_env.hdrq_entries, opx_env.eager_bytes, opx_env.eager_max,
		opx_env.checksum, TL_NX);
	for (size_t i = 0; i < TL_NX; i++) {
		free(sbuf[i]);
		free(rbuf[i]);
	}
	fx_close(&e);
	return 0;
}

/* Item 20: the oversubscription defaults, as TL_EXPECT="spin split
 * oversubscribed" says they must come out. */
static int tl_child_oversub(void)
{
	const char *want = getenv("TL_EXPECT");
	int spin, over;
	size_t split;

	fx_prov();
	if (!want || sscanf(want, "%d %zu %d", &spin, &split, &over) != 3)
		TL_FAIL(2, "TL_EXPECT missing\n");
	if (opx_env.spin_count != spin || opx_env.rndv_split != split ||
	    opx_env.oversubscribed != (over != 0))
		TL_FAIL(3, "spin %d split %zu oversubscribed %d, expected %s\n", opx_env.spin_count,
			opx_env.rndv_split, opx_env.oversubscribed, want);
	return 0;
}

static int tl_child(const char *mode)
{
	if (!strcmp(mode, "oversub"))
		return tl_child_oversub();
	if (!strcmp(mode, "inject"))
		return tl_child_inject();
	if (!strcmp(mode, "params"))
		return tl_child_params();
	if (!strcmp(mode, "params_max"))
		return tl_child_params_max();
	if (!strcmp(mode, "xchg"))
		return tl_child_xchg();
	return 100;
}

/* ---------------------------------------------------------------------
 * Tests.
 */
static void test_inject_clamped(void **state)
{
	static const char *const env[] = {"FI_OPX_EAGER_MAX=4096", NULL};

	(void)state;
	assert_int_equal(tl_run_child("inject", env, 30000), 0);
}

static void test_params_bad_values(void **state)
{
	static const char *const cases[][3] = {
		{"FI_OPX_INJECT_SIZE=abc", NULL, NULL},
		{"FI_OPX_HDRQ_ENTRIES=131072", NULL, NULL},
		{"FI_OPX_HDRQ_ENTRIES=1048576", NULL, NULL},
		{"FI_OPX_HDRQ_ENTRIES=1000", "FI_OPX_MTU=8k", NULL},
		{"FI_OPX_UNITS=two", "FI_OPX_INJECT_SIZE=-1", NULL},
		{"FI_OPX_INJECT_SIZE=99999999999999999999999", "FI_OPX_MTU=", NULL},
		{"FI_OPX_CHECKSUM=maybe", "FI_OPX_UNITS=1x", NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = tl_run_child("params", cases[i], 30000);

		if (rc)
			fail_msg("with %s %s: child exit %d", cases[i][0],
				 cases[i][1] ? cases[i][1] : "", rc);
	}
}

static void test_params_documented_max(void **state)
{
	static const char *const env[] = {"FI_OPX_HDRQ_ENTRIES=65536", "FI_OPX_INJECT_SIZE= 0x64 ",
					  NULL};
	struct fi_param *params = NULL;
	int count = 0;
	bool found = false;

	(void)state;
	assert_int_equal(tl_run_child("params_max", env, 30000), 0);
	/* the help text documents exactly that upper bound */
	fx_prov();
	assert_int_equal(fi_getparams(&params, &count), 0);
	for (int i = 0; i < count; i++) {
		if (strcmp(params[i].name, "FI_OPX_HDRQ_ENTRIES"))
			continue;
		found = true;
		assert_non_null(strstr(params[i].help_string, "65536"));
		assert_null(strstr(params[i].help_string, "1048576"));
	}
	fi_freeparams(params);
	assert_true(found);
}

/* Item 20: more ranks than CPUs (as the launcher says) lower the spin
 * count and turn the split copy off, unless the user set them; one rank
 * per CPU, or a launcher variable that does not parse, changes nothing. */
static void test_params_oversub(void **state)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char over[64], fit[64], hydra[64];
	const char *c_over[] = {over, "TL_EXPECT=200 0 1", NULL};
	const char *c_fit[] = {fit, "TL_EXPECT=1000 32768 0", NULL};
	const char *c_set[] = {hydra, "FI_OPX_SPIN_COUNT=7", "TL_EXPECT=7 0 1", NULL};
	const char *c_split[] = {over, "FI_OPX_RNDV_SPLIT=4096", "TL_EXPECT=200 4096 1", NULL};
	const char *c_junk[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=lots", "TL_EXPECT=1000 32768 0", NULL};
	const char *const *cases[] = {c_over, c_fit, c_set, c_split, c_junk};

	(void)state;
	assert_true(cpus > 0);
	snprintf(over, sizeof(over), "OMPI_COMM_WORLD_LOCAL_SIZE=%ld", cpus + 1);
	snprintf(fit, sizeof(fit), "OMPI_COMM_WORLD_LOCAL_SIZE=%ld", cpus);
	snprintf(hydra, sizeof(hydra), "MPI_LOCALNRANKS=%ld", 4 * cpus);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = tl_run_child("oversub", cases[i], 30000);

		if (rc)
			fail_msg("with %s %s: child exit %d", cases[i][0], cases[i][1], rc);
	}
}

/* Item 17: the two children, wired with pipes. */
static void tl_xchg(const char *const *env_a, const char *const *env_b)
{
	int ab[2], ba[2], status[2];
	pid_t pid[2];
	uint64_t end;

	assert_int_equal(pipe(ab), 0);
	assert_int_equal(pipe(ba), 0);
	fflush(NULL);
	for (int c = 0; c < 2; c++) {
		pid[c] = fork();
		assert_true(pid[c] >= 0);
		if (pid[c] == 0) {
			const char *const *env = c ? env_b : env_a;
			char *argv[] = {"test_limits", TL_CHILD, "xchg", NULL};
			/* child a reads ba, writes ab; child b the reverse */
			int in = c ? ab[0] : ba[0], out = c ? ba[1] : ab[1];

			if (dup2(in, 3) < 0 || dup2(out, 4) < 0)
				_exit(126);
			for (int fd = 5; fd < 64; fd++)
				(void)close(fd);
			for (size_t i = 0; env && env[i]; i++)
				putenv((char *)env[i]);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
	}
	close(ab[0]);
	close(ab[1]);
	close(ba[0]);
	close(ba[1]);
	end = fx_now_ms() + 60000;
	for (int c = 0; c < 2; c++) {
		for (;;) {
			pid_t w = waitpid(pid[c], &status[c], WNOHANG);

			if (w == pid[c])
				break;
			assert_int_not_equal(w, -1);
			if (fx_now_ms() > end) {
				kill(pid[0], SIGKILL);
				kill(pid[1], SIGKILL);
				(void)waitpid(pid[0], NULL, 0);
				(void)waitpid(pid[1], NULL, 0);
				fail_msg("exchange children hung");
			}
			usleep(10000);
		}
	}
	for (int c = 0; c < 2; c++) {
		if (!WIFEXITED(status[c]))
			fail_msg("child %c died with signal %d", 'a' + c, WTERMSIG(status[c]));
		if (WEXITSTATUS(status[c]))
			fail_msg("child %c exited %d", 'a' + c, WEXITSTATUS(status[c]));
	}
}

static void test_mixed_settings(void **state)
{
	/* small receiver: MTU, header queue, eager ring and limit all below
	 * the other side's, and it wants checksums */
	static const char *const small[] = {"FI_OPX_MTU=1024", "FI_OPX_HDRQ_ENTRIES=64",
					    "FI_OPX_EAGER_RING_BYTES=16384", "FI_OPX_EAGER_MAX=4096",
					    "FI_OPX_CHECKSUM=1", NULL};
	static const char *const big[] = {"FI_OPX_EAGER_RING_BYTES=262144", "FI_OPX_EAGER_MAX=65536",
					  NULL};
	static const char *const mid[] = {"FI_OPX_MTU=4096", "FI_OPX_UX_MAX_BYTES=20000", NULL};

	(void)state;
	tl_xchg(small, big);
	tl_xchg(big, mid);
	tl_xchg(mid, small);
}

/* Item 16: iovec lengths whose sum wraps size_t, on every v/msg call. */
static void test_iov_wrap(void **state)
{
	struct fx_env *e = *state;
	char a[8], b[32];
	struct iovec iov[2] = {{.iov_base = a, .iov_len = SIZE_MAX - 10},
			       {.iov_base = b, .iov_len = 20}}; /* sums to 9 */
	struct fi_msg msg = {.msg_iov = iov, .iov_count = 2, .addr = e->self};
	struct fi_msg_tagged tmsg = {.msg_iov = iov, .iov_count = 2, .addr = e->self, .tag = 3};
	struct fi_context ctx;

	msg.context = &ctx;
	tmsg.context = &ctx;
	assert_int_equal(fi_sendv(e->ep, iov, NULL, 2, e->self, &ctx), -FI_EINVAL);
	assert_int_equal(fi_tsendv(e->ep, iov, NULL, 2, e->self, 3, &ctx), -FI_EINVAL);
	assert_int_equal(fi_sendmsg(e->ep, &msg, 0), -FI_EINVAL);
	assert_int_equal(fi_tsendmsg(e->ep, &tmsg, 0), -FI_EINVAL);
	assert_int_equal(fi_recvv(e->ep, iov, NULL, 2, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
	assert_int_equal(fi_trecvv(e->ep, iov, NULL, 2, FI_ADDR_UNSPEC, 3, 0, &ctx), -FI_EINVAL);
	assert_int_equal(fi_recvmsg(e->ep, &msg, 0), -FI_EINVAL);
	assert_int_equal(fi_trecvmsg(e->ep, &tmsg, 0), -FI_EINVAL);
	/* three that wrap only together */
	struct iovec iov3[3] = {{a, SIZE_MAX / 2}, {a, SIZE_MAX / 2}, {b, 2}};
	assert_int_equal(fi_tsendv(e->ep, iov3, NULL, 3, e->self, 3, &ctx), -FI_EINVAL);
	assert_int_equal(fi_trecvv(e->ep, iov3, NULL, 3, FI_ADDR_UNSPEC, 3, 0, &ctx), -FI_EINVAL);
	/* nothing was posted or sent */
	struct fi_cq_tagged_entry ent;
	assert_int_equal(fi_cq_read(e->cq, &ent, 1), -FI_EAGAIN);
	assert_int_equal(fi_cancel(&e->ep->fid, &ctx), -FI_ENOENT);
}

/* Item 19: a CQ that cannot grow pushes back; no completion is lost. */
#define TL_NMSG 48
#define TL_CAP 16

struct tl_cqenv {
	struct fx_env fx; /* the sender: fixture CQ */
	struct fid_cq *cq2; /* the receiver's CQ, capped */
	struct fid_ep *ep2;
	fi_addr_t a2;
};

static void tl_cq_open(struct tl_cqenv *t)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_TAGGED, .size = TL_CAP};
	char name[64];
	size_t namelen = sizeof(name);

	memset(t, 0, sizeof(*t));
	assert_int_equal(fx_open(&t->fx, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_cq_open(t->fx.domain, &attr, &t->cq2, NULL), 0);
	opx_complete_set_cap(OPX_CONTAINER_OF(t->cq2, struct opx_cq, cq_fid), TL_CAP);
	assert_int_equal(fi_endpoint(t->fx.domain, t->fx.info, &t->ep2, NULL), 0);
	assert_int_equal(fi_ep_bind(t->ep2, &t->cq2->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(t->ep2, &t->fx.av->fid, 0), 0);
	assert_int_equal(fi_enable(t->ep2), 0);
	assert_int_equal(fi_getname(&t->ep2->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(t->fx.av, name, 1, &t->a2, 0, NULL), 1);
}

static void tl_cq_close(struct tl_cqenv *t)
{
	assert_int_equal(fi_close(&t->ep2->fid), 0);
	assert_int_equal(fi_close(&t->cq2->fid), 0);
	fx_close(&t->fx);
}

/* Read every completion of cq into seen[] (by context index), failing
 * on an error entry. */
static size_t tl_drain(struct fid_cq *cq, struct fi_context *base, bool *seen, size_t n)
{
	struct fi_cq_tagged_entry ent[4];
	size_t got = 0;
	ssize_t r;

	while ((r = fi_cq_read(cq, ent, 4)) > 0) {
		for (ssize_t k = 0; k < r; k++) {
			struct fi_context *c = ent[k].op_context;

			assert_true(c >= base && c < base + n);
			assert_false(seen[c - base]);
			seen[c - base] = true;
			got++;
		}
	}
	if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry ee;

		memset(&ee, 0, sizeof(ee));
		assert_int_equal(fi_cq_readerr(cq, &ee, 0), 1);
		fail_msg("error completion %d (%s) instead of push-back", ee.err, fi_strerror(ee.err));
	}
	assert_int_equal(r, -FI_EAGAIN);
	return got;
}

static void test_cq_full_receiver(void **state)
{
	struct tl_cqenv t;
	struct fi_context rctx[TL_NMSG], sctx[TL_NMSG];
	bool rseen[TL_NMSG] = {0}, sseen[TL_NMSG] = {0};
	uint8_t rbuf[TL_NMSG][300], sbuf[300];
	size_t got = 0, sent = 0;
	uint64_t end;

	(void)state;
	tl_cq_open(&t);
	for (size_t i = 0; i < TL_NMSG; i++)
		assert_int_equal(fi_trecv(t.ep2, rbuf[i], sizeof(rbuf[i]), NULL, FI_ADDR_UNSPEC,
					  0x900 + i, 0, &rctx[i]),
				 0);
	for (size_t i = 0; i < TL_NMSG; i++) {
		tl_fill(sbuf, sizeof(sbuf), (unsigned)i);
		assert_int_equal(
			fi_tsend(t.fx.ep, sbuf, sizeof(sbuf), NULL, t.a2, 0x900 + i, &sctx[i]), 0);
	}
	/* progress the receiver without reading: its CQ fills, the rest of
	 * the packets must wait in its queue, not vanish */
	for (int k = 0; k < 50; k++)
		assert_int_equal(fi_cq_read(t.cq2, NULL, 0), 0);
	assert_true(opx_cq_free_locked(OPX_CONTAINER_OF(t.cq2, struct opx_cq, cq_fid)) <
		    TL_CAP);
	end = fx_now_ms() + TL_WAIT_MS;
	while (got < TL_NMSG && fx_now_ms() < end)
		got += tl_drain(t.cq2, rctx, rseen, TL_NMSG);
	if (got != TL_NMSG)
		fail_msg("%zu of %d receive completions arrived", got, TL_NMSG);
	for (size_t i = 0; i < TL_NMSG; i++)
		assert_int_equal(tl_check(rbuf[i], sizeof(rbuf[i]), (unsigned)i), sizeof(rbuf[i]));
	end = fx_now_ms() + TL_WAIT_MS;
	while (sent < TL_NMSG && fx_now_ms() < end)
		sent += tl_drain(t.fx.cq, sctx, sseen, TL_NMSG);
	assert_int_equal(sent, TL_NMSG);
	tl_cq_close(&t);
}

static void test_cq_full_sender(void **state)
{
	struct tl_cqenv t;
	struct fi_context rctx[TL_NMSG], sctx[TL_NMSG];
	bool rseen[TL_NMSG] = {0}, sseen[TL_NMSG] = {0};
	uint8_t rbuf[TL_NMSG][64], sbuf[64];
	size_t posted = 0, sent = 0, got = 0, eagain = 0;
	uint64_t end = fx_now_ms() + TL_WAIT_MS;

	(void)state;
	tl_cq_open(&t);
	for (size_t i = 0; i < TL_NMSG; i++)
		assert_int_equal(fi_trecv(t.fx.ep, rbuf[i], sizeof(rbuf[i]), NULL, FI_ADDR_UNSPEC,
					  0xa00 + i, 0, &rctx[i]),
				 0);
	/* ep2 (capped CQ) sends without reading its CQ until pushed back */
	while (posted < TL_NMSG && fx_now_ms() < end) {
		ssize_t rc;

		tl_fill(sbuf, sizeof(sbuf), (unsigned)posted + 50);
		rc = fi_tsend(t.ep2, sbuf, sizeof(sbuf), NULL, t.fx.self, 0xa00 + posted,
			      &sctx[posted]);
		if (rc == -FI_EAGAIN) {
			eagain++;
			sent += tl_drain(t.cq2, sctx, sseen, TL_NMSG);
			continue;
		}
		assert_int_equal(rc, 0);
		posted++;
	}
	assert_int_equal(posted, TL_NMSG);
	assert_true(eagain > 0);
	while (sent < TL_NMSG && fx_now_ms() < end)
		sent += tl_drain(t.cq2, sctx, sseen, TL_NMSG);
	assert_int_equal(sent, TL_NMSG);
	while (got < TL_NMSG && fx_now_ms() < end)
		got += tl_drain(t.fx.cq, rctx, rseen, TL_NMSG);
	assert_int_equal(got, TL_NMSG);
	for (size_t i = 0; i < TL_NMSG; i++)
		assert_int_equal(tl_check(rbuf[i], sizeof(rbuf[i]), (unsigned)i + 50),
				 sizeof(rbuf[i]));
	tl_cq_close(&t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inject_clamped),
		cmocka_unit_test(test_params_bad_values),
		cmocka_unit_test(test_params_documented_max),
		cmocka_unit_test(test_params_oversub),
		cmocka_unit_test(test_mixed_settings),
		cmocka_unit_test_setup_teardown(test_iov_wrap, fx_setup, fx_teardown),
		cmocka_unit_test(test_cq_full_receiver),
		cmocka_unit_test(test_cq_full_sender),
	};

	if (argc > 2 && !strcmp(argv[1], TL_CHILD))
		return tl_child(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
