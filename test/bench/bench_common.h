/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_common.h - what the libfabric benchmark programs (opx_msgrate,
 * opx_bw) and memcpy_bw share: fatal-error and option helpers, the
 * out-of-band TCP socket that carries settings and fabric addresses, and
 * the setup and teardown of one RDM endpoint with its CQ and AV.
 *
 * These are test programs, not library code: every helper here reports a
 * failure on stderr, prefixed with the name given to bench_init(), and
 * exits with status 1.  The data path (posting, CQ progress) stays in each
 * program, so a measured loop never calls across files.
 *
 * test/bench/mpi_bw.c does not use this file: scripts/bench-large.sh
 * builds it alone with mpicc, and it needs none of the libfabric parts.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

/* Longest fabric address the exchange carries (a fixed-size wire field). */
#define BENCH_NAME_MAX 1024

/*
 * One RDM endpoint and the objects it is bound to.  The programs embed it
 * in their own state and use the fields directly on the data path.
 */
struct bench_fabric {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc;     /* local descriptor for every op; NULL when not needed */
	fi_addr_t peer; /* the other process, once bench_addr_exchange() ran */
	int sock;       /* out-of-band TCP connection to the peer */
};

/* ---- process-wide helpers ------------------------------------------- */

/* Names the program in every message below; call first thing in main(). */
void bench_init(const char *prog);

/*
 * Exit with "prog: what: <reason> (ret)": the libfabric error for a
 * negative ret, else strerror(errno) of the failed system call.
 */
void bench_die(const char *what, int ret) __attribute__((noreturn));

/* Exit with "prog: <formatted message>". */
void bench_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/*
 * Deliver SIGALRM after secs seconds and then exit with status 3 and
 * "prog: timeout, giving up", so a broken provider cannot hang a script.
 */
void bench_alarm_arm(unsigned int secs);

/* Monotonic clock in seconds. */
double bench_now(void);

/* Parse an option value in [min, max] (strtoul base 0) or exit. */
unsigned long bench_parse_ul(const char *s, const char *what, unsigned long min,
			     unsigned long max);

/*
 * Print the usage text of a server/client program: the synopsis and the
 * -p/-P lines, then the program's own option lines (fmt, printf-style),
 * then the -T/-v lines every such program has.
 */
void bench_usage(const char *argv0, unsigned int default_port, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- out-of-band socket --------------------------------------------- */

/* Read or write exactly len bytes (retrying short transfers) or exit. */
void bench_sock_read(int fd, void *buf, size_t len);
void bench_sock_write(int fd, const void *buf, size_t len);

/* Server: accept one connection on 127.0.0.1:port. */
int bench_sock_server(uint16_t port);

/*
 * Client: connect to host (IPv4 dotted quad), retrying while the server
 * is still starting; only the alarm bounds the wait.
 */
int bench_sock_client(const char *host, uint16_t port);

/*
 * Send len bytes from buf to the peer and replace them with the peer's
 * len bytes, calling progress(arg) until they arrive.  Both sides write
 * first, so the call is symmetric; a provider with manual progress may
 * need our CQ reads to finish the peer's last operation, so a plain
 * blocking read() here could deadlock.
 */
void bench_sock_sync(int fd, void *buf, size_t len, void (*progress)(void *), void *arg);

/* ---- fabric ----------------------------------------------------------- */

/*
 * fi_getinfo() for an RDM endpoint with FI_TAGGED on provider prov into
 * fab->info.  The programs check and print what they need before opening.
 */
void bench_fabric_getinfo(struct bench_fabric *fab, const char *prov);

/*
 * Open fabric, domain, a CQ of cq_format and cq_size entries (no wait
 * object), an AV and the endpoint bound to both, and enable it.
 */
void bench_fabric_open(struct bench_fabric *fab, enum fi_cq_format cq_format, size_t cq_size);

/*
 * Register buf for send and receive when the provider asks for local
 * descriptors (FI_MR_LOCAL); otherwise fab->desc stays NULL.
 */
void bench_fabric_mr_reg(struct bench_fabric *fab, void *buf, size_t len);

/*
 * Swap endpoint names with the peer over fab->sock and insert the peer's
 * into the AV as fab->peer.  Each side sends a 32-bit length in network
 * order followed by a BENCH_NAME_MAX-byte name field.
 */
void bench_addr_exchange(struct bench_fabric *fab);

/*
 * Exit on a failed fi_cq_read() (ret < 0, not -FI_EAGAIN): for -FI_EAVAIL
 * with the error entry's reason, otherwise with ret's.
 */
void bench_cq_fail(struct fid_cq *cq, ssize_t ret) __attribute__((noreturn));

/* Close everything bench_fabric_getinfo/open/mr_reg made (not the socket). */
void bench_fabric_close(struct bench_fabric *fab);

#endif /* BENCH_COMMON_H */
