/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_udp_wd.c - the udp wire's watchdog: one thread per process, for
 * every context with udp flows, that sends unacknowledged packets again, repeats acks and sends
 * keepalives while the owner does not progress (see the comment above
 * SHIM_UDP_WD_TICK_MS), which the library's destructor stops
 * (shim_udp_unload); and the first look at a datagram
 * that the watchdog and the receive side (shim_udp_rx.c) share: its
 * length in a UDP_GRO run and its tag.  The overview of the udp wire is
 * at the top of shim_udp.c, which starts and stops the watchdog.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shim_internal.h"
#include "shim_udp.h"

/* ---------------------------------------------------------------------
 * The first look at a datagram (the watchdog's and the receive side's)
 */
/* Whether the datagram d (n bytes; its udp header copied to uh, and for
 * DATA its packet header to ph) carries the right tag for our mode.  No
 * counting: the watchdog asks too. */
bool shim_udp_authentic(const struct shim_udp *u, const struct shim_udp_hdr *uh,
			const struct shim_pkt_hdr *ph, const uint8_t *d, size_t n)
{
	if (uh->type == SHIM_UDP_PACK)
		return n >= sizeof(*uh) &&
		       shim_udp_auth_check(&u->auth, uh, NULL, d + sizeof(*uh), n - sizeof(*uh));
	if (uh->type != SHIM_UDP_DATA)
		return shim_udp_auth_check(&u->auth, uh, NULL, NULL, 0);
	if (n < SHIM_UDP_HDRS)
		return false;
	return shim_udp_auth_check(&u->auth, uh, ph, d + SHIM_UDP_HDRS, n - SHIM_UDP_HDRS);
}

size_t shim_udp_seg_len(const uint8_t *d, size_t n)
{
	struct shim_udp_hdr uh;
	struct shim_pkt_hdr ph;
	size_t len;

	if (n < sizeof(uh))
		return n;
	memcpy(&uh, d, sizeof(uh));
	if (uh.type == SHIM_UDP_PACK) {
		/* its packets' own lengths, as far as they are there */
		len = sizeof(uh);
		if (uh.rhf < 2 || uh.rhf > SHIM_UDP_PACK_MAX)
			return n;
		for (uint32_t k = 0; k < uh.rhf; k++) {
			struct shim_udp_frame fr;

			if (n - len < sizeof(fr) + sizeof(ph))
				return n;
			memcpy(&fr, d + len, sizeof(fr));
			len += sizeof(fr) + sizeof(ph);
			if (fr.len > n - len)
				return n;
			len += fr.len;
		}
		return len;
	}
	if (uh.type != SHIM_UDP_DATA)
		return sizeof(uh);
	if (n < SHIM_UDP_HDRS || !(uh.rhf & SHIM_RHF_EGR))
		return n < SHIM_UDP_HDRS ? n : SHIM_UDP_HDRS;
	memcpy(&ph, d + sizeof(uh), sizeof(ph));
	len = SHIM_UDP_HDRS + (size_t)ph.paylen;
	return ph.paylen && len < n ? len : n;
}

/* ---------------------------------------------------------------------
 * The watchdog.  Reliability is the provider's and runs when the
 * application progresses; but an application may stop progressing right
 * after its last send (blocked on something else: a barrier over another
 * network, a sleep, a computation), and a datagram of that send lost on
 * the wire would then never be sent again while the peer waits for it.
 * So once a context has udp flows, a thread looks every
 * SHIM_UDP_WD_TICK_MS, and only when the owner has not polled the socket
 * for SHIM_UDP_WD_IDLE_NS: it goes round each flow's unacknowledged
 * packets sending them again, a burst per tick (the acks that would say
 * which arrived wait unread), then backs off, and, when
 * datagrams wait unread in the socket (a peer sending again what it
 * already sent), repeats each flow's cumulative ack so that peer stops;
 * and on a flow it has sent nothing on for a second it sends an ack as a
 * keepalive, so peers tell a process that computes from one that died.
 * It reads the send rings under u->lock, which shim_udp_release() takes
 * before freeing entries; it never receives and never touches provider
 * state.
 */
#define SHIM_UDP_WD_TICK_MS 2
#define SHIM_UDP_WD_IDLE_NS 4000000ull
#define SHIM_UDP_WD_RTO_NS 4000000ull
#define SHIM_UDP_WD_RTO_MAX_NS 256000000ull
#define SHIM_UDP_WD_BURST 64u

/* Senders we have no link to whose datagrams wait unread (we never read
 * one of theirs: a first contact while we compute) hear nothing from the
 * per-link loop below and would take our silence for death.  So, at most
 * every half keepalive, walk the unread datagrams without taking them
 * (MSG_PEEK at a moving SO_PEEK_OFF, which skips whole datagrams with
 * MSG_TRUNC) and send each such sender a HELD ack.  The offset goes back
 * to off afterwards: with it on, every receive of the owner takes the
 * socket lock once more. */
#define SHIM_UDP_WD_PEEK 256u
#define SHIM_UDP_WD_SENDERS 32u

static void shim_udp_wd_scan(struct shim_udp *u, uint64_t now)
{
	struct sockaddr_in seen[SHIM_UDP_WD_SENDERS];
	uint32_t nseen = 0;
	int off = 0;

	if (now - u->wd_scan_ns < u->keepalive_ns / 2 || !u->wd_buf)
		return;
	u->wd_scan_ns = now;
	if (setsockopt(u->fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off)) < 0)
		return;
	for (uint32_t i = 0; i < SHIM_UDP_WD_PEEK && nseen < SHIM_UDP_WD_SENDERS; i++) {
		struct shim_udp_hdr uh;
		struct shim_pkt_hdr ph;
		struct sockaddr_in from;
		socklen_t alen = sizeof(from);
		ssize_t n = recvfrom(u->fd, u->wd_buf, u->rbuf_sz, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &alen);
		bool known = false;

		if (n < 0)
			break;
		/* only what is ours: authenticated (no answer to anyone who
		 * lacks the job's secret), from the address it names; the
		 * crc is checked when the owner reads it */
		if ((size_t)n < sizeof(uh) || (size_t)n > u->rbuf_sz || alen != sizeof(from) ||
		    from.sin_family != AF_INET)
			continue;
		if (u->gro) /* the first of a run is enough */
			n = (ssize_t)shim_udp_seg_len(u->wd_buf, (size_t)n);
		memcpy(&uh, u->wd_buf, sizeof(uh));
		if ((size_t)n >= SHIM_UDP_HDRS)
			memcpy(&ph, u->wd_buf + sizeof(uh), sizeof(ph));
		if (uh.magic != SHIM_UDP_MAGIC || uh.version != SHIM_UDP_VERSION ||
		    uh.type < SHIM_UDP_DATA || uh.type > SHIM_UDP_PACK ||
		    !shim_udp_authentic(u, &uh, &ph, u->wd_buf, (size_t)n) ||
		    uh.src_ipv4 != from.sin_addr.s_addr || uh.src_port != from.sin_port ||
		    uh.jkey != u->ctx->rx.jkey || !uh.src_nonce ||
		    (uh.dst_nonce && uh.dst_nonce != u->ctx->nonce) ||
		    shim_udp_link_find(u, from.sin_addr.s_addr, from.sin_port))
			continue;
		for (uint32_t k = 0; k < nseen && !known; k++)
			known = seen[k].sin_addr.s_addr == from.sin_addr.s_addr &&
				seen[k].sin_port == from.sin_port;
		if (known)
			continue;
		seen[nseen++] = from;
		shim_udp_send_held(u, &from, uh.src_nonce);
	}
	off = -1;
	(void)setsockopt(u->fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
}

static void shim_udp_watchdog_tick(struct shim_udp *u, bool unread)
{
	uint64_t now = shim_udp_now(), polls = atomic_load_explicit(&u->app_polls, memory_order_relaxed);

	/* the owner counts its polls (a clock read on each would cost every
	 * poll); standing still since the last tick that saw it move means
	 * idle.  0: the owner never polled: idle since shim_udp_watch(), or
	 * a shim-level user (tests) the watchdog leaves alone */
	shim_udp_note_moved(polls, &u->wd_polls, &u->wd_polls_ns, now);
	if ((!polls && !u->wd_watched) || now - u->wd_polls_ns < SHIM_UDP_WD_IDLE_NS)
		return;
	pthread_mutex_lock(&u->lock);
	for (struct shim_udp_link *l = u->links; l; l = l->all_next) {
		struct shim_peer *p = &l->pp.pub;
		uint32_t head = atomic_load_explicit(&p->ctl->hdr_head, memory_order_acquire);
		uint32_t sent = __atomic_load_n(&l->sent, __ATOMIC_ACQUIRE);

		if (l->dead || !l->udp)
			continue;
		/* an ack repeated for a peer resending, or a keepalive:
		 * this process lives even while it does not progress; and
		 * with datagrams unread it holds what they sent (HELD: the
		 * ack standing still is not their packets being lost) */
		shim_udp_note_moved(atomic_load_explicit(&l->tx_count, memory_order_relaxed),
				    &l->wd_tx_seen, &l->wd_tx_ns, now);
		if ((unread && p->udp_ack) || shim_udp_since(now, l->wd_tx_ns) > u->keepalive_ns)
			shim_udp_send_ctl(p, SHIM_UDP_ACK, 0, unread ? SHIM_UDP_ACK_HELD : 0);
		/* (a link not looked at yet starts its timeout now) */
		if (head == sent || head != l->wd_acked || !l->wd_ns) {
			/* at least twice the owner's timeout: when the owner
			 * is only descheduled (more ranks than cores), its
			 * peers are too, and their acks come that late */
			uint64_t hint = 2 * atomic_load_explicit(&l->rto_hint_ns,
								 memory_order_relaxed);

			l->wd_acked = head;
			l->wd_next = head;
			l->wd_ns = now;
			l->wd_rto_ns = hint > SHIM_UDP_WD_RTO_NS ? hint : SHIM_UDP_WD_RTO_NS;
			continue;
		}
		if (now - l->wd_ns < l->wd_rto_ns)
			continue;
		/* The acks that would say what arrived wait unread in
		 * the socket: go round everything unacknowledged, a
		 * burst per tick, then wait a doubled timeout. */
		if ((uint32_t)(l->wd_next - head) >= (uint32_t)(sent - head))
			l->wd_next = head;
		for (uint32_t n = 0; l->wd_next != sent && n < SHIM_UDP_WD_BURST; n++) {
			shim_udp_xmit(l, l->wd_next++);
			u->st.wd_resends++;
		}
		if (l->wd_next == sent) {
			l->wd_next = head;
			l->wd_ns = now;
			if (l->wd_rto_ns < SHIM_UDP_WD_RTO_MAX_NS)
				l->wd_rto_ns *= 2;
		}
	}
	if (unread)
		shim_udp_wd_scan(u, now);
	pthread_mutex_unlock(&u->lock);
}

/*
 * One watchdog thread per process, for every context with udp flows: a
 * thread per context would wake every SHIM_UDP_WD_TICK_MS each, and a
 * process with hundreds of endpoints (scalable or simulated hosts) would
 * spend its cores on those wake-ups.  The thread sleeps a tick (or,
 * while no context has a flow, until a datagram arrives at any of them:
 * a first contact) on its pipe and an epoll set of the contexts'
 * sockets, asks that set which sockets hold unread datagrams (one call,
 * level-triggered: only a look, the owners read them), and ticks every
 * context under shim_udp_wd_lock, which shim_udp_watchdog_stop() takes
 * to take a context out: a context is never ticked after it.  The thread
 * starts with the first watched context and ends with the last.
 *
 * fork: the thread and the epoll set are the parent's (the set is shared
 * with it).  A child that starts a watchdog lets go of both (no join, no
 * epoll_ctl, no write to the pipe: each would reach the parent's) and
 * makes its own; the parent's contexts it inherited are not its own.
 */
/* shim_udp_wd_life orders starting and stopping (the thread is joined
 * under it); shim_udp_wd_lock guards the list the thread walks. */
static pthread_mutex_t shim_udp_wd_life = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t shim_udp_wd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_udp *shim_udp_wd_list; /* contexts of shim_udp_wd_pid */
static uint32_t shim_udp_wd_count;
static pid_t shim_udp_wd_pid;             /* the process the thread runs in, 0: none */
static pthread_t shim_udp_wd_thread;
static int shim_udp_wd_pipe[2] = {-1, -1};
static int shim_udp_wd_epfd = -1;
static bool shim_udp_wd_quit;

/* Ready contexts of one look, by address (compared, never followed:
 * one may have been stopped since). */
#define SHIM_UDP_WD_EVENTS 1024

static bool shim_udp_wd_in(const struct epoll_event *ev, int n, const struct shim_udp *u)
{
	for (int i = 0; i < n; i++)
		if (ev[i].data.ptr == u)
			return true;
	return false;
}

static void *shim_udp_watchdog(void *arg)
{
	static struct epoll_event ev[SHIM_UDP_WD_EVENTS];
	struct pollfd pf[2] = {{.fd = shim_udp_wd_pipe[0], .events = POLLIN},
			       {.fd = shim_udp_wd_epfd, .events = POLLIN}};

	int n = 0;

	(void)arg;
	for (;;) {
		/* unread datagrams at the last look: tick, not sleep on them */
		bool idle = !n;

		pthread_mutex_lock(&shim_udp_wd_lock);
		if (shim_udp_wd_quit) {
			pthread_mutex_unlock(&shim_udp_wd_lock);
			break;
		}
		for (struct shim_udp *u = shim_udp_wd_list; u && idle; u = u->wd_next)
			idle = !__atomic_load_n(&u->links, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&shim_udp_wd_lock);
		/* no flow anywhere and nothing unread: nothing to do until a
		 * datagram comes */
		pf[0].revents = pf[1].revents = 0;
		(void)poll(pf, idle ? 2 : 1, idle ? -1 : SHIM_UDP_WD_TICK_MS);
		if (pf[0].revents) {
			char b[64];

			(void)!read(shim_udp_wd_pipe[0], b, sizeof(b)); /* a wake-up, or quit */
		}
		n = epoll_wait(shim_udp_wd_epfd, ev, SHIM_UDP_WD_EVENTS, 0);
		if (n < 0)
			n = 0;
		pthread_mutex_lock(&shim_udp_wd_lock);
		for (struct shim_udp *u = shim_udp_wd_list; u && !shim_udp_wd_quit; u = u->wd_next)
			shim_udp_watchdog_tick(u, shim_udp_wd_in(ev, n, u));
		pthread_mutex_unlock(&shim_udp_wd_lock);
	}
	return NULL;
}

static void shim_udp_wd_wake(void)
{
	const char b = 1;

	(void)!write(shim_udp_wd_pipe[1], &b, 1);
}

/* The thread of this process (wd_lock held; a parent's is gone): true
 * if it runs. */
static bool shim_udp_wd_thread_ensure(void)
{
	pid_t me = getpid();

	if (shim_udp_wd_pid == me)
		return true;
	if (pipe2(shim_udp_wd_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return false;
	shim_udp_wd_epfd = epoll_create1(EPOLL_CLOEXEC);
	shim_udp_wd_quit = false;
	if (shim_udp_wd_epfd < 0 || pthread_create(&shim_udp_wd_thread, NULL, shim_udp_watchdog, NULL)) {
		if (shim_udp_wd_epfd >= 0)
			close(shim_udp_wd_epfd);
		close(shim_udp_wd_pipe[0]);
		close(shim_udp_wd_pipe[1]);
		shim_udp_wd_epfd = -1;
		return false;
	}
	shim_udp_wd_pid = me;
	return true;
}

/* Join this process's thread and let go of its pipe and set (wd_life
 * held, wd_lock not: the thread takes it). */
static void shim_udp_wd_thread_end(void)
{
	bool join;

	pthread_mutex_lock(&shim_udp_wd_lock);
	join = shim_udp_wd_pid && shim_udp_wd_pid == getpid();
	if (join) {
		shim_udp_wd_quit = true;
		shim_udp_wd_wake();
	}
	pthread_mutex_unlock(&shim_udp_wd_lock);
	if (join)
		pthread_join(shim_udp_wd_thread, NULL);
	pthread_mutex_lock(&shim_udp_wd_lock);
	for (struct shim_udp *u = shim_udp_wd_list; u; u = u->wd_next)
		u->wd_running = false;
	shim_udp_wd_list = NULL;
	shim_udp_wd_count = 0;
	if (shim_udp_wd_pid) {
		close(shim_udp_wd_pipe[0]);
		close(shim_udp_wd_pipe[1]);
		close(shim_udp_wd_epfd);
		shim_udp_wd_epfd = -1;
	}
	shim_udp_wd_pid = 0;
	pthread_mutex_unlock(&shim_udp_wd_lock);
}

/* A fork while the thread ticks would leave the child's copy of wd_lock
 * held by a thread the child does not have (and its exit, which stops
 * watchdogs, would wait for it forever): fork waits for the tick. */
static void shim_udp_wd_prepare(void)
{
	pthread_mutex_lock(&shim_udp_wd_life);
	pthread_mutex_lock(&shim_udp_wd_lock);
}

static void shim_udp_wd_release(void)
{
	pthread_mutex_unlock(&shim_udp_wd_lock);
	pthread_mutex_unlock(&shim_udp_wd_life);
}

static pthread_once_t shim_udp_wd_once = PTHREAD_ONCE_INIT;

static void shim_udp_wd_atfork(void)
{
	(void)pthread_atfork(shim_udp_wd_prepare, shim_udp_wd_release, shim_udp_wd_release);
}

void shim_udp_watchdog_start(struct shim_udp *u)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = u};

	if (u->wd_running && u->wd_pid == getpid()) {
		shim_udp_wd_wake(); /* a new flow ends its sleep */
		return;
	}
	(void)pthread_once(&shim_udp_wd_once, shim_udp_wd_atfork);
	pthread_mutex_lock(&shim_udp_wd_life);
	if (shim_udp_wd_pid && shim_udp_wd_pid != getpid())
		shim_udp_wd_thread_end(); /* forked: the parent's are not ours */
	pthread_mutex_lock(&shim_udp_wd_lock);
	if (shim_udp_wd_count < SHIM_UDP_WD_EVENTS && shim_udp_wd_thread_ensure() &&
	    !epoll_ctl(shim_udp_wd_epfd, EPOLL_CTL_ADD, u->fd, &ev)) {
		u->wd_running = true;
		u->wd_pid = shim_udp_wd_pid;
		u->wd_next = shim_udp_wd_list;
		shim_udp_wd_list = u;
		shim_udp_wd_count++;
		shim_udp_wd_wake();
	}
	pthread_mutex_unlock(&shim_udp_wd_lock);
	pthread_mutex_unlock(&shim_udp_wd_life);
}

void shim_udp_watchdog_stop(struct shim_udp *u)
{
	struct shim_udp **pp;
	bool last = false;

	if (!u->wd_running)
		return;
	pthread_mutex_lock(&shim_udp_wd_life);
	pthread_mutex_lock(&shim_udp_wd_lock);
	/* a context inherited from the parent is not in this list */
	if (u->wd_pid == getpid() && shim_udp_wd_pid == u->wd_pid) {
		for (pp = &shim_udp_wd_list; *pp; pp = &(*pp)->wd_next) {
			if (*pp == u) {
				*pp = u->wd_next;
				shim_udp_wd_count--;
				(void)epoll_ctl(shim_udp_wd_epfd, EPOLL_CTL_DEL, u->fd, NULL);
				last = !shim_udp_wd_count;
				break;
			}
		}
	}
	u->wd_running = false;
	pthread_mutex_unlock(&shim_udp_wd_lock);
	if (last)
		shim_udp_wd_thread_end();
	pthread_mutex_unlock(&shim_udp_wd_life);
}

/* The library is unloaded (dlclose, or exit with contexts still open):
 * the thread goes first.  The contexts stay as they are; nothing may use
 * them once their code is gone. */
__attribute__((destructor)) static void shim_udp_fini(void)
{
	shim_udp_unload();
}

void shim_udp_unload(void)
{
	pthread_mutex_lock(&shim_udp_wd_life);
	shim_udp_wd_thread_end();
	pthread_mutex_unlock(&shim_udp_wd_life);
}
