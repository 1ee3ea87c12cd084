/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_rel.c - the reliability module with the provider on the udp wire
 * (FI_OPX_WIRE=udp, loopback, FI_OPX_PEER_TIMEOUT=1), against a peer in
 * another process:
 *  - killed with SIGKILL mid-stream: the survivor's pending rendezvous
 *    send and a receive directed at the dead peer complete in error and
 *    later sends fail, within a bounded time, and the survivor still
 *    talks to others;
 *  - restarted at the same address (same UDP port): traffic with the new
 *    process works in both directions, data checked;
 * and, without a peer, the rules that say when a receiver's standalone
 * ack is due and when a drained socket restarts every peer's silence
 * count.
 * Every loop is bounded in count and time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "opx_rel_priv.h"
#include "rdma/opx_ext.h"
#include "shim_udp_wire.h"

#define TR_WAIT_MS 20000u
#define TR_TAG_ECHO FX_TAG_ECHO
#define TR_TAG_BUSY 0x177u /* echoed, then the child computes */
#define TR_TAG_FULL 0x277u /* echoed, then the child only progresses */
#define TR_BUSY_MS 3000u   /* three peer timeouts */
#define TR_FLOOD 400u      /* messages to a child that posts no receive */
#define TR_FLOOD_LEN 1000u

/* extra environment (NAME=value, NULL-terminated) for the next child */
static char *const *tr_child_env;

/* Child: open at src (NULL: anywhere), tell the parent our name, then
 * echo every message tagged TR_TAG_ECHO back to its sender until killed
 * or 30 s have passed. */
static void tr_child(int wfd, const struct shim_addr *src)
{
	static uint8_t buf[1 << 20];
	struct fx_env e;
	char name[64];
	size_t len = sizeof(name);
	uint64_t end = fx_now_ms() + 30000;

	int orc = fx_open_at(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED, src, src ? sizeof(*src) : 0);

	/* the parent sees only that no name came: say why here */
	if (orc) {
		fprintf(stderr, "test_rel child: open at port %u: %s\n",
			src ? (unsigned)ntohs(src->udp_port) : 0u, fi_strerror(orc < 0 ? -orc : orc));
		_exit(2);
	}
	if (fi_getname(&e.ep->fid, name, &len) || write(wfd, name, len) != (ssize_t)len)
		_exit(2);
	if (getenv("TR_BUSY_FIRST")) /* computes before it ever reads a datagram */
		usleep(TR_BUSY_MS * 1000u);
	while (fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		int rc = fx_echo_serve(&e, buf, sizeof(buf), 0x300u, 0, end, &ent);

		if (rc)
			_exit(rc < 0 ? 0 : rc);
		if (ent.tag == TR_TAG_BUSY)
			usleep(TR_BUSY_MS * 1000u); /* no progress at all */
		if (ent.tag == TR_TAG_FULL) /* progress, but no receive posted */
			for (uint64_t t = fx_now_ms(); fx_now_ms() - t < TR_BUSY_MS;)
				(void)fi_cq_read(e.cq, NULL, 0);
	}
	_exit(0);
}

/* Start a child at src (NULL: anywhere); its name in *name.  -1 (the
 * child reaped) when it could not open there. */
static pid_t tr_try_spawn(const struct shim_addr *src, struct shim_addr *name)
{
	int fds[2];
	pid_t pid;
	ssize_t got;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char fd[16], ip[16], port[16];

		/* a fresh process: the parent's provider state (device, its
		 * sockets) must not be inherited */
		close(fds[0]);
		for (char *const *v = tr_child_env; v && *v; v++)
			putenv(*v);
		snprintf(fd, sizeof(fd), "%d", fds[1]);
		snprintf(ip, sizeof(ip), "%u", src ? src->ipv4 : 0);
		snprintf(port, sizeof(port), "%u", src ? src->udp_port : 0);
		execl("/proc/self/exe", "test_rel", "child", fd, ip, port, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	got = read(fds[0], name, sizeof(*name));
	close(fds[0]);
	if (got != (ssize_t)sizeof(*name)) {
		fx_reap(pid);
		return -1;
	}
	assert_int_not_equal(name->udp_port, 0);
	return pid;
}

static pid_t tr_spawn(const struct shim_addr *src, struct shim_addr *name)
{
	pid_t pid = tr_try_spawn(src, name);

	assert_true(pid > 0);
	return pid;
}

/* A UDP port below the kernel's ephemeral range, where no bind to port 0
 * (other tests of make check run beside this one) takes it between the
 * two processes.  Random, so that parallel runs differ; network byte
 * order; 0 if the range leaves no room. */
static uint16_t tr_port_outside_ephemeral(void)
{
	unsigned int lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	if (lo < 2048 + 1024)
		return 0;
	return htons((uint16_t)(lo - 1024 - (unsigned int)(rand() % 1024)));
}

/* A peer killed mid-stream: errors, not a hang. */
static void test_rel_peer_killed(void **state)
{
	static uint8_t big[1 << 20], small[4096], rsmall[64];
	struct shim_addr name;
	struct fx_env e;
	fi_addr_t peer;
	uint64_t t0;
	ssize_t rc = 0;
	size_t taken = 0;
	int err;
	pid_t pid;

	(void)state;
	pid = tr_spawn(NULL, &name);
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_av_insert(e.av, &name, 1, &peer, 0, NULL), 1);
	fx_echo(&e, peer, 100, 1, TR_TAG_ECHO);
	fx_echo(&e, peer, 200000, 2, TR_TAG_ECHO); /* rendezvous both ways */
	/* a rendezvous send the dead will never answer, and a receive
	 * directed at it that it will never satisfy */
	assert_int_equal(fi_tsend(e.ep, big, sizeof(big), NULL, peer, 0x5, big), 0);
	assert_int_equal(fi_trecv(e.ep, rsmall, sizeof(rsmall), NULL, peer, 0x9, 0, rsmall), 0);
	fx_reap(pid);
	t0 = fx_now_ms();
	while (fx_now_ms() - t0 < TR_WAIT_MS) {
		rc = fi_tsend(e.ep, small, sizeof(small), NULL, peer, 0x6, NULL);
		if (rc == 0) {
			taken++;
			continue;
		}
		if (rc != -FI_EAGAIN)
			break;
		(void)fi_cq_read(e.cq, NULL, 0);
	}
	print_message("killed peer: %zu sends taken, refused after %llu ms\n", taken,
		      (unsigned long long)(fx_now_ms() - t0));
	assert_int_equal(rc, -FI_ECONNREFUSED);
	/* both complete (no timeout), in error, in either order; the
	 * small sends' completions (no context) are read past */
	{
		int errs[2] = {-FI_ETIMEDOUT, -FI_ETIMEDOUT};
		void *ctxs[2] = {big, rsmall};

		for (t0 = fx_now_ms(); fx_now_ms() - t0 < TR_WAIT_MS &&
				       (errs[0] == -FI_ETIMEDOUT || errs[1] == -FI_ETIMEDOUT);) {
			struct fi_cq_tagged_entry ce;
			struct fi_cq_err_entry ee;
			void *ctx = NULL;
			ssize_t n = fi_cq_read(e.cq, &ce, 1);

			memset(&ee, 0, sizeof(ee));
			if (n == 1)
				ctx = ce.op_context, err = 0;
			else if (n == -FI_EAVAIL && fi_cq_readerr(e.cq, &ee, 0) == 1)
				ctx = ee.op_context, err = ee.err;
			for (int i = 0; i < 2; i++)
				if (ctx && ctx == ctxs[i])
					errs[i] = err;
		}
		for (int i = 0; i < 2; i++) {
			assert_int_not_equal(errs[i], -FI_ETIMEDOUT);
			assert_int_not_equal(errs[i], 0);
		}
	}
	assert_int_equal(fi_tsend(e.ep, small, 8, NULL, peer, 0x6, NULL), -FI_ECONNREFUSED);
	/* still talks to a live peer (a new one) */
	pid = tr_spawn(NULL, &name);
	assert_int_equal(fi_av_insert(e.av, &name, 1, &peer, 0, NULL), 1);
	fx_echo(&e, peer, 5000, 3, TR_TAG_ECHO);
	fx_reap(pid);
	fx_close(&e);
}

/* A child with the extra environment env (NULL: none), and an endpoint
 * of ours that knows it as *peer. */
static pid_t tr_start(struct fx_env *e, char *const *env, fi_addr_t *peer)
{
	struct shim_addr name;
	pid_t pid;

	tr_child_env = env;
	pid = tr_spawn(NULL, &name);
	tr_child_env = NULL;
	assert_int_equal(fx_open(e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_av_insert(e->av, &name, 1, peer, 0, NULL), 1);
	return pid;
}

static uint64_t tr_peer_timeouts(struct fx_env *e)
{
	struct opx_stats_ops *ops = NULL;
	struct opx_stats st;

	assert_int_equal(fi_open_ops(&e->ep->fid, OPX_STATS_OPS_NAME, 0, (void **)&ops, NULL), 0);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	assert_int_equal(ops->read(&e->ep->fid, &st), 0);
	return st.peer_timeouts;
}

/* A peer that computes for three peer timeouts without a single poll is
 * alive: while we wait with nothing outstanding (its keepalives, a few
 * per timeout), and with our eager message and rendezvous send to it
 * unacknowledged all that time (its acks say it holds them): both
 * complete once it polls again, data checked, and nothing was declared
 * dead. */
static void test_rel_peer_busy(void **state)
{
	struct fx_env e;
	fi_addr_t peer;
	uint64_t t0;
	pid_t pid;

	(void)state;
	pid = tr_start(&e, NULL, &peer);
	fx_echo(&e, peer, 100, 6, TR_TAG_BUSY);
	for (t0 = fx_now_ms(); fx_now_ms() - t0 < TR_BUSY_MS + 500;)
		(void)fi_cq_read(e.cq, NULL, 0);
	assert_int_equal(tr_peer_timeouts(&e), 0);
	fx_echo(&e, peer, 100, 7, TR_TAG_BUSY);
	t0 = fx_now_ms();
	fx_echo(&e, peer, 1000, 8, TR_TAG_ECHO);
	fx_echo(&e, peer, 200000, 9, TR_TAG_ECHO);
	print_message("busy peer: echoes back after %llu ms\n",
		      (unsigned long long)(fx_now_ms() - t0));
	assert_true(fx_now_ms() - t0 >= TR_BUSY_MS / 2); /* it did wait for the peer */
	assert_int_equal(tr_peer_timeouts(&e), 0);
	fx_reap(pid);
	fx_close(&e);
}

/* A peer that computes from the start, before it read anything from us:
 * it has no flow to us that its keepalives would go on, our first
 * messages wait unread in its socket, and it is alive all the same. */
static void test_rel_peer_busy_first(void **state)
{
	static char *busy_first[] = {"TR_BUSY_FIRST=1", NULL};
	struct fx_env e;
	fi_addr_t peer;
	uint64_t t0;
	pid_t pid;

	(void)state;
	pid = tr_start(&e, busy_first, &peer);
	t0 = fx_now_ms();
	fx_echo(&e, peer, 1000, 11, TR_TAG_ECHO);
	print_message("busy from the start: first echo after %llu ms\n",
		      (unsigned long long)(fx_now_ms() - t0));
	assert_true(fx_now_ms() - t0 >= TR_BUSY_MS / 2);
	fx_echo(&e, peer, 200000, 12, TR_TAG_ECHO);
	assert_int_equal(tr_peer_timeouts(&e), 0);
	fx_reap(pid);
	fx_close(&e);
}

/* A peer that progresses but posts no receive for three peer timeouts,
 * its receive ring and unexpected-message bound full of our messages and
 * more of them waiting unacknowledged, is alive too: every message
 * arrives, in order, data checked, once it receives again. */
static void test_rel_peer_full(void **state)
{
	static char *small_child[] = {"FI_OPX_HDRQ_ENTRIES=64", "FI_OPX_UX_MAX_BYTES=4096", NULL};
	static uint8_t out[TR_FLOOD][32 + TR_FLOOD_LEN], back[TR_FLOOD][TR_FLOOD_LEN];
	struct fx_env e;
	fi_addr_t peer;
	uint64_t t0;
	size_t nl = 32;
	unsigned posted = 0, done = 0;
	pid_t pid;

	(void)state;
	pid = tr_start(&e, small_child, &peer);
	fx_echo(&e, peer, 100, 10, TR_TAG_FULL);
	t0 = fx_now_ms();
	for (unsigned m = 0; m < TR_FLOOD; m++) {
		assert_int_equal(fi_getname(&e.ep->fid, out[m], &nl), 0);
		for (size_t i = 0; i < TR_FLOOD_LEN; i++)
			out[m][32 + i] = fx_echo_pat(20 + m, i);
		assert_int_equal(fi_trecv(e.ep, back[m], TR_FLOOD_LEN, NULL, peer, TR_TAG_ECHO, 0,
					  back[m]),
				 0);
	}
	/* every send taken (some after -FI_EAGAIN), every echo back */
	while (done < 2 * TR_FLOOD && fx_now_ms() - t0 < TR_WAIT_MS) {
		struct fi_cq_tagged_entry ent;
		struct fi_cq_err_entry err;
		ssize_t n;

		if (posted < TR_FLOOD) {
			n = fi_tsend(e.ep, out[posted], sizeof(out[posted]), NULL, peer, TR_TAG_ECHO,
				     out[posted]);
			if (n == 0)
				posted++;
			else
				assert_int_equal(n, -FI_EAGAIN);
		}
		n = fi_cq_read(e.cq, &ent, 1);
		if (n == 1)
			done++;
		else if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			(void)fi_cq_readerr(e.cq, &err, 0);
			fail_msg("completion error %d after %u of %u", err.err, done, 2 * TR_FLOOD);
		}
	}
	print_message("full peer: %u sends, %u completions after %llu ms\n", posted, done,
		      (unsigned long long)(fx_now_ms() - t0));
	assert_int_equal(done, 2 * TR_FLOOD);
	assert_true(fx_now_ms() - t0 >= TR_BUSY_MS / 2); /* it did wait for the peer */
	for (unsigned m = 0; m < TR_FLOOD; m++)
		for (size_t i = 0; i < TR_FLOOD_LEN; i++)
			if (back[m][i] != fx_echo_pat(20 + m, i))
				fail_msg("echo %u differs at %zu", m, i);
	assert_int_equal(tr_peer_timeouts(&e), 0);
	fx_reap(pid);
	fx_close(&e);
}

/* A peer restarted at the same UDP port is a new session: it talks
 * normally, both directions, data checked. */
static void test_rel_peer_restarted(void **state)
{
	struct shim_addr first, second, at;
	struct fx_env e;
	fi_addr_t a1, a2;
	pid_t pid;

	(void)state;
	/* the first process at a port it names, so that it claims the port
	 * in the service registry and the restart must take a dead holder's
	 * entry over (a udp endpoint's never was: shim_svc_live); this
	 * interface's address from a child that opens anywhere, then a few
	 * random tries */
	pid = tr_spawn(NULL, &first);
	fx_reap(pid);
	memset(&at, 0, sizeof(at));
	at.ipv4 = first.ipv4;
	pid = -1;
	srand((unsigned int)getpid());
	for (int i = 0; i < 16 && pid < 0; i++) {
		at.udp_port = tr_port_outside_ephemeral();
		pid = at.udp_port ? tr_try_spawn(&at, &first) : tr_spawn(NULL, &first);
	}
	assert_true(pid > 0);
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_av_insert(e.av, &first, 1, &a1, 0, NULL), 1);
	fx_echo(&e, a1, 64, 4, TR_TAG_ECHO);
	fx_reap(pid);
	at.udp_port = first.udp_port;
	pid = tr_spawn(&at, &second);
	assert_int_equal(second.udp_port, first.udp_port);
	assert_int_not_equal(second.nonce, first.nonce);
	assert_int_equal(fi_av_insert(e.av, &second, 1, &a2, 0, NULL), 1);
	fx_echo(&e, a2, 64, 5, TR_TAG_ECHO);
	fx_echo(&e, a2, 100000, 6, TR_TAG_ECHO);
	fx_reap(pid);
	fx_close(&e);
}

/* Packets first .. first + n - 1 of a stream of paylen-byte packets (0:
 * no payload), per_dgram to a datagram, counted towards flow f's next
 * ack as the receive path counts them. */
static void tr_arrive(struct opx_rel_flow *f, uint32_t first, uint32_t n, uint32_t paylen,
		      uint32_t per_dgram)
{
	for (uint32_t i = first; i < first + n; i++) {
		struct shim_udp_pkt pkt;

		memset(&pkt, 0, sizeof(pkt));
		pkt.e.rhf = paylen ? SHIM_RHF_EGR : 0;
		pkt.e.hdr.paylen = paylen;
		pkt.dgram_first = i % per_dgram == 0;
		opx_rel_ack_count(f, &pkt);
		f->expected++;
	}
}

/* A flow that has just acked, packets arriving now. */
static void tr_flow(struct opx_rel_flow *f, uint64_t now)
{
	memset(f, 0, sizeof(*f));
	f->ack_due_ns = now;
	f->rx_last_ns = now;
}

/* When a standalone ack is due: every 8 datagrams and 16 packets of
 * small messages; once per 64 KiB of bulk, not per 16 datagrams of a
 * 1500-byte path (1344 bytes each: the 49th is the one) nor per 8 of
 * jumbo frames; half a window and the timers whatever the bytes.  Each
 * stream's ack is due at its last packet, not one packet before. */
static void test_rel_ack_rule(void **state)
{
	static const struct {
		uint32_t pkts, paylen, per_dgram;
	} streams[] = {
		{16, 8, 2},                     /* packed small messages: 8 datagrams */
		{16, 1000, 1},                  /* a small message per datagram */
		{16, 0, 1},                     /* header-only packets */
		{49, 1344, 1},                  /* a 1500-byte path: 48 are 64512 bytes */
		{16, 8192, 1},                  /* jumbo frames: 128 KiB, as before */
		{SHIM_UDP_WINDOW / 2, 8, SHIM_UDP_WINDOW}, /* half a window, 1 datagram */
	};
	const uint64_t now = 10000000000ull;
	struct opx_rel_flow f;

	(void)state;
	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
		tr_flow(&f, now);
		tr_arrive(&f, 0, streams[i].pkts - 1, streams[i].paylen, streams[i].per_dgram);
		assert_false(opx_rel_ack_due(&f, 0, now));
		tr_arrive(&f, streams[i].pkts - 1, 1, streams[i].paylen, streams[i].per_dgram);
		assert_true(opx_rel_ack_due(&f, 0, now));
	}
	/* the count starts at the last ack sent */
	tr_flow(&f, now);
	tr_arrive(&f, 0, 60, 1344, 1);
	assert_true(opx_rel_ack_due(&f, 0, now));
	assert_false(opx_rel_ack_due(&f, 50, now));
	/* a flow fallen quiet, and the oldest unacknowledged packet's age */
	tr_flow(&f, now);
	tr_arrive(&f, 0, 1, 1344, 1);
	assert_false(opx_rel_ack_due(&f, 0, now + 150000));
	assert_true(opx_rel_ack_due(&f, 0, now + 250000));
	f.rx_last_ns = now + 400000;
	assert_false(opx_rel_ack_due(&f, 0, now + 450000));
	assert_true(opx_rel_ack_due(&f, 0, now + 550000));
}

/* When a poll finds the socket empty: the first drain of all, and one
 * after a gap over the peer timeout, restart every peer's silence count
 * (resumed_ns); drains closer together do not.  Before, the first drain
 * did not: a rank that read its first datagrams with a few polls, none
 * a timed one with the socket empty, then computed for longer than the
 * timeout, took a peer whose datagrams it did not find in its socket for
 * dead at its first poll back (udp.sh's busy MPI test, once: "heard
 * 31603 ms ago, socket emptied 0 ms ago, resumed 78604691 ms ago"). */
static void test_rel_drained_rule(void **state)
{
	const uint64_t s = 1000000000ull, timeout = 20 * s;
	struct opx_rel_stats rel;

	(void)state;
	memset(&rel, 0, sizeof(rel));
	opx_rel_drained(&rel, 31 * s, timeout); /* first drain, after 31 s unread */
	assert_int_equal(rel.drained_ns, 31 * s);
	assert_int_equal(rel.resumed_ns, 31 * s);
	opx_rel_drained(&rel, 32 * s, timeout); /* polling on */
	assert_int_equal(rel.drained_ns, 32 * s);
	assert_int_equal(rel.resumed_ns, 31 * s);
	opx_rel_drained(&rel, 52 * s, timeout); /* a gap of exactly the timeout */
	assert_int_equal(rel.resumed_ns, 31 * s);
	opx_rel_drained(&rel, 72 * s + 1, timeout); /* over it */
	assert_int_equal(rel.drained_ns, 72 * s + 1);
	assert_int_equal(rel.resumed_ns, 72 * s + 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rel_peer_killed),
		cmocka_unit_test(test_rel_peer_restarted),
		cmocka_unit_test(test_rel_peer_busy),
		cmocka_unit_test(test_rel_peer_busy_first),
		cmocka_unit_test(test_rel_peer_full),
		cmocka_unit_test(test_rel_ack_rule),
		cmocka_unit_test(test_rel_drained_rule),
	};

	/* before the provider reads its parameters */
	setenv("FI_OPX_WIRE", "udp", 1);
	setenv("FI_OPX_IFACE", "lo", 1);
	setenv("FI_OPX_PEER_TIMEOUT", "1", 1);
	if (argc == 5 && !strcmp(argv[1], "child")) {
		struct shim_addr src;

		memset(&src, 0, sizeof(src));
		src.ipv4 = (uint32_t)strtoul(argv[3], NULL, 10);
		src.udp_port = (uint16_t)strtoul(argv[4], NULL, 10);
		tr_child(atoi(argv[2]), src.udp_port ? &src : NULL);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
