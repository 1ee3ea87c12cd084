/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_auth.c - the udp wire's authentication with the provider (issue
 * 28), FI_OPX_WIRE=udp on loopback, peers in other processes:
 *  - the user's key file is created on first use, mode 0600, 64 hex
 *    digits, under XDG_CONFIG_HOME (a directory this test makes);
 *  - a peer with the same secret talks (data checked), in every mode;
 *  - attackers who know the wire but not the secret (a process with
 *    another FI_OPX_AUTH_KEY, one with FI_OPX_AUTH=off, one whose key
 *    file is another user's secret) send tagged messages at a victim
 *    that has a wildcard receive and a receive directed at its good
 *    peer posted: nothing completes, every datagram is counted as
 *    unauthenticated, and the good peer's messages then complete in
 *    those very receives with its data.
 * Every loop is bounded in count and time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "opx_ep.h"
#include "shim_udp_wire.h"

#define TA_WAIT_MS 20000u
#define TA_TAG_ECHO FX_TAG_ECHO
#define TA_TAG_ANY 0x1000u  /* the victim's wildcard receive */
#define TA_TAG_DIR 0x2000u  /* the victim's receive directed at its good peer */
#define TA_ATTACKS 20u      /* messages each attacker sends */
#define TA_QUIET_MS 1500u   /* the victim watches for forged completions */

static char ta_dir[64];

/* Child "echo": tell the parent our name, echo TA_TAG_ECHO messages. */
static void ta_child_echo(int wfd)
{
	static uint8_t buf[1 << 18];
	struct fx_env e;
	char name[64];
	size_t len = sizeof(name);
	uint64_t end = fx_now_ms() + 30000;

	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED) ||
	    fi_getname(&e.ep->fid, name, &len) || write(wfd, name, len) != (ssize_t)len)
		_exit(2);
	while (fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		/* answer on the high bits of the tag it came with (0: the echo
		 * tag): the parent chooses which of its receives gets it */
		int rc = fx_echo_serve(&e, buf, sizeof(buf), 0xff00u, 1, end, &ent);

		if (rc)
			_exit(rc < 0 ? 0 : rc);
	}
	_exit(0);
}

/* Child "probe": whether an endpoint got a udp wire (exit 10) or not
 * (11). */
static void ta_child_probe(void)
{
	struct fx_env e;
	int udp;

	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		_exit(2);
	udp = OPX_CONTAINER_OF(e.ep, struct opx_ep, ep_fid)->udp;
	fx_close(&e);
	_exit(udp ? 10 : 11);
}

/* Child "send": send TA_ATTACKS messages of each tag in argv to the
 * victim named on the pipe, then progress until its sends have
 * completed (in error: nobody acknowledges them) or 10 s passed. */
static void ta_child_send(int rfd, int wfd)
{
	static uint8_t msg[256];
	char victim[64];
	struct fx_env e;
	fi_addr_t to;
	uint64_t end;
	unsigned done = 0;

	if (read(rfd, victim, sizeof(victim)) <= 0 ||
	    fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED) ||
	    fi_av_insert(e.av, victim, 1, &to, 0, NULL) != 1)
		_exit(2);
	if (write(wfd, "s", 1) != 1)
		_exit(2);
	memset(msg, 0xee, sizeof(msg)); /* foreign bytes */
	for (unsigned i = 0; i < 2 * TA_ATTACKS; i++) {
		uint64_t tag = i % 2 ? TA_TAG_DIR : TA_TAG_ANY;

		end = fx_now_ms() + 5000;
		while (fi_tsend(e.ep, msg, sizeof(msg), NULL, to, tag, NULL) == -FI_EAGAIN &&
		       fx_now_ms() < end)
			fi_cq_read(e.cq, NULL, 0);
	}
	end = fx_now_ms() + 10000;
	while (done < 2 * TA_ATTACKS && fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		struct fi_cq_err_entry err;

		if (fi_cq_read(e.cq, &ent, 1) == 1)
			done++;
		else if (fi_cq_readerr(e.cq, &err, 0) == 1)
			done++;
	}
	_exit(0);
}

/* A child in mode "echo" that sends us its name. */
static pid_t ta_spawn_echo(void *name, size_t name_len)
{
	int up[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char w[16];

		close(up[0]);
		snprintf(w, sizeof(w), "%d", up[1]);
		execl("/proc/self/exe", "test_auth", "echo", "-1", w, (char *)NULL);
		_exit(127);
	}
	close(up[1]);
	assert_int_equal(read(up[0], name, name_len), (ssize_t)name_len);
	close(up[0]);
	return pid;
}

static void ta_udp_stats(struct fx_env *e, struct shim_udp_stats *st)
{
	struct opx_ep *ep = OPX_CONTAINER_OF(e->ep, struct opx_ep, ep_fid);

	shim_udp_stats(ep->shim, st);
}

/* A key file of 64 hex digits at path, mode 0600. */
static void ta_write_key(const char *path, const char *hex64)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, hex64, 64), 64);
	assert_int_equal(write(fd, "\n", 1), 1);
	close(fd);
}

/* Run a "probe" child with env; its exit status. */
static int ta_probe(char *const *env)
{
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		for (char *const *v = env; v && *v; v++)
			putenv(*v);
		execl("/proc/self/exe", "test_auth", "probe", "-1", "-1", (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* A key file that is a symlink, or that group or others may read, is
 * refused: without another secret there is no udp wire at all (never an
 * unauthenticated one), unless FI_OPX_AUTH=off says so; the launcher's
 * job secret alone is enough. */
static void test_auth_key_file_refused(void **state)
{
	static char good[160], link_env[200], loose_env[200], good_env[200];
	static char *use_good[] = {good_env, NULL};
	static char *use_link[] = {link_env, NULL};
	static char *use_loose[] = {loose_env, NULL};
	static char *link_off[] = {link_env, "FI_OPX_AUTH=off", NULL};
	static char *loose_job[] = {loose_env,
				    "OMPI_MCA_orte_precondition_transports=0123456789abcdef-fedcba9876543210",
				    NULL};
	char path[160];

	(void)state;
	snprintf(good, sizeof(good), "%s/good.key", ta_dir);
	ta_write_key(good, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
	snprintf(good_env, sizeof(good_env), "FI_OPX_AUTH_KEY_FILE=%s", good);
	assert_int_equal(ta_probe(use_good), 10);

	snprintf(path, sizeof(path), "%s/link.key", ta_dir);
	assert_int_equal(symlink(good, path), 0);
	snprintf(link_env, sizeof(link_env), "FI_OPX_AUTH_KEY_FILE=%s", path);
	assert_int_equal(ta_probe(use_link), 11);
	assert_int_equal(ta_probe(link_off), 10);

	snprintf(path, sizeof(path), "%s/loose.key", ta_dir);
	ta_write_key(path, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
	assert_int_equal(chmod(path, 0640), 0);
	snprintf(loose_env, sizeof(loose_env), "FI_OPX_AUTH_KEY_FILE=%s", path);
	assert_int_equal(ta_probe(use_loose), 11);
	assert_int_equal(ta_probe(loose_job), 10);
}

static void ta_attack(struct fx_env *e, char *const *env);

/* Another user of this host, through the socket (loopback here): it can
 * neither read the user's key file nor get a datagram accepted; its own
 * key file is in a directory of its own. */
static void test_auth_other_user(void **state)
{
	static char cfg_env[200];
	static char *env[] = {cfg_env, "TA_UID=65534", NULL};
	static uint8_t any[256];
	char dir[160];
	struct fx_env e;

	(void)state;
	if (geteuid() != 0) {
		print_message("SKIP: another user needs root to switch to uid 65534\n");
		skip();
	}
	snprintf(dir, sizeof(dir), "%s/nobody", ta_dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chown(dir, 65534, 65534), 0);
	assert_int_equal(chmod(ta_dir, 0711), 0); /* it may pass through, not list */
	snprintf(cfg_env, sizeof(cfg_env), "XDG_CONFIG_HOME=%s", dir);
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_trecv(e.ep, any, sizeof(any), NULL, FI_ADDR_UNSPEC, TA_TAG_ANY, 0, any),
			 0);
	ta_attack(&e, env);
	fx_close(&e);
}

/* The key file: created by the first endpoint of this process. */
static void test_auth_key_file(void **state)
{
	char path[128], text[128];
	struct stat st;
	struct fx_env e;
	ssize_t n;
	int fd;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	snprintf(path, sizeof(path), "%s/opx/auth.key", ta_dir);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_uid, geteuid());
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	assert_int_equal(n, 65);
	text[n] = '\0';
	assert_int_equal(strspn(text, "0123456789abcdef"), 64);
	fx_close(&e);
}

/* An echo child, and e opened knowing it as *peer (data checked once). */
static pid_t ta_start_echo(struct fx_env *e, fi_addr_t *peer, unsigned seed)
{
	struct shim_addr name;
	pid_t pid = ta_spawn_echo(&name, sizeof(name));

	assert_int_equal(fx_open(e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_av_insert(e->av, &name, 1, peer, 0, NULL), 1);
	fx_echo(e, *peer, 64, seed, TA_TAG_ECHO);
	return pid;
}

/* The same secret talks, eager and rendezvous. */
static void test_auth_same_secret(void **state)
{
	struct fx_env e;
	fi_addr_t peer;
	pid_t pid;

	(void)state;
	pid = ta_start_echo(&e, &peer, 1);
	fx_echo(&e, peer, 200000, 2, TA_TAG_ECHO);
	fx_reap(pid);
	fx_close(&e);
}

/* One attacker: a child with env sends forged messages at e; nothing
 * completes in e's posted receives, its datagrams are counted as
 * unauthenticated. */
static void ta_attack(struct fx_env *e, char *const *env)
{
	struct shim_udp_stats st0, st1;
	char name[64], c;
	size_t nl = sizeof(name);
	int to_child, up;

	uint64_t end;
	pid_t pid;

	assert_int_equal(fi_getname(&e->ep->fid, name, &nl), 0);
	ta_udp_stats(e, &st0);
	{
		int upp[2], down[2];

		assert_int_equal(pipe(upp), 0);
		assert_int_equal(pipe(down), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char r[16], w[16];

			close(upp[0]);
			close(down[1]);
			for (char *const *v = env; v && *v; v++)
				putenv(*v);
			/* one datagram per forged message: the count below
			 * is of datagrams */
			putenv("FI_OPX_UDP_PACK=0");
			if (getenv("TA_UID")) {
				/* another local user: its own key file, none of ours */
				uid_t uid = (uid_t)atoi(getenv("TA_UID"));
				char kp[128];

				if (setgroups(0, NULL) || setgid((gid_t)uid) || setuid(uid))
					_exit(6);
				snprintf(kp, sizeof(kp), "%s/opx/auth.key", ta_dir);
				if (open(kp, O_RDONLY) >= 0 || errno != EACCES)
					_exit(7); /* it could read our secret */
			}
			snprintf(r, sizeof(r), "%d", down[0]);
			snprintf(w, sizeof(w), "%d", upp[1]);
			execl("/proc/self/exe", "test_auth", "send", r, w, (char *)NULL);
			_exit(127);
		}
		close(upp[1]);
		close(down[0]);
		to_child = down[1];
		up = upp[0];
	}
	assert_int_equal(write(to_child, name, nl), (ssize_t)nl);
	assert_int_equal(read(up, &c, 1), 1); /* it knows us: it sends now */
	/* until the child is done, then a little longer: no completion */
	end = fx_now_ms() + TA_WAIT_MS;
	for (;;) {
		struct fi_cq_tagged_entry ent;
		int st;

		if (fi_cq_read(e->cq, &ent, 1) == 1)
			fail_msg("a forged message completed (tag 0x%llx, %zu bytes)",
				 (unsigned long long)ent.tag, ent.len);
		if (waitpid(pid, &st, WNOHANG) == pid) {
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			break;
		}
		assert_true(fx_now_ms() < end);
	}
	end = fx_now_ms() + TA_QUIET_MS;
	while (fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;

		if (fi_cq_read(e->cq, &ent, 1) == 1)
			fail_msg("a forged message completed late (tag 0x%llx)",
				 (unsigned long long)ent.tag);
	}
	close(to_child);
	close(up);
	ta_udp_stats(e, &st1);
	print_message("attacker %s: %llu datagrams refused as unauthenticated\n",
		      env && env[0] ? env[0] : "",
		      (unsigned long long)(st1.drop_mac - st0.drop_mac));
	assert_true(st1.drop_mac - st0.drop_mac >= TA_ATTACKS);
	assert_int_equal(st1.drop_jkey, st0.drop_jkey);
}

/* Have the good echo peer send 100 pattern bytes on tag: they must
 * complete the receive posted with buf as its context. */
static void ta_via_good(struct fx_env *e, fi_addr_t good, uint64_t tag, uint8_t *buf,
			unsigned seed)
{
	struct fi_cq_tagged_entry ent;
	struct fx_stash st = {.n = 0};
	struct fx_comp c;
	uint8_t msg[32 + 100];
	size_t nl = 32;

	assert_int_equal(fi_getname(&e->ep->fid, msg, &nl), 0);
	for (size_t i = 0; i < 100; i++)
		msg[32 + i] = fx_echo_pat(seed, i);
	assert_int_equal(fi_tsend(e->ep, msg, sizeof(msg), NULL, good, tag | TA_TAG_ECHO, msg), 0);
	/* either may complete first: a stash keeps the other */
	assert_int_equal(fx_stash_wait(e->cq, &st, msg, &c, TA_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(fx_stash_wait(e->cq, &st, buf, &c, TA_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	ent = c.e;
	assert_int_equal(ent.len, 100);
	assert_int_equal(ent.tag, tag);
	for (size_t i = 0; i < 100; i++)
		assert_int_equal(buf[i], fx_echo_pat(seed, i));
}

/* Attackers with another secret, with no MAC, with another user's key
 * file: refused while a wildcard and a directed receive wait; then the
 * good peer's messages complete in them, data intact. */
static void test_auth_forged_messages(void **state)
{
	static char *other_key[] = {
		"FI_OPX_AUTH_KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
		NULL};
	static char *no_mac[] = {"FI_OPX_AUTH=off", NULL};
	static char other_file[160];
	static char *other_user[] = {other_file, NULL};
	static uint8_t any[256], dir[256];
	struct fx_env e;
	fi_addr_t good;
	pid_t pid;

	(void)state;
	pid = ta_start_echo(&e, &good, 3); /* the good peer is known and talking */
	assert_int_equal(fi_trecv(e.ep, any, sizeof(any), NULL, FI_ADDR_UNSPEC, TA_TAG_ANY, 0, any),
			 0);
	assert_int_equal(fi_trecv(e.ep, dir, sizeof(dir), NULL, good, TA_TAG_DIR, 0, dir), 0);

	ta_attack(&e, other_key);
	ta_attack(&e, no_mac);
	/* a key file of its own (another user's secret) */
	snprintf(other_file, sizeof(other_file), "FI_OPX_AUTH_KEY_FILE=%s/other.key", ta_dir);
	ta_write_key(other_file + strlen("FI_OPX_AUTH_KEY_FILE="),
		     "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100");
	ta_attack(&e, other_user);

	/* the good peer: its messages land in those very receives */
	ta_via_good(&e, good, TA_TAG_ANY, any, 9);
	ta_via_good(&e, good, TA_TAG_DIR, dir, 10);
	fx_reap(pid);
	fx_close(&e);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auth_key_file),
		cmocka_unit_test(test_auth_key_file_refused),
		cmocka_unit_test(test_auth_same_secret),
		cmocka_unit_test(test_auth_forged_messages),
		cmocka_unit_test(test_auth_other_user),
	};
	int rc;

	if (argc == 4 && !strcmp(argv[1], "echo"))
		ta_child_echo(atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "probe"))
		ta_child_probe();
	if (argc == 4 && !strcmp(argv[1], "send"))
		ta_child_send(atoi(argv[2]), atoi(argv[3]));
	/* before the provider reads its parameters; the key file goes to a
	 * directory of this run's own */
	snprintf(ta_dir, sizeof(ta_dir), "/tmp/opx-auth.XXXXXX");
	if (!mkdtemp(ta_dir))
		return 1;
	setenv("XDG_CONFIG_HOME", ta_dir, 1);
	unsetenv("FI_OPX_AUTH_KEY");
	unsetenv("FI_OPX_AUTH_KEY_FILE");
	unsetenv("FI_OPX_AUTH");
	unsetenv("OMPI_MCA_orte_precondition_transports");
	setenv("FI_OPX_WIRE", "udp", 1);
	setenv("FI_OPX_IFACE", "lo", 1);
	/* nothing here waits for a death: a timeout a loaded machine's
	 * scheduler cannot reach (at 1 s the good peer was once taken for
	 * dead beside a parallel build and a test suite) */
	setenv("FI_OPX_PEER_TIMEOUT", "10", 1);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ta_dir);
		if (system(cmd))
			rc = rc ? rc : 1;
	}
	return rc;
}
