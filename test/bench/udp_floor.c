/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * udp_floor.c - this machine's raw UDP one-way time with busy polling: the
 * physical floor any transport over UDP (opx's udp wire, libfabric's udp)
 * can approach between two hosts, measured the same way and in the same
 * run (scripts/bench-hosts.sh).
 *
 *   server:  udp_floor -s [-p PORT] [-T SECS]
 *   client:  udp_floor -c HOST [-p PORT] [-n N] [-W N] [-S SIZE] [-T SECS] [-u]
 *
 * The client connects its socket to the server (the kernel then keeps
 * the route, and finds the socket of an arriving datagram by early demux
 * without a route lookup); with -u it does not, and names the server in
 * every sendto like the server does for its answer: what a transport
 * with one socket for many peers (opx's udp wire, libfabric's udp) pays.
 *
 * The server echoes every datagram back to its sender.  The client sends
 * SIZE bytes (default 8), waits for the echo and repeats: -W round trips
 * of warm-up (default 1000), then -n measured ones (default 20000).  Both
 * sides busy-poll: every receive is recv(MSG_DONTWAIT) in a loop, so no
 * call ever sleeps in the kernel and the figure holds no wake-up latency
 * (the same as a provider that spins on its completion queue).  The
 * client prints one machine-parsable line:
 *
 *   udp_floor size=8 one_way_us=4.21 rtt_median_us=8.42 rtt_mean_us=8.60
 *             rtt_min_us=7.90 iters=20000 lost=0
 *
 * one_way_us is half the MEDIAN round trip (not the mean): a round trip
 * the scheduler or an interrupt delayed is one-sided noise, and the
 * median ignores it where the mean would not.  The mean is printed too.
 *
 * Each datagram carries its sequence number in its first 4 bytes (so
 * SIZE is at least 4); an echo of another sequence number (the late
 * answer to a retried one) is ignored.  A datagram lost either way is sent
 * again after 100 ms without an answer and counted in "lost"; a round trip
 * that needed a resend is left out of the figures (it measures the
 * timeout, not the path).  At the end the client sends the server a few
 * "quit" datagrams (sequence 0xffffffff).
 *
 * A test program: -T (default 30 s) bounds either side.  The client exits
 * 1 if it did not finish in time; the server exits 0 on "quit", or at the
 * time limit if it echoed anything, else 1.  EADDRINUSE on the server's
 * bind is reported as such ("Address already in use") for the caller to
 * retry on another port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define UF_DEFAULT_PORT 47992
#define UF_MAX_SIZE 65507 /* the largest IPv4 UDP payload */
#define UF_MAX_ITERS 10000000UL
#define UF_RETRY_NS 100000000ULL /* 100 ms */
#define UF_QUIT 0xffffffffu
#define UF_QUIT_SENDS 5

struct uf_opts {
	int server;
	const char *host;
	unsigned long port;
	unsigned long iters;
	unsigned long warmup;
	unsigned long size;
	unsigned long timeout_s;
	int unconnected;
};

static uint64_t uf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void uf_usage(void)
{
	fprintf(stderr,
		"usage: udp_floor -s [-p PORT] [-T SECS]\n"
		"       udp_floor -c HOST [-p PORT] [-n N] [-W N] [-S SIZE] [-T SECS] [-u]\n"
		"  -p PORT   UDP port (default %d)\n"
		"  -n N      measured round trips (default 20000)\n"
		"  -W N      warm-up round trips (default 1000)\n"
		"  -S SIZE   datagram payload in bytes, 4..%d (default 8)\n"
		"  -T SECS   time limit of the whole run (default 30)\n"
		"  -u        client: do not connect, name the server in each sendto\n",
		UF_DEFAULT_PORT, UF_MAX_SIZE);
}

static int uf_parse_ul(const char *s, const char *what, unsigned long lo, unsigned long hi,
		       unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi || s[0] == '-') {
		fprintf(stderr, "udp_floor: bad %s '%s' (%lu..%lu)\n", what, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static void uf_put_seq(unsigned char *buf, uint32_t seq)
{
	uint32_t n = htonl(seq);

	memcpy(buf, &n, sizeof(n));
}

static uint32_t uf_get_seq(const unsigned char *buf)
{
	uint32_t n;

	memcpy(&n, buf, sizeof(n));
	return ntohl(n);
}

static int uf_server(const struct uf_opts *o)
{
	struct sockaddr_in sa, peer;
	socklen_t plen;
	unsigned char *buf;
	unsigned long echoed = 0;
	uint64_t deadline = uf_now_ns() + o->timeout_s * 1000000000ULL;
	uint32_t spins = 0;
	ssize_t n;
	int fd;

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("udp_floor: socket");
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	sa.sin_port = htons((uint16_t)o->port);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		/* perror says "Address already in use" for EADDRINUSE. */
		perror("udp_floor: bind");
		close(fd);
		return 1;
	}
	buf = malloc(UF_MAX_SIZE);
	if (!buf) {
		fprintf(stderr, "udp_floor: out of memory\n");
		close(fd);
		return 1;
	}
	printf("udp_floor server port=%lu\n", o->port);
	fflush(stdout);
	for (;;) {
		plen = sizeof(peer);
		n = recvfrom(fd, buf, UF_MAX_SIZE, MSG_DONTWAIT, (struct sockaddr *)&peer, &plen);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				perror("udp_floor: recvfrom");
				break;
			}
			/* The clock only now and then: it is cheap, not free. */
			if (++spins % 1024 == 0 && uf_now_ns() > deadline) {
				fprintf(stderr, "udp_floor: server time limit (%lu s), %lu echoed\n",
					o->timeout_s, echoed);
				break;
			}
			continue;
		}
		if (n >= 4 && uf_get_seq(buf) == UF_QUIT) {
			free(buf);
			close(fd);
			return 0;
		}
		/* A lost echo is the client's to retry; nothing to do here. */
		if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&peer, plen) == n)
			echoed++;
	}
	free(buf);
	close(fd);
	return echoed ? 0 : 1;
}

static int uf_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One round trip of sequence number seq.  Returns the round-trip time in
 * ns of the last send (0 when it needed a resend: left out of the
 * figures), or UINT64_MAX at the deadline or on an error. */
static uint64_t uf_round_trip(int fd, const struct sockaddr *to, socklen_t tolen, unsigned char *tx,
			      unsigned char *rx, size_t size, uint32_t seq, uint64_t deadline,
			      unsigned long *lost)
{
	uint64_t t0, now;
	int resent = 0;
	ssize_t n;

	uf_put_seq(tx, seq);
	t0 = uf_now_ns();
	for (;;) {
		/* ECONNREFUSED: an earlier datagram met no socket (ICMP port
		 * unreachable); the timeout below sends again. */
		if (sendto(fd, tx, size, 0, to, tolen) != (ssize_t)size && errno != ECONNREFUSED &&
		    errno != EAGAIN && errno != ENOBUFS && errno != EINTR) {
			perror("udp_floor: send");
			return UINT64_MAX;
		}
		for (;;) {
			n = recv(fd, rx, size, MSG_DONTWAIT);
			now = uf_now_ns();
			if (n == (ssize_t)size && uf_get_seq(rx) == seq)
				return resent ? 0 : now - t0;
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNREFUSED) {
				perror("udp_floor: recv");
				return UINT64_MAX;
			}
			if (now > deadline)
				return UINT64_MAX;
			if (now - t0 > UF_RETRY_NS)
				break;
		}
		(*lost)++;
		resent = 1;
		t0 = uf_now_ns();
	}
}

static int uf_client(const struct uf_opts *o)
{
	struct addrinfo hints, *res = NULL;
	char port[16];
	unsigned char *tx, *rx;
	double *rtt;
	unsigned long lost = 0, i, k = 0;
	uint64_t deadline = uf_now_ns() + o->timeout_s * 1000000000ULL, t;
	double sum = 0;
	struct sockaddr_in to;
	const struct sockaddr *dst = NULL; /* NULL: connected */
	socklen_t tolen = 0;
	int fd, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	snprintf(port, sizeof(port), "%lu", o->port);
	rc = getaddrinfo(o->host, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "udp_floor: %s: %s\n", o->host, gai_strerror(rc));
		return 1;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || (!o->unconnected && connect(fd, res->ai_addr, res->ai_addrlen))) {
		perror("udp_floor: socket/connect");
		freeaddrinfo(res);
		return 1;
	}
	if (o->unconnected) {
		memcpy(&to, res->ai_addr, sizeof(to));
		dst = (const struct sockaddr *)&to;
		tolen = sizeof(to);
	}
	freeaddrinfo(res);
	tx = calloc(1, o->size);
	rx = calloc(1, o->size);
	rtt = calloc(o->iters, sizeof(*rtt));
	if (!tx || !rx || !rtt) {
		fprintf(stderr, "udp_floor: out of memory\n");
		return 1;
	}
	for (i = 0; i < o->warmup + o->iters; i++) {
		t = uf_round_trip(fd, dst, tolen, tx, rx, o->size, (uint32_t)i, deadline, &lost);
		if (t == UINT64_MAX) {
			fprintf(stderr,
				"udp_floor: no answer to round trip %lu of %lu within the time limit "
				"(%lu s), %lu lost\n",
				i, o->warmup + o->iters, o->timeout_s, lost);
			return 1;
		}
		if (i >= o->warmup && t) {
			rtt[k] = (double)t / 1000.0;
			sum += rtt[k];
			k++;
		}
	}
	uf_put_seq(tx, UF_QUIT);
	for (i = 0; i < UF_QUIT_SENDS; i++)
		(void)sendto(fd, tx, o->size, 0, dst, tolen);
	if (!k) {
		fprintf(stderr, "udp_floor: every measured round trip needed a resend\n");
		return 1;
	}
	qsort(rtt, k, sizeof(*rtt), uf_cmp_double);
	{
		double med = k % 2 ? rtt[k / 2] : (rtt[k / 2 - 1] + rtt[k / 2]) / 2;

		printf("udp_floor size=%lu one_way_us=%.2f rtt_median_us=%.2f rtt_mean_us=%.2f "
		       "rtt_min_us=%.2f iters=%lu lost=%lu%s\n",
		       o->size, med / 2, med, sum / (double)k, rtt[0], k, lost,
		       o->unconnected ? " unconnected=1" : "");
	}
	free(rtt);
	free(rx);
	free(tx);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct uf_opts o = {
		.server = 0, .host = NULL, .port = UF_DEFAULT_PORT, .iters = 20000,
		.warmup = 1000, .size = 8, .timeout_s = 30,
	};
	int c;

	while ((c = getopt(argc, argv, "sc:p:n:W:S:T:uh")) != -1) {
		switch (c) {
		case 's': o.server = 1; break;
		case 'u': o.unconnected = 1; break;
		case 'c': o.host = optarg; break;
		case 'p':
			if (uf_parse_ul(optarg, "port", 1, 65535, &o.port))
				return 1;
			break;
		case 'n':
			if (uf_parse_ul(optarg, "round trips", 1, UF_MAX_ITERS, &o.iters))
				return 1;
			break;
		case 'W':
			if (uf_parse_ul(optarg, "warm-up", 0, UF_MAX_ITERS, &o.warmup))
				return 1;
			break;
		case 'S':
			if (uf_parse_ul(optarg, "size", 4, UF_MAX_SIZE, &o.size))
				return 1;
			break;
		case 'T':
			if (uf_parse_ul(optarg, "time limit", 1, 86400, &o.timeout_s))
				return 1;
			break;
		default:
			uf_usage();
			return c == 'h' ? 0 : 1;
		}
	}
	if (optind < argc || o.server == !!o.host) {
		uf_usage();
		return 1;
	}
	return o.server ? uf_server(&o) : uf_client(&o);
}
