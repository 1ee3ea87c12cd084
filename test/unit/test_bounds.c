/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_bounds.c - what a udp peer may cost a receiver (issue 28, items 4
 * and 5).  No sender can block the others: the unexpected-message bound
 * is shared out per sender.
 *  - the accounting (opx_ux_get / opx_ux_put with made-up senders): a
 *    sender over its fair share is refused while one under it is not;
 *    FI_OPX_UX_PEER_MAX_BYTES caps one sender; 300 senders (more than
 *    the table's slots) and random frees keep every count exact;
 *  - over the udp wire on loopback (FI_OPX_WIRE=udp, three processes):
 *    a flooder sends far more unexpected bytes than the victim's bound
 *    on a tag nobody receives; the victim's receive for a second sender
 *    completes with its data while the flood goes on, the victim's
 *    unexpected bytes stay within the bound plus its receive ring, the
 *    flooder was held back (ux_held), and once the victim receives the
 *    flood every message arrives, in order, data checked;
 *  - an idle peer's cost: 64 endpoints of another process each send one
 *    message; the receiver's resident memory per peer is printed and
 *    bounded; once that process is killed its peers are declared dead and
 *    their flows freed (links_freed), none left.
 * Every loop is bounded in count and time.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "opx_ep.h"
#include "opx_ux.h"
#include "shim_udp_wire.h"
#include "../common/testutil.h"

#define TQ_WAIT_MS 30000u
#define TQ_BOUND (1u << 20)     /* the victim's FI_OPX_UX_MAX_BYTES */
#define TQ_FLOOD_LEN 4000u      /* eager */
#define TQ_FLOOD_MSGS 2048u     /* 8 MB: eight times the bound */
#define TQ_TAG_FLOOD 0x100u
#define TQ_TAG_GOOD 0x200u
#define TQ_TAG_NAME 0x300u      /* children send their names on it */

static struct opx_ep *tq_ep(struct fx_env *e)
{
	return OPX_CONTAINER_OF(e->ep, struct opx_ep, ep_fid);
}

static uint8_t tq_pat(uint32_t msg, size_t i)
{
	return (uint8_t)(msg * 29u + i * 13u + 1u);
}

/* ---------------------------------------------------------------------
 * The accounting, with made-up senders.
 */
static struct opx_ux *tq_get(struct opx_ep *ep, uint16_t lid, size_t len)
{
	struct opx_ux *ux = opx_ux_get(ep, lid, 1, len);

	if (ux)
		ux->queued = false;
	return ux;
}

static void test_quota_fair_share(void **state)
{
	struct opx_ux *a[64], *b[32], *c;
	size_t bound, peer;
	struct fx_env e;
	struct opx_ep *ep;
	unsigned na = 0, nb = 0;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	bound = opx_env.ux_max_bytes; /* the parameters are read by now */
	peer = opx_env.ux_peer_max_bytes;
	ep = tq_ep(&e);
	opx_env.ux_max_bytes = 64 << 10;
	opx_env.ux_peer_max_bytes = opx_env.ux_max_bytes;
	ep->match.ux_slack = 0;
	/* sender 7 alone takes the whole bound (and one message more) */
	while (na < 64 && (a[na] = tq_get(ep, 7, 4000)))
		na++;
	assert_true(na >= 15 && na < 64);
	assert_true(ep->match.ux_bytes >= opx_env.ux_max_bytes);
	assert_true(opx_ux_src_over(ep, 7, 1, 0));
	/* sender 8 holds nothing: never waits for 7 */
	assert_false(opx_ux_src_over(ep, 8, 1, 0));
	while (nb < 32 && (b[nb] = tq_get(ep, 8, 4000)))
		nb++;
	/* two senders: each may hold half the bound; 8 got there too */
	assert_true(nb >= 1 && nb < 32);
	assert_true(opx_ux_src_over(ep, 8, 1, 0));
	assert_int_equal(ep->match.ux_srcs, 2);
	/* a third, empty sender still passes; with slack, nobody is over */
	assert_false(opx_ux_src_over(ep, 9, 2, 0));
	assert_false(opx_ux_src_over(ep, 7, 1, SIZE_MAX / 2));
	/* 7 frees below the bound: 8 may add again */
	while (na && ep->match.ux_bytes >= opx_env.ux_max_bytes)
		opx_ux_put(ep, a[--na]);
	assert_false(opx_ux_src_over(ep, 8, 1, 0));
	/* the per-sender cap: a quarter */
	opx_env.ux_peer_max_bytes = opx_env.ux_max_bytes / 4;
	assert_true(opx_ux_src_over(ep, 7, 1, 0));
	c = tq_get(ep, 10, 100);
	assert_non_null(c);
	opx_ux_put(ep, c);
	while (na)
		opx_ux_put(ep, a[--na]);
	while (nb)
		opx_ux_put(ep, b[--nb]);
	assert_int_equal(ep->match.ux_bytes, 0);
	assert_int_equal(ep->match.ux_srcs, 0);
	opx_env.ux_max_bytes = bound;
	opx_env.ux_peer_max_bytes = peer;
	fx_close(&e);
}

/* 300 senders (the table has 256 slots, the rest share one count), freed
 * in random order: the per-sender counts stay exact, every removal keeps
 * the others findable. */
#define TQ_SRCS 300u
#define TQ_PER 3u
static void test_quota_many_senders(void **state)
{
	static struct opx_ux *u[TQ_SRCS * TQ_PER];
	struct fx_env e;
	struct opx_ep *ep;
	unsigned n = TQ_SRCS * TQ_PER, seed = 12345;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	ep = tq_ep(&e);
	for (unsigned i = 0; i < n; i++) {
		u[i] = tq_get(ep, (uint16_t)(1 + i % TQ_SRCS), 100 + i % 7);
		assert_non_null(u[i]);
	}
	/* 256 slots + the shared one */
	assert_int_equal(ep->match.ux_srcs, OPX_UX_SRC_SLOTS + 1);
	for (unsigned left = n; left; left--) {
		unsigned k;

		seed = seed * 1103515245u + 12345u;
		k = (seed >> 8) % left;
		opx_ux_put(ep, u[k]);
		u[k] = u[left - 1];
		/* every count is its sender's bytes, and they add up */
		if (left % 61 == 0) {
			size_t sum = 0;

			for (unsigned i = 0; i <= OPX_UX_SRC_SLOTS; i++)
				sum += ep->match.ux_src[i].used ? ep->match.ux_src[i].bytes : 0;
			assert_int_equal(sum, ep->match.ux_bytes);
			for (unsigned i = 0; i < OPX_UX_SRC_SLOTS; i++) {
				size_t want = 0;

				if (!ep->match.ux_src[i].used)
					continue;
				for (unsigned j = 0; j < left - 1; j++)
					if (u[j]->src_key == ep->match.ux_src[i].key)
						want += u[j]->cost;
				assert_int_equal(ep->match.ux_src[i].bytes, want);
			}
		}
	}
	assert_int_equal(ep->match.ux_bytes, 0);
	assert_int_equal(ep->match.ux_srcs, 0);
	for (unsigned i = 0; i <= OPX_UX_SRC_SLOTS; i++)
		assert_false(ep->match.ux_src[i].used);
	fx_close(&e);
}

/* ---------------------------------------------------------------------
 * Over the udp wire, with processes.
 */

/* Child: its name to the victim (named on rfd), then count messages of
 * len bytes on tag, message i filled with tq_pat(i); progress until all
 * completed or TQ_WAIT_MS; exit 0 when all completed successfully. */
static void tq_child(int rfd, uint64_t tag, uint32_t count, uint32_t len)
{
	uint8_t *msg = malloc((size_t)count * len);
	char victim[64], name[64];
	size_t nl = sizeof(name);
	struct fx_env e;
	fi_addr_t to;
	uint64_t end = fx_now_ms() + 2 * TQ_WAIT_MS;
	uint32_t sent = 0, done = 0;

	if (!msg || read(rfd, victim, sizeof(victim)) <= 0 ||
	    fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED) ||
	    fi_av_insert(e.av, victim, 1, &to, 0, NULL) != 1 ||
	    fi_getname(&e.ep->fid, name, &nl))
		_exit(2);
	while (fi_tsend(e.ep, name, nl, NULL, to, TQ_TAG_NAME, name) == -FI_EAGAIN)
		if (fx_now_ms() > end)
			_exit(3);
	if (fx_cq_wait(e.cq, name, TQ_WAIT_MS, NULL))
		_exit(4);
	for (uint32_t i = 0; i < count; i++)
		for (uint32_t j = 0; j < len; j++)
			msg[(size_t)i * len + j] = tq_pat(i, j);
	while (done < count && fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		struct fi_cq_err_entry err;

		if (sent < count) {
			ssize_t rc = fi_tsend(e.ep, msg + (size_t)sent * len, len, NULL, to, tag,
					      NULL);

			if (rc == 0)
				sent++;
			else if (rc != -FI_EAGAIN)
				_exit(5);
		}
		if (fi_cq_read(e.cq, &ent, 1) == 1)
			done++;
		else if (fi_cq_readerr(e.cq, &err, 0) == 1)
			_exit(6);
	}
	fx_close(&e);
	_exit(done == count ? 0 : 7);
}

static pid_t tq_spawn(const char *role, int *wfd)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char r[16];

		close(p[1]);
		snprintf(r, sizeof(r), "%d", p[0]);
		execl("/proc/self/exe", "test_bounds", role, r, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

/* The child's name (sent on TQ_TAG_NAME) into the AV. */
static fi_addr_t tq_accept(struct fx_env *e)
{
	char name[64];
	fi_addr_t a;

	memset(name, 0, sizeof(name));
	assert_int_equal(fi_trecv(e->ep, name, sizeof(name), NULL, FI_ADDR_UNSPEC, TQ_TAG_NAME, 0,
				  name), 0);
	assert_int_equal(fx_cq_wait(e->cq, name, TQ_WAIT_MS, NULL), 0);
	assert_int_equal(fi_av_insert(e->av, name, 1, &a, 0, NULL), 1);
	return a;
}

static int tq_wait_child(pid_t pid, unsigned ms)
{
	uint64_t end = fx_now_ms() + ms;
	int st;

	while (fx_now_ms() < end) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static void test_quota_flood_udp(void **state)
{
	static uint8_t good[TQ_FLOOD_LEN], fbuf[TQ_FLOOD_LEN];
	struct fx_env e;
	struct opx_ep *ep;
	char me[64];
	size_t ml = sizeof(me);
	pid_t flooder, peer;
	int wf, wp;
	fi_addr_t fa;
	size_t peak = 0;
	uint64_t end;
	int rc = 1;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	ep = tq_ep(&e);
	if (!ep->udp) {
		fx_close(&e);
		skip(); /* no udp wire here */
	}
	opx_env.ux_max_bytes = TQ_BOUND; /* as the children read it */
	opx_env.ux_peer_max_bytes = TQ_BOUND;
	assert_int_equal(fi_getname(&e.ep->fid, me, &ml), 0);
	flooder = tq_spawn("flood", &wf);
	assert_int_equal(write(wf, me, ml), (ssize_t)ml);
	fa = tq_accept(&e);
	/* let the flood reach the bound: the victim progresses, receives
	 * nothing on the flood's tag */
	end = fx_now_ms() + TQ_WAIT_MS;
	while (ep->match.ux_bytes + TQ_FLOOD_LEN + sizeof(struct opx_ux) <= TQ_BOUND && fx_now_ms() < end)
		fi_cq_read(e.cq, NULL, 0);
	assert_true(ep->match.ux_bytes + TQ_FLOOD_LEN + sizeof(struct opx_ux) > TQ_BOUND);
	/* now the good sender: its message must get through the flood */
	peer = tq_spawn("good", &wp);
	assert_int_equal(write(wp, me, ml), (ssize_t)ml);
	(void)tq_accept(&e);
	memset(good, 0, sizeof(good));
	assert_int_equal(fi_trecv(e.ep, good, sizeof(good), NULL, FI_ADDR_UNSPEC, TQ_TAG_GOOD, 0,
				  good), 0);
	end = fx_now_ms() + TQ_WAIT_MS;
	while (fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;

		if (ep->match.ux_bytes > peak)
			peak = ep->match.ux_bytes;
		if (fi_cq_read(e.cq, &ent, 1) == 1 && ent.op_context == good) {
			rc = 0;
			break;
		}
	}
	assert_int_equal(rc, 0);
	for (size_t j = 0; j < sizeof(good); j++)
		assert_int_equal(good[j], tq_pat(0, j));
	assert_int_equal(tq_wait_child(peer, TQ_WAIT_MS), 0);
	/* the flood was held back, memory stayed within bound + ring */
	assert_true(ep->rel.ux_held > 0);
	assert_true(peak <= TQ_BOUND + ep->match.ux_slack);
	/* every flood message arrives, in order, with its data */
	for (uint32_t i = 0; i < TQ_FLOOD_MSGS; i++) {
		struct fi_cq_tagged_entry ent;

		assert_int_equal(fi_trecv(e.ep, fbuf, sizeof(fbuf), NULL, fa, TQ_TAG_FLOOD, 0, fbuf),
				 0);
		assert_int_equal(fx_cq_wait(e.cq, fbuf, TQ_WAIT_MS, &ent), 0);
		assert_int_equal(ent.len, TQ_FLOOD_LEN);
		for (size_t j = 0; j < TQ_FLOOD_LEN; j++)
			if (fbuf[j] != tq_pat(i, j))
				fail_msg("flood message %u differs at byte %zu", i, j);
	}
	assert_int_equal(tq_wait_child(flooder, TQ_WAIT_MS), 0);
	close(wf);
	close(wp);
	fx_close(&e);
}

/* ---------------------------------------------------------------------
 * Idle peers, and dead ones freed.
 */
#define TB_PEERS 64u
#define TB_TAG_IDLE 0x400u

/* Child: TB_PEERS endpoints each send one 8-byte message to the victim
 * (its name on rfd), then "d" on wfd; it waits for EOF on rfd (or
 * TQ_WAIT_MS) and exits without closing anything (as a crash would). */
static void tb_child_many(int rfd, int wfd)
{
	static struct fid_ep *eps[TB_PEERS];
	uint64_t msg = 0x1122334455667788ull, end = fx_now_ms() + TQ_WAIT_MS;
	char victim[64], c;
	struct fx_env e;
	fi_addr_t to;
	unsigned done = 0;

	if (read(rfd, victim, sizeof(victim)) <= 0 || fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED) ||
	    fi_av_insert(e.av, victim, 1, &to, 0, NULL) != 1)
		_exit(2);
	eps[0] = e.ep; /* its AV's endpoint speaks first: one of the peers */
	for (unsigned i = 1; i < TB_PEERS; i++)
		if (fi_endpoint(e.domain, e.info, &eps[i], NULL) ||
		    fi_ep_bind(eps[i], &e.cq->fid, FI_TRANSMIT | FI_RECV) ||
		    fi_ep_bind(eps[i], &e.av->fid, 0) || fi_enable(eps[i]))
			_exit(3);
	for (unsigned i = 0; i < TB_PEERS; i++)
		while (fi_tsend(eps[i], &msg, sizeof(msg), NULL, to, TB_TAG_IDLE, NULL) == -FI_EAGAIN)
			if (fx_now_ms() > end || fi_cq_read(e.cq, NULL, 0) < -FI_EAGAIN)
				_exit(4);
	while (done < TB_PEERS && fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;

		if (fi_cq_read(e.cq, &ent, 1) == 1)
			done++;
	}
	if (done < TB_PEERS || write(wfd, "d", 1) != 1)
		_exit(5);
	while (read(rfd, &c, 1) > 0 && fx_now_ms() < end)
		;
	_exit(0);
}

static unsigned tb_links(struct opx_ep *ep)
{
	unsigned n = 0;

	for (struct shim_peer *p = shim_udp_next(ep->shim, NULL); p; p = shim_udp_next(ep->shim, p))
		n++;
	return n;
}

static void test_bounds_idle_peers(void **state)
{
	static uint64_t got[TB_PEERS];
	struct shim_udp_stats st;
	struct fx_env e;
	struct opx_ep *ep;
	char me[64], c;
	size_t ml = sizeof(me);
	int down[2], up[2];
	long before, after;
	uint64_t end;
	pid_t pid;
	int rc;

	(void)state;
	assert_int_equal(fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	ep = tq_ep(&e);
	if (!ep->udp) {
		fx_close(&e);
		skip();
	}
	assert_int_equal(fi_getname(&e.ep->fid, me, &ml), 0);
	for (unsigned i = 0; i < TB_PEERS; i++)
		assert_int_equal(fi_trecv(e.ep, &got[i], sizeof(got[i]), NULL, FI_ADDR_UNSPEC,
					  TB_TAG_IDLE, 0, &got[i]), 0);
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char r[16], w[16];

		close(down[1]);
		close(up[0]);
		snprintf(r, sizeof(r), "%d", down[0]);
		snprintf(w, sizeof(w), "%d", up[1]);
		execl("/proc/self/exe", "test_bounds", "many", r, w, (char *)NULL);
		_exit(127);
	}
	close(down[0]);
	close(up[1]);
	assert_int_equal(tb_links(ep), 0);
	before = tu_rss_kib();
	assert_int_equal(write(down[1], me, ml), (ssize_t)ml);
	/* every peer's message, then the child says it saw them complete */
	for (unsigned i = 0; i < TB_PEERS; i++) {
		assert_int_equal(fx_cq_wait(e.cq, &got[i], TQ_WAIT_MS, NULL), 0);
		assert_int_equal(got[i], 0x1122334455667788ull);
	}
	end = fx_now_ms() + TQ_WAIT_MS;
	for (;;) {
		struct pollfd pf = {.fd = up[0], .events = POLLIN};

		fi_cq_read(e.cq, NULL, 0);
		if (poll(&pf, 1, 0) == 1)
			break;
		assert_true(fx_now_ms() < end);
	}
	assert_int_equal(read(up[0], &c, 1), 1);
	after = tu_rss_kib();
	assert_int_equal(tb_links(ep), TB_PEERS);
	print_message("      %u idle udp peers: receiver RSS %ld -> %ld KiB, %ld bytes per peer\n",
		      TB_PEERS, before, after, (after - before) * 1024 / (long)TB_PEERS);
	assert_true((after - before) * 1024 / (long)TB_PEERS <= 32 * 1024);
	/* the process dies: its peers are declared dead (FI_OPX_PEER_TIMEOUT)
	 * and, nothing of ours referring to them, freed */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &rc, 0), pid);
	end = fx_now_ms() + TQ_WAIT_MS;
	do {
		fi_cq_read(e.cq, NULL, 0);
		shim_udp_stats(ep->shim, &st);
	} while (st.links_freed < TB_PEERS && fx_now_ms() < end);
	assert_int_equal(st.links_freed, TB_PEERS);
	assert_int_equal(tb_links(ep), 0);
	close(down[1]);
	close(up[0]);
	fx_close(&e);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quota_fair_share),
		cmocka_unit_test(test_quota_many_senders),
		cmocka_unit_test(test_quota_flood_udp),
		cmocka_unit_test(test_bounds_idle_peers),
	};
	char bound[32];

	if (argc == 3 && !strcmp(argv[1], "flood"))
		tq_child(atoi(argv[2]), TQ_TAG_FLOOD, TQ_FLOOD_MSGS, TQ_FLOOD_LEN);
	if (argc == 4 && !strcmp(argv[1], "many"))
		tb_child_many(atoi(argv[2]), atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "good"))
		tq_child(atoi(argv[2]), TQ_TAG_GOOD, 1, TQ_FLOOD_LEN);
	/* before the provider reads its parameters (children inherit) */
	snprintf(bound, sizeof(bound), "%u", TQ_BOUND);
	setenv("FI_OPX_UX_MAX_BYTES", bound, 1);
	setenv("FI_OPX_WIRE", "udp", 1);
	setenv("FI_OPX_IFACE", "lo", 1);
	setenv("FI_OPX_AUTH_KEY", "5175f0a7c3e1d2b4a69788b6c5d4e3f20112233445566778899aabbccddeeff0",
	       1);
	unsetenv("FI_OPX_AUTH");
	setenv("FI_OPX_PEER_TIMEOUT", "1", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
