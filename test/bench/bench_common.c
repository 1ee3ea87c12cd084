/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_common.c - helpers shared by the benchmark programs; see
 * bench_common.h.  Everything here is setup or out-of-band traffic: none
 * of it runs inside a timed loop.
 */
#include "bench_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

static const char *bench_prog = "bench";

/*
 * The alarm handler may only make async-signal-safe calls, so its whole
 * message is formatted here, when the alarm is armed.
 */
static char bench_alarm_msg[128];
static size_t bench_alarm_len;

void bench_init(const char *prog)
{
	bench_prog = prog;
}

void bench_die(const char *what, int ret)
{
	fprintf(stderr, "%s: %s: %s (%d)\n", bench_prog, what,
		ret < 0 ? fi_strerror(-ret) : strerror(errno), ret);
	exit(1);
}

void bench_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void bench_on_alarm(int sig)
{
	ssize_t n;

	(void)sig;
	n = write(STDERR_FILENO, bench_alarm_msg, bench_alarm_len);
	(void)n;
	_exit(3);
}

void bench_alarm_arm(unsigned int secs)
{
	struct sigaction sa;
	int n;

	n = snprintf(bench_alarm_msg, sizeof(bench_alarm_msg), "%s: timeout, giving up\n",
		     bench_prog);
	bench_alarm_len = n < 0 ? 0 : (size_t)n < sizeof(bench_alarm_msg)
					   ? (size_t)n : sizeof(bench_alarm_msg) - 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = bench_on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(secs);
}

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

unsigned long bench_parse_ul(const char *s, const char *what, unsigned long min,
			     unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v < min || v > max)
		bench_fail("bad %s '%s' (%lu..%lu)", what, s, min, max);
	return v;
}

void bench_usage(const char *argv0, unsigned int default_port, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr,
		"usage: %s [options] [server_addr]\n"
		"  -p PROV   libfabric provider (default opx)\n"
		"  -P PORT   TCP port for the address exchange (default %u)\n",
		argv0, default_port);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("  -T SECS   give up after SECS seconds (default 60)\n"
	      "  -v        verbose\n",
	      stderr);
}

/* ---- out-of-band socket -------------------------------------------- */

void bench_sock_read(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			bench_fail("socket read failed");
		p += n;
		len -= (size_t)n;
	}
}

void bench_sock_write(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			bench_fail("socket write failed");
		p += n;
		len -= (size_t)n;
	}
}

int bench_sock_server(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, lfd, fd;

	sa.sin_addr.s_addr = htonl(INADDR_ANY); /* clients on other hosts too */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		bench_die("socket", 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		bench_die("bind/listen", 0);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		bench_die("accept", 0);
	close(lfd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int bench_sock_client(const char *host, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		bench_fail("server_addr must be an IPv4 address");
	/* The server may still be starting: retry, bounded by the alarm. */
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			bench_die("socket", 0);
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		usleep(50 * 1000);
	}
}

void bench_sock_sync(int fd, void *buf, size_t len, void (*progress)(void *), void *arg)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	bench_sock_write(fd, buf, len);
	for (;;) {
		int r = poll(&pfd, 1, 0);

		if (r > 0)
			break;
		if (r < 0 && errno != EINTR)
			bench_die("poll", 0);
		progress(arg);
	}
	bench_sock_read(fd, buf, len);
}

/* ---- fabric ----------------------------------------------------------- */

void bench_fabric_getinfo(struct bench_fabric *fab, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		bench_die("fi_allocinfo", -FI_ENOMEM);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	/* Every op carries its own fi_context2, so both modes are fine. */
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov);

	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fab->info);
	fi_freeinfo(hints);
	if (ret)
		bench_die("fi_getinfo", ret);
}

void bench_fabric_open(struct bench_fabric *fab, enum fi_cq_format cq_format, size_t cq_size)
{
	struct fi_cq_attr cq_attr = { .format = cq_format, .wait_obj = FI_WAIT_NONE,
				      .size = cq_size };
	struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
	int ret;

	ret = fi_fabric(fab->info->fabric_attr, &fab->fabric, NULL);
	if (ret)
		bench_die("fi_fabric", ret);
	ret = fi_domain(fab->fabric, fab->info, &fab->domain, NULL);
	if (ret)
		bench_die("fi_domain", ret);
	ret = fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL);
	if (ret)
		bench_die("fi_cq_open", ret);
	ret = fi_av_open(fab->domain, &av_attr, &fab->av, NULL);
	if (ret)
		bench_die("fi_av_open", ret);
	ret = fi_endpoint(fab->domain, fab->info, &fab->ep, NULL);
	if (ret)
		bench_die("fi_endpoint", ret);
	ret = fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		bench_die("fi_ep_bind(cq)", ret);
	ret = fi_ep_bind(fab->ep, &fab->av->fid, 0);
	if (ret)
		bench_die("fi_ep_bind(av)", ret);
	ret = fi_enable(fab->ep);
	if (ret)
		bench_die("fi_enable", ret);
}

void bench_fabric_mr_reg(struct bench_fabric *fab, void *buf, size_t len)
{
	int ret;

	/*
	 * opx does not ask for local descriptors, and neither does shm 1.17
	 * (mr_mode FI_MR_VIRT_ADDR only), so normally every op passes NULL.
	 */
	if (!(fab->info->domain_attr->mr_mode & FI_MR_LOCAL))
		return;
	ret = fi_mr_reg(fab->domain, buf, len, FI_SEND | FI_RECV, 0, 0, 0, &fab->mr, NULL);
	if (ret)
		bench_die("fi_mr_reg", ret);
	fab->desc = fi_mr_desc(fab->mr);
}

void bench_addr_exchange(struct bench_fabric *fab)
{
	uint8_t mine[BENCH_NAME_MAX], theirs[BENCH_NAME_MAX];
	uint32_t mine_len, theirs_len;
	size_t len = BENCH_NAME_MAX;
	int ret;

	memset(mine, 0, sizeof(mine));
	ret = fi_getname(&fab->ep->fid, mine, &len);
	if (ret)
		bench_die("fi_getname", ret);
	mine_len = htonl((uint32_t)len);
	bench_sock_write(fab->sock, &mine_len, sizeof(mine_len));
	bench_sock_write(fab->sock, mine, sizeof(mine));
	bench_sock_read(fab->sock, &theirs_len, sizeof(theirs_len));
	bench_sock_read(fab->sock, theirs, sizeof(theirs));
	if (ntohl(theirs_len) > BENCH_NAME_MAX)
		bench_fail("peer sent a bad address length");
	ret = fi_av_insert(fab->av, theirs, 1, &fab->peer, 0, NULL);
	if (ret != 1)
		bench_die("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
}

void bench_cq_fail(struct fid_cq *cq, ssize_t ret)
{
	struct fi_cq_err_entry err;

	if (ret != -FI_EAVAIL)
		bench_die("fi_cq_read", (int)ret);
	memset(&err, 0, sizeof(err));
	if (fi_cq_readerr(cq, &err, 0) > 0)
		fprintf(stderr, "%s: completion error: %s (prov errno %d)\n", bench_prog,
			fi_strerror(err.err), err.prov_errno);
	exit(1);
}

void bench_fabric_close(struct bench_fabric *fab)
{
	if (fab->mr)
		fi_close(&fab->mr->fid);
	fi_close(&fab->ep->fid);
	fi_close(&fab->av->fid);
	fi_close(&fab->cq->fid);
	fi_close(&fab->domain->fid);
	fi_close(&fab->fabric->fid);
	fi_freeinfo(fab->info);
}
