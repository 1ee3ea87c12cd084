/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_auth.c - where the udp wire's secret comes from (FI_OPX_AUTH*).
 *
 * On one host the kernel keeps users and jobs apart (owner-only segments,
 * job keys checked before the first packet).  Across hosts nothing stamps
 * a datagram with its sender, so every datagram carries a MAC keyed by a
 * secret only the job holds (driver-shim/shim_udp_auth.c).  The secret,
 * in order:
 *   1. FI_OPX_AUTH_KEY: hex, 16..64 bytes, the same for every process
 *      (a site's or a launcher's own distribution);
 *   2. else the user's key file (FI_OPX_AUTH_KEY_FILE, by default
 *      $XDG_CONFIG_HOME/opx/auth.key or ~/.config/opx/auth.key: 32 random
 *      bytes in hex, created mode 0600 on first use; refused when it is a
 *      symlink, not the user's, or readable by group or others), mixed
 *      with the launcher's per-job secret where there is one (Open MPI's
 *      random OMPI_MCA_orte_precondition_transports, FI_OPX_UUID as real
 *      OPX uses it).  Hosts that share home directories share the file;
 *      others get it copied (docs: the README's trust section).
 *   3. neither: the launcher's job secret alone.
 * Without any of them the udp wire stays closed (this host's peers only)
 * unless FI_OPX_AUTH=off says to run it unauthenticated.
 *
 * Read lazily, once, when a device that may open the udp wire is built,
 * so a fi_info that never opens an endpoint creates no file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "opx.h"

#define OPX_AUTH_FILE_BYTES 32u
#define OPX_AUTH_KEY_MIN 16u
#define OPX_AUTH_KEY_MAX 64u

static pthread_once_t opx_auth_once = PTHREAD_ONCE_INIT;
static struct {
	bool have;                         /* a secret was found */
	uint8_t key[SHIM_AUTH_KEY_BYTES];  /* the job's secret */
	char from[160];                    /* where it came from, for the log */
} opx_auth;

/* Hex digits (blanks and a newline around them allowed) into at most max
 * bytes: the count, or 0 on anything else. */
static size_t opx_auth_unhex(const char *s, uint8_t *out, size_t max)
{
	size_t bin = 0;
	const char *end;

	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	if (sodium_hex2bin(out, max, s, strlen(s), " \t\n", &bin, &end) || bin == 0)
		return 0;
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	return *end ? 0 : bin;
}

/* The default key file: $XDG_CONFIG_HOME/opx/auth.key, else
 * <home>/.config/opx/auth.key. */
static int opx_auth_default_path(char *path, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	struct passwd *pw;
	int n;

	if (xdg && xdg[0] == '/')
		n = snprintf(path, len, "%s/opx/auth.key", xdg);
	else {
		if (!home || home[0] != '/') {
			pw = getpwuid(geteuid());
			home = pw ? pw->pw_dir : NULL;
		}
		if (!home || home[0] != '/')
			return -ENOENT;
		n = snprintf(path, len, "%s/.config/opx/auth.key", home);
	}
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* mkdir -p of path's directory, new directories mode 0700. */
static void opx_auth_mkdirs(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(dir, 0700);
		*p = '/';
	}
	(void)mkdir(dir, 0700);
}

/* Read the key file: 0 with key filled, -ENOENT when there is none,
 * another -errno (with why set) when it is refused. */
static int opx_auth_read_file(const char *path, uint8_t key[OPX_AUTH_FILE_BYTES], const char **why)
{
	char text[256];
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ELOOP)
			*why = "it is a symbolic link";
		else
			*why = strerror(errno);
		return -errno;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		close(fd);
		return -EINVAL;
	}
	if (st.st_uid != geteuid()) {
		*why = "owned by another user";
		close(fd);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		*why = "group or others may read or write it (chmod 600)";
		close(fd);
		return -EPERM;
	}
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0) {
		*why = "empty or unreadable";
		return -EINVAL;
	}
	text[n] = '\0';
	if (opx_auth_unhex(text, key, OPX_AUTH_FILE_BYTES) != OPX_AUTH_FILE_BYTES) {
		*why = "not 64 hex digits";
		sodium_memzero(text, sizeof(text));
		return -EINVAL;
	}
	sodium_memzero(text, sizeof(text));
	return 0;
}

/* Create the key file with 32 random bytes, atomically: written to a
 * private temporary name, then linked to its name, so two processes
 * starting at once end up with one file (the loser reads the winner's). */
static int opx_auth_create_file(const char *path)
{
	uint8_t key[OPX_AUTH_FILE_BYTES];
	char tmp[PATH_MAX], hex[2 * OPX_AUTH_FILE_BYTES + 2];
	int fd, rc = 0;
	size_t len;

	opx_auth_mkdirs(path);
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp); /* mode 0600 */
	if (fd < 0)
		return -errno;
	randombytes_buf(key, sizeof(key));
	sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	len = strlen(hex);
	hex[len++] = '\n';
	if (fchmod(fd, 0600) < 0 || write(fd, hex, len) != (ssize_t)len || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	sodium_memzero(hex, sizeof(hex));
	close(fd);
	if (!rc && link(tmp, path) < 0 && errno != EEXIST)
		rc = -errno;
	unlink(tmp);
	return rc;
}

/* The launcher's per-job secret: a value every rank of the job has and
 * nobody outside it (not a job id, which is guessable). */
static const char *opx_auth_job_secret(const char **name)
{
	static const char *const vars[] = {"OMPI_MCA_orte_precondition_transports",
					   "OMPI_MCA_opal_precondition_transports",
					   "FI_OPX_UUID"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v && *v) {
			*name = vars[i];
			return v;
		}
	}
	return NULL;
}

static void opx_auth_load(void)
{
	static const char domain[] = "opx udp wire secret v1";
	uint8_t file_key[OPX_AUTH_FILE_BYTES], raw[OPX_AUTH_KEY_MAX];
	const char *hex = getenv("FI_OPX_AUTH_KEY"), *job_name = NULL, *why = NULL, *job;
	char path[PATH_MAX], *cfg = NULL;
	crypto_generichash_state st;
	bool have_file = false;
	size_t n;
	int rc;

	if (sodium_init() < 0) {
		OPX_WARN(FI_LOG_CORE, "libsodium failed to initialise: no udp wire\n");
		return;
	}
	if (hex && *hex) {
		n = opx_auth_unhex(hex, raw, sizeof(raw));
		if (n < OPX_AUTH_KEY_MIN) {
			OPX_WARN(FI_LOG_CORE,
				 "FI_OPX_AUTH_KEY is not %u to %u bytes in hex: ignored\n",
				 OPX_AUTH_KEY_MIN, OPX_AUTH_KEY_MAX);
		} else {
			crypto_generichash_init(&st, NULL, 0, SHIM_AUTH_KEY_BYTES);
			crypto_generichash_update(&st, (const uint8_t *)domain, sizeof(domain));
			crypto_generichash_update(&st, raw, n);
			crypto_generichash_final(&st, opx_auth.key, SHIM_AUTH_KEY_BYTES);
			sodium_memzero(raw, sizeof(raw));
			opx_auth.have = true;
			snprintf(opx_auth.from, sizeof(opx_auth.from), "FI_OPX_AUTH_KEY");
			return;
		}
	}
	if (!fi_param_get_str(&opx_prov, "AUTH_KEY_FILE", &cfg) && cfg && *cfg)
		snprintf(path, sizeof(path), "%s", cfg);
	else if (opx_auth_default_path(path, sizeof(path)))
		path[0] = '\0';
	if (path[0]) {
		rc = opx_auth_read_file(path, file_key, &why);
		if (rc == -ENOENT) {
			rc = opx_auth_create_file(path);
			if (!rc) {
				OPX_INFO(FI_LOG_CORE, "created the udp wire key file %s\n", path);
				rc = opx_auth_read_file(path, file_key, &why);
			} else {
				why = strerror(-rc);
			}
		}
		if (!rc)
			have_file = true;
		else
			OPX_WARN(FI_LOG_CORE, "udp wire key file %s refused: %s\n", path,
				 why ? why : strerror(-rc));
	}
	job = opx_auth_job_secret(&job_name);
	if (!have_file && !job)
		return;
	crypto_generichash_init(&st, have_file ? file_key : NULL, have_file ? sizeof(file_key) : 0,
				SHIM_AUTH_KEY_BYTES);
	crypto_generichash_update(&st, (const uint8_t *)domain, sizeof(domain));
	if (job) {
		crypto_generichash_update(&st, (const uint8_t *)job_name, strlen(job_name) + 1);
		crypto_generichash_update(&st, (const uint8_t *)job, strlen(job));
	}
	crypto_generichash_final(&st, opx_auth.key, SHIM_AUTH_KEY_BYTES);
	sodium_memzero(file_key, sizeof(file_key));
	opx_auth.have = true;
	/* for the log line only: a long path is cut (the return value is
	 * looked at, so gcc -O1 does not take the cut for a mistake) */
	if (snprintf(opx_auth.from, sizeof(opx_auth.from), "%s%s%s", have_file ? path : "",
		     have_file && job ? " mixed with " : "", job ? job_name : "") < 0)
		opx_auth.from[0] = '\0';
}

int opx_auth_mode(void)
{
	char *m = NULL;

	if (fi_param_get_str(&opx_prov, "AUTH", &m) || !m || !*m || !strcmp(m, "header"))
		return SHIM_AUTH_HEADER;
	if (!strcmp(m, "full"))
		return SHIM_AUTH_FULL;
	if (!strcmp(m, "off"))
		return SHIM_AUTH_OFF;
	OPX_WARN(FI_LOG_CORE, "FI_OPX_AUTH=\"%s\" is not header, full or off: header\n", m);
	return SHIM_AUTH_HEADER;
}

const char *opx_auth_mode_name(int mode)
{
	return mode == SHIM_AUTH_OFF ? "off" : mode == SHIM_AUTH_FULL ? "full" : "header";
}

bool opx_auth_secret(uint8_t key[SHIM_AUTH_KEY_BYTES], const char **from)
{
	pthread_once(&opx_auth_once, opx_auth_load);
	if (!opx_auth.have)
		return false;
	memcpy(key, opx_auth.key, SHIM_AUTH_KEY_BYTES);
	*from = opx_auth.from;
	return true;
}
