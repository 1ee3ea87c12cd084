/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_msgrate.c - small-message rate benchmark for any libfabric provider.
 *
 * Two processes, RDM endpoints, FI_TAGGED.  The client streams windows of
 * W non-blocking sends of S bytes; the server has all W receives of a
 * window pre-posted and answers each completed window with one small ack,
 * like osu_mbw_mr.  The ack is what makes the figure a *delivered* rate:
 * without it the client would only measure how fast it can queue.
 *
 *   server:  opx_msgrate -p opx [options]
 *   client:  opx_msgrate -p opx [options] 127.0.0.1
 *
 * Addresses are exchanged out of band over a TCP socket so the benchmark
 * does not depend on any provider feature beyond tagged send/receive.  The
 * client's size/window/iteration settings win, so the server can be
 * started with defaults.  The client prints one machine-parsable line:
 *
 *   msgrate prov=opx size=8 window=64 iters=1000 msgs_per_sec=... MBps=...
 *
 * This is a test program, not library code: it exits on fatal errors and
 * a SIGALRM deadline bounds every run, so a broken provider cannot hang a
 * benchmark script.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define MR_DATA_TAG 0x1ULL
#define MR_ACK_TAG 0x2ULL
#define MR_ACK_SIZE 4
#define MR_NAME_MAX 1024
#define MR_CQ_BATCH 64

struct mr_opts {
	const char *prov;
	const char *server; /* NULL: act as server */
	uint16_t port;
	uint32_t size;
	uint32_t window;
	uint32_t iters;
	uint32_t warmup;
	unsigned int timeout_s;
	int verbose;
};

/* Fabric address as sent over the socket; name_len in network order. */
struct mr_hello {
	uint32_t name_len;
	uint8_t name[MR_NAME_MAX];
};

struct mr_state {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc;
	fi_addr_t peer;
	int sock;

	uint8_t *buf;            /* window * size data slots, then the ack slot */
	uint8_t *ack_buf;
	struct fi_context2 *ctx; /* window data contexts, then one for the ack */
	struct fi_context2 *ack_ctx;
	size_t data_done;        /* data completions (send or recv) seen */
	size_t ack_done;         /* ack completions seen */
};

static void mr_die(const char *what, int ret)
{
	fprintf(stderr, "opx_msgrate: %s: %s (%d)\n", what,
		ret < 0 ? fi_strerror(-ret) : strerror(errno), ret);
	exit(1);
}

static void mr_on_alarm(int sig)
{
	static const char msg[] = "opx_msgrate: timeout, giving up\n";
	ssize_t n;

	(void)sig;
	n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)n;
	_exit(3);
}

static double mr_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void mr_usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [options] [server_addr]\n"
		"  -p PROV   libfabric provider (default opx)\n"
		"  -P PORT   TCP port for the address exchange (default 47990)\n"
		"  -S SIZE   message size in bytes (default 8)\n"
		"  -w W      messages per window (default 64)\n"
		"  -n N      measured windows (default 1000)\n"
		"  -W N      warm-up windows (default 100)\n"
		"  -T SECS   give up after SECS seconds (default 60)\n"
		"  -v        verbose\n",
		argv0);
}

static uint32_t mr_parse_u32(const char *s, const char *what, uint32_t min, uint32_t max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v < min || v > max) {
		fprintf(stderr, "opx_msgrate: bad %s '%s' (%u..%u)\n", what, s, min, max);
		exit(1);
	}
	return (uint32_t)v;
}

/* ---- out-of-band socket -------------------------------------------- */

static void mr_sock_full(int fd, void *buf, size_t len, int writing)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "opx_msgrate: socket %s failed\n", writing ? "write" : "read");
			exit(1);
		}
		p += n;
		len -= (size_t)n;
	}
}

static int mr_sock_server(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, lfd, fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		mr_die("socket", 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		mr_die("bind/listen", 0);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		mr_die("accept", 0);
	close(lfd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int mr_sock_client(const char *host, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "opx_msgrate: server_addr must be an IPv4 address\n");
		exit(1);
	}
	/* The server may still be starting: retry, bounded by the alarm. */
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			mr_die("socket", 0);
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		usleep(50 * 1000);
	}
}

/* ---- fabric setup ---------------------------------------------------- */

static void mr_fabric_open(struct mr_state *st, const struct mr_opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
	size_t len;
	int ret;

	if (!hints)
		mr_die("fi_allocinfo", -FI_ENOMEM);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	/* Every op carries its own fi_context2, so both modes are fine. */
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(o->prov);

	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &st->info);
	fi_freeinfo(hints);
	if (ret)
		mr_die("fi_getinfo", ret);
	if (o->verbose)
		fprintf(stderr, "opx_msgrate: provider %s domain %s inject_size %zu\n",
			st->info->fabric_attr->prov_name, st->info->domain_attr->name,
			st->info->tx_attr->inject_size);

	ret = fi_fabric(st->info->fabric_attr, &st->fabric, NULL);
	if (ret)
		mr_die("fi_fabric", ret);
	ret = fi_domain(st->fabric, st->info, &st->domain, NULL);
	if (ret)
		mr_die("fi_domain", ret);
	cq_attr.size = 4 * (size_t)o->window + 64;
	ret = fi_cq_open(st->domain, &cq_attr, &st->cq, NULL);
	if (ret)
		mr_die("fi_cq_open", ret);
	ret = fi_av_open(st->domain, &av_attr, &st->av, NULL);
	if (ret)
		mr_die("fi_av_open", ret);
	ret = fi_endpoint(st->domain, st->info, &st->ep, NULL);
	if (ret)
		mr_die("fi_endpoint", ret);
	ret = fi_ep_bind(st->ep, &st->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		mr_die("fi_ep_bind(cq)", ret);
	ret = fi_ep_bind(st->ep, &st->av->fid, 0);
	if (ret)
		mr_die("fi_ep_bind(av)", ret);
	ret = fi_enable(st->ep);
	if (ret)
		mr_die("fi_enable", ret);

	len = (size_t)o->window * o->size + MR_ACK_SIZE;
	st->buf = aligned_alloc(64, (len + 63) & ~(size_t)63);
	st->ctx = calloc((size_t)o->window + 1, sizeof(*st->ctx));
	if (!st->buf || !st->ctx)
		mr_die("out of memory", -FI_ENOMEM);
	memset(st->buf, 0xa5, len);
	st->ack_buf = st->buf + (size_t)o->window * o->size;
	st->ack_ctx = &st->ctx[o->window];

	/* Register only when the provider says it needs local descriptors. */
	if (st->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(st->domain, st->buf, len, FI_SEND | FI_RECV, 0, 0, 0, &st->mr,
				NULL);
		if (ret)
			mr_die("fi_mr_reg", ret);
		st->desc = fi_mr_desc(st->mr);
	}
}

static void mr_fabric_close(struct mr_state *st)
{
	if (st->mr)
		fi_close(&st->mr->fid);
	fi_close(&st->ep->fid);
	fi_close(&st->av->fid);
	fi_close(&st->cq->fid);
	fi_close(&st->domain->fid);
	fi_close(&st->fabric->fid);
	fi_freeinfo(st->info);
	free(st->buf);
	free(st->ctx);
}

/* ---- data path ------------------------------------------------------- */

/* Drain the CQ once; completions are told apart by their context. */
static void mr_progress(struct mr_state *st)
{
	struct fi_cq_entry ent[MR_CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t n, i;

	n = fi_cq_read(st->cq, ent, MR_CQ_BATCH);
	if (n == -FI_EAGAIN)
		return;
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(st->cq, &err, 0) > 0)
			fprintf(stderr, "opx_msgrate: completion error: %s (prov errno %d)\n",
				fi_strerror(err.err), err.prov_errno);
		exit(1);
	}
	if (n < 0)
		mr_die("fi_cq_read", (int)n);
	for (i = 0; i < n; i++) {
		if (ent[i].op_context == st->ack_ctx)
			st->ack_done++;
		else
			st->data_done++;
	}
}

static void mr_post_recv(struct mr_state *st, void *buf, size_t len, uint64_t tag, void *ctx)
{
	for (;;) {
		ssize_t ret = fi_trecv(st->ep, buf, len, st->desc, st->peer, tag, 0, ctx);

		if (!ret)
			return;
		if (ret != -FI_EAGAIN)
			mr_die("fi_trecv", (int)ret);
		mr_progress(st);
	}
}

/* Returns 1 when the send will produce a completion, 0 for an inject. */
static int mr_post_send(struct mr_state *st, void *buf, size_t len, uint64_t tag, void *ctx)
{
	int inject = len <= st->info->tx_attr->inject_size;

	for (;;) {
		ssize_t ret = inject ? fi_tinject(st->ep, buf, len, st->peer, tag)
				     : fi_tsend(st->ep, buf, len, st->desc, st->peer, tag, ctx);

		if (!ret)
			return !inject;
		if (ret != -FI_EAGAIN)
			mr_die(inject ? "fi_tinject" : "fi_tsend", (int)ret);
		mr_progress(st);
	}
}

static void mr_post_window_recvs(struct mr_state *st, const struct mr_opts *o)
{
	uint32_t i;

	for (i = 0; i < o->window; i++)
		mr_post_recv(st, st->buf + (size_t)i * o->size, o->size, MR_DATA_TAG, &st->ctx[i]);
}

/*
 * Wait for the peer's TCP byte while still progressing the endpoint:
 * a provider with manual progress may need our CQ reads to push out the
 * last ack, so a plain blocking read() here could deadlock.
 */
static void mr_barrier(struct mr_state *st)
{
	struct pollfd pfd = { .fd = st->sock, .events = POLLIN };
	uint8_t b = 0;

	mr_sock_full(st->sock, &b, 1, 1);
	for (;;) {
		int r = poll(&pfd, 1, 0);

		if (r > 0)
			break;
		if (r < 0 && errno != EINTR)
			mr_die("poll", 0);
		mr_progress(st);
	}
	mr_sock_full(st->sock, &b, 1, 0);
}

static void mr_run_server(struct mr_state *st, const struct mr_opts *o)
{
	uint32_t total = o->warmup + o->iters, w;
	size_t want = 0;
	int acks = 0;

	/* First window's receives are posted before the client may send. */
	mr_post_window_recvs(st, o);
	mr_barrier(st);
	for (w = 0; w < total; w++) {
		want += o->window;
		while (st->data_done < want)
			mr_progress(st);
		/* Post the next window before acking, so it lands on posted receives. */
		if (w + 1 < total)
			mr_post_window_recvs(st, o);
		acks += mr_post_send(st, st->ack_buf, MR_ACK_SIZE, MR_ACK_TAG, st->ack_ctx);
	}
	while (st->ack_done < (size_t)acks)
		mr_progress(st);
	mr_barrier(st);
}

static void mr_run_client(struct mr_state *st, const struct mr_opts *o)
{
	uint32_t total = o->warmup + o->iters, w, i;
	size_t want_sends = 0, want_acks = 0;
	double t0 = 0.0, dt, rate;

	mr_barrier(st);
	for (w = 0; w < total; w++) {
		if (w == o->warmup)
			t0 = mr_now();
		mr_post_recv(st, st->ack_buf, MR_ACK_SIZE, MR_ACK_TAG, st->ack_ctx);
		want_acks++;
		for (i = 0; i < o->window; i++)
			want_sends += (size_t)mr_post_send(st, st->buf + (size_t)i * o->size, o->size,
							   MR_DATA_TAG, &st->ctx[i]);
		while (st->data_done < want_sends || st->ack_done < want_acks)
			mr_progress(st);
	}
	dt = mr_now() - t0;
	mr_barrier(st);

	rate = (double)o->iters * o->window / dt;
	printf("msgrate prov=%s size=%u window=%u iters=%u msgs_per_sec=%.0f MBps=%.2f\n",
	       o->prov, o->size, o->window, o->iters, rate, rate * o->size / 1e6);
	fflush(stdout);
}

/* ---- main -------------------------------------------------------------- */

/* Settings travel client -> server before anything is sized. */
static void mr_settings_exchange(int sock, struct mr_opts *o)
{
	uint32_t cfg[4] = { htonl(o->size), htonl(o->window), htonl(o->iters), htonl(o->warmup) };

	if (o->server) {
		mr_sock_full(sock, cfg, sizeof(cfg), 1);
		return;
	}
	mr_sock_full(sock, cfg, sizeof(cfg), 0);
	o->size = ntohl(cfg[0]);
	o->window = ntohl(cfg[1]);
	o->iters = ntohl(cfg[2]);
	o->warmup = ntohl(cfg[3]);
	if (!o->size || o->size > (1u << 24) || !o->window || o->window > 4096 || !o->iters) {
		fprintf(stderr, "opx_msgrate: bad settings from client\n");
		exit(1);
	}
}

static void mr_exchange(struct mr_state *st)
{
	struct mr_hello mine, theirs;
	size_t len = MR_NAME_MAX;
	int ret;

	memset(&mine, 0, sizeof(mine));
	ret = fi_getname(&st->ep->fid, mine.name, &len);
	if (ret)
		mr_die("fi_getname", ret);
	mine.name_len = htonl((uint32_t)len);

	mr_sock_full(st->sock, &mine, sizeof(mine), 1);
	mr_sock_full(st->sock, &theirs, sizeof(theirs), 0);
	if (ntohl(theirs.name_len) > MR_NAME_MAX) {
		fprintf(stderr, "opx_msgrate: peer sent a bad address length\n");
		exit(1);
	}
	ret = fi_av_insert(st->av, theirs.name, 1, &st->peer, 0, NULL);
	if (ret != 1)
		mr_die("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
}

int main(int argc, char **argv)
{
	struct mr_opts o = {
		.prov = "opx", .port = 47990, .size = 8, .window = 64,
		.iters = 1000, .warmup = 100, .timeout_s = 60,
	};
	struct mr_state st;
	struct sigaction sa;
	int c;

	while ((c = getopt(argc, argv, "p:P:S:w:n:W:T:vh")) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'P': o.port = (uint16_t)mr_parse_u32(optarg, "port", 1, 65535); break;
		case 'S': o.size = mr_parse_u32(optarg, "size", 1, 1u << 24); break;
		case 'w': o.window = mr_parse_u32(optarg, "window", 1, 4096); break;
		case 'n': o.iters = mr_parse_u32(optarg, "iterations", 1, 100000000); break;
		case 'W': o.warmup = mr_parse_u32(optarg, "warm-up", 0, 100000000); break;
		case 'T': o.timeout_s = mr_parse_u32(optarg, "timeout", 1, 86400); break;
		case 'v': o.verbose = 1; break;
		default: mr_usage(argv[0]); return c == 'h' ? 0 : 1;
		}
	}
	if (optind < argc)
		o.server = argv[optind];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = mr_on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(o.timeout_s);

	memset(&st, 0, sizeof(st));
	/* The socket comes first: the client's settings size the buffers. */
	st.sock = o.server ? mr_sock_client(o.server, o.port) : mr_sock_server(o.port);
	mr_settings_exchange(st.sock, &o);
	mr_fabric_open(&st, &o);
	mr_exchange(&st);

	if (o.server)
		mr_run_client(&st, &o);
	else
		mr_run_server(&st, &o);

	mr_fabric_close(&st);
	close(st.sock);
	return 0;
}
