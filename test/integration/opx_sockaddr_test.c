/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_sockaddr_test.c - two processes that find each other with socket
 * addresses only (addr_format FI_SOCKADDR_IN, or FI_SOCKADDR), the way
 * tools and middleware that exchange socket addresses do:
 *
 *   server: fi_getinfo(hints: FI_SOCKADDR_IN) -> endpoint on any port;
 *           fi_getname is a struct sockaddr_in; fi_av_straddr of it,
 *           "fi_sockaddr_in://a.b.c.d:port", is written to FILE (to a
 *           temporary name, then renamed: the file is whole or absent)
 *   client: reads FILE, parses address and port, fi_getinfo(address,
 *           port) -> dest_addr is that sockaddr_in -> fi_av_insert; sends
 *           its own fi_getname (a sockaddr_in) in-band
 *   server: inserts the client's sockaddr_in; then every message size
 *           both ways, directed receives, FI_SOURCE checked, every byte
 *           checked.
 *
 * On one host the names resolve to shared memory (the service registry);
 * between hosts, or with FI_OPX_WIRE=udp, the udp wire carries them.
 * test/integration/sockaddr.sh runs it all ways.  Every wait is bounded;
 * the whole run is under alarm().
 *
 *   opx_sockaddr_test -s FILE [-a FI_SOCKADDR]      server
 *   opx_sockaddr_test -c FILE [-a FI_SOCKADDR]      client
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define SA_WAIT_MS 20000
#define SA_FILE_MS 30000 /* the client waits this long for the server's file */
#define SA_ALARM_S 150
#define SA_MAXLEN (1024 * 1024)
#define SA_TAG_HELLO 1u
#define SA_TAG_ACK 2u
#define SA_TAG_DATA 0x100u

static const size_t sa_sizes[] = {0, 1, 16, 17, 1000, 8191, 8192, 8193, 65536, SA_MAXLEN};
#define SA_NSIZES (sizeof(sa_sizes) / sizeof(sa_sizes[0]))

struct sa {
	const char *who;
	uint32_t fmt;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer;
	struct sockaddr_in name, peer_name;
	uint8_t *sbuf, *rbuf;
};

#define SA_FAIL(s, ...)                                                                            \
	do {                                                                                       \
		fprintf(stderr, "FAIL %s: ", (s)->who);                                            \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		return -1;                                                                         \
	} while (0)

static int64_t sa_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint8_t sa_byte(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + 1u);
}

static const char *sa_str(struct sa *s, const struct sockaddr_in *sin, char *buf, size_t len)
{
	size_t n = len;

	if (!fi_av_straddr(s->av, sin, buf, &n) || n > len)
		snprintf(buf, len, "(no string)");
	return buf;
}

/* A struct sockaddr_in of AF_INET, exactly: what a socket format names. */
static int sa_check_sin(struct sa *s, const void *addr, size_t len, const char *what)
{
	const struct sockaddr_in *sin = addr;

	if (!addr || len != sizeof(*sin) || sin->sin_family != AF_INET || !sin->sin_port ||
	    !sin->sin_addr.s_addr)
		SA_FAIL(s, "%s is not a struct sockaddr_in with an address and a port (%zu bytes)",
			what, len);
	return 0;
}

static int sa_open(struct sa *s, const char *node, const char *service)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fi_info *h = fi_allocinfo();
	size_t len = sizeof(s->name);
	int ret;

	if (!h)
		SA_FAIL(s, "fi_allocinfo");
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV;
	h->addr_format = s->fmt;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->fabric_attr->prov_name = strdup("opx");
	ret = fi_getinfo(FI_VERSION(1, 17), node, service, 0, h, &s->info);
	fi_freeinfo(h);
	if (ret)
		SA_FAIL(s, "fi_getinfo(%s, %s, %s): %s", node ? node : "NULL",
			service ? service : "NULL", fi_tostr(&s->fmt, FI_TYPE_ADDR_FORMAT),
			fi_strerror(-ret));
	if (s->info->addr_format != s->fmt)
		SA_FAIL(s, "fi_getinfo gave addr_format %u, not %u", s->info->addr_format, s->fmt);
	if (s->info->src_addrlen != sizeof(struct sockaddr_in))
		SA_FAIL(s, "src_addr of %zu bytes", s->info->src_addrlen);
	ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL);
	if (!ret)
		ret = fi_domain(s->fabric, s->info, &s->domain, NULL);
	if (!ret)
		ret = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	if (!ret)
		ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	if (!ret)
		ret = fi_endpoint(s->domain, s->info, &s->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!ret)
		ret = fi_enable(s->ep);
	if (!ret)
		ret = fi_getname(&s->ep->fid, &s->name, &len);
	if (ret)
		SA_FAIL(s, "open: %s", fi_strerror(-ret));
	if (sa_check_sin(s, &s->name, len, "fi_getname"))
		return -1;
	s->sbuf = malloc(SA_MAXLEN + 1);
	s->rbuf = malloc(SA_MAXLEN + 1);
	if (!s->sbuf || !s->rbuf)
		SA_FAIL(s, "malloc");
	return 0;
}

static void sa_close(struct sa *s)
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
	free(s->sbuf);
	free(s->rbuf);
}

/* The completion of ctx, and its source (one operation in flight per
 * direction, both on the CQ: a send's completion may come first). */
static int sa_wait(struct sa *s, void *ctx, struct fi_cq_tagged_entry *out, fi_addr_t *src)
{
	int64_t end = sa_now_ms() + SA_WAIT_MS;
	static struct fi_cq_tagged_entry early[4];
	static void *early_ctx[4];

	for (int i = 0; i < 4; i++) {
		if (early_ctx[i] == ctx) {
			early_ctx[i] = NULL;
			if (out)
				*out = early[i];
			return 0;
		}
	}
	while (sa_now_ms() <= end) {
		struct fi_cq_tagged_entry e;
		fi_addr_t from = FI_ADDR_NOTAVAIL;
		ssize_t n = fi_cq_readfrom(s->cq, &e, 1, &from);

		if (n == 1 && e.op_context == ctx) {
			if (out)
				*out = e;
			if (src)
				*src = from;
			return 0;
		}
		if (n == 1) { /* the other direction's: keep it */
			int i = 0;

			while (i < 4 && early_ctx[i])
				i++;
			if (i == 4)
				SA_FAIL(s, "unexpected completion %p", e.op_context);
			early[i] = e;
			early_ctx[i] = e.op_context;
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			fi_cq_readerr(s->cq, &ee, 0);
			SA_FAIL(s, "error completion: %s", fi_strerror(ee.err));
		}
		if (n != -FI_EAGAIN)
			SA_FAIL(s, "fi_cq_read: %s", fi_strerror((int)-n));
	}
	SA_FAIL(s, "no completion within %d ms", SA_WAIT_MS);
}

static int sa_send(struct sa *s, const void *buf, size_t len, uint64_t tag, struct fi_context *ctx)
{
	int64_t end = sa_now_ms() + SA_WAIT_MS;
	ssize_t ret;

	while ((ret = fi_tsend(s->ep, buf, len, NULL, s->peer, tag, ctx)) == -FI_EAGAIN &&
	       sa_now_ms() <= end)
		(void)fi_cq_read(s->cq, NULL, 0);
	if (ret)
		SA_FAIL(s, "fi_tsend(%zu): %s", len, fi_strerror((int)-ret));
	return 0;
}

/* Receive a message of exactly len bytes with seed's pattern from the
 * peer (a directed receive), and check FI_SOURCE named the peer. */
static int sa_recv_check(struct sa *s, size_t len, uint64_t tag, unsigned seed)
{
	struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;

	memset(s->rbuf, 0xee, len + 1);
	if (fi_trecv(s->ep, s->rbuf, SA_MAXLEN, NULL, s->peer, tag, 0, &ctx))
		SA_FAIL(s, "fi_trecv");
	if (sa_wait(s, &ctx, &e, &src))
		return -1;
	if (e.len != len)
		SA_FAIL(s, "received %zu bytes, expected %zu", e.len, len);
	if (src != s->peer)
		SA_FAIL(s, "a %zu-byte message from fi_addr %llu, the peer is %llu", len,
			(unsigned long long)src, (unsigned long long)s->peer);
	for (size_t i = 0; i < len; i++) {
		if (s->rbuf[i] != sa_byte(seed, i))
			SA_FAIL(s, "byte %zu of a %zu-byte message is wrong", i, len);
	}
	return 0;
}

/* Every size, client first; the server answers with another pattern. */
static int sa_exchange(struct sa *s, int server)
{
	for (size_t k = 0; k < SA_NSIZES; k++) {
		size_t len = sa_sizes[k];
		unsigned seed = (unsigned)k * 2u + 1u;
		struct fi_context ctx;

		if (server) {
			if (sa_recv_check(s, len, SA_TAG_DATA + k, seed))
				return -1;
			seed++;
		}
		for (size_t i = 0; i < len; i++)
			s->sbuf[i] = sa_byte(seed, i);
		if (sa_send(s, s->sbuf, len, SA_TAG_DATA + k, &ctx))
			return -1;
		if (!server && sa_recv_check(s, len, SA_TAG_DATA + k, seed + 1))
			return -1;
		if (sa_wait(s, &ctx, NULL, NULL))
			return -1;
	}
	return 0;
}

/* The peer's socket address is in the AV as inserted. */
static int sa_check_lookup(struct sa *s)
{
	struct sockaddr_in got;
	size_t len = sizeof(got);
	char a[64], b[64];

	if (fi_av_lookup(s->av, s->peer, &got, &len))
		SA_FAIL(s, "fi_av_lookup");
	if (sa_check_sin(s, &got, len, "fi_av_lookup"))
		return -1;
	if (memcmp(&got, &s->peer_name, sizeof(got)))
		SA_FAIL(s, "fi_av_lookup gave %s, %s was inserted", sa_str(s, &got, a, sizeof(a)),
			sa_str(s, &s->peer_name, b, sizeof(b)));
	return 0;
}

static int sa_server(struct sa *s, const char *file)
{
	char str[64], tmp[4096], peer[64];
	size_t len = sizeof(str);
	struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	fi_addr_t src = 0;
	FILE *f;

	if (sa_open(s, NULL, NULL))
		return -1;
	if (!fi_av_straddr(s->av, &s->name, str, &len) || len > sizeof(str) ||
	    strncmp(str, "fi_sockaddr_in://", 17))
		SA_FAIL(s, "fi_av_straddr of our name");
	/* what a client reads is whole: written aside, then renamed */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid());
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", str) < 0 || fclose(f) || rename(tmp, file))
		SA_FAIL(s, "cannot write %s: %s", file, strerror(errno));
	printf("server: listening at %s\n", str);

	/* the client's name arrives in-band, from a source we do not know */
	if (fi_trecv(s->ep, &s->peer_name, sizeof(s->peer_name), NULL, FI_ADDR_UNSPEC,
		     SA_TAG_HELLO, 0, &ctx) ||
	    sa_wait(s, &ctx, &e, &src))
		return -1;
	if (src != FI_ADDR_NOTAVAIL)
		SA_FAIL(s, "a message from a source not in the AV came from fi_addr %llu",
			(unsigned long long)src);
	if (sa_check_sin(s, &s->peer_name, e.len, "the client's name"))
		return -1;
	if (fi_av_insert(s->av, &s->peer_name, 1, &s->peer, 0, NULL) != 1)
		SA_FAIL(s, "fi_av_insert of the client's name %s",
			sa_str(s, &s->peer_name, peer, sizeof(peer)));
	if (sa_check_lookup(s))
		return -1;
	if (sa_send(s, &s->name, sizeof(s->name), SA_TAG_ACK, &ctx) || sa_wait(s, &ctx, NULL, NULL))
		return -1;
	if (sa_exchange(s, 1))
		return -1;
	printf("server: client %s: %zu sizes exchanged\n",
	       sa_str(s, &s->peer_name, peer, sizeof(peer)), SA_NSIZES);
	return 0;
}

/* "fi_sockaddr_in://a.b.c.d:port" from the file, once it is there. */
static int sa_read_file(struct sa *s, const char *file, char *ip, size_t iplen, char *port)
{
	int64_t end = sa_now_ms() + SA_FILE_MS;
	char line[128];
	FILE *f;

	while (!(f = fopen(file, "r"))) {
		if (errno != ENOENT || sa_now_ms() > end)
			SA_FAIL(s, "no server address in %s: %s", file, strerror(errno));
		usleep(10000);
	}
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		SA_FAIL(s, "%s is empty", file);
	}
	fclose(f);
	if (sscanf(line, "fi_sockaddr_in://%15[0-9.]:%5[0-9]", ip, port) != 2 || iplen < 16)
		SA_FAIL(s, "%s holds no fi_sockaddr_in address: %s", file, line);
	return 0;
}

static int sa_client(struct sa *s, const char *file)
{
	char ip[16], port[6], str[64], want[64];
	size_t len = sizeof(str);
	struct fi_context ctx, rctx;
	struct sockaddr_in ack;

	if (sa_read_file(s, file, ip, sizeof(ip), port))
		return -1;
	/* fi_getinfo turns node and service into the server's sockaddr_in */
	if (sa_open(s, ip, port))
		return -1;
	if (sa_check_sin(s, s->info->dest_addr, s->info->dest_addrlen, "dest_addr"))
		return -1;
	memcpy(&s->peer_name, s->info->dest_addr, sizeof(s->peer_name));
	if (fi_av_insert(s->av, &s->peer_name, 1, &s->peer, 0, NULL) != 1)
		SA_FAIL(s, "fi_av_insert of the server's %s:%s", ip, port);
	if (sa_check_lookup(s))
		return -1;
	snprintf(want, sizeof(want), "fi_sockaddr_in://%s:%s", ip, port);
	if (!fi_av_straddr(s->av, &s->peer_name, str, &len) || strcmp(str, want))
		SA_FAIL(s, "fi_av_straddr of dest_addr is not %s", want);
	printf("client: server at %s, we are %s\n", str, sa_str(s, &s->name, want, sizeof(want)));

	/* our name, in-band; the server answers with its own, from itself */
	if (fi_trecv(s->ep, &ack, sizeof(ack), NULL, s->peer, SA_TAG_ACK, 0, &rctx) ||
	    sa_send(s, &s->name, sizeof(s->name), SA_TAG_HELLO, &ctx) || sa_wait(s, &ctx, NULL, NULL) ||
	    sa_wait(s, &rctx, NULL, NULL))
		return -1;
	if (memcmp(&ack, &s->peer_name, sizeof(ack)))
		SA_FAIL(s, "the server names itself otherwise than its file did");
	if (sa_exchange(s, 0))
		return -1;
	printf("client: %zu sizes exchanged\n", SA_NSIZES);
	return 0;
}

int main(int argc, char **argv)
{
	struct sa s = {.fmt = FI_SOCKADDR_IN};
	const char *file = NULL;
	int server = -1, opt, ret;
	bool bad = false;

	setvbuf(stdout, NULL, _IONBF, 0);
	while ((opt = getopt(argc, argv, "s:c:a:")) != -1) {
		switch (opt) {
		case 's':
		case 'c':
			server = opt == 's';
			file = optarg;
			break;
		case 'a':
			if (!strcmp(optarg, "FI_SOCKADDR"))
				s.fmt = FI_SOCKADDR;
			else
				bad = bad || strcmp(optarg, "FI_SOCKADDR_IN");
			break;
		default:
			bad = true;
		}
	}
	if (bad || server < 0 || !file || optind != argc) {
		fprintf(stderr, "usage: %s -s FILE | -c FILE [-a FI_SOCKADDR_IN|FI_SOCKADDR]\n",
			argv[0]);
		return 2;
	}
	alarm(SA_ALARM_S);
	s.who = server ? "server" : "client";
	ret = server ? sa_server(&s, file) : sa_client(&s, file);
	sa_close(&s);
	printf("%s %s\n", s.who, ret ? "FAIL" : "PASS");
	return ret ? 1 : 0;
}
