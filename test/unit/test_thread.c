/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_thread.c - FI_THREAD_SAFE: several threads drive one domain at
 * once (the MPI_THREAD_MULTIPLE pattern).  Two endpoints exchange tagged
 * messages in both directions across every protocol while separate
 * threads post receives, send, and reap completions (one side with the
 * blocking fi_cq_sread).  Every message must arrive once, in order, intact.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"

#define TH_MSGS 3000
#define TH_DEADLINE_S 60

/* inline, eager, multi-packet eager, rendezvous */
static const size_t th_sizes[] = {8, 100, 9000, 70000};
#define TH_NSIZES (sizeof(th_sizes) / sizeof(th_sizes[0]))
#define TH_MAXSZ 70000

struct th_side {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t peer;
	int sent_done;      /* send completions reaped */
	int recv_done;      /* receives verified */
	int errors;
	pthread_mutex_t mu; /* guards the counters above (test-side only) */
};

struct th_env {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct th_side side[2];
	time_t deadline;
};

static uint8_t th_byte(int dir, int i, size_t off)
{
	return (uint8_t)(dir * 131 + i * 7 + off * 13);
}

static bool th_late(const struct th_env *e)
{
	return time(NULL) > e->deadline;
}

static void th_open(struct th_env *e)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	char addr[2][64];

	memset(e, 0, sizeof(*e));
	assert_int_equal(fx_getinfo("safe", 0, &e->info), 0);
	assert_int_equal(e->info->domain_attr->threading, FI_THREAD_SAFE);
	assert_int_equal(fx_prov()->fabric(e->info->fabric_attr, &e->fabric, NULL), 0);
	assert_int_equal(fi_domain(e->fabric, e->info, &e->domain, NULL), 0);
	assert_int_equal(fi_av_open(e->domain, &av_attr, &e->av, NULL), 0);
	for (int s = 0; s < 2; s++) {
		struct th_side *d = &e->side[s];
		size_t len = sizeof(addr[s]);

		assert_int_equal(fi_cq_open(e->domain, &cq_attr, &d->cq, NULL), 0);
		assert_int_equal(fi_endpoint(e->domain, e->info, &d->ep, NULL), 0);
		assert_int_equal(fi_ep_bind(d->ep, &d->cq->fid, FI_TRANSMIT | FI_RECV), 0);
		assert_int_equal(fi_ep_bind(d->ep, &e->av->fid, 0), 0);
		assert_int_equal(fi_enable(d->ep), 0);
		assert_int_equal(fi_getname(&d->ep->fid, addr[s], &len), 0);
		pthread_mutex_init(&d->mu, NULL);
	}
	for (int s = 0; s < 2; s++)
		assert_int_equal(fi_av_insert(e->av, addr[1 - s], 1, &e->side[s].peer, 0, NULL), 1);
	e->deadline = time(NULL) + TH_DEADLINE_S;
}

static void th_close(struct th_env *e)
{
	for (int s = 0; s < 2; s++) {
		fi_close(&e->side[s].ep->fid);
		fi_close(&e->side[s].cq->fid);
		pthread_mutex_destroy(&e->side[s].mu);
	}
	fi_close(&e->av->fid);
	fi_close(&e->domain->fid);
	fi_close(&e->fabric->fid);
	fi_freeinfo(e->info);
}

struct th_arg {
	struct th_env *e;
	int s; /* the side this thread works on */
};

/* Reap completions of one side: receives are checked in posting order. */
static void th_reap(struct th_env *e, int s, uint8_t **bufs, bool blocking)
{
	struct th_side *d = &e->side[s];
	struct fi_cq_tagged_entry ent[16];
	ssize_t n = blocking ? fi_cq_sread(d->cq, ent, 16, NULL, 100) : fi_cq_read(d->cq, ent, 16);

	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(d->cq, &err, 0);
		print_error("side %d: error completion %d (%s) flags 0x%llx len %zu\n", s, err.err,
			    fi_strerror(err.err), (unsigned long long)err.flags, err.len);
		pthread_mutex_lock(&d->mu);
		d->errors++;
		pthread_mutex_unlock(&d->mu);
		return;
	}
	for (ssize_t k = 0; k < n; k++) {
		pthread_mutex_lock(&d->mu);
		if (ent[k].flags & FI_SEND) {
			d->sent_done++;
		} else {
			int i = (int)(uintptr_t)ent[k].op_context - 1;
			size_t sz = th_sizes[i % TH_NSIZES];
			bool ok = i == d->recv_done && ent[k].len == sz && ent[k].tag == (uint64_t)i;
			for (size_t off = 0; ok && off < sz; off += 61)
				ok = bufs[i][off] == th_byte(1 - s, i, off);
			if (!ok) {
				print_error("side %d: message %d (expected %d) len %zu tag %llu bad\n", s, i,
					    d->recv_done, ent[k].len, (unsigned long long)ent[k].tag);
				d->errors++;
			}
			free(bufs[i]);
			bufs[i] = NULL;
			d->recv_done++;
		}
		pthread_mutex_unlock(&d->mu);
	}
}

/* Receiver of side s: posts receives in a sliding window and reaps the
 * side's CQ (receive and send completions) with fi_cq_sread on side 1 and
 * fi_cq_read on side 0. */
static void *th_receiver(void *p)
{
	struct th_arg *a = p;
	struct th_env *e = a->e;
	struct th_side *d = &e->side[a->s];
	uint8_t **bufs = calloc(TH_MSGS, sizeof(*bufs));
	int posted = 0;

	while (!th_late(e)) {
		pthread_mutex_lock(&d->mu);
		int done = d->recv_done, sent = d->sent_done;
		pthread_mutex_unlock(&d->mu);
		/* this thread also reaps the side's send completions */
		if (done == TH_MSGS && sent == TH_MSGS)
			break;
		while (posted < TH_MSGS && posted - done < 32) {
			size_t sz = th_sizes[posted % TH_NSIZES];
			bufs[posted] = malloc(sz);
			ssize_t rc = fi_trecv(d->ep, bufs[posted], sz, NULL, d->peer, (uint64_t)posted,
					      0, (void *)(uintptr_t)(posted + 1));
			if (rc == -FI_EAGAIN) {
				free(bufs[posted]);
				bufs[posted] = NULL;
				break;
			}
			if (rc) {
				pthread_mutex_lock(&d->mu);
				d->errors++;
				pthread_mutex_unlock(&d->mu);
				goto out;
			}
			posted++;
		}
		th_reap(e, a->s, bufs, a->s == 1);
	}
out:
	for (int i = 0; i < TH_MSGS; i++)
		free(bufs[i]);
	free(bufs);
	return NULL;
}

/* Sender from side s to the other side. */
static void *th_sender(void *p)
{
	struct th_arg *a = p;
	struct th_env *e = a->e;
	struct th_side *d = &e->side[a->s];
	uint8_t *buf = malloc(TH_MAXSZ);

	for (int i = 0; i < TH_MSGS && !th_late(e);) {
		size_t sz = th_sizes[i % TH_NSIZES];
		for (size_t off = 0; off < sz; off++)
			buf[off] = th_byte(a->s, i, off);
		ssize_t rc = fi_tsend(d->ep, buf, sz, NULL, d->peer, (uint64_t)i, NULL);
		if (rc == -FI_EAGAIN) {
			sched_yield(); /* the other threads progress the domain */
			continue;
		}
		if (rc) {
			pthread_mutex_lock(&d->mu);
			d->errors++;
			pthread_mutex_unlock(&d->mu);
			break;
		}
		/* buf is the application's until the send completes (a
		 * rendezvous send is read from it after fi_tsend returns) */
		{
			for (;;) {
				pthread_mutex_lock(&d->mu);
				int sd = d->sent_done;
				pthread_mutex_unlock(&d->mu);
				if (sd == i + 1 || th_late(e))
					break;
				sched_yield();
			}
		}
		i++;
	}
	free(buf);
	return NULL;
}

static void test_thread_safe_bidir(void **state)
{
	struct th_env e;
	struct th_arg args[2] = {{&e, 0}, {&e, 1}};
	pthread_t th[4];

	(void)state;
	th_open(&e);
	pthread_create(&th[0], NULL, th_receiver, &args[0]);
	pthread_create(&th[1], NULL, th_receiver, &args[1]);
	pthread_create(&th[2], NULL, th_sender, &args[0]);
	pthread_create(&th[3], NULL, th_sender, &args[1]);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	/* send completions of the last messages may still be queued */
	while (!th_late(&e) &&
	       (e.side[0].sent_done < TH_MSGS || e.side[1].sent_done < TH_MSGS)) {
		th_reap(&e, 0, NULL, false);
		th_reap(&e, 1, NULL, false);
	}
	for (int s = 0; s < 2; s++)
		print_message("side %d: sent %d received %d errors %d\n", s, e.side[s].sent_done,
			      e.side[s].recv_done, e.side[s].errors);
	for (int s = 0; s < 2; s++) {
		assert_int_equal(e.side[s].errors, 0);
		assert_int_equal(e.side[s].recv_done, TH_MSGS);
		assert_int_equal(e.side[s].sent_done, TH_MSGS);
	}
	th_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thread_safe_bidir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
