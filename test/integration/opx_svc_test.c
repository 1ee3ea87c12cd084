/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_svc_test.c - the fabtests flow of address exchange, over opx, in
 * two processes, with no out-of-band address exchange at all:
 *
 *   server: fi_getinfo(NULL, PORT, FI_SOURCE) -> endpoint (claims PORT)
 *   client: fi_getinfo(NODE, PORT, 0) -> fi_av_insert(info->dest_addr)
 *           -> sends its fi_getname to the server in-band
 *   server: inserts the client's name; both exchange messages of every
 *           protocol size, checking every byte.
 *
 * The client runs twice, with NODE = 127.0.0.1 and with this host's
 * name.  PORT is picked at random and another one is tried when an
 * endpoint of this uid already holds it (-FI_EADDRINUSE); only the port
 * number travels from the server to the client (a pipe stands for the
 * command line).  Every wait is bounded; the whole run is under alarm().
 *
 * Run with FI_PROVIDER_PATH pointing at libopx-fi.so (make check sets it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define SV_WAIT_MS 10000
#define SV_ALARM_S 120
#define SV_NAME_MAX 256
#define SV_MAXLEN (256 * 1024)

static const size_t sv_sizes[] = {0, 1, 16, 17, 1000, 8192, 8193, 65536, SV_MAXLEN};
#define SV_NSIZES (sizeof(sv_sizes) / sizeof(sv_sizes[0]))

struct sv {
	const char *who;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer;
	uint8_t *sbuf, *rbuf;
};

#define SV_FAIL(s, ...)                                                                            \
	do {                                                                                       \
		fprintf(stderr, "FAIL %s: ", (s)->who);                                            \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		return -1;                                                                         \
	} while (0)

static int64_t sv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint8_t sv_byte(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + 1u);
}

static struct fi_info *sv_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->fabric_attr->prov_name = strdup("opx");
	return h;
}

/* Everything but the endpoint; the endpoint separately, since opening it
 * is where a server learns that its port is taken. */
static int sv_open_domain(struct sv *s)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_NONE};
	int ret;

	ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL);
	if (!ret)
		ret = fi_domain(s->fabric, s->info, &s->domain, NULL);
	if (!ret)
		ret = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	if (!ret)
		ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	if (ret)
		SV_FAIL(s, "open: %s", fi_strerror(-ret));
	return 0;
}

static int sv_open_ep(struct sv *s)
{
	int ret = fi_endpoint(s->domain, s->info, &s->ep, NULL);

	if (ret)
		return ret;
	ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!ret)
		ret = fi_enable(s->ep);
	return ret;
}

static void sv_close(struct sv *s)
{
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	if (s->info)
		fi_freeinfo(s->info);
	s->ep = NULL;
	s->cq = NULL;
	s->av = NULL;
	s->domain = NULL;
	s->fabric = NULL;
	s->info = NULL;
}

/* The completion of ctx (sends and receives share the CQ, one op at a
 * time per direction here, so any other context is an error). */
static int sv_wait(struct sv *s, void *ctx, struct fi_cq_msg_entry *out)
{
	int64_t end = sv_now_ms() + SV_WAIT_MS;
	struct fi_cq_msg_entry e;

	while (sv_now_ms() <= end) {
		ssize_t n = fi_cq_read(s->cq, &e, 1);

		if (n == 1) {
			if (e.op_context != ctx)
				SV_FAIL(s, "completion for %p while waiting for %p", e.op_context, ctx);
			if (out)
				*out = e;
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			fi_cq_readerr(s->cq, &ee, 0);
			SV_FAIL(s, "error completion: %s", fi_strerror(ee.err));
		}
		if (n != -FI_EAGAIN)
			SV_FAIL(s, "fi_cq_read: %s", fi_strerror((int)-n));
	}
	SV_FAIL(s, "no completion within %d ms", SV_WAIT_MS);
}

static int sv_send(struct sv *s, const void *buf, size_t len)
{
	struct fi_context ctx;
	int64_t end = sv_now_ms() + SV_WAIT_MS;
	ssize_t ret;

	while ((ret = fi_send(s->ep, buf, len, NULL, s->peer, &ctx)) == -FI_EAGAIN &&
	       sv_now_ms() <= end)
		(void)fi_cq_read(s->cq, NULL, 0);
	if (ret)
		SV_FAIL(s, "fi_send(%zu): %s", len, fi_strerror((int)-ret));
	return sv_wait(s, &ctx, NULL);
}

/* Receive one message of exactly len bytes filled with seed's pattern. */
static int sv_recv_check(struct sv *s, size_t len, unsigned seed)
{
	struct fi_context ctx;
	struct fi_cq_msg_entry e;

	memset(s->rbuf, 0xee, len + 1);
	if (fi_recv(s->ep, s->rbuf, SV_MAXLEN, NULL, FI_ADDR_UNSPEC, &ctx))
		SV_FAIL(s, "fi_recv");
	if (sv_wait(s, &ctx, &e))
		return -1;
	if (e.len != len)
		SV_FAIL(s, "received %zu bytes, expected %zu", e.len, len);
	for (size_t i = 0; i < len; i++) {
		if (s->rbuf[i] != sv_byte(seed, i))
			SV_FAIL(s, "byte %zu of a %zu-byte message is wrong", i, len);
	}
	return 0;
}

static void sv_fill(struct sv *s, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		s->sbuf[i] = sv_byte(seed, i);
}

/* Ping-pong every size: the client sends, the server checks and answers. */
static int sv_exchange(struct sv *s, int server, unsigned round)
{
	for (size_t k = 0; k < SV_NSIZES; k++) {
		size_t len = sv_sizes[k];
		unsigned seed = round * 100u + (unsigned)k;

		if (server) {
			if (sv_recv_check(s, len, seed))
				return -1;
			sv_fill(s, len, seed + 50u);
			if (sv_send(s, s->sbuf, len))
				return -1;
		} else {
			sv_fill(s, len, seed);
			if (sv_send(s, s->sbuf, len) || sv_recv_check(s, len, seed + 50u))
				return -1;
		}
	}
	return 0;
}

static int sv_server(int port_fd, unsigned rounds)
{
	struct sv s = {.who = "server"};
	struct fi_info *h = sv_hints();
	char port[16];
	int ret = -FI_EADDRINUSE;

	if (!h)
		return -1;
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	for (int tries = 0; tries < 32 && ret == -FI_EADDRINUSE; tries++) {
		snprintf(port, sizeof(port), "%d", 10000 + rand() % 50000);
		sv_close(&s);
		ret = fi_getinfo(fi_version(), NULL, port, FI_SOURCE, h, &s.info);
		if (ret) {
			fi_freeinfo(h);
			SV_FAIL(&s, "fi_getinfo(NULL, %s, FI_SOURCE): %s", port, fi_strerror(-ret));
		}
		if (!s.info->src_addr || !s.info->src_addrlen) {
			fi_freeinfo(h);
			SV_FAIL(&s, "fi_getinfo returned no src_addr");
		}
		if (sv_open_domain(&s))
			break;
		ret = sv_open_ep(&s);
	}
	fi_freeinfo(h);
	if (ret) {
		sv_close(&s);
		SV_FAIL(&s, "endpoint on port %s: %s", port, fi_strerror(-ret));
	}
	/* the service number is all the client is told */
	if (write(port_fd, port, sizeof(port)) != (ssize_t)sizeof(port)) {
		sv_close(&s);
		SV_FAIL(&s, "cannot tell the port");
	}
	s.sbuf = malloc(SV_MAXLEN + 1);
	s.rbuf = malloc(SV_MAXLEN + 1);
	ret = (!s.sbuf || !s.rbuf) ? -1 : 0;
	for (unsigned r = 0; r < rounds && !ret; r++) {
		struct fi_context ctx;
		struct fi_cq_msg_entry e;
		char name[SV_NAME_MAX];

		/* the client's name arrives in-band */
		ret = -1;
		if (fi_recv(s.ep, name, sizeof(name), NULL, FI_ADDR_UNSPEC, &ctx) ||
		    sv_wait(&s, &ctx, &e))
			break;
		if (fi_av_insert(s.av, name, 1, &s.peer, 0, NULL) != 1) {
			fprintf(stderr, "FAIL server: fi_av_insert of the client's name\n");
			break;
		}
		ret = sv_exchange(&s, 1, r);
	}
	free(s.sbuf);
	free(s.rbuf);
	sv_close(&s);
	if (!ret)
		printf("server: %u clients served on port %s\n", rounds, port);
	return ret;
}

static int sv_client(const char *node, const char *port, unsigned round)
{
	struct sv s = {.who = "client"};
	struct fi_info *h = sv_hints();
	char name[SV_NAME_MAX];
	size_t namelen = sizeof(name);
	int ret;

	if (!h)
		return -1;
	ret = fi_getinfo(fi_version(), node, port, 0, h, &s.info);
	fi_freeinfo(h);
	if (ret)
		SV_FAIL(&s, "fi_getinfo(%s, %s, 0): %s", node, port, fi_strerror(-ret));
	if (!s.info->dest_addr || !s.info->dest_addrlen)
		SV_FAIL(&s, "fi_getinfo(%s, %s) returned no dest_addr", node, port);
	ret = sv_open_domain(&s);
	if (!ret && (ret = sv_open_ep(&s)))
		fprintf(stderr, "FAIL client: endpoint: %s\n", fi_strerror(-ret));
	if (!ret) {
		ret = fi_av_insert(s.av, s.info->dest_addr, 1, &s.peer, 0, NULL);
		if (ret != 1)
			fprintf(stderr, "FAIL client: fi_av_insert(dest_addr of %s:%s): %s\n", node,
				port, ret < 0 ? fi_strerror(-ret) : "not inserted");
		ret = ret == 1 ? 0 : -1;
	}
	if (!ret)
		ret = fi_getname(&s.ep->fid, name, &namelen);
	s.sbuf = malloc(SV_MAXLEN + 1);
	s.rbuf = malloc(SV_MAXLEN + 1);
	if (!ret && s.sbuf && s.rbuf)
		ret = sv_send(&s, name, namelen);
	else
		ret = -1;
	if (!ret)
		ret = sv_exchange(&s, 0, round);
	free(s.sbuf);
	free(s.rbuf);
	sv_close(&s);
	if (!ret)
		printf("client: node %s port %s: %zu sizes exchanged\n", node, port, SV_NSIZES);
	return ret;
}

int main(void)
{
	char host[256], port[16];
	const char *nodes[2] = {"127.0.0.1", host};
	int pfd[2], status = 0;
	pid_t pid;
	int ret = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	if (pipe(pfd) < 0) {
		perror("pipe");
		return 1;
	}
	alarm(SV_ALARM_S);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid > 0) {
		close(pfd[0]);
		ret = sv_server(pfd[1], 2);
		close(pfd[1]);
		if (ret)
			kill(pid, SIGKILL);
		if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			ret = -1;
		printf("%s\n", ret ? "FAIL" : "PASS");
		return ret ? 1 : 0;
	}
	close(pfd[1]);
	if (read(pfd[0], port, sizeof(port)) != (ssize_t)sizeof(port)) {
		fprintf(stderr, "FAIL client: no port from the server\n");
		_exit(1);
	}
	port[sizeof(port) - 1] = '\0';
	for (unsigned r = 0; r < 2 && !ret; r++)
		ret = sv_client(nodes[r], port, r);
	_exit(ret ? 1 : 0);
}
