/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_ctx.c - receive contexts of the software SuperNIC.
 *
 * A context is a POSIX shared-memory segment /opx.<uid>.<unit>.<ctx>
 * laid out as shim_abi.h describes.  The context number is the lowest one
 * whose name could be created with O_EXCL; assignment is serialised per
 * unit with flock() on /dev/shm/opx.<uid>.<unit>.lock so that the
 * "inspect a leftover segment, unlink it, create it again" sequence is
 * atomic with respect to other processes assigning on the same unit.
 *
 * A leftover segment is reclaimed only when its owner is certainly gone
 * (pid missing or recycled), or when it never became a valid context and
 * is older than SHIM_STALE_AGE_S.  A live job's segment is never touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

enum shim_seg_state {
	SHIM_SEG_LIVE,   /* owned by a running process: skip the number */
	SHIM_SEG_STALE,  /* abandoned: unlink and retry the number */
	SHIM_SEG_GONE,   /* vanished meanwhile: retry the number */
};

static enum shim_seg_state shim_ctx_seg_inspect(const char *name)
{
	enum shim_seg_state state = SHIM_SEG_LIVE;
	const struct shim_rcv_ctl *ctl;
	struct stat st;
	int fd;

	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? SHIM_SEG_GONE : SHIM_SEG_LIVE;
	if (fstat(fd, &st) < 0)
		goto out; /* cannot judge: treat as live */
	if ((size_t)st.st_size >= sizeof(*ctl)) {
		ctl = mmap(NULL, sizeof(*ctl), PROT_READ, MAP_SHARED, fd, 0);
		if (ctl == MAP_FAILED)
			goto out;
		/* The magic is written after the owner fields and before
		 * ready, all under the unit lock we now hold: a segment with
		 * the magic has trustworthy owner fields. */
		if (ctl->magic == SHIM_CTL_MAGIC) {
			if (shim_proc_gone((pid_t)ctl->owner_pid, ctl->owner_start))
				state = SHIM_SEG_STALE;
			munmap((void *)ctl, sizeof(*ctl));
			goto out;
		}
		munmap((void *)ctl, sizeof(*ctl));
	}
	/* Not a valid context: a creator that died before finishing, or
	 * something else.  Give a possible slow creator time first. */
	if (time(NULL) - st.st_mtime >= SHIM_STALE_AGE_S)
		state = SHIM_SEG_STALE;
out:
	close(fd);
	return state;
}

/* Create the lowest free segment of the unit.  Returns the fd and fills
 * ctx->name / ctx->rx.ctx, or -errno (-EBUSY when all are taken). */
static int shim_ctx_seg_create(struct shim_ctx *ctx, uint32_t uid, unsigned int unit)
{
	struct shim_dev *dev = ctx->dev;

	for (unsigned int n = 0; n < SHIM_MAX_CTXTS; n++) {
		int ret = shim_name_segment(ctx->name, sizeof(ctx->name), uid, unit, n);

		if (ret)
			return ret;
		for (int tries = 0;; tries++) {
			int fd = shm_open(ctx->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
			enum shim_seg_state state;

			if (fd >= 0) {
				ctx->rx.ctx = (uint16_t)n;
				return fd;
			}
			if (errno != EEXIST)
				return -errno;
			if (tries >= SHIM_RECLAIM_TRIES)
				break;
			state = shim_ctx_seg_inspect(ctx->name);
			if (state == SHIM_SEG_LIVE)
				break;
			if (state == SHIM_SEG_STALE && shm_unlink(ctx->name) == 0)
				atomic_fetch_add_explicit(&dev->stale_reclaimed, 1,
							  memory_order_relaxed);
		}
	}
	return -EBUSY;
}

static int shim_ctx_lock_unit(uint32_t uid, unsigned int unit)
{
	char path[96];
	int fd, ret;

	snprintf(path, sizeof(path), "/dev/shm/opx.%u.%u.lock", uid, unit);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	do {
		ret = flock(fd, LOCK_EX);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
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

static int shim_ctx_sock_bind(struct shim_ctx *ctx, uint32_t uid)
{
	struct sockaddr_un sun;
	socklen_t len;

	ctx->sock_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctx->sock_fd < 0)
		return -errno;
	shim_name_wake(&sun, &len, uid, ctx->rx.unit, ctx->rx.ctx, ctx->nonce);
	if (bind(ctx->sock_fd, (struct sockaddr *)&sun, len) < 0) {
		int ret = -errno;

		close(ctx->sock_fd);
		ctx->sock_fd = -1;
		return ret;
	}
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

	shim_proc_starttime(0, &start);
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
	ctl->claim_off = seg_size - (uint64_t)SHIM_CLAIM_SLOTS * sizeof(struct shim_claim);
	ctl->claim_cnt = SHIM_CLAIM_SLOTS; /* zero-filled by ftruncate: all free */
	ctl->jkey = dev->params.jkey;
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

static uint16_t shim_clamp16(uint64_t v)
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
		cinfo->credits = shim_clamp16(ctx->egr_blocks); /* PIO credits: 64 B blocks */
		cinfo->numa_node = (uint16_t)dev->units[rx->unit].numa_node;
		cinfo->rec_cpu = 0xffff;
		cinfo->send_ctxt = rx->ctx;
		cinfo->egrtids = shim_clamp16((uint64_t)ctx->egr_blocks * SHIM_BLOCK / rx->mtu);
		cinfo->rcvhdrq_cnt = shim_clamp16(ctx->hdrq_cnt);
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
	uint32_t uid = (uint32_t)getuid();
	struct shim_ctx *ctx;
	uint64_t seg_size;
	int lock_fd, fd, ret;

	if (!dev || !ctxp || unit < 0 || unit >= dev->num_units)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->dev = dev;
	ctx->sock_fd = -1;
	ret = shim_tid_table_create(ctx);
	if (ret)
		goto err_free;
	ctx->rx.unit = (uint16_t)unit;
	ctx->hdrq_cnt = dev->params.hdrq_cnt;
	ctx->egr_blocks = dev->params.egr_bytes / SHIM_BLOCK;
	ctx->nonce = shim_ctx_nonce();
	seg_size = SHIM_CTL_PAD + (uint64_t)ctx->hdrq_cnt * sizeof(struct shim_rhq_entry) +
		   dev->params.egr_bytes + (uint64_t)SHIM_CLAIM_SLOTS * sizeof(struct shim_claim);

	lock_fd = shim_ctx_lock_unit(uid, (unsigned int)unit);
	if (lock_fd < 0) {
		ret = lock_fd;
		goto err_free;
	}
	fd = shim_ctx_seg_create(ctx, uid, (unsigned int)unit);
	if (fd < 0) {
		ret = fd;
		goto err_unlock;
	}
	/* O_CREAT's mode is filtered by the umask; owner-only is a security
	 * property here, so set it explicitly. */
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
	ctx->rx.jkey = dev->params.jkey;
	ctx->rx.lid = dev->units[unit].lid;
	ctx->rx.mtu = dev->params.mtu;
	shim_ctx_ctl_init(ctx, seg_size);

	close(fd);
	close(lock_fd); /* releases the flock */
	shim_ctx_fill_info(ctx, cinfo, binfo);
	*ctxp = ctx;
	return 0;

err_unmap:
	munmap(ctx->map, seg_size);
err_unlink:
	shm_unlink(ctx->name);
	close(fd);
err_unlock:
	close(lock_fd);
err_free:
	shim_tid_table_destroy(ctx);
	free(ctx);
	return ret;
}

/* True if the name still refers to this context's segment; after a
 * (mistaken) reclaim by someone else it would name a stranger's. */
static bool shim_ctx_owns_name(const struct shim_ctx *ctx)
{
	const struct shim_rcv_ctl *ctl;
	struct stat st;
	bool mine = false;
	int fd;

	fd = shm_open(ctx->name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(*ctl)) {
		ctl = mmap(NULL, sizeof(*ctl), PROT_READ, MAP_SHARED, fd, 0);
		if (ctl != MAP_FAILED) {
			mine = ctl->magic == SHIM_CTL_MAGIC && ctl->nonce == ctx->nonce &&
			       ctl->owner_pid == (uint32_t)getpid();
			munmap((void *)ctl, sizeof(*ctl));
		}
	}
	close(fd);
	return mine;
}

void shim_ctx_close(struct shim_ctx *ctx)
{
	if (!ctx)
		return;
	/* Only the creating process retires the context: a forked child
	 * closing its inherited copy must not pull it from under the
	 * parent.  Peers that open the name from now on get -EAGAIN, not a
	 * context nobody will ever drain. */
	if (ctx->rx.ctl->owner_pid == (uint32_t)getpid()) {
		atomic_store_explicit(&ctx->rx.ctl->ready, 0, memory_order_release);
		if (shim_ctx_owns_name(ctx))
			shm_unlink(ctx->name);
	}
	munmap(ctx->map, ctx->map_len);
	if (ctx->sock_fd >= 0)
		close(ctx->sock_fd);
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
	memset(addr, 0, sizeof(*addr));
	addr->host_id = ctx->dev->host_id;
	addr->ipv4 = 0;
	addr->udp_port = 0;
	addr->lid = ctx->rx.lid;
	addr->ctx = ctx->rx.ctx;
	addr->unit = ctx->rx.unit;
	addr->nonce = ctx->nonce;
	addr->uid = (uint32_t)getuid();
	addr->pid = (uint32_t)getpid();
}

int shim_ctx_wait_fd(const struct shim_ctx *ctx)
{
	return ctx ? ctx->sock_fd : -EINVAL;
}

int shim_ctx_sleep_arm(struct shim_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	/* seq_cst store then load of the ring: either we see the entry a
	 * producer published, or the producer sees sleeping == 1 (up to the
	 * relaxed-load window documented at shim_pio_publish()). */
	atomic_store_explicit(&ctx->rx.ctl->sleeping, 1, memory_order_seq_cst);
	if (shim_rx_peek(&ctx->rx)) {
		atomic_store_explicit(&ctx->rx.ctl->sleeping, 0, memory_order_relaxed);
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
	/* Bounded drain: producers that still saw sleeping == 1 may add a
	 * few more, which the next disarm takes. */
	for (int i = 0; i < 1024; i++)
		if (recv(ctx->sock_fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
			break;
}
