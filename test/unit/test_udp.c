/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_udp.c - unit tests of the udp wire of the driver shim: a packet
 * published into a udp peer goes out as one datagram with its sequence
 * number and arrives validated with its payload intact; acknowledged
 * packets free the send ring; whatever a hostile or broken sender puts
 * on the socket (random bytes, mutated headers, another job's key, a
 * wrong length, a flipped byte) is dropped and counted, and good traffic
 * still passes after it; fault injection is reproducible from its seed;
 * a udp peer is never a process for Cross Memory Attach; unloading the
 * library stops the watchdog threads (not a forked parent's); a burst
 * goes out as GSO messages, and a socket that refuses GSO gets the same
 * burst datagram by datagram, nothing lost.  Receiving a run of
 * datagrams at once (UDP_GRO) and packing small packets into one
 * datagram (PACK) are tested in test_udp_batch.c; what both share is
 * udp_fixture.c.
 * Two receive contexts of one process talk over loopback; every loop is
 * bounded in count and in time.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "udp_fixture.h"

#define T_NPKT 200

/* Packets go out as published, numbered from 0, payloads intact; an ack
 * frees the send ring; delivered packets land in b's own ring. */
static void test_udp_exchange(void **state)
{
	uint32_t psns[T_NPKT], acked, sent;
	struct shim_udp_pkt pkts[16];
	struct t_pair t;
	int got;

	(void)state;
	t_pair_open(&t, NULL);
	for (uint32_t s = 0; s < T_NPKT; s++)
		assert_int_equal(t_send(t.to_b, s), 0);
	got = t_recv_all(&t, T_NPKT, psns, 10.0);
	assert_int_equal(got, T_NPKT);
	for (uint32_t s = 0; s < T_NPKT; s++)
		assert_int_equal(psns[s], s); /* loopback keeps order */
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(acked, 0);
	assert_int_equal(sent, T_NPKT);
	shim_udp_release(t.to_b, T_NPKT + 5); /* beyond what was sent: ignored */
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(acked, 0);
	shim_udp_release(t.to_b, T_NPKT);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(acked, T_NPKT);
	/* a resend of an acknowledged packet is refused */
	assert_int_equal(shim_udp_resend(t.to_b, 3), -ENOENT);

	/* one more, delivered into b's own ring */
	assert_int_equal(t_send(t.to_b, 7), 0);
	double end = t_now() + 5.0;
	got = 0;
	while (!got && t_now() < end)
		got = shim_udp_recv(t.b, pkts, 16);
	assert_int_equal(got, 1);
	assert_int_equal(pkts[0].uh.psn, T_NPKT);
	assert_int_equal(shim_udp_deliver(t.b, &pkts[0]), 0);
	struct shim_rhq_entry *e = shim_rx_peek(shim_ctx_rx(t.b));
	assert_non_null(e);
	assert_int_equal(e->hdr.msgid, 7);
	assert_int_equal(e->hdr.dctx, shim_ctx_rx(t.b)->ctx);
	const uint8_t *pay = shim_rx_payload(shim_ctx_rx(t.b), e);
	assert_non_null(pay);
	for (uint32_t i = 0; i < e->hdr.paylen; i++)
		assert_int_equal(pay[i], t_pat(7, i));
	shim_rx_release(shim_ctx_rx(t.b), e);
	/* the sender's flow is the peer b sees */
	struct shim_addr learned;
	assert_int_equal(shim_udp_peer_addr(pkts[0].peer, &learned), 0);
	assert_int_equal(learned.lid, shim_ctx_rx(t.a)->lid);
	assert_int_equal(learned.ctx, shim_ctx_rx(t.a)->ctx);
	t_pair_close(&t);
}

/* A run of packets goes again in one batch: only what is staged of it
 * (neither acknowledged nor beyond what was sent), in order, payloads
 * intact; a run of nothing staged, an empty one and one longer than a
 * batch are refused. */
static void test_udp_resend_run(void **state)
{
	uint32_t psns[40];
	struct t_pair t;

	(void)state;
	t_pair_open(&t, NULL);
	for (uint32_t s = 0; s < 40; s++)
		assert_int_equal(t_send(t.to_b, s), 0);
	assert_int_equal(t_recv_all(&t, 40, psns, 10.0), 40);
	shim_udp_release(t.to_b, 10);
	/* 5 .. 24: 5 .. 9 are acknowledged */
	assert_int_equal(shim_udp_resend_run(t.to_b, 5, 20), 15);
	assert_int_equal(t_recv_all(&t, 15, psns, 10.0), 15);
	for (uint32_t i = 0; i < 15; i++)
		assert_int_equal(psns[i], 10 + i);
	/* 35 .. 44: 40 and on were never sent */
	assert_int_equal(shim_udp_resend_run(t.to_b, 35, 10), 5);
	assert_int_equal(t_recv_all(&t, 5, psns, 10.0), 5);
	for (uint32_t i = 0; i < 5; i++)
		assert_int_equal(psns[i], 35 + i);
	/* one alone, as shim_udp_resend */
	assert_int_equal(shim_udp_resend_run(t.to_b, 12, 1), 1);
	assert_int_equal(t_recv_all(&t, 1, psns, 10.0), 1);
	assert_int_equal(psns[0], 12);
	assert_int_equal(shim_udp_resend_run(t.to_b, 0, 10), -ENOENT);
	assert_int_equal(shim_udp_resend_run(t.to_b, 50, 4), -ENOENT);
	assert_int_equal(shim_udp_resend_run(t.to_b, 12, 0), -EINVAL);
	assert_int_equal(shim_udp_resend_run(t.to_b, 12, SHIM_UDP_RESEND_MAX + 1), -EINVAL);
	assert_int_equal(shim_udp_resend_run(NULL, 12, 1), -EINVAL);
	t_pair_close(&t);
}

/* An idle link gives its send ring's pages back: only once everything
 * sent is acknowledged, nothing waits to be sent, and no data went out
 * for the idle time, however recently the peer spoke (keepalives and
 * acks of a live pair never stop); data after a trim is intact. */
static void test_udp_trim(void **state)
{
	const uint64_t idle = 1000000000ull, t0 = shim_udp_now();
	struct shim_udp_link *l;
	uint32_t psns[16];
	struct t_pair t;

	(void)state;
	t_pair_open(&t, NULL);
	l = ((struct shim_peer_priv *)t.to_b)->link;
	for (uint32_t s = 0; s < 10; s++)
		assert_int_equal(t_send(t.to_b, s), 0);
	assert_int_equal(t_recv_all(&t, 10, psns, 10.0), 10);
	/* sent, not acknowledged: never */
	assert_int_equal(shim_udp_trim(t.to_b, t0, idle), 0);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 5 * idle, idle), 0);
	shim_udp_release(t.to_b, 10);
	/* acknowledged, but data went out within the idle time: not yet
	 * (sent noted at t0), even with the peer silent for long */
	atomic_store(&l->rx_ns, 0);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + idle / 2, idle), 0);
	/* the peer spoke a moment ago (a keepalive): idle all the same */
	atomic_store(&l->rx_ns, t0 + 2 * idle);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 2 * idle, idle), 1);
	assert_int_equal(l->udp->st.trims, 1);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 3 * idle, idle), 0); /* done */

	/* a packet after the trim arrives intact (t_recv_all checks) */
	assert_int_equal(t_send(t.to_b, 10), 0);
	assert_int_equal(t_recv_all(&t, 1, psns, 10.0), 1);
	assert_int_equal(psns[0], 10);
	shim_udp_release(t.to_b, 11);
	/* the send moved sent: the idle time starts again at the next look */
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 10 * idle, idle), 0);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 10 * idle + idle / 2, idle), 0);
	/* a published packet that waits (held) is not given back */
	shim_udp_hold((struct shim_peer_priv *)t.to_b);
	assert_int_equal(t_send(t.to_b, 11), 0);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 20 * idle, idle), 0);
	shim_udp_unhold((struct shim_peer_priv *)t.to_b);
	assert_int_equal(t_recv_all(&t, 1, psns, 10.0), 1);
	assert_int_equal(psns[0], 11);
	shim_udp_release(t.to_b, 12);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 30 * idle, idle), 0);
	assert_int_equal(shim_udp_trim(t.to_b, t0 + 32 * idle, idle), 1);
	assert_int_equal(l->udp->st.trims, 2);
	t_pair_close(&t);
}

/* The watchdog sends a watched, idle owner's unacknowledged packets
 * again after its timeout, 4 ms at least, and at least twice the
 * owner's own retransmission timeout (shim_udp_rto_hint): an owner that
 * is only descheduled has peers whose acks come that late. */
static void test_udp_wd_hint(void **state)
{
	struct shim_udp_stats st;
	uint32_t psns[8];
	struct t_pair t;
	double end;

	(void)state;
	for (int hinted = 1; hinted >= 0; hinted--) {
		t_pair_open(&t, NULL);
		shim_udp_watch(t.a, 0); /* an owner that has not polled: idle */
		if (hinted)
			shim_udp_rto_hint(t.to_b, 500000000ull); /* 0.5 s: wait 1 s */
		for (uint32_t s = 0; s < 4; s++)
			assert_int_equal(t_send(t.to_b, s), 0);
		assert_int_equal(t_recv_all(&t, 4, psns, 10.0), 4); /* never acked */
		/* unhinted: resent within a few ticks; hinted: not within 0.3 s */
		end = t_now() + (hinted ? 0.3 : 10.0);
		do {
			usleep(2000);
			shim_udp_stats(t.a, &st);
		} while (!st.wd_resends && t_now() < end);
		if (hinted)
			assert_int_equal(st.wd_resends, 0);
		else
			assert_true(st.wd_resends > 0);
		t_pair_close(&t);
	}
}

/* A polling receiver takes one datagram per call while they come one at
 * a time, a batch once they queue up (SHIM_UDP_BATCH_AFTER calls in a row
 * found one), and one again when a batch call finds at most one; nothing
 * is lost or reordered across the switches. */
static void test_udp_recv_modes(void **state)
{
	struct shim_udp_pkt pkts[16];
	uint32_t next = 0;
	int calls = 0, singles = 0, batches = 0, k = 0;
	uint64_t last_ns = 0;
	struct t_pair t;
	double end;

	(void)state;
	t_pair_open(&t, NULL);
	for (uint32_t s = 0; s < 64; s++)
		assert_int_equal(t_send_len(t.to_b, s, 8), 0);
	end = t_now() + 10.0;
	while (next < 64 && t_now() < end) {
		k = shim_udp_recv(t.b, pkts, 16);
		if (k <= 0)
			continue;
		calls++;
		if (calls <= (int)SHIM_UDP_BATCH_AFTER)
			assert_int_equal(k, 1); /* the first ones: one at a time */
		k > 1 ? batches++ : singles++;
		for (int i = 0; i < k; i++) {
			t_check(&pkts[i]);
			assert_int_equal(pkts[i].uh.psn, next);
			/* stamped with the batch's clock read, never backwards */
			assert_true(pkts[i].rx_ns > 0 && pkts[i].rx_ns >= last_ns);
			last_ns = pkts[i].rx_ns;
			next++;
		}
	}
	assert_int_equal(next, 64);
	assert_true(batches > 0);
	/* drained: a batch call found nothing, the next call is single */
	assert_int_equal(shim_udp_recv(t.b, pkts, 16), 0);
	assert_false(t.b->udp->rx_batch);
	assert_int_equal(t_send_len(t.to_b, 64, 8), 0);
	end = t_now() + 5.0;
	while ((k = shim_udp_recv(t.b, pkts, 16)) == 0 && t_now() < end)
		;
	assert_int_equal(k, 1);
	assert_int_equal(pkts[0].uh.psn, 64);
	assert_int_equal(shim_udp_since(5, 7), 0);
	assert_int_equal(shim_udp_since(7, 5), 2);
	t_pair_close(&t);
}

/* Whether the epoll set epfd watches fd (/proc/self/fdinfo lists a
 * "tfd:" line per watched descriptor). */
static bool t_epoll_has(int epfd, int fd)
{
	char path[64], line[256];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		int tfd;

		if (sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd)
			found = true;
	}
	fclose(f);
	return found;
}

/* The socket is in the context's epoll set only while a sleep is armed
 * (a watched socket costs every datagram a wake-up callback); an armed
 * sleeper wakes on a datagram, also on one that came before it armed;
 * a datagram larger than the receive buffer is dropped, in both receive
 * modes. */
static void test_udp_wait_arm(void **state)
{
	struct shim_udp_stats st0, st1;
	struct shim_udp_pkt pkts[16];
	struct epoll_event ev;
	struct t_pair t;
	int epfd, k = 0;
	double end;

	(void)state;
	t_no_gro = true; /* a datagram larger than a buffer: GRO's hold any */
	t_pair_open(&t, NULL);
	t_no_gro = false;
	assert_false(t.b->udp->gro);
	epfd = shim_ctx_wait_fd(t.b);
	assert_true(epfd >= 0);
	assert_true(t_epoll_has(epfd, t.b->sock_fd));
	assert_false(t_epoll_has(epfd, t.b->udp->fd));
	assert_int_equal(epoll_wait(epfd, &ev, 1, 0), 0);

	/* armed: a datagram sent now wakes the sleeper */
	assert_int_equal(shim_ctx_sleep_arm(t.b), 0);
	assert_true(t_epoll_has(epfd, t.b->udp->fd));
	assert_int_equal(t_send_len(t.to_b, 0, 8), 0);
	assert_int_equal(epoll_wait(epfd, &ev, 1, 5000), 1);
	shim_ctx_sleep_disarm(t.b);
	assert_false(t_epoll_has(epfd, t.b->udp->fd));
	assert_int_equal(t_recv_all(&t, 1, NULL, 5.0), 1);

	/* a datagram already queued when the sleep is armed: ready at once */
	assert_int_equal(t_send_len(t.to_b, 1, 8), 0);
	{
		struct pollfd pf = {.fd = t.b->udp->fd, .events = POLLIN};

		assert_int_equal(poll(&pf, 1, 5000), 1);
	}
	assert_int_equal(shim_ctx_sleep_arm(t.b), 0);
	assert_int_equal(epoll_wait(epfd, &ev, 1, 0), 1);
	shim_ctx_sleep_disarm(t.b);
	assert_int_equal(t_recv_all(&t, 1, NULL, 5.0), 1);

	/* oversized datagrams: one in single mode, then a batch of them */
	{
		struct sockaddr_in to = {.sin_family = AF_INET,
					 .sin_addr.s_addr = t.addr_b.ipv4,
					 .sin_port = t.addr_b.udp_port};
		size_t big = t.b->udp->rbuf_sz + 100;
		uint8_t *buf = calloc(1, big);
		int fd = socket(AF_INET, SOCK_DGRAM, 0);

		assert_non_null(buf);
		assert_true(fd >= 0);
		assert_int_equal(shim_udp_recv(t.b, pkts, 16), 0); /* empty: single mode */
		assert_false(t.b->udp->rx_batch);
		shim_udp_stats(t.b, &st0);
		for (int i = 0; i < 8; i++)
			assert_int_equal(sendto(fd, buf, big, 0, (struct sockaddr *)&to,
						sizeof(to)), (ssize_t)big);
		end = t_now() + 5.0;
		do {
			k += shim_udp_recv(t.b, pkts, 16);
			shim_udp_stats(t.b, &st1);
		} while (st1.rx_datagrams - st0.rx_datagrams < 8 && t_now() < end);
		assert_int_equal(k, 0);
		assert_int_equal(st1.rx_datagrams - st0.rx_datagrams, 8);
		assert_int_equal(st1.drop_len - st0.drop_len, 8);
		assert_true(t.b->udp->rx_batch); /* the later ones came in a batch */
		close(fd);
		free(buf);
	}
	assert_int_equal(t_send_len(t.to_b, 2, 8), 0);
	assert_int_equal(t_recv_all(&t, 1, NULL, 5.0), 1);
	t_pair_close(&t);
}

/* A link sends datagrams a 1500-byte path carries until the peer tells
 * how large a one it takes (every datagram says), then min(ours, its). */
static void test_udp_mtu_learned(void **state)
{
	struct shim_udp_pkt pkts[16];
	struct t_pair t;
	uint32_t ours;
	int got = 0;

	(void)state;
	t_pair_open(&t, NULL);
	ours = t.a->udp->mtu;
	assert_true(ours > SHIM_UDP_SAFE_MTU); /* loopback: 64 KiB frames */
	assert_int_equal(t.to_b->mtu, SHIM_UDP_SAFE_MTU);
	assert_int_equal(t_send(t.to_b, 0), 0);
	for (double end = t_now() + 5.0; !got && t_now() < end;)
		got = shim_udp_recv(t.b, pkts, 16);
	assert_int_equal(got, 1);
	/* b heard a: its link back may use a's size (capped by its own) */
	assert_int_equal(pkts[0].peer->mtu, t.b->udp->mtu < ours ? t.b->udp->mtu : ours);
	/* a hears b's ack: the link to b grows; nothing shrinks it after */
	assert_int_equal(shim_udp_send_ctl(pkts[0].peer, SHIM_UDP_ACK, 0, 0), 0);
	got = 0;
	for (double end = t_now() + 5.0; !got && t_now() < end;)
		got = shim_udp_recv(t.a, pkts, 16);
	assert_int_equal(got, 1);
	assert_int_equal(t.to_b->mtu, t.b->udp->mtu < ours ? t.b->udp->mtu : ours);
	t_pair_close(&t);
}

/* A udp peer is never a process to copy with (Cross Memory Attach), in
 * either direction, even here where both contexts are this very process:
 * across hosts its pid would name a stranger. */
static void test_udp_no_cma(void **state)
{
	struct shim_udp_pkt pkts[4];
	struct t_pair t;
	pid_t pid = 0;
	int got = 0;

	(void)state;
	t_pair_open(&t, NULL);
	assert_int_equal(shim_peer_cma_pid(t.to_b, &pid), -ESRCH);
	assert_int_equal(shim_peer_cma_pid_recorded(t.to_b, &pid), -ESRCH);
	/* b's peer for a, learnt from a datagram */
	assert_int_equal(t_send(t.to_b, 1), 0);
	double end = t_now() + 5.0;
	while (!got && t_now() < end)
		got = shim_udp_recv(t.b, pkts, 4);
	assert_int_equal(got, 1);
	assert_non_null(pkts[0].peer);
	assert_int_equal(shim_peer_cma_pid(pkts[0].peer, &pid), -ESRCH);
	assert_int_equal(shim_peer_cma_pid_recorded(pkts[0].peer, &pid), -ESRCH);
	assert_int_equal(pid, 0);
	t_pair_close(&t);
}

static int t_threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The library's destructor (exit or dlclose with contexts open) stops
 * the watchdog threads, which would otherwise wake up in unmapped code;
 * a child forked meanwhile leaves its parent's threads running; closing
 * the contexts afterwards still works. */
static void test_udp_unload(void **state)
{
	struct t_pair t;
	int before, st;
	pid_t pid;

	(void)state;
	before = t_threads();
	t_pair_open(&t, NULL); /* a flow: a's watchdog runs */
	assert_int_equal(t_threads(), before + 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shim_udp_unload();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	usleep(20000); /* a watchdog told to stop would be gone by now */
	assert_int_equal(t_threads(), before + 1);
	shim_udp_unload();
	assert_int_equal(t_threads(), before);
	shim_udp_unload(); /* nothing left: no-op */
	t_pair_close(&t);
}

/* Random datagrams and mutated valid ones are dropped and counted, never
 * delivered; a good packet after them still arrives. */
static void test_udp_fuzz(void **state)
{
	struct shim_udp_stats st0, st1;
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint8_t good[sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr) + 64];
	uint8_t buf[sizeof(good) + 64];
	struct shim_udp_pkt pkts[16];
	uint32_t rng = 12345;
	struct t_pair t;
	int fd, got = 0;

	(void)state;
	t_pair_open(&t, NULL);
	to.sin_addr.s_addr = t.addr_b.ipv4;
	to.sin_port = t.addr_b.udp_port;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	/* capture one valid datagram from the wire to mutate */
	assert_int_equal(t_send(t.to_b, 4), 0); /* 64-byte payload */
	{
		struct sockaddr_in me = {.sin_family = AF_INET};
		socklen_t sl = sizeof(me);
		int cap = socket(AF_INET, SOCK_DGRAM, 0);
		struct shim_addr fake = t.addr_b;

		assert_int_equal(bind(cap, (struct sockaddr *)&me, sizeof(me)), 0);
		assert_int_equal(getsockname(cap, (struct sockaddr *)&me, &sl), 0);
		fake.udp_port = me.sin_port;
		fake.nonce = 0;
		struct shim_peer *p2;
		assert_int_equal(shim_peer_open(t.dev, &fake, &p2), 0);
		assert_int_equal(t_send(p2, 4), 0);
		assert_int_equal(recv(cap, good, sizeof(good), 0), (ssize_t)sizeof(good));
		shim_peer_close(p2);
		close(cap);
	}
	(void)t_recv_all(&t, 1, NULL, 5.0); /* the first one */
	shim_udp_stats(t.b, &st0);
	for (int i = 0; i < 2000; i++) {
		size_t len;

		if (i % 2) {
			len = (size_t)(rng % sizeof(buf));
			for (size_t k = 0; k < len; k++) {
				rng = rng * 1103515245u + 12345u;
				buf[k] = (uint8_t)(rng >> 16);
			}
		} else {
			memcpy(buf, good, sizeof(good));
			len = sizeof(good);
			rng = rng * 1103515245u + 12345u;
			buf[(rng >> 8) % sizeof(good)] ^= (uint8_t)(1u + (rng >> 20) % 255u);
			if (i % 6 == 0)
				len -= 1 + (rng >> 4) % 40; /* truncated */
		}
		(void)sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to));
		if (i % 64 == 0) {
			int k = shim_udp_recv(t.b, pkts, 16);
			assert_int_equal(k, 0);
		}
	}
	for (int i = 0; i < 200; i++)
		assert_int_equal(shim_udp_recv(t.b, pkts, 16), 0);
	shim_udp_stats(t.b, &st1);
	uint64_t dropped = (st1.drop_len - st0.drop_len) + (st1.drop_magic - st0.drop_magic) +
			   (st1.drop_crc - st0.drop_crc) + (st1.drop_jkey - st0.drop_jkey) +
			   (st1.drop_dest - st0.drop_dest) + (st1.drop_mac - st0.drop_mac) +
			   (st1.drop_ident - st0.drop_ident) + (st1.drop_quota - st0.drop_quota);
	assert_int_equal(dropped, st1.rx_datagrams - st0.rx_datagrams);
	assert_true(st1.drop_crc > st0.drop_crc);
	assert_true(dropped > 1000); /* loopback loses none, the socket buffer is 4 MiB */
	/* good traffic still passes */
	assert_int_equal(t_send(t.to_b, 9), 0);
	got = t_recv_all(&t, 1, NULL, 5.0);
	assert_int_equal(got, 1);
	close(fd);
	t_pair_close(&t);
}

/* One 300-byte message from t's a to a socket of ours (a peer that only
 * a captures): its datagram as the wire carries it, in buf. */
static size_t t_capture(struct t_pair *t, uint8_t *buf, size_t cap_len)
{
	struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(me);
	struct shim_addr fake = t->addr_b;
	struct shim_peer *to_cap;
	struct pollfd pf;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &sl), 0);
	fake.udp_port = me.sin_port;
	fake.nonce = 0;
	assert_int_equal(shim_peer_open(t->dev, &fake, &to_cap), 0);
	assert_int_equal(t_send_len(to_cap, 0, 300), 0);
	pf = (struct pollfd){.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&pf, 1, 5000), 1);
	n = recv(fd, buf, cap_len, 0);
	assert_int_equal(n, (ssize_t)(SHIM_UDP_HDRS + 300));
	shim_peer_close(to_cap);
	close(fd);
	return (size_t)n;
}

/* n packets of 1000 bytes from a to b, each with a byte flipped on its
 * way out: none delivered (t_recv_all's pattern check fails on one),
 * all dropped and counted. */
static void t_all_corrupt_dropped(struct t_pair *t, uint32_t n)
{
	struct shim_udp_stats st0, st1;

	shim_udp_stats(t->b, &st0);
	for (uint32_t s = 0; s < n; s++)
		assert_int_equal(t_send_len(t->to_b, s, 1000), 0);
	assert_int_equal(t_recv_all(t, (int)n, NULL, 0.5), 0);
	shim_udp_stats(t->b, &st1);
	assert_int_equal((st1.drop_crc - st0.drop_crc) + (st1.drop_len - st0.drop_len) +
				 (st1.drop_magic - st0.drop_magic) + (st1.drop_mac - st0.drop_mac),
			 n);
	assert_true(st1.drop_crc - st0.drop_crc >= n / 2); /* most flips hit the payload */
}

/* FI_OPX_UDP_CRC: a sender's CRC covers its payloads or not, and the
 * header says which (SHIM_UDP_AUTH_PCRC); a receiver checks what the
 * flag says, whatever its own setting; injected corruption (a byte
 * flipped before the kernel's UDP checksum) turns the CRC on. */
static void test_udp_payload_crc(void **state)
{
	struct shim_fault f = {.corrupt = 1000000, .seed = 5};
	uint8_t buf[2048];
	struct t_pair t;

	(void)state;
	for (int no_crc = 0; no_crc < 2; no_crc++) {
		struct shim_udp_hdr uh;
		uint32_t crc;
		size_t n;

		t_no_crc = no_crc;
		t_pair_open(&t, NULL);
		n = t_capture(&t, buf, sizeof(buf));
		memcpy(&uh, buf, sizeof(uh));
		assert_int_equal(uh.type, SHIM_UDP_DATA);
		assert_int_equal(uh.auth, no_crc ? 0u : SHIM_UDP_AUTH_PCRC);
		((struct shim_udp_hdr *)buf)->crc = 0;
		crc = shim_crc32c(0, buf, SHIM_UDP_HDRS);
		if (!no_crc)
			crc = shim_crc32c_wide(crc, buf + SHIM_UDP_HDRS, n - SHIM_UDP_HDRS);
		assert_int_equal(uh.crc, crc);
		/* b takes a's datagrams, intact, whichever way a sends
		 * them (a turned the other way here) */
		for (int other = 0; other < 2; other++) {
			t.a->udp->pcrc = other ? no_crc : !no_crc;
			for (uint32_t s = 0; s < 8; s++)
				assert_int_equal(t_send(t.to_b, 8 * (uint32_t)other + s), 0);
			assert_int_equal(t_recv_all(&t, 8, NULL, 5.0), 8);
		}
		t_pair_close(&t);
	}
	/* b does not ask for the CRC; a (turned on here) sends it: b checks */
	t_no_crc = true;
	t_pair_open(&t, NULL);
	t.dev->params.fault.corrupt = 1000000;
	t.a->udp->faulty = true;
	t.a->udp->pcrc = true;
	assert_false(t.b->udp->pcrc);
	t_all_corrupt_dropped(&t, 16);
	t_pair_close(&t);
	/* FI_OPX_UDP_CRC=0 with FI_OPX_FAULT_CORRUPT: the CRC is on */
	t_pair_open(&t, &f);
	t_all_corrupt_dropped(&t, 16);
	t_pair_close(&t);
	t_no_crc = false;
}

/* The same seed makes the same decisions. */
static int t_faulty_run(uint64_t seed)
{
	struct shim_fault f = {.drop = 300000, .dup = 100000, .seed = seed};
	struct t_pair t;
	int got;

	t_pair_open(&t, &f);
	for (uint32_t s = 0; s < T_NPKT; s++)
		assert_int_equal(t_send(t.to_b, s), 0);
	got = t_recv_all(&t, 2 * T_NPKT, NULL, 1.0);
	t_pair_close(&t);
	return got;
}

static void test_udp_fault_seed(void **state)
{
	int a, b, c;

	(void)state;
	a = t_faulty_run(42);
	b = t_faulty_run(42);
	c = t_faulty_run(43);
	assert_int_equal(a, b);
	assert_true(a < T_NPKT + T_NPKT / 5 && a > T_NPKT / 2); /* ~70 % + ~7 % dups */
	(void)c;
}

/* sendmmsg as the shim sees it: this definition comes before the C
 * library's.  T_GSO_REFUSE makes it fail a UDP_SEGMENT message as a
 * route without checksum offload does (EIO). */
enum { T_GSO_PASS, T_GSO_REFUSE };
static int t_gso_mode;
static unsigned t_gso_msgs, t_gso_refused, t_mm_calls;

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	unsigned int k = 0;

	t_mm_calls++;
	for (; k < n; k++) {
		if (!v[k].msg_hdr.msg_controllen)
			continue;
		t_gso_msgs++;
		if (t_gso_mode == T_GSO_REFUSE)
			break;
	}
	if (k == 0 && n) {
		t_gso_refused++;
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_sendmmsg, fd, v, k, flags);
}

/* A burst of full packets, published while the link is held, then sent
 * together: psns in order and payloads intact on b. */
static void t_burst(struct t_pair *t, uint32_t first, uint32_t n)
{
	uint32_t psns[64], acked, sent;

	assert_true(n <= 64);
	shim_udp_hold((struct shim_peer_priv *)t->to_b);
	for (uint32_t s = 0; s < n; s++)
		assert_int_equal(t_send_len(t->to_b, first + s, t->to_b->mtu), 0);
	shim_udp_unhold((struct shim_peer_priv *)t->to_b);
	assert_int_equal(t_recv_all(t, (int)n, psns, 10.0), (int)n);
	for (uint32_t s = 0; s < n; s++)
		assert_int_equal(psns[s], first + s);
	shim_udp_tx_state(t->to_b, &acked, &sent);
	shim_udp_release(t->to_b, sent);
}

static void test_udp_gso_refused(void **state)
{
	struct t_pair t;
	unsigned calls;

	(void)state;
	t_pair_open(&t, NULL);
	t_gso_mode = T_GSO_PASS;
	t_gso_msgs = t_gso_refused = t_mm_calls = 0;
	t_burst(&t, 0, 12);
	assert_true(t_gso_msgs > 0); /* loopback takes GSO */
	assert_int_equal(t_gso_refused, 0);

	t_gso_mode = T_GSO_REFUSE;
	t_burst(&t, 12, 12);
	assert_int_equal(t_gso_refused, 1);
	/* refused once, never asked again; batches still go by sendmmsg */
	t_gso_msgs = 0;
	calls = t_mm_calls;
	t_burst(&t, 24, 12);
	assert_int_equal(t_gso_msgs, 0);
	assert_int_equal(t_gso_refused, 1);
	assert_true(t_mm_calls > calls);
	t_gso_mode = T_GSO_PASS;
	t_pair_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udp_exchange),
		cmocka_unit_test(test_udp_resend_run),
		cmocka_unit_test(test_udp_trim),
		cmocka_unit_test(test_udp_wd_hint),
		cmocka_unit_test(test_udp_recv_modes),
		cmocka_unit_test(test_udp_wait_arm),
		cmocka_unit_test(test_udp_mtu_learned),
		cmocka_unit_test(test_udp_no_cma),
		cmocka_unit_test(test_udp_unload),
		cmocka_unit_test(test_udp_fuzz),
		cmocka_unit_test(test_udp_fault_seed),
		cmocka_unit_test(test_udp_payload_crc),
		cmocka_unit_test(test_udp_gso_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
