/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_fanout: one endpoint talks to many peers, all in one address vector.
 *
 *   opx_fanout [-n PEERS] [-j PROCS] [-s SIZE] [-i IDLE_S] [-m MAX_BYTES] [-T SECS]
 *
 * The hub (this process) forks PROCS children first, before anything of
 * libfabric exists.  Each child opens PEERS / PROCS endpoints (one domain,
 * one AV, one CQ), posts a receive on each and sends their names to the
 * hub over a socketpair.  The hub inserts all PEERS names into its AV in
 * one fi_av_insert, sends each peer SIZE bytes (tag = its index, a
 * pattern of its index) and receives each peer's answer (the child checks
 * what came, answers with the pattern of index + PEERS under the same
 * tag); every byte is checked.  Then the hub keeps progressing, quiet,
 * for IDLE_S seconds and reads its resident memory again:
 *
 *   fanout peers=1000 procs=4 size=64 reached=1000 sends=1000 rss_kib: base=..
 *     inserted=.. warmed=.. traffic=.. idle=.. per_peer_bytes: av=.. busy=.. idle=..
 *
 * The hub talks to a tenth of the peers first and is quiet for IDLE_S
 * (warmed: what the endpoint allocates once is in), then to the rest.
 * per_peer_bytes idle is the AV's share, (inserted - base) / PEERS, plus
 * (idle - warmed) / (the rest): what a remote peer that talked once and
 * went quiet costs the hub (AV entry, link, flow, any ring pages that
 * stay); busy is the same right after the traffic.  -m fails the run
 * when idle exceeds MAX_BYTES.  The test buffers are allocated and
 * touched before base is read.
 *
 * Exit 0 if every peer was reached and answered correctly (and -m held),
 * 1 otherwise; every wait is bounded, alarm(SECS) bounds the run.  Set
 * FI_OPX_WIRE=udp (and run in a network namespace of its own) for the
 * udp wire's per-peer state.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "../common/testutil.h"

#define FO_MAX_PEERS 4096
#define FO_MAX_PROCS 64
#define FO_NAME_MAX 64
#define FO_WAIT_MS 60000

struct fo_lib {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
};

static const char *fo_who = "hub";

#define FO_FAIL(...)                                                                               \
	do {                                                                                       \
		fprintf(stderr, "FAIL %s: ", fo_who);                                              \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		return -1;                                                                         \
	} while (0)

static int64_t fo_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whole buffers over a socket, bounded. */
static int fo_io(int fd, void *buf, size_t len, bool out)
{
	uint8_t *p = buf;
	int64_t end = fo_now_ms() + FO_WAIT_MS;

	while (len) {
		struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		ssize_t n;
		int64_t left = end - fo_now_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return -1;
		n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n <= 0) {
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int fo_open(struct fo_lib *l)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_av_attr av = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_TAGGED, .size = 4 * FO_MAX_PEERS};
	const char *prov = getenv("FANOUT_PROVIDER");
	int ret;

	if (!h)
		FO_FAIL("fi_allocinfo");
	h->caps = FI_TAGGED;
	h->ep_attr->type = FI_EP_RDM;
	h->mode = 0;
	h->domain_attr->mr_mode = FI_MR_UNSPEC;
	h->fabric_attr->prov_name = strdup(prov && *prov ? prov : "opx");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &l->info);
	fi_freeinfo(h);
	if (ret)
		FO_FAIL("fi_getinfo: %s", fi_strerror(-ret));
	ret = fi_fabric(l->info->fabric_attr, &l->fabric, NULL);
	if (!ret)
		ret = fi_domain(l->fabric, l->info, &l->domain, NULL);
	if (!ret)
		ret = fi_av_open(l->domain, &av, &l->av, NULL);
	if (!ret)
		ret = fi_cq_open(l->domain, &cq, &l->cq, NULL);
	if (ret)
		FO_FAIL("open: %s", fi_strerror(-ret));
	return 0;
}

static int fo_ep(struct fo_lib *l, struct fid_ep **ep, uint8_t *name, size_t *len)
{
	int ret = fi_endpoint(l->domain, l->info, ep, NULL);

	if (!ret)
		ret = fi_ep_bind(*ep, &l->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(*ep, &l->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(*ep);
	*len = FO_NAME_MAX;
	if (!ret)
		ret = fi_getname(&(*ep)->fid, name, len);
	if (ret)
		FO_FAIL("endpoint: %s", fi_strerror(-ret));
	return 0;
}

static void fo_close(struct fo_lib *l, struct fid_ep **eps, int n)
{
	for (int i = 0; i < n; i++)
		if (eps[i])
			fi_close(&eps[i]->fid);
	if (l->cq)
		fi_close(&l->cq->fid);
	if (l->av)
		fi_close(&l->av->fid);
	if (l->domain)
		fi_close(&l->domain->fid);
	if (l->fabric)
		fi_close(&l->fabric->fid);
	if (l->info)
		fi_freeinfo(l->info);
}

/* One completion or none; an error entry fails. */
static int fo_poll(struct fid_cq *cq, struct fi_cq_tagged_entry *e)
{
	ssize_t n = fi_cq_read(cq, e, 1);

	if (n == 1)
		return 1;
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};

		fi_cq_readerr(cq, &err, 0);
		FO_FAIL("completion error %d (%s), tag %#lx", err.err, fi_strerror(err.err),
			(unsigned long)err.tag);
	}
	FO_FAIL("fi_cq_read: %s", fi_strerror((int)-n));
}

/* Child c: n endpoints, global indexes first .. first + n - 1. */
static int fo_child(int sock, uint32_t first, uint32_t n, uint32_t peers, size_t size)
{
	static char who[32];
	struct fo_lib l = {0};
	struct fid_ep **eps = calloc(n, sizeof(*eps));
	uint8_t *bufs = malloc((size_t)n * size * 2);
	uint32_t *ready = calloc(n, sizeof(*ready)); /* received, to answer */
	uint8_t name[FO_NAME_MAX], hub_name[FO_NAME_MAX];
	uint32_t hub_len, answered = 0, sent = 0, nready = 0;
	fi_addr_t hub = FI_ADDR_NOTAVAIL;
	int64_t end;
	char go;
	int rc = -1;

	snprintf(who, sizeof(who), "child %u", first);
	fo_who = who;
	if (!eps || !bufs || !ready || fo_open(&l))
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		size_t len;
		uint32_t len32;

		if (fo_ep(&l, &eps[i], name, &len))
			goto out;
		len32 = (uint32_t)len;
		if (fo_io(sock, &len32, sizeof(len32), true) || fo_io(sock, name, len, true)) {
			fprintf(stderr, "FAIL %s: name to the hub\n", who);
			goto out;
		}
		if (fi_trecv(eps[i], bufs + (size_t)i * 2 * size, size, NULL, FI_ADDR_UNSPEC,
			     first + i, 0, (void *)(uintptr_t)(i + 1))) {
			fprintf(stderr, "FAIL %s: fi_trecv\n", who);
			goto out;
		}
	}
	if (fo_io(sock, &hub_len, sizeof(hub_len), false) || hub_len > FO_NAME_MAX ||
	    fo_io(sock, hub_name, hub_len, false) ||
	    fi_av_insert(l.av, hub_name, 1, &hub, 0, NULL) != 1) {
		fprintf(stderr, "FAIL %s: the hub's name\n", who);
		goto out;
	}
	end = fo_now_ms() + FO_WAIT_MS;
	while ((answered < n || sent < n) && fo_now_ms() < end) {
		struct fi_cq_tagged_entry e;
		int got;

		/* answer what came, in order; a full send queue waits */
		while (nready) {
			uint32_t i = ready[nready - 1];
			ssize_t r = fi_tsend(eps[i], bufs + ((size_t)i * 2 + 1) * size, size, NULL,
					     hub, first + i, (void *)(uintptr_t)(n + 1 + i));

			if (r == -FI_EAGAIN)
				break;
			if (r) {
				fprintf(stderr, "FAIL %s: fi_tsend: %s\n", who, fi_strerror((int)-r));
				goto out;
			}
			nready--;
			answered++;
		}
		got = fo_poll(l.cq, &e);
		if (got < 0)
			goto out;
		if (!got)
			continue;
		if ((uintptr_t)e.op_context > n) { /* an answer went */
			sent++;
		} else {
			uint32_t i = (uint32_t)(uintptr_t)e.op_context - 1;
			long bad = tu_check(bufs + (size_t)i * 2 * size, size, first + i);

			if (e.len != size || e.tag != first + i || bad >= 0) {
				fprintf(stderr, "FAIL %s: peer %u got len %zu tag %#lx, byte %ld wrong\n",
					who, first + i, e.len, (unsigned long)e.tag, bad);
				goto out;
			}
			tu_fill(bufs + ((size_t)i * 2 + 1) * size, size, first + i + peers);
			ready[nready++] = i;
		}
	}
	if (answered < n || sent < n) {
		fprintf(stderr, "FAIL %s: %u of %u answered, %u sends completed\n", who, answered,
			n, sent);
		goto out;
	}
	go = 'd';
	if (fo_io(sock, &go, 1, true))
		goto out;
	/* keep progressing (the hub's sends want acks) until the hub is done */
	end = fo_now_ms() + 4 * FO_WAIT_MS;
	for (;;) {
		struct fi_cq_tagged_entry e;
		struct pollfd pfd = {.fd = sock, .events = POLLIN};

		if (fo_poll(l.cq, &e) < 0)
			goto out;
		if (poll(&pfd, 1, 1) == 1)
			break;
		if (fo_now_ms() > end) {
			fprintf(stderr, "FAIL %s: the hub never said goodbye\n", who);
			goto out;
		}
	}
	rc = 0;
out:
	fo_close(&l, eps, (int)n);
	free(eps);
	free(bufs);
	free(ready);
	return rc;
}

struct fo_hub {
	struct fo_lib l;
	struct fid_ep *ep;
	fi_addr_t *addr;
	uint8_t *bufs;
	size_t size;
	uint32_t peers;
	uint32_t reached, sent; /* answers checked, sends completed */
};

/* Send to peers [from, to) and check their answers. */
static int fo_hub_exchange(struct fo_hub *h, uint32_t from, uint32_t to)
{
	uint32_t posted = from, reached = h->reached + (to - from), sent = h->sent + (to - from);
	bool rposted = false;
	int64_t end = fo_now_ms() + 2 * FO_WAIT_MS;
	size_t size = h->size;

	while ((h->reached < reached || h->sent < sent) && fo_now_ms() < end) {
		struct fi_cq_tagged_entry e;
		int r;

		if (posted < to) {
			uint32_t i = posted;
			ssize_t p = 0;

			/* the receive first (the answer may beat our send's
			 * completion), then the send; either may be retried */
			if (!rposted) {
				p = fi_trecv(h->ep, h->bufs + ((size_t)i * 2 + 1) * size, size, NULL,
					     h->addr[i], i, 0, (void *)(uintptr_t)(h->peers + 1 + i));
				rposted = !p;
				tu_fill(h->bufs + (size_t)i * 2 * size, size, i);
			}
			if (rposted)
				p = fi_tsend(h->ep, h->bufs + (size_t)i * 2 * size, size, NULL,
					     h->addr[i], i, (void *)(uintptr_t)(i + 1));
			if (!p) {
				posted++;
				rposted = false;
			} else if (p != -FI_EAGAIN) {
				FO_FAIL("to peer %u: %s", i, fi_strerror((int)-p));
			}
		}
		r = fo_poll(h->l.cq, &e);
		if (r < 0)
			return -1;
		if (!r)
			continue;
		if ((uintptr_t)e.op_context <= h->peers) {
			h->sent++;
		} else {
			uint32_t i = (uint32_t)((uintptr_t)e.op_context - h->peers - 1);
			long bad = tu_check(h->bufs + ((size_t)i * 2 + 1) * size, size, i + h->peers);

			if (e.len != size || e.tag != i || bad >= 0)
				FO_FAIL("answer of peer %u: len %zu tag %#lx, byte %ld wrong", i, e.len,
					(unsigned long)e.tag, bad);
			h->reached++;
		}
	}
	if (h->reached < reached || h->sent < sent)
		FO_FAIL("peers %u-%u: %u of %u answered, %u of %u sends completed in %d s", from,
			to - 1, h->reached, reached, h->sent, sent, 2 * FO_WAIT_MS / 1000);
	return 0;
}

/* Progress only, for idle_s: idle state is given back meanwhile. */
static int fo_hub_quiet(struct fo_hub *h, double idle_s)
{
	int64_t end = fo_now_ms() + (int64_t)(idle_s * 1000);

	while (fo_now_ms() < end) {
		struct fi_cq_tagged_entry e;

		if (fo_poll(h->l.cq, &e) != 0)
			FO_FAIL("a completion while quiet");
		usleep(1000);
	}
	return 0;
}

/* The names of every child's endpoints, packed at one length (all alike):
 * the layout fi_av_insert reads. */
static int fo_hub_names(int *socks, uint32_t procs, uint32_t peers, uint8_t *names,
			size_t *name_len)
{
	uint32_t per = peers / procs;

	*name_len = 0;
	for (uint32_t c = 0; c < procs; c++) {
		uint32_t n = c + 1 == procs ? peers - per * c : per;

		for (uint32_t i = 0; i < n; i++) {
			uint32_t nl;

			if (fo_io(socks[c], &nl, sizeof(nl), false) || !nl || nl > FO_NAME_MAX ||
			    (*name_len && nl != *name_len) ||
			    fo_io(socks[c], names + (size_t)(per * c + i) * nl, nl, false))
				FO_FAIL("name %u of child %u", i, c);
			*name_len = nl;
		}
	}
	return 0;
}

/* First a tenth of the peers (warms what the endpoint allocates once:
 * receive buffers, its rings), quiet, then the rest, quiet: the resident
 * memory the rest added, over their number, is what a peer costs while
 * idle; inserting all of them into the AV is counted apart. */
static int fo_hub(int *socks, uint32_t procs, uint32_t peers, size_t size, double idle_s,
		  long max_bytes)
{
	struct fo_hub h = {.peers = peers, .size = size};
	uint8_t *names = calloc(peers, FO_NAME_MAX);
	uint8_t name[FO_NAME_MAX];
	uint32_t warm = peers / 10 ? peers / 10 : 1;
	size_t len, name_len;
	long base, inserted, warmed, traffic, idle, av_b, busy_b, idle_b;
	int rc = -1;

	h.bufs = malloc((size_t)peers * size * 2);
	h.addr = calloc(peers, sizeof(*h.addr));
	if (!names || !h.bufs || !h.addr) {
		fprintf(stderr, "FAIL hub: no memory\n");
		goto out;
	}
	memset(h.bufs, 0, (size_t)peers * size * 2);
	if (fo_open(&h.l) || fo_ep(&h.l, &h.ep, name, &len) ||
	    fo_hub_names(socks, procs, peers, names, &name_len))
		goto out;
	base = tu_rss_kib();
	if (fi_av_insert(h.l.av, names, peers, h.addr, 0, NULL) != (int)peers) {
		fprintf(stderr, "FAIL hub: fi_av_insert of %u names\n", peers);
		goto out;
	}
	inserted = tu_rss_kib();
	for (uint32_t c = 0; c < procs; c++) {
		uint32_t nl = (uint32_t)len;

		if (fo_io(socks[c], &nl, sizeof(nl), true) || fo_io(socks[c], name, len, true)) {
			fprintf(stderr, "FAIL hub: our name to child %u\n", c);
			goto out;
		}
	}
	if (fo_hub_exchange(&h, 0, warm) || fo_hub_quiet(&h, idle_s))
		goto out;
	warmed = tu_rss_kib();
	if (fo_hub_exchange(&h, warm, peers))
		goto out;
	traffic = tu_rss_kib();
	for (uint32_t c = 0; c < procs; c++) {
		char d;

		if (fo_io(socks[c], &d, 1, false) || d != 'd') {
			fprintf(stderr, "FAIL hub: child %u did not finish\n", c);
			goto out;
		}
	}
	if (fo_hub_quiet(&h, idle_s))
		goto out;
	idle = tu_rss_kib();
	av_b = (inserted - base) * 1024 / (long)peers;
	busy_b = (traffic - warmed) * 1024 / (long)(peers - warm);
	idle_b = (idle - warmed) * 1024 / (long)(peers - warm);
	printf("fanout peers=%u procs=%u size=%zu reached=%u sends=%u rss_kib: base=%ld "
	       "inserted=%ld warmed=%ld traffic=%ld idle=%ld per_peer_bytes: av=%ld busy=%ld "
	       "idle=%ld\n",
	       peers, procs, size, h.reached, h.sent, base, inserted, warmed, traffic, idle, av_b,
	       av_b + busy_b, av_b + idle_b);
	fflush(stdout);
	if (max_bytes > 0 && av_b + idle_b > max_bytes) {
		fprintf(stderr, "FAIL hub: %ld bytes per idle peer, more than %ld\n", av_b + idle_b,
			max_bytes);
		goto out;
	}
	rc = 0;
out:
	fo_close(&h.l, &h.ep, 1);
	free(names);
	free(h.bufs);
	free(h.addr);
	return rc;
}

int main(int argc, char **argv)
{
	uint32_t peers = 1000, procs = 4;
	size_t size = 64;
	double idle_s = 2.5;
	long max_bytes = 0;
	unsigned secs = 300;
	int socks[FO_MAX_PROCS], opt, rc, fails = 0;
	pid_t pids[FO_MAX_PROCS];
	struct rlimit rl;

	while ((opt = getopt(argc, argv, "n:j:s:i:m:T:")) != -1) {
		switch (opt) {
		case 'n': peers = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'j': procs = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'i': idle_s = strtod(optarg, NULL); break;
		case 'm': max_bytes = strtol(optarg, NULL, 0); break;
		case 'T': secs = (unsigned)strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [-n PEERS] [-j PROCS] [-s SIZE] [-i IDLE_S] "
					"[-m MAX_BYTES] [-T SECS]\n", argv[0]);
			return 2;
		}
	}
	if (!peers || peers > FO_MAX_PEERS || !procs || procs > FO_MAX_PROCS || procs > peers ||
	    !size || size > (1u << 20) || idle_s < 0 || idle_s > 600) {
		fprintf(stderr, "opx_fanout: bad arguments\n");
		return 2;
	}
	/* a child's endpoints hold several descriptors each */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	alarm(secs);
	for (uint32_t c = 0; c < procs; c++) {
		int sv[2];
		uint32_t per = peers / procs;

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
			perror("socketpair");
			return 1;
		}
		fflush(NULL);
		pids[c] = fork();
		if (pids[c] < 0) {
			perror("fork");
			return 1;
		}
		if (!pids[c]) {
			for (uint32_t k = 0; k < c; k++)
				close(socks[k]);
			close(sv[0]);
			_exit(fo_child(sv[1], per * c, c + 1 == procs ? peers - per * c : per, peers,
				       size) ? 1 : 0);
		}
		close(sv[1]);
		socks[c] = sv[0];
	}
	rc = fo_hub(socks, procs, peers, size, idle_s, max_bytes);
	for (uint32_t c = 0; c < procs; c++)
		close(socks[c]); /* goodbye: children close and exit */
	for (uint32_t c = 0; c < procs; c++) {
		int st;

		if (waitpid(pids[c], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "FAIL: child %u did not exit cleanly\n", c);
			fails++;
		}
	}
	printf("%s\n", rc || fails ? "FAIL" : "PASS");
	return rc || fails ? 1 : 0;
}
