/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_ctx.c - receive contexts of the software SuperNIC.
 *
 * A context is a POSIX shared-memory segment /opx.<uid>.<unit>.<ctx>
 * laid out as shim_abi.h describes.  The number is taken by creating the
 * name with O_EXCL, which is atomic by itself: there is no per-unit lock
 * file (one a neighbour could plant as a symlink or hold for ever).  The
 * search starts at a per-process cursor (random at device open, then just
 * past the last number taken), so a host full of ranks does not probe
 * 0, 1, 2, ... each time.
 *
 * Liveness is the OFD lock the owner takes on its segment right after
 * creating it and keeps until it exits (shim_trust.c).  A leftover
 * segment is reclaimed only by whoever manages to take that lock, and is
 * unlinked while the lock is held; since every unlink of a name happens
 * under the lock of the file it names, two reclaimers can never unlink a
 * segment that a third process has just created at the same name.  A
 * segment that never became a valid context is reclaimed only once older
 * than SHIM_STALE_AGE_S (its creator may still be initialising it).
 * Names owned by another uid, symlinks and other non-files are skipped,
 * never opened through, never removed, and reported through shim_trust_warn().
 * Besides the names a search passes, every open sweeps the unit's names
 * for segments of owners that died (shim_ctx_sweep).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"
#include "shim_trust.h"

/* How long a creator tries to take the lock on the name it has just
 * created: an inspector holds it for microseconds. */
#define SHIM_LOCK_TRIES 1000
#define SHIM_LOCK_PAUSE_NS 100000L

enum shim_seg_state {
	SHIM_SEG_LIVE,     /* in use by a running process (or cannot judge): skip */
	SHIM_SEG_STALE,    /* was abandoned, we unlinked it: retry the number */
	SHIM_SEG_GONE,     /* vanished meanwhile: retry the number */
	SHIM_SEG_SQUATTED, /* not ours (other uid, symlink, not a file): skip */
};

/* Remove the wake-up socket file of an abandoned context; its directory
 * was checked (ours, 0700) when that context bound it. */
static void shim_ctx_unlink_wake(const struct shim_rcv_ctl *s, uint32_t uid)
{
	struct sockaddr_un sun;
	socklen_t len;

	shim_dev_name_wake(&sun, &len, uid, s->unit, s->ctx, s->nonce);
	(void)unlink(sun.sun_path);
}

/* Is the segment at (unit, n) that we hold the lock of abandoned?  When
 * we hold the owner lock, its owner is gone: that is enough for a name
 * the search wants.  A sweep removes names nobody asked for, so it also
 * wants the owner's pid gone, and leaves segments that never became a
 * context (and those of older shims, which did not lock) to the search. */
static bool shim_ctx_seg_abandoned(int fd, const struct stat *st, uint32_t uid, unsigned int unit,
				   unsigned int n, bool sweep)
{
	const struct shim_rcv_ctl *ctl;
	struct shim_rcv_ctl s;
	bool locked, stale;

	if ((size_t)st->st_size >= sizeof(*ctl)) {
		ctl = mmap(NULL, sizeof(*ctl), PROT_READ, MAP_SHARED, fd, 0);
		if (ctl == MAP_FAILED)
			return false; /* cannot judge: treat as live */
		(void)shim_ctl_snapshot(&s, ctl);
		munmap((void *)ctl, sizeof(*ctl));
		/* The magic is written after the owner fields, and the owner
		 * locked the segment before writing either. */
		if (s.magic == SHIM_CTL_MAGIC) {
			locked = s.flags & SHIM_CTL_F_OWNER_LOCK;
			if (sweep) /* we hold its owner's lock, and its pid is gone */
				stale = locked &&
					shim_dev_proc_gone((pid_t)s.owner_pid, s.owner_start);
			else /* an older shim that did not lock: its pid is all we have */
				stale = locked ||
					shim_dev_proc_gone((pid_t)s.owner_pid, s.owner_start);
			/* only the wake-up socket of this very name: the block
			 * could name another, live, context's */
			if (stale && locked && s.unit == unit && s.ctx == n)
				shim_ctx_unlink_wake(&s, uid);
			return stale;
		}
	}
	if (sweep)
		return false;
	/* Not a valid context: a creator that died before finishing, or
	 * one still initialising.  Give a slow creator time first. */
	return time(NULL) - st->st_mtime >= SHIM_STALE_AGE_S;
}

static enum shim_seg_state shim_ctx_seg_reclaim(struct shim_dev *dev, const char *name,
						uint32_t uid, unsigned int unit, unsigned int n,
						bool sweep)
{
	enum shim_seg_state state = SHIM_SEG_LIVE;
	struct stat st;
	int fd;

	/* O_NONBLOCK: a FIFO planted at the name must not block the open */
	fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			return SHIM_SEG_GONE;
		/* ELOOP: a symlink; EACCES: another user's file */
		return errno == ELOOP || errno == EACCES || errno == EPERM ? SHIM_SEG_SQUATTED
									   : SHIM_SEG_LIVE;
	}
	if (fstat(fd, &st) < 0)
		goto out;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		state = SHIM_SEG_SQUATTED;
		goto out;
	}
	if (shim_trust_seg_lock(fd))
		goto out; /* held: its owner is alive */
	/* Someone else may have reclaimed it between our open and our lock. */
	if (fstat(fd, &st) < 0)
		goto out;
	if (st.st_nlink == 0) {
		state = SHIM_SEG_GONE;
		goto out;
	}
	if (shim_ctx_seg_abandoned(fd, &st, uid, unit, n, sweep) && shm_unlink(name) == 0) {
		atomic_fetch_add_explicit(&dev->stale_reclaimed, 1, memory_order_relaxed);
		state = SHIM_SEG_STALE;
	}
out:
	close(fd); /* drops the lock, if we took it */
	return state;
}

/* This process's own contexts, by number: a sweep need not judge them. */
static void shim_ctx_mine_set(struct shim_dev *dev, unsigned int unit, unsigned int n, bool mine)
{
	_Atomic uint64_t *w = &dev->ctx_mine[unit][n / 64];
	uint64_t bit = 1ull << (n % 64);

	if (mine)
		atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed);
}

static bool shim_ctx_mine(struct shim_dev *dev, unsigned int unit, unsigned int n)
{
	return atomic_load_explicit(&dev->ctx_mine[unit][n / 64], memory_order_relaxed) &
	       (1ull << (n % 64));
}

/* The context number a segment name ends in, written the way
 * shim_dev_name_segment writes it (decimal, no leading zero); -1 otherwise. */
static int shim_ctx_name_num(const char *p)
{
	unsigned int n = 0;
	size_t len = strlen(p);

	if (len == 0 || len > 4 || (p[0] == '0' && len > 1))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		n = n * 10 + (unsigned int)(p[i] - '0');
	}
	return n < SHIM_MAX_CTXTS ? (int)n : -1;
}

/*
 * Reclaim the abandoned segments of this uid on this unit, whatever their
 * numbers.  The search in shim_ctx_seg_create() reclaims only the names
 * it passes, which it stops doing at the first free one: the segments of
 * endpoints killed in a crashed job (388 KiB each with the default rings)
 * stayed in /dev/shm until some later search happened to reach them.  So
 * every open sweeps the unit's names found in /dev/shm, through the same
 * judgement as the search (shim_ctx_seg_reclaim: our uid, a regular file,
 * the owner lock taken, the name unlinked under that lock) plus the
 * owner's pid gone.  Bounded: at most SHIM_SWEEP_SCAN_MAX directory
 * entries are read, each name is judged once, and this process's own
 * contexts are skipped without a syscall, so a process opening n contexts
 * does not judge O(n^2) live ones.  Best effort: any failure skips.
 */
static void shim_ctx_sweep(struct shim_dev *dev, uint32_t uid, unsigned int unit)
{
	char prefix[SHIM_NAME_MAX], name[SHIM_NAME_MAX];
	struct dirent *de;
	size_t plen;
	DIR *dir;
	int len;

	len = snprintf(prefix, sizeof(prefix), "opx.%u.%u.", uid, unit);
	if (len < 0 || (size_t)len >= sizeof(prefix))
		return;
	plen = (size_t)len;
	dir = opendir(SHIM_SHM_DIR);
	if (!dir)
		return;
	for (unsigned int i = 0; i < SHIM_SWEEP_SCAN_MAX && (de = readdir(dir)); i++) {
		int n;

		if ((de->d_type != DT_REG && de->d_type != DT_UNKNOWN) ||
		    strncmp(de->d_name, prefix, plen))
			continue;
		n = shim_ctx_name_num(de->d_name + plen);
		if (n < 0 || shim_ctx_mine(dev, unit, (unsigned int)n) ||
		    shim_dev_name_segment(name, sizeof(name), uid, unit, (unsigned int)n))
			continue;
		(void)shim_ctx_seg_reclaim(dev, name, uid, unit, (unsigned int)n, true);
	}
	closedir(dir);
}

/* Take the liveness lock of a segment we just created.  Only an inspector
 * judging the fresh (young, magic-less, so never stale) segment can hold
 * it, and only for microseconds; still bounded. */
static int shim_ctx_seg_lock_new(int fd)
{
	const struct timespec pause = {.tv_sec = 0, .tv_nsec = SHIM_LOCK_PAUSE_NS};
	int ret = -EAGAIN;

	for (int i = 0; i < SHIM_LOCK_TRIES && ret == -EAGAIN; i++) {
		ret = shim_trust_seg_lock(fd);
		if (ret == -EAGAIN)
			nanosleep(&pause, NULL);
	}
	return ret;
}

/* Create a free segment of the unit, searching from the unit's cursor,
 * or only number want when want >= 0 (shim_ctx_open_at: no warning then,
 * the caller tries another range).  Returns the fd, locked, and fills
 * ctx->name / ctx->rx.ctx, or -errno (-EBUSY when every name is taken). */
static int shim_ctx_seg_create(struct shim_ctx *ctx, uint32_t uid, unsigned int unit, int want)
{
	struct shim_dev *dev = ctx->dev;
	uint32_t start = want >= 0 ? (uint32_t)want
				   : atomic_load_explicit(&dev->ctx_next[unit], memory_order_relaxed);
	unsigned int squatted = 0, live = 0;
	unsigned int names = want >= 0 ? 1 : SHIM_MAX_CTXTS;
	char first_squat[SHIM_NAME_MAX] = "";

	for (unsigned int i = 0; i < names; i++) {
		unsigned int n = (start + i) % SHIM_MAX_CTXTS;
		int ret = shim_dev_name_segment(ctx->name, sizeof(ctx->name), uid, unit, n);

		if (ret)
			return ret;
		for (int tries = 0;; tries++) {
			int fd = shm_open(ctx->name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC,
					  0600);
			enum shim_seg_state state;

			if (fd >= 0) {
				ret = shim_ctx_seg_lock_new(fd);
				if (ret) {
					/* nobody else unlinks an unlocked young
					 * name; it is still ours to remove */
					shm_unlink(ctx->name);
					close(fd);
					if (ret == -EAGAIN)
						break;
					return ret;
				}
				ctx->rx.ctx = (uint16_t)n;
				atomic_store_explicit(&dev->ctx_next[unit], (n + 1) % SHIM_MAX_CTXTS,
						      memory_order_relaxed);
				if (squatted)
					shim_trust_warn(
						dev,
						"skipped %u receive context name(s) of unit %u not "
						"owned by uid %u or not regular files (first: "
						"/dev/shm%s)",
						squatted, unit, uid, first_squat);
				return fd;
			}
			if (errno != EEXIST)
				return -errno;
			if (tries >= SHIM_RECLAIM_TRIES) {
				live++;
				break;
			}
			state = shim_ctx_seg_reclaim(dev, ctx->name, uid, unit, n, false);
			if (state == SHIM_SEG_LIVE) {
				live++;
				break;
			}
			if (state == SHIM_SEG_SQUATTED) {
				if (!squatted++)
					snprintf(first_squat, sizeof(first_squat), "%s", ctx->name);
				atomic_fetch_add_explicit(&dev->names_squatted, 1,
							  memory_order_relaxed);
				break;
			}
		}
	}
	if (want >= 0)
		return -EBUSY;
	if (squatted)
		shim_trust_warn(
			dev,
			"no free receive context on unit %u: %u name(s) in use, %u not owned "
			"by uid %u or not regular files (first: /dev/shm%s)",
			unit, live, squatted, uid, first_squat);
	else
		shim_trust_warn(dev, "no free receive context on unit %u: all %u names in use",
				unit, live);
	return -EBUSY;
}

static uint32_t shim_ctx_nonce(void)
{
	uint32_t nonce = 0;
	struct timespec ts;

	if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != (ssize_t)sizeof(nonce)) {
		/* early boot entropy shortage: uniqueness, not secrecy, is
		 * what the nonce is for */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		nonce = (uint32_t)ts.tv_nsec ^ ((uint32_t)getpid() << 12) ^ (uint32_t)ts.tv_sec;
	}
	return nonce ? nonce : 1; /* 0 reads as "unset" in dumps */
}

/* Bind the wake-up socket in the per-uid 0700 directory, so only our uid
 * can reach it.  If the directory is unusable (a neighbour planted
 * something at its name) the socket stays unbound: sleepers then wake on
 * their bounded timeout instead, slower but correct, and we say so. */
static int shim_ctx_sock_bind(struct shim_ctx *ctx, uint32_t uid)
{
	struct sockaddr_un sun;
	socklen_t len;
	int ret;

	ctx->sock_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctx->sock_fd < 0)
		return -errno;
	ret = shim_trust_wake_dir_check(uid);
	if (ret) {
		char dir[SHIM_NAME_MAX];

		shim_dev_name_wake_dir(dir, sizeof(dir), uid);
		shim_trust_warn(ctx->dev,
				"%s is not a directory owned by uid %u (%s): blocking waits of "
				"context %u poll instead of being woken",
				dir, uid, strerror(-ret), ctx->rx.ctx);
		return 0;
	}
	shim_dev_name_wake(&sun, &len, uid, ctx->rx.unit, ctx->rx.ctx, ctx->nonce);
	ret = bind(ctx->sock_fd, (struct sockaddr *)&sun, len);
	if (ret < 0 && errno == EADDRINUSE) {
		/* leftover of a crashed context with the same number and
		 * nonce, in our own directory */
		(void)unlink(sun.sun_path);
		ret = bind(ctx->sock_fd, (struct sockaddr *)&sun, len);
	}
	if (ret < 0) {
		ret = -errno;
		close(ctx->sock_fd);
		ctx->sock_fd = -1;
		return ret;
	}
	ctx->sock_bound = true;
	return 0;
}

/* Write the control block; ready is published last (release) so a peer
 * that sees ready == 1 with acquire sees every other field. */
static void shim_ctx_ctl_init(struct shim_ctx *ctx, uint64_t seg_size)
{
	struct shim_dev *dev = ctx->dev;
	struct shim_rcv_ctl *ctl = ctx->map;
	struct shim_rhq_entry *hdrq = (void *)((uint8_t *)ctx->map + SHIM_CTL_PAD);
	uint64_t start = 0;

	shim_dev_proc_starttime(0, &start);
	ctl->abi_version = SHIM_ABI_VERSION;
	ctl->hdrq_cnt = ctx->hdrq_cnt;
	ctl->egr_blocks = ctx->egr_blocks;
	ctl->mtu = dev->params.mtu;
	ctl->owner_pid = (uint32_t)getpid();
	ctl->nonce = ctx->nonce;
	ctl->owner_start = start;
	ctl->hdrq_off = SHIM_CTL_PAD;
	ctl->egr_off = SHIM_CTL_PAD + (uint64_t)ctx->hdrq_cnt * sizeof(struct shim_rhq_entry);
	ctl->seg_size = seg_size;
	ctl->claim_off = ctx->claim_off; /* for the senders: we use ctx's copy */
	ctl->claim_cnt = ctx->claim_cnt; /* zero-filled by ftruncate: all free */
	ctl->rgn_off = ctx->rgn_off;     /* likewise: every region entry empty */
	ctl->rgn_cnt = ctx->rgn_cnt;
	ctl->jkey = dev->params.jkey;
	ctl->jkey_src = dev->params.jkey_src;
	ctl->flags = SHIM_CTL_F_OWNER_LOCK; /* shim_ctx_seg_create() took it */
	ctl->lid = dev->units[ctx->rx.unit].lid;
	ctl->ctx = ctx->rx.ctx;
	ctl->unit = ctx->rx.unit;
	/* Position p is valid when seq == p + 1; 0 is never p + 1 in the
	 * first lap, and after a wrap the old value is p + 1 - hdrq_cnt. */
	for (uint32_t i = 0; i < ctx->hdrq_cnt; i++)
		atomic_store_explicit(&hdrq[i].seq, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->hdr_head, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->egr_head, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->sleeping, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->rx_pkts, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->rx_dropped, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->tx_nocredit, 0, memory_order_relaxed);
	ctl->magic = SHIM_CTL_MAGIC;
	atomic_store_explicit(&ctl->ready, 1, memory_order_release);
}

static uint16_t shim_ctx_clamp16(uint64_t v)
{
	return v > 0xffff ? 0xffff : (uint16_t)v;
}

/* What HFI1_IOCTL_CTXT_INFO and HFI1_IOCTL_USER_INFO would report.  u16
 * fields saturate: the authoritative sizes are in struct shim_rx. */
static void shim_ctx_fill_info(const struct shim_ctx *ctx, struct hfi1_ctxt_info *cinfo,
			       struct hfi1_base_info *binfo)
{
	const struct shim_dev *dev = ctx->dev;
	const struct shim_rx *rx = &ctx->rx;

	if (cinfo) {
		memset(cinfo, 0, sizeof(*cinfo));
		cinfo->runtime_flags = HFI1_CAP_SDMA | HFI1_CAP_MULTI_PKT_EGR |
				       HFI1_CAP_NODROP_RHQ_FULL | HFI1_CAP_NODROP_EGR_FULL;
		cinfo->rcvegr_size = rx->mtu;
		cinfo->num_active = (uint16_t)dev->num_units;
		cinfo->unit = rx->unit;
		cinfo->ctxt = rx->ctx;
		cinfo->subctxt = 0;
		cinfo->rcvtids = SHIM_TID_MAX;
		cinfo->credits = shim_ctx_clamp16(ctx->egr_blocks); /* PIO credits: 64 B blocks */
		cinfo->numa_node = (uint16_t)dev->units[rx->unit].numa_node;
		cinfo->rec_cpu = 0xffff;
		cinfo->send_ctxt = rx->ctx;
		cinfo->egrtids = shim_ctx_clamp16((uint64_t)ctx->egr_blocks * SHIM_BLOCK / rx->mtu);
		cinfo->rcvhdrq_cnt = shim_ctx_clamp16(ctx->hdrq_cnt);
		cinfo->rcvhdrq_entsize = sizeof(struct shim_rhq_entry);
		cinfo->sdma_ring_size = SHIM_SDMA_RING_DEFAULT;
	}
	if (binfo) {
		memset(binfo, 0, sizeof(*binfo));
		binfo->hw_version = SHIM_ABI_VERSION;
		binfo->sw_version = (HFI1_USER_SWMAJOR << HFI1_SWMAJOR_SHIFT) | HFI1_USER_SWMINOR;
		binfo->jkey = rx->jkey;
		binfo->bthqp = 0x80;
		binfo->sc_credits_addr = (uintptr_t)&rx->ctl->hdr_head;
		binfo->pio_bufbase_sop = 0;
		binfo->pio_bufbase = 0;
		binfo->rcvhdr_bufbase = (uintptr_t)rx->hdrq;
		binfo->rcvegr_bufbase = (uintptr_t)rx->egr;
		binfo->status_bufbase = (uintptr_t)rx->ctl;
	}
}

int shim_ctx_open(struct shim_dev *dev, int unit, struct shim_ctx **ctxp,
		  struct hfi1_ctxt_info *cinfo, struct hfi1_base_info *binfo)
{
	return shim_ctx_open_at(dev, unit, -1, 0, ctxp, cinfo, binfo);
}

int shim_ctx_open_at(struct shim_dev *dev, int unit, int want, uint32_t nonce,
		     struct shim_ctx **ctxp, struct hfi1_ctxt_info *cinfo,
		     struct hfi1_base_info *binfo)
{
	uint32_t uid = (uint32_t)geteuid();
	struct shim_ctx *ctx;
	uint64_t seg_size;
	int fd, ret;

	if (!dev || !ctxp || unit < 0 || unit >= dev->num_units || want >= (int)SHIM_MAX_CTXTS)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->dev = dev;
	ctx->sock_fd = -1;
	ctx->seg_fd = -1;
	ctx->wait_fd = -1;
	ctx->owner = getpid();
	ret = shim_tid_table_create(ctx);
	if (ret)
		goto err_free;
	ctx->rx.unit = (uint16_t)unit;
	ctx->hdrq_cnt = dev->params.hdrq_cnt;
	ctx->egr_blocks = dev->params.egr_bytes / SHIM_BLOCK;
	ctx->nonce = nonce ? nonce : shim_ctx_nonce();
	ctx->claim_cnt = SHIM_CLAIM_SLOTS;
	ctx->claim_off = SHIM_CTL_PAD + (uint64_t)ctx->hdrq_cnt * sizeof(struct shim_rhq_entry) +
			 dev->params.egr_bytes;
	ctx->rgn_cnt = SHIM_RGN_SLOTS;
	ctx->rgn_off = ctx->claim_off + (uint64_t)ctx->claim_cnt * sizeof(struct shim_claim);
	seg_size = ctx->rgn_off + (uint64_t)ctx->rgn_cnt * sizeof(struct shim_rgn);

	if (want < 0) /* a scalable endpoint's later contexts: its first swept */
		shim_ctx_sweep(dev, uid, (unsigned int)unit);
	fd = shim_ctx_seg_create(ctx, uid, (unsigned int)unit, want);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}
	shim_ctx_mine_set(dev, (unsigned int)unit, ctx->rx.ctx, true);
	/* O_CREAT's mode is filtered by the umask; owner-only is a security
	 * property here (peers refuse anything else), so set it explicitly. */
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)seg_size) < 0) {
		ret = -errno;
		goto err_unlink;
	}
	ctx->map = mmap(NULL, seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ctx->map == MAP_FAILED) {
		ctx->map = NULL;
		ret = -errno;
		goto err_unlink;
	}
	ctx->map_len = seg_size;
	shim_dev_prefault(ctx->map, seg_size);
	/* bind before ready: a peer may want to wake us as soon as it maps */
	ret = shim_ctx_sock_bind(ctx, uid);
	if (ret)
		goto err_unmap;

	ctx->rx.ctl = ctx->map;
	ctx->rx.hdrq = (void *)((uint8_t *)ctx->map + SHIM_CTL_PAD);
	ctx->rx.egr = (uint8_t *)ctx->map + SHIM_CTL_PAD +
		      (size_t)ctx->hdrq_cnt * sizeof(struct shim_rhq_entry);
	ctx->rx.hdrq_mask = ctx->hdrq_cnt - 1;
	ctx->rx.egr_mask = ctx->egr_blocks - 1;
	ctx->rx.head = 0;
	ctx->rx.egr_head = 0;
	ctx->rx.head_pub = 0;
	ctx->rx.jkey = dev->params.jkey;
	ctx->rx.lid = dev->units[unit].lid;
	ctx->rx.mtu = dev->params.mtu;
	shim_ctx_ctl_init(ctx, seg_size);

	ctx->seg_fd = fd; /* kept open: it holds the liveness lock */
	shim_ctx_fill_info(ctx, cinfo, binfo);
	*ctxp = ctx;
	return 0;

err_unmap:
	munmap(ctx->map, seg_size);
err_unlink:
	shim_ctx_mine_set(dev, (unsigned int)unit, ctx->rx.ctx, false);
	shm_unlink(ctx->name);
	close(fd);
err_free:
	shim_tid_table_destroy(ctx);
	free(ctx);
	return ret;
}

/* True if the name still refers to this context's segment.  While we
 * hold its lock nobody following the protocol unlinks it, but an older
 * shim (pid-based) might have: then the name may be a stranger's. */
static bool shim_ctx_owns_name(const struct shim_ctx *ctx)
{
	char path[SHIM_NAME_MAX + 16];
	struct stat mine, named;

	snprintf(path, sizeof(path), "/dev/shm%s", ctx->name);
	if (fstat(ctx->seg_fd, &mine) < 0 || mine.st_nlink == 0)
		return false;
	if (fstatat(AT_FDCWD, path, &named, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return mine.st_dev == named.st_dev && mine.st_ino == named.st_ino;
}

void shim_ctx_close(struct shim_ctx *ctx)
{
	if (!ctx)
		return;
	shim_udp_close(ctx);
	/* Only the creating process retires the context: a forked child
	 * closing its inherited copy must not pull it from under the
	 * parent (nor drop the lock: the parent's descriptor still holds
	 * it).  Peers that open the name from now on get -EAGAIN, not a
	 * context nobody will ever drain. */
	if (ctx->owner == getpid()) {
		atomic_store_explicit(&ctx->rx.ctl->ready, 0, memory_order_release);
		if (shim_ctx_owns_name(ctx))
			shm_unlink(ctx->name);
		if (ctx->sock_bound) {
			struct sockaddr_un sun;
			socklen_t len;

			shim_dev_name_wake(&sun, &len, (uint32_t)geteuid(), ctx->rx.unit,
					   ctx->rx.ctx, ctx->nonce);
			(void)unlink(sun.sun_path);
		}
	}
	/* also in a forked child: it no longer holds this context, so its
	 * sweeps judge the number like any other (the parent's lock says
	 * live) */
	shim_ctx_mine_set(ctx->dev, ctx->rx.unit, ctx->rx.ctx, false);
	munmap(ctx->map, ctx->map_len);
	if (ctx->sock_fd >= 0)
		close(ctx->sock_fd);
	if (ctx->seg_fd >= 0)
		close(ctx->seg_fd); /* the last owner descriptor: drops the lock */
	shim_tid_table_destroy(ctx);
	free(ctx);
}

struct shim_rx *shim_ctx_rx(struct shim_ctx *ctx)
{
	return ctx ? &ctx->rx : NULL;
}

void shim_ctx_addr(const struct shim_ctx *ctx, struct shim_addr *addr)
{
	if (!ctx || !addr)
		return;
	shim_ctx_addr_shm(ctx, addr);
	shim_udp_addr_fill(ctx, addr);
}

int shim_ctx_wait_fd(const struct shim_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	return ctx->wait_fd >= 0 ? ctx->wait_fd : ctx->sock_fd;
}

int shim_ctx_sleep_arm(struct shim_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	int rc = shim_udp_wait_arm(ctx);

	if (rc)
		return rc;
	/* seq_cst store then load of the ring: either we see the entry a
	 * producer published, or the producer sees sleeping == 1 (up to the
	 * relaxed-load window documented at shim_pio_publish()). */
	atomic_store_explicit(&ctx->rx.ctl->sleeping, 1, memory_order_seq_cst);
	if (shim_rx_peek(&ctx->rx)) {
		atomic_store_explicit(&ctx->rx.ctl->sleeping, 0, memory_order_relaxed);
		shim_udp_wait_disarm(ctx);
		return -EAGAIN;
	}
	return 0;
}

void shim_ctx_sleep_disarm(struct shim_ctx *ctx)
{
	char buf[16];

	if (!ctx)
		return;
	atomic_store_explicit(&ctx->rx.ctl->sleeping, 0, memory_order_relaxed);
	shim_udp_wait_disarm(ctx);
	/* Bounded drain: producers that still saw sleeping == 1 may add a
	 * few more, which the next disarm takes. */
	for (int i = 0; i < 1024; i++)
		if (recv(ctx->sock_fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
			break;
}
