/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma_test.c - one-sided operations between processes, through the
 * public libfabric API (FI_PROVIDER selects the provider, default opx).
 *
 * The program forks: the parent is the target, NCHILD children are
 * initiators.  Addresses and keys go over pipes (no ports), or, with
 * -l/-c, over TCP between a target and initiators on different hosts
 * (the udp wire between them).  The target
 * only progresses (manual progress: a target that reads its CQ) and
 * answers the children's requests to check its memory.  Child 0:
 *   - write/read/writev/readv/writedata sweep 0 B .. 64 MiB around every
 *     threshold, the target checking its memory after each write, the
 *     child checking what it reads back; remote CQ data checked by the
 *     target, in order;
 *   - every atomic op x datatype x call against a reference computed
 *     here on small integers every datatype represents exactly; the
 *     largest count fi_*atomicvalid allows, for each call;
 *   - an fi_inject_write whose buffer is overwritten as soon as the call
 *     returns, posted behind a window the stalled target keeps full;
 *   - bad key, out-of-range (also a large atomic), missing access and
 *     closed-key attempts:
 *     error completions, and the target's memory byte-for-byte unchanged.
 * Every child: concurrent fetch-add and compare-swap increments of two
 * counters at the target, whose final values must be exact.
 *
 *   opx_rma_test [-p prov] [-v] [-l PORT | -c HOST:PORT]
 *     -v       FI_MR_VIRT_ADDR | FI_MR_PROV_KEY (give it to both sides)
 *     -l PORT  the target only: it waits on TCP PORT (0: any; the port
 *              is printed as "listening on port N") for the NCHILD
 *              initiators of one -c instead of forking them
 *     -c HOST:PORT  the initiators only, forked here, each connecting
 *              to the target's -l; exit status 0 when all passed
 *     -n       the target does not insert its initiators into its AV
 *              (as Open MPI's osc rdma, whose targets insert only the
 *              peers they initiate to): replies still reach them
 *
 * Files: this one (the harness: setting up a node, the pipes or TCP
 * connections to the target, completions, the target's loop, main),
 * opx_rma_subtests.c (what an initiator runs: the sweep, the atomics,
 * the inject window, the refused operations, the counters) and
 * opx_rma_test.h (what the two share).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "opx_rma_test.h"

static const char *prov = "opx";
bool virt;
static time_t t_start;

void check_deadline(void)
{
	if (time(NULL) - t_start > DEADLINE_S)
		DIE("deadline of %d s passed", DEADLINE_S);
}

static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		DIE("pipe write: %s", strerror(errno));
}

static void xread(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			DIE("pipe read: %s", r ? strerror(errno) : "eof");
		got += (size_t)r;
	}
}

static void node_open(struct node *n)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};

	hints->caps = FI_RMA | FI_ATOMIC;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(prov);
	CHK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &n->info));
	fi_freeinfo(hints);
	if (!(n->info->caps & FI_RMA) || !(n->info->caps & FI_ATOMIC))
		DIE("provider does not offer FI_RMA|FI_ATOMIC");
	if (virt)
		n->info->domain_attr->mr_mode |= FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	else
		n->info->domain_attr->mr_mode &= ~(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY);
	CHK(fi_fabric(n->info->fabric_attr, &n->fabric, NULL));
	CHK(fi_domain(n->fabric, n->info, &n->domain, NULL));
	CHK(fi_av_open(n->domain, &av_attr, &n->av, NULL));
	CHK(fi_cq_open(n->domain, &cq_attr, &n->cq, NULL));
	CHK(fi_endpoint(n->domain, n->info, &n->ep, NULL));
	CHK(fi_ep_bind(n->ep, &n->av->fid, 0));
	CHK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHK(fi_enable(n->ep));
}

static void node_close(struct node *n)
{
	fi_close(&n->ep->fid);
	fi_close(&n->cq->fid);
	fi_close(&n->av->fid);
	fi_close(&n->domain->fid);
	fi_close(&n->fabric->fid);
	fi_freeinfo(n->info);
}

void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		if (!(i & 7))
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (uint8_t)(x >> ((i & 7) * 8));
	}
}

/* ---------------------------------------------------------------------
 * Initiator side helpers.
 */
struct node me;
fi_addr_t tgt;
struct setup su;
static int to_parent, from_parent;

/* Wait for the completion of ctx; returns 0 or the positive error. */
int wait_comp(void *ctx)
{
	for (;;) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(me.cq, &c, 1);
		if (n == 1) {
			if (c.op_context != ctx)
				DIE("completion for %p, want %p", c.op_context, ctx);
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry e = {0};
			CHK(fi_cq_readerr(me.cq, &e, 0));
			if (e.op_context != ctx)
				DIE("error completion for %p, want %p", e.op_context, ctx);
			return e.err;
		}
		if (n != -FI_EAGAIN)
			DIE("fi_cq_read: %zd", n);
		check_deadline();
	}
}

char ask(struct cmd c)
{
	char r;
	xwrite(to_parent, &c, sizeof(c));
	xread(from_parent, &r, 1);
	return r;
}

void expect_err(int got, int want, const char *what)
{
	if (got != want)
		DIE("%s: completion error %d (%s), want %d (%s)", what, got, fi_strerror(got), want,
		    fi_strerror(want));
}

/* writedata operations sweep() sent: the target must have seen as many */
uint64_t ndata;

static void child(int idx)
{
	node_open(&me);
	char addr[64];
	size_t addrlen = sizeof(addr);
	CHK(fi_getname(&me.ep->fid, addr, &addrlen));
	xwrite(to_parent, &addrlen, sizeof(addrlen));
	xwrite(to_parent, addr, addrlen);
	xread(from_parent, &su, sizeof(su));
	if (fi_av_insert(me.av, su.addr, 1, &tgt, 0, NULL) != 1)
		DIE("av insert");
	if (idx == 0) {
		sweep();
		atomics();
		atomics_max();
		inject_window();
		refused();
	}
	hammer();
	xwrite(to_parent, &(struct cmd){.op = 'D', .ndata = ndata}, sizeof(struct cmd));
	char r;
	xread(from_parent, &r, 1);
	node_close(&me);
	exit(r == 'k' ? 0 : 1);
}

/* ---------------------------------------------------------------------
 * Across hosts (-l / -c): the pipes become one TCP connection per
 * initiator, which first sends its index.
 */
static int tcp_connect(const char *hostport)
{
	char host[256], *colon;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int fd = -1, rc;

	snprintf(host, sizeof(host), "%s", hostport);
	colon = strrchr(host, ':');
	if (!colon)
		DIE("-c wants HOST:PORT, not %s", hostport);
	*colon = '\0';
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc)
		DIE("%s: %s", hostport, gai_strerror(rc));
	/* the target may still be starting */
	for (int i = 0; i < 100; i++) {
		fd = socket(ai->ai_family, ai->ai_socktype, 0);
		if (fd < 0)
			DIE("socket: %s", strerror(errno));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (fd < 0)
		DIE("no target at %s", hostport);
	return fd;
}

/* -c: NCHILD initiators against a remote target. */
static int initiators(const char *hostport)
{
	pid_t pids[NCHILD];
	int failed = 0;

	for (int i = 0; i < NCHILD; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			DIE("fork");
		if (pids[i] == 0) {
			int fd = tcp_connect(hostport);

			xwrite(fd, &i, sizeof(i));
			to_parent = from_parent = fd;
			child(i);
		}
	}
	for (int i = 0; i < NCHILD; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "FAIL: initiator %d exited with status 0x%x\n", i, st);
			failed = 1;
		}
	}
	printf("%s\n", failed ? "FAIL" : "PASS");
	return failed;
}

/* -l: accept the NCHILD initiators of one -c; conn[i] is initiator i's. */
static void accept_initiators(const char *port, int conn[NCHILD])
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
	char *end;
	long p = strtol(port, &end, 10);

	if (*end || p < 0 || p > 65535)
		DIE("bad port %s", port);
	sin.sin_port = htons((uint16_t)p);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sin, sizeof(sin)) || listen(ls, NCHILD) ||
	    getsockname(ls, (struct sockaddr *)&sin, &sl))
		DIE("listen on port %s: %s", port, strerror(errno));
	printf("listening on port %u\n", (unsigned)ntohs(sin.sin_port));
	for (int i = 0; i < NCHILD; i++)
		conn[i] = -1;
	for (int n = 0; n < NCHILD; n++) {
		struct pollfd pl = {.fd = ls, .events = POLLIN};
		int fd, idx;

		while (poll(&pl, 1, 1000) == 0)
			check_deadline();
		fd = accept(ls, NULL, NULL);
		if (fd < 0)
			DIE("accept: %s", strerror(errno));
		xread(fd, &idx, sizeof(idx));
		if (idx < 0 || idx >= NCHILD || conn[idx] >= 0)
			DIE("initiator index %d twice or out of range", idx);
		conn[idx] = fd;
	}
	close(ls);
}

/* ---------------------------------------------------------------------
 * Target.
 */
int main(int argc, char **argv)
{
	int opt, up[NCHILD][2], down[NCHILD][2], failed = 0;
	const char *listen_port = NULL, *connect_to = NULL;
	pid_t pids[NCHILD];
	struct node t;

	bool no_insert = false;

	while ((opt = getopt(argc, argv, "p:vl:c:n")) != -1) {
		if (opt == 'p')
			prov = optarg;
		else if (opt == 'v')
			virt = true;
		else if (opt == 'l')
			listen_port = optarg;
		else if (opt == 'c')
			connect_to = optarg;
		else if (opt == 'n')
			no_insert = true;
		else {
			fprintf(stderr, "usage: %s [-p prov] [-v] [-n] [-l PORT | -c HOST:PORT]\n",
				argv[0]);
			return 2;
		}
	}
	t_start = time(NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (connect_to)
		return initiators(connect_to);
	if (listen_port) {
		int conn[NCHILD];

		accept_initiators(listen_port, conn);
		for (int i = 0; i < NCHILD; i++) {
			up[i][0] = down[i][1] = conn[i];
			pids[i] = -1;
		}
	}
	for (int i = 0; !listen_port && i < NCHILD; i++) {
		if (pipe(up[i]) || pipe(down[i]))
			DIE("pipe");
		pids[i] = fork();
		if (pids[i] < 0)
			DIE("fork");
		if (pids[i] == 0) {
			to_parent = up[i][1];
			from_parent = down[i][0];
			child(i);
		}
		close(up[i][1]);
		close(down[i][0]);
	}

	node_open(&t);
	size_t sizes[R_NUM] = {BIG + BIG_PAD, SMALL, SMALL, SMALL, SMALL};
	uint64_t access[R_NUM] = {FI_REMOTE_READ | FI_REMOTE_WRITE, FI_REMOTE_READ,
				  FI_REMOTE_WRITE, FI_REMOTE_READ | FI_REMOTE_WRITE,
				  FI_REMOTE_READ | FI_REMOTE_WRITE};
	uint8_t *mem[R_NUM], *snap[R_NUM];
	struct fid_mr *mr[R_NUM];
	struct setup s;

	memset(&s, 0, sizeof(s));
	s.addrlen = sizeof(s.addr);
	CHK(fi_getname(&t.ep->fid, s.addr, &s.addrlen));
	for (int r = 0; r < R_NUM; r++) {
		mem[r] = malloc(sizes[r]);
		snap[r] = malloc(sizes[r]);
		if (!mem[r] || !snap[r])
			DIE("malloc");
		fill(mem[r], sizes[r], 500 + r);
		if (r == R_ATOM)
			memset(mem[r], 0, 64);
		CHK(fi_mr_reg(t.domain, mem[r], sizes[r], access[r], 0, 100 + r, 0, &mr[r], NULL));
		s.key[r] = fi_mr_key(mr[r]);
		s.base[r] = (t.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
				    ? (uint64_t)(uintptr_t)mem[r]
				    : 0;
		memcpy(snap[r], mem[r], sizes[r]);
	}
	for (int i = 0; i < NCHILD; i++) {
		size_t alen;
		char a[64];
		fi_addr_t fa;
		xread(up[i][0], &alen, sizeof(alen));
		if (alen > sizeof(a))
			DIE("address length");
		xread(up[i][0], a, alen);
		if (!no_insert && fi_av_insert(t.av, a, 1, &fa, 0, NULL) != 1)
			DIE("av insert");
	}
	for (int i = 0; i < NCHILD; i++)
		xwrite(down[i][1], &s, sizeof(s));

	int done = 0;
	bool stall = false;
	uint64_t rdata = 0;
	struct pollfd pfd[NCHILD];
	for (int i = 0; i < NCHILD; i++)
		pfd[i] = (struct pollfd){.fd = up[i][0], .events = POLLIN};
	for (unsigned long it = 0; done < NCHILD; it++) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(t.cq, &c, 1);
		if (n == 1) {
			if (!(c.flags & FI_REMOTE_CQ_DATA) || c.data != 0xD000 + rdata)
				DIE("target CQ entry flags 0x%llx data 0x%llx, want data 0x%llx",
				    (unsigned long long)c.flags, (unsigned long long)c.data,
				    (unsigned long long)(0xD000 + rdata));
			rdata++;
		} else if (n != -FI_EAGAIN) {
			DIE("target fi_cq_read %zd", n);
		}
		if (it % 64)
			continue;
		check_deadline();
		if (poll(pfd, NCHILD, 0) <= 0)
			continue;
		for (int i = 0; i < NCHILD; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLHUP)))
				continue;
			struct cmd cm;
			char ok = 'k';
			xread(up[i][0], &cm, sizeof(cm));
			switch (cm.op) {
			case 'V': {
				uint8_t *ref = malloc(cm.len + 1);
				fill(ref, cm.len, cm.seed);
				if (memcmp(mem[R_BIG] + cm.off, ref, cm.len))
					ok = 'f';
				/* the bytes around it are the last writes' or the snapshot's:
				 * only the range itself is checked */
				free(ref);
				break;
			}
			case 'U':
				for (int r = R_RO; r <= R_DOOMED; r++)
					if (r != R_ATOM && memcmp(mem[r], snap[r], sizes[r]))
						ok = 'f';
				break;
			case 'X':
				/* the region's last legal write is its new reference */
				memcpy(snap[R_DOOMED], mem[R_DOOMED], sizes[R_DOOMED]);
				if (fi_close(&mr[R_DOOMED]->fid))
					ok = 'f';
				mr[R_DOOMED] = NULL;
				break;
			case 'S':
				stall = true;
				break;
			case 'D':
				if (i == 0 && cm.ndata != rdata) {
					fprintf(stderr, "FAIL: %llu remote CQ data entries, want %llu\n",
						(unsigned long long)rdata,
						(unsigned long long)cm.ndata);
					ok = 'f';
				}
				done++;
				pfd[i].fd = -1;
				break;
			default:
				DIE("bad command %d", cm.op);
			}
			if (ok != 'k')
				failed = 1; /* the initiator may be on another host */
			xwrite(down[i][1], &ok, 1);
			if (stall) {
				usleep(STALL_MS * 1000);
				stall = false;
			}
		}
	}
	uint64_t a, b;
	memcpy(&a, mem[R_ATOM], 8);
	memcpy(&b, mem[R_ATOM] + 8, 8);
	if (a != (uint64_t)NCHILD * NINC || b != (uint64_t)NCHILD * NCAS) {
		fprintf(stderr, "FAIL: counters %llu and %llu, want %d and %d\n",
			(unsigned long long)a, (unsigned long long)b, NCHILD * NINC, NCHILD * NCAS);
		failed = 1;
	} else {
		printf("target: %d processes: fetch-add counter %llu, compare-swap counter %llu exact\n",
		       NCHILD, (unsigned long long)a, (unsigned long long)b);
	}
	for (int i = 0; listen_port && i < NCHILD; i++) {
		/* keep progressing until the initiator has closed its
		 * endpoint and exited: its connection reaches end of file */
		char c;

		for (;;) {
			struct pollfd pl = {.fd = up[i][0], .events = POLLIN};
			struct fi_cq_data_entry e;

			(void)fi_cq_read(t.cq, &e, 1);
			check_deadline();
			if (poll(&pl, 1, 0) > 0 && read(up[i][0], &c, 1) <= 0)
				break;
		}
		close(up[i][0]);
	}
	for (int i = 0; !listen_port && i < NCHILD; i++) {
		int st;
		/* keep progressing until the child has exited */
		while (waitpid(pids[i], &st, WNOHANG) == 0) {
			struct fi_cq_data_entry c;
			(void)fi_cq_read(t.cq, &c, 1);
			check_deadline();
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "FAIL: initiator %d exited with status 0x%x\n", i, st);
			failed = 1;
		}
	}
	for (int r = 0; r < R_NUM; r++) {
		if (mr[r])
			fi_close(&mr[r]->fid);
		free(mem[r]);
		free(snap[r]);
	}
	node_close(&t);
	printf("%s\n", failed ? "FAIL" : "PASS");
	return failed;
}
