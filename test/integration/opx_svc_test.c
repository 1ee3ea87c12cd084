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

#include "opx_pair.h"

#define SV_ALARM_S 120
#define SV_NAME_MAX 256
#define SV_MAXLEN (256 * 1024)

static const size_t sv_sizes[] = {0, 1, 16, 17, 1000, 8192, 8193, 65536, SV_MAXLEN};
#define SV_NSIZES (sizeof(sv_sizes) / sizeof(sv_sizes[0]))

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

static int sv_send(struct pair *s, const void *buf, size_t len)
{
	struct fi_context ctx;

	if (pair_post_send(s, buf, len, false, 0, &ctx))
		return -1;
	return pair_wait(s, &ctx, NULL, NULL);
}

/* Ping-pong every size: the client sends, the server checks and answers. */
static int sv_exchange(struct pair *s, int server, unsigned round)
{
	for (size_t k = 0; k < SV_NSIZES; k++) {
		size_t len = sv_sizes[k];
		unsigned seed = round * 100u + (unsigned)k;

		if (server) {
			if (pair_recv_check(s, len, false, 0, FI_ADDR_UNSPEC, seed, NULL))
				return -1;
			pair_fill(s, len, seed + 50u);
			if (sv_send(s, s->sbuf, len))
				return -1;
		} else {
			pair_fill(s, len, seed);
			if (sv_send(s, s->sbuf, len) ||
			    pair_recv_check(s, len, false, 0, FI_ADDR_UNSPEC, seed + 50u, NULL))
				return -1;
		}
	}
	return 0;
}

static int sv_server(int port_fd, unsigned rounds)
{
	struct pair s = {.who = "server"};
	struct fi_info *h = sv_hints();
	char port[16];
	int ret = -FI_EADDRINUSE;

	if (!h)
		return -1;
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	for (int tries = 0; tries < 32 && ret == -FI_EADDRINUSE; tries++) {
		snprintf(port, sizeof(port), "%d", 10000 + rand() % 50000);
		pair_close(&s);
		ret = fi_getinfo(fi_version(), NULL, port, FI_SOURCE, h, &s.info);
		if (ret) {
			fi_freeinfo(h);
			PAIR_FAIL(&s, "fi_getinfo(NULL, %s, FI_SOURCE): %s", port, fi_strerror(-ret));
		}
		if (!s.info->src_addr || !s.info->src_addrlen) {
			fi_freeinfo(h);
			PAIR_FAIL(&s, "fi_getinfo returned no src_addr");
		}
		if (pair_open_domain(&s))
			break;
		ret = pair_open_ep(&s);
	}
	fi_freeinfo(h);
	if (ret) {
		pair_close(&s);
		PAIR_FAIL(&s, "endpoint on port %s: %s", port, fi_strerror(-ret));
	}
	/* the service number is all the client is told */
	if (write(port_fd, port, sizeof(port)) != (ssize_t)sizeof(port)) {
		pair_close(&s);
		PAIR_FAIL(&s, "cannot tell the port");
	}
	ret = pair_bufs(&s, SV_MAXLEN);
	for (unsigned r = 0; r < rounds && !ret; r++) {
		struct fi_context ctx;
		char name[SV_NAME_MAX];

		/* the client's name arrives in-band */
		ret = -1;
		if (fi_recv(s.ep, name, sizeof(name), NULL, FI_ADDR_UNSPEC, &ctx) ||
		    pair_wait(&s, &ctx, NULL, NULL))
			break;
		if (fi_av_insert(s.av, name, 1, &s.peer, 0, NULL) != 1) {
			fprintf(stderr, "FAIL server: fi_av_insert of the client's name\n");
			break;
		}
		ret = sv_exchange(&s, 1, r);
	}
	pair_free(&s);
	if (!ret)
		printf("server: %u clients served on port %s\n", rounds, port);
	return ret;
}

static int sv_client(const char *node, const char *port, unsigned round)
{
	struct pair s = {.who = "client"};
	struct fi_info *h = sv_hints();
	char name[SV_NAME_MAX];
	size_t namelen = sizeof(name);
	int ret;

	if (!h)
		return -1;
	ret = fi_getinfo(fi_version(), node, port, 0, h, &s.info);
	fi_freeinfo(h);
	if (ret)
		PAIR_FAIL(&s, "fi_getinfo(%s, %s, 0): %s", node, port, fi_strerror(-ret));
	if (!s.info->dest_addr || !s.info->dest_addrlen)
		PAIR_FAIL(&s, "fi_getinfo(%s, %s) returned no dest_addr", node, port);
	ret = pair_open_domain(&s);
	if (!ret && (ret = pair_open_ep(&s)))
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
	if (!ret)
		ret = pair_bufs(&s, SV_MAXLEN);
	if (!ret)
		ret = sv_send(&s, name, namelen);
	if (!ret)
		ret = sv_exchange(&s, 0, round);
	pair_free(&s);
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
