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

#include "opx_pair.h"

#define SA_FILE_MS 30000 /* the client waits this long for the server's file */
#define SA_ALARM_S 150
#define SA_MAXLEN (1024 * 1024)
#define SA_TAG_HELLO 1u
#define SA_TAG_ACK 2u
#define SA_TAG_DATA 0x100u

static const size_t sa_sizes[] = {0, 1, 16, 17, 1000, 8191, 8192, 8193, 65536, SA_MAXLEN};
#define SA_NSIZES (sizeof(sa_sizes) / sizeof(sa_sizes[0]))

struct sa {
	struct pair p;
	uint32_t fmt;
	struct sockaddr_in name, peer_name;
};

#define SA_FAIL(s, ...) PAIR_FAIL(&(s)->p, __VA_ARGS__)

static const char *sa_str(struct sa *s, const struct sockaddr_in *sin, char *buf, size_t len)
{
	size_t n = len;

	if (!fi_av_straddr(s->p.av, sin, buf, &n) || n > len)
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
	ret = fi_getinfo(FI_VERSION(1, 17), node, service, 0, h, &s->p.info);
	fi_freeinfo(h);
	if (ret)
		SA_FAIL(s, "fi_getinfo(%s, %s, %s): %s", node ? node : "NULL",
			service ? service : "NULL", fi_tostr(&s->fmt, FI_TYPE_ADDR_FORMAT),
			fi_strerror(-ret));
	if (s->p.info->addr_format != s->fmt)
		SA_FAIL(s, "fi_getinfo gave addr_format %u, not %u", s->p.info->addr_format, s->fmt);
	if (s->p.info->src_addrlen != sizeof(struct sockaddr_in))
		SA_FAIL(s, "src_addr of %zu bytes", s->p.info->src_addrlen);
	if (pair_open_domain(&s->p))
		return -1;
	ret = pair_open_ep(&s->p);
	if (!ret)
		ret = fi_getname(&s->p.ep->fid, &s->name, &len);
	if (ret)
		SA_FAIL(s, "open: %s", fi_strerror(-ret));
	if (sa_check_sin(s, &s->name, len, "fi_getname"))
		return -1;
	return pair_bufs(&s->p, SA_MAXLEN);
}

/* Receive a message of exactly len bytes with seed's pattern from the
 * peer (a directed receive), and check FI_SOURCE named the peer. */
static int sa_recv_check(struct sa *s, size_t len, uint64_t tag, unsigned seed)
{
	fi_addr_t src = FI_ADDR_NOTAVAIL;

	if (pair_recv_check(&s->p, len, true, tag, s->p.peer, seed, &src))
		return -1;
	if (src != s->p.peer)
		SA_FAIL(s, "a %zu-byte message from fi_addr %llu, the peer is %llu", len,
			(unsigned long long)src, (unsigned long long)s->p.peer);
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
		pair_fill(&s->p, len, seed);
		if (pair_post_send(&s->p, s->p.sbuf, len, true, SA_TAG_DATA + k, &ctx))
			return -1;
		if (!server && sa_recv_check(s, len, SA_TAG_DATA + k, seed + 1))
			return -1;
		if (pair_wait(&s->p, &ctx, NULL, NULL))
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

	if (fi_av_lookup(s->p.av, s->p.peer, &got, &len))
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
	if (!fi_av_straddr(s->p.av, &s->name, str, &len) || len > sizeof(str) ||
	    strncmp(str, "fi_sockaddr_in://", 17))
		SA_FAIL(s, "fi_av_straddr of our name");
	/* what a client reads is whole: written aside, then renamed */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid());
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", str) < 0 || fclose(f) || rename(tmp, file))
		SA_FAIL(s, "cannot write %s: %s", file, strerror(errno));
	printf("server: listening at %s\n", str);

	/* the client's name arrives in-band, from a source we do not know */
	if (fi_trecv(s->p.ep, &s->peer_name, sizeof(s->peer_name), NULL, FI_ADDR_UNSPEC,
		     SA_TAG_HELLO, 0, &ctx) ||
	    pair_wait(&s->p, &ctx, &e, &src))
		return -1;
	if (src != FI_ADDR_NOTAVAIL)
		SA_FAIL(s, "a message from a source not in the AV came from fi_addr %llu",
			(unsigned long long)src);
	if (sa_check_sin(s, &s->peer_name, e.len, "the client's name"))
		return -1;
	if (fi_av_insert(s->p.av, &s->peer_name, 1, &s->p.peer, 0, NULL) != 1)
		SA_FAIL(s, "fi_av_insert of the client's name %s",
			sa_str(s, &s->peer_name, peer, sizeof(peer)));
	if (sa_check_lookup(s))
		return -1;
	if (pair_post_send(&s->p, &s->name, sizeof(s->name), true, SA_TAG_ACK, &ctx) || pair_wait(&s->p, &ctx, NULL, NULL))
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
	int64_t end = pair_now_ms() + SA_FILE_MS;
	char line[128];
	FILE *f;

	while (!(f = fopen(file, "r"))) {
		if (errno != ENOENT || pair_now_ms() > end)
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
	if (sa_check_sin(s, s->p.info->dest_addr, s->p.info->dest_addrlen, "dest_addr"))
		return -1;
	memcpy(&s->peer_name, s->p.info->dest_addr, sizeof(s->peer_name));
	if (fi_av_insert(s->p.av, &s->peer_name, 1, &s->p.peer, 0, NULL) != 1)
		SA_FAIL(s, "fi_av_insert of the server's %s:%s", ip, port);
	if (sa_check_lookup(s))
		return -1;
	snprintf(want, sizeof(want), "fi_sockaddr_in://%s:%s", ip, port);
	if (!fi_av_straddr(s->p.av, &s->peer_name, str, &len) || strcmp(str, want))
		SA_FAIL(s, "fi_av_straddr of dest_addr is not %s", want);
	printf("client: server at %s, we are %s\n", str, sa_str(s, &s->name, want, sizeof(want)));

	/* our name, in-band; the server answers with its own, from itself */
	if (fi_trecv(s->p.ep, &ack, sizeof(ack), NULL, s->p.peer, SA_TAG_ACK, 0, &rctx) ||
	    pair_post_send(&s->p, &s->name, sizeof(s->name), true, SA_TAG_HELLO, &ctx) || pair_wait(&s->p, &ctx, NULL, NULL) ||
	    pair_wait(&s->p, &rctx, NULL, NULL))
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
	s.p.who = server ? "server" : "client";
	ret = server ? sa_server(&s, file) : sa_client(&s, file);
	pair_free(&s.p);
	printf("%s %s\n", s.p.who, ret ? "FAIL" : "PASS");
	return ret ? 1 : 0;
}
