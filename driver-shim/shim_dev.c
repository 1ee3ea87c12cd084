/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_dev.c - device model of the software SuperNIC: units, ports, LIDs,
 * NUMA affinity and host identity, plus the naming and process-identity
 * helpers the context and peer code share, and the shim's error strings.
 *
 * The device is a process-wide object, like an open /dev/hfi1_N: the
 * first shim_dev_open() builds it, later opens share it (reference
 * counted under a mutex), the last close frees it.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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

#define SHIM_FNV_OFFSET 0xcbf29ce484222325ULL
#define SHIM_FNV_PRIME 0x100000001b3ULL

/* LIDs 0 and >= 0xC000 (multicast) are not unicast LIDs. */
#define SHIM_LID_SPAN 0xBFFEu

static pthread_mutex_t shim_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_dev *shim_dev_global;

static bool shim_dev_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint64_t shim_dev_fnv1a(uint64_t h, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= SHIM_FNV_PRIME;
	}
	return h;
}

/* Host identity: the boot id names the kernel instance, the network
 * namespace inode stands in for "which host" when several simulated hosts
 * share one kernel.  Both are needed: namespaces alone repeat across
 * reboots and machines, boot ids alone cannot tell namespaces apart. */
static uint64_t shim_dev_host_id_compute(void)
{
	uint64_t h = SHIM_FNV_OFFSET;
	char buf[128];
	struct stat st;
	ssize_t n = -1;
	int fd;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	if (n > 0) {
		h = shim_dev_fnv1a(h, buf, (size_t)n);
	} else if (gethostname(buf, sizeof(buf)) == 0) {
		/* no procfs: the host name is the best identity left */
		buf[sizeof(buf) - 1] = '\0';
		h = shim_dev_fnv1a(h, buf, strlen(buf));
	}
	if (stat("/proc/self/ns/net", &st) == 0) {
		uint64_t ino = (uint64_t)st.st_ino;
		uint64_t dev = (uint64_t)st.st_dev;

		h = shim_dev_fnv1a(h, &ino, sizeof(ino));
		h = shim_dev_fnv1a(h, &dev, sizeof(dev));
	}
	return h ? h : SHIM_FNV_OFFSET; /* 0 is reserved for "unknown host" */
}

static int shim_dev_params_resolve(const struct shim_dev_params *in, struct shim_dev_params *out)
{
	*out = *in;
	if (out->num_units == 0)
		out->num_units = 1;
	if (out->num_units < 0 || out->num_units > (int)SHIM_MAX_UNITS)
		return -EINVAL;
	if (out->force_unit < 0)
		out->force_unit = -1;
	if (out->mtu == 0)
		out->mtu = SHIM_MTU_DEFAULT;
	if (out->mtu < SHIM_BLOCK || out->mtu > SHIM_MTU_MAX || out->mtu % SHIM_BLOCK)
		return -EINVAL;
	if (out->hdrq_cnt == 0)
		out->hdrq_cnt = SHIM_HDRQ_CNT_DEFAULT;
	if (!shim_dev_is_pow2(out->hdrq_cnt) || out->hdrq_cnt < 64 || out->hdrq_cnt > 65536)
		return -EINVAL;
	if (out->egr_bytes == 0)
		out->egr_bytes = SHIM_EGR_BYTES_DEFAULT;
	/* 4 MTUs at least so a full-size packet never starves behind a lap
	 * skip; 1 GiB at most so every block index fits the 24-bit RHF. */
	if (!shim_dev_is_pow2(out->egr_bytes) || (uint64_t)out->egr_bytes < 4ull * out->mtu ||
	    out->egr_bytes > (1u << 30))
		return -EINVAL;
	if (out->auth < SHIM_AUTH_OFF || out->auth > SHIM_AUTH_FULL)
		return -EINVAL;
	return 0;
}

static void shim_dev_units_init(struct shim_dev *dev)
{
	int nodes = 1;

	dev->numa_ok = numa_available() >= 0;
	if (dev->numa_ok) {
		nodes = numa_num_configured_nodes();
		if (nodes < 1)
			nodes = 1;
	}
	/* LIDs must differ between hosts: a sender is known by (lid, ctx).
	 * The low 16 bits of the host's IPv4 address differ between the
	 * hosts of one subnet up to a /16, which a hash of the host id
	 * would not promise (two of 100 hosts collide with 10 % odds).  A
	 * host with no address but loopback talks to nobody else. */
	uint32_t ip = ntohl(shim_dev_host_ipv4());
	uint64_t base = (ip >> 24) == 127 ? dev->host_id
					  : (uint64_t)(ip & 0xffffu) * (uint64_t)dev->num_units;

	for (int i = 0; i < dev->num_units; i++) {
		struct shim_unit_info *u = &dev->units[i];

		u->unit = (uint16_t)i;
		u->lid = (uint16_t)(1 + ((base + (uint64_t)i) % SHIM_LID_SPAN));
		u->mtu = dev->params.mtu;
		u->numa_node = dev->numa_ok ? i % nodes : 0;
		u->port = 1;
		u->state = 1;
	}
}

/* Random first context number per unit: ranks of one job starting
 * together spread over the name space instead of all probing 0, 1, 2...
 * (which made n opens cost O(n^2) name probes). */
static void shim_dev_cursors_init(struct shim_dev *dev)
{
	uint32_t r[SHIM_MAX_UNITS];
	struct timespec ts;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (unsigned int i = 0; i < SHIM_MAX_UNITS; i++)
			r[i] = (uint32_t)shim_dev_fnv1a(SHIM_FNV_OFFSET ^ (uint64_t)getpid() ^ i,
							&ts, sizeof(ts));
	}
	for (unsigned int i = 0; i < SHIM_MAX_UNITS; i++)
		atomic_init(&dev->ctx_next[i], r[i] % SHIM_MAX_CTXTS);
}

int shim_dev_open(const struct shim_dev_params *params, struct shim_dev **devp)
{
	struct shim_dev_params p;
	struct shim_dev *dev;
	int ret;

	if (!params || !devp)
		return -EINVAL;
	ret = shim_dev_params_resolve(params, &p);
	if (ret)
		return ret;

	pthread_mutex_lock(&shim_dev_lock);
	if (shim_dev_global) {
		/* Like a second open of the same device node: the model is
		 * already built, later parameters do not rebuild it. */
		shim_dev_global->refcnt++;
		*devp = shim_dev_global;
		pthread_mutex_unlock(&shim_dev_lock);
		return 0;
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		pthread_mutex_unlock(&shim_dev_lock);
		return -ENOMEM;
	}
	dev->refcnt = 1;
	dev->params = p;
	dev->num_units = p.num_units;
	dev->host_id = shim_dev_host_id_compute();
	atomic_init(&dev->stale_reclaimed, 0);
	atomic_init(&dev->names_squatted, 0);
	shim_dev_cursors_init(dev);
	shim_dev_units_init(dev);
	dev->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (dev->wake_fd < 0) {
		ret = -errno;
		free(dev);
		pthread_mutex_unlock(&shim_dev_lock);
		return ret;
	}
	shim_dev_global = dev;
	*devp = dev;
	pthread_mutex_unlock(&shim_dev_lock);
	return 0;
}

void shim_dev_close(struct shim_dev *dev)
{
	if (!dev)
		return;
	pthread_mutex_lock(&shim_dev_lock);
	if (dev != shim_dev_global || dev->refcnt <= 0) {
		/* not ours or already gone: a double close must not free twice */
		pthread_mutex_unlock(&shim_dev_lock);
		return;
	}
	if (--dev->refcnt == 0) {
		shim_dev_global = NULL;
		close(dev->wake_fd);
		free(dev);
	}
	pthread_mutex_unlock(&shim_dev_lock);
}

int shim_dev_num_units(const struct shim_dev *dev)
{
	if (!dev)
		return -EINVAL;
	return dev->num_units;
}

int shim_dev_unit_info(const struct shim_dev *dev, int unit, struct shim_unit_info *info)
{
	if (!dev || !info || unit < 0 || unit >= dev->num_units)
		return -EINVAL;
	*info = dev->units[unit];
	return 0;
}

int shim_dev_select_unit(const struct shim_dev *dev)
{
	int cpu, node;

	if (!dev)
		return -EINVAL;
	if (dev->params.force_unit >= 0)
		return dev->params.force_unit < dev->num_units ? dev->params.force_unit : -EINVAL;
	if (!dev->numa_ok)
		return 0;
	/* Like hardware selection: the unit attached to the caller's node
	 * keeps PIO writes and receive polling off the interconnect. */
	cpu = sched_getcpu();
	if (cpu < 0)
		return 0;
	node = numa_node_of_cpu(cpu);
	if (node < 0)
		return 0;
	for (int i = 0; i < dev->num_units; i++)
		if (dev->units[i].numa_node == node)
			return i;
	return 0;
}

uint64_t shim_dev_host_id(const struct shim_dev *dev)
{
	return dev ? dev->host_id : 0;
}

/* ---------------------------------------------------------------------
 * Names.  The segment name carries the uid so users never collide and the
 * permission check stays with the kernel; the wake-up name carries the
 * nonce so a reused context number never receives a stale wake-up.  A
 * name says where to look, never whom to trust: shim_trust.c checks
 * what is found there.
 */
int shim_dev_name_segment(char *buf, size_t len, uint32_t uid, unsigned int unit, unsigned int ctx)
{
	int n = snprintf(buf, len, "/opx.%u.%u.%u", uid, unit, ctx);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Wake-up sockets are pathname sockets in a per-uid 0700 directory
 * (shim_trust_wake_dir_check): the kernel then lets only our uid (and root)
 * send to them.  Abstract names, used before, accept anyone's datagram. */
void shim_dev_name_wake_dir(char *buf, size_t len, uint32_t uid)
{
	snprintf(buf, len, "/dev/shm/opx.%u.wake", uid);
}

void shim_dev_name_wake(struct sockaddr_un *sun, socklen_t *len, uint32_t uid, unsigned int unit,
			unsigned int ctx, uint32_t nonce)
{
	char dir[SHIM_NAME_MAX];
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	shim_dev_name_wake_dir(dir, sizeof(dir), uid);
	/* at most 22 + 1 + 3 + 1 + 5 + 1 + 8 bytes: always fits sun_path */
	n = snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/%u.%u.%08x", dir, unit, ctx, nonce);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(sun->sun_path) - 1)
		n = (int)sizeof(sun->sun_path) - 1;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

/* ---------------------------------------------------------------------
 * Process identity.  A pid alone is reused; pid plus start time is not.
 */
int shim_dev_proc_starttime(pid_t pid, uint64_t *start)
{
	char path[64], buf[1024];
	unsigned long long v;
	ssize_t n;
	char *p;
	int fd;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	/* comm (field 2) may hold spaces and parentheses: fields 3.. start
	 * after the last ')'.  starttime is field 22, the 20th after it. */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	if (sscanf(p, " %llu", &v) != 1)
		return -EIO;
	*start = v;
	return 0;
}

bool shim_dev_proc_gone(pid_t pid, uint64_t start)
{
	uint64_t now;

	if (pid <= 0)
		return true;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	/* Exists (or EPERM: exists under another uid).  A different start
	 * time means the pid was recycled. */
	if (start && shim_dev_proc_starttime(pid, &now) == 0 && now != start)
		return true;
	return false;
}

/* Fault a shared mapping's pages in, writable, before the first packet
 * needs them (contexts and shm peers). */
void shim_dev_prefault(void *addr, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	/* bounded: a huge ring (FI_OPX_EAGER_RING_BYTES) faults in the rest
	 * as it is used, instead of every peer paying for it at once */
	(void)madvise(addr, len < SHIM_PREFAULT_MAX ? len : SHIM_PREFAULT_MAX,
		      MADV_POPULATE_WRITE);
#else
	(void)addr;
	(void)len;
#endif
}

/* ---------------------------------------------------------------------
 * This host's IPv4 addresses.
 */
static bool shim_dev_ipv4_loopback(uint32_t ipv4)
{
	return (ntohl(ipv4) >> 24) == 127;
}

uint32_t shim_dev_host_ipv4(void)
{
	struct ifaddrs *ifa, *it;
	uint32_t found = htonl(INADDR_LOOPBACK);

	if (getifaddrs(&ifa) < 0)
		return found;
	for (it = ifa; it; it = it->ifa_next) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)it->ifa_addr;

		if (!sin || sin->sin_family != AF_INET || !(it->ifa_flags & IFF_UP) ||
		    (it->ifa_flags & IFF_LOOPBACK) || shim_dev_ipv4_loopback(sin->sin_addr.s_addr))
			continue;
		found = sin->sin_addr.s_addr;
		break;
	}
	freeifaddrs(ifa);
	return found;
}

bool shim_dev_host_has_ipv4(uint32_t ipv4)
{
	struct ifaddrs *ifa, *it;
	bool mine = false;

	if (shim_dev_ipv4_loopback(ipv4))
		return true;
	if (getifaddrs(&ifa) < 0)
		return false;
	for (it = ifa; it && !mine; it = it->ifa_next) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)it->ifa_addr;

		mine = sin && sin->sin_family == AF_INET && sin->sin_addr.s_addr == ipv4;
	}
	freeifaddrs(ifa);
	return mine;
}

/* The shim's -errno values as strings for logs (declared in shim_dev.h). */
const char *shim_dev_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case EAGAIN:
		return "no credits or not ready: progress and retry";
	case EMSGSIZE:
		return "reservation larger than the ring";
	case EBUSY:
		return "all receive contexts of the unit are in use";
	case ENOENT:
		return "no such receive context";
	case ESTALE:
		return "receive context was reused (nonce mismatch)";
	case EPROTO:
		return "receive context has an incompatible or corrupt layout";
	case EHOSTUNREACH:
		return "peer is on another host";
	case EACCES:
	case EPERM:
		return "permission denied";
	case ENAMETOOLONG:
		return "name too long";
	case EUSERS:
		return "receive context has no free sender slot";
	default:
		return "unknown shim error";
	}
}
