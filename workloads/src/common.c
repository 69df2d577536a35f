// SPDX-License-Identifier: BSD-3-Clause
/* common.c - see common.h. */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int wl_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	default: return -1;
	}
	/* accept an optional trailing 'B'/'iB' (e.g. 64MiB, 64MB) */
	if (*end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	if (v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static void usage(FILE *f, const char *name, const char *about, unsigned extra)
{
	fprintf(f, "usage: %s [options]\n%s\n\n"
		"  --size BYTES      data size (suffix K/M/G), see above\n"
		"  --threads N       worker threads (default %s)\n"
		"  --iters N         iterations\n"
		"  --seed N          data seed\n"
		"  --no-placement    do not query page nodes (move_pages)\n",
		name, about, (extra & WL_OPT_PTRCHASE) ? "1" : "2");
	if (extra & WL_OPT_SHARE)
		fprintf(f, "  --share-pct P     %% of the next worker's data each worker also reads\n");
	if (extra & WL_OPT_PRIVATE)
		fprintf(f, "  --private-size B  private bytes per client thread\n");
	if (extra & WL_OPT_VERIFY_STRIDE)
		fprintf(f, "  --verify-stride N recompute every Nth result serially (1 = all)\n");
	if (extra & WL_OPT_BURSTS)
		fprintf(f, "  --bursts N        split each phase's pass into N pieces (default 1)\n"
			   "  --sleep-us U      sleep U microseconds after each piece (default 0):\n"
			   "                    the threads block and wake all the time\n");
	if (extra & WL_OPT_PASSES)
		fprintf(f, "  --passes P        each phase passes over its data P times before\n"
			   "                    the barrier (default 1): fewer barriers for the\n"
			   "                    same work\n");
	if (extra & WL_OPT_START_AWAY)
		fprintf(f, "  --start-away      each worker starts on a node other than the\n"
			   "                    leader's (round robin), then is free to move\n");
	if (extra & WL_OPT_PTRCHASE)
		fprintf(f, "  --cpu-node N      run on the CPUs of node N\n"
			   "  --mem-node N      place the chain on node N (mbind MPOL_BIND)\n"
			   "  --sweep           measure every (cpu node, mem node) pair\n"
			   "  --pairs C:M[,C:M] measure these (cpu node, mem node) pairs,\n"
			   "                    one after another\n"
			   "  --no-hugepage     do not madvise(MADV_HUGEPAGE) the chain\n");
	fprintf(f, "\nPrints one JSON line on stdout. Exit: 0 ok, 1 verification failed,\n"
		   "2 usage, 3 runtime error.\n");
}

/* "C:M[,C:M...]" -> o->pair_cpu/pair_mem; at most WL_MAX_PAIRS pairs. */
static int parse_pairs(const char *s, struct wl_opts *o)
{
	const char *p = s;

	o->npairs = 0;
	while (*p) {
		char *end;
		long c, m;

		if (o->npairs == WL_MAX_PAIRS)
			return -1;
		errno = 0;
		c = strtol(p, &end, 10);
		if (end == p || *end != ':' || errno || c < 0 || c >= WL_MAX_NODES)
			return -1;
		p = end + 1;
		m = strtol(p, &end, 10);
		if (end == p || (*end && *end != ',') || errno || m < 0 || m >= WL_MAX_NODES)
			return -1;
		o->pair_cpu[o->npairs] = (int)c;
		o->pair_mem[o->npairs] = (int)m;
		o->npairs++;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return -1;	/* trailing comma */
	}
	return o->npairs ? 0 : -1;
}

int wl_parse(int argc, char **argv, const char *name, const char *about,
	     unsigned extra, struct wl_opts *o, int *exit_code)
{
	enum { O_SIZE = 256, O_THREADS, O_ITERS, O_SEED, O_NOPLACE, O_SHARE,
	       O_PRIVATE, O_VSTRIDE, O_CPUNODE, O_MEMNODE, O_SWEEP, O_PAIRS, O_NOHUGE,
	       O_BURSTS, O_SLEEPUS, O_AWAY, O_PASSES, O_HELP };
	static const struct option lo[] = {
		{ "size", required_argument, NULL, O_SIZE },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "iters", required_argument, NULL, O_ITERS },
		{ "seed", required_argument, NULL, O_SEED },
		{ "no-placement", no_argument, NULL, O_NOPLACE },
		{ "share-pct", required_argument, NULL, O_SHARE },
		{ "private-size", required_argument, NULL, O_PRIVATE },
		{ "verify-stride", required_argument, NULL, O_VSTRIDE },
		{ "cpu-node", required_argument, NULL, O_CPUNODE },
		{ "mem-node", required_argument, NULL, O_MEMNODE },
		{ "sweep", no_argument, NULL, O_SWEEP },
		{ "pairs", required_argument, NULL, O_PAIRS },
		{ "no-hugepage", no_argument, NULL, O_NOHUGE },
		{ "bursts", required_argument, NULL, O_BURSTS },
		{ "sleep-us", required_argument, NULL, O_SLEEPUS },
		{ "start-away", no_argument, NULL, O_AWAY },
		{ "passes", required_argument, NULL, O_PASSES },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	long v;

	*exit_code = WL_EX_USAGE;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		const char *bad = NULL;

		switch (c) {
		case O_SIZE:
			if (wl_parse_size(optarg, &o->size) || o->size == 0)
				bad = "--size";
			break;
		case O_THREADS:
			if (parse_int(optarg, 1, WL_MAX_THREADS, &v))
				bad = "--threads";
			else
				o->threads = (int)v;
			break;
		case O_ITERS:
			if (wl_parse_size(optarg, &o->iters) || o->iters == 0)
				bad = "--iters";
			break;
		case O_SEED:
			if (wl_parse_size(optarg, &o->seed))
				bad = "--seed";
			break;
		case O_NOPLACE:
			o->placement = 0;
			break;
		case O_SHARE:
			if (!(extra & WL_OPT_SHARE) || wl_parse_size(optarg, &o->share_pct) ||
			    o->share_pct > 100)
				bad = "--share-pct";
			break;
		case O_PRIVATE:
			if (!(extra & WL_OPT_PRIVATE) || wl_parse_size(optarg, &o->private_size) ||
			    o->private_size < 8)
				bad = "--private-size";
			break;
		case O_VSTRIDE:
			if (!(extra & WL_OPT_VERIFY_STRIDE) ||
			    wl_parse_size(optarg, &o->verify_stride) || o->verify_stride == 0)
				bad = "--verify-stride";
			break;
		case O_CPUNODE:
		case O_MEMNODE:
			if (!(extra & WL_OPT_PTRCHASE) ||
			    parse_int(optarg, 0, WL_MAX_NODES - 1, &v)) {
				bad = c == O_CPUNODE ? "--cpu-node" : "--mem-node";
			} else if (c == O_CPUNODE) {
				o->cpu_node = (int)v;
			} else {
				o->mem_node = (int)v;
			}
			break;
		case O_PAIRS:
			if (!(extra & WL_OPT_PTRCHASE) || parse_pairs(optarg, o))
				bad = "--pairs";
			break;
		case O_SWEEP:
		case O_NOHUGE:
			if (!(extra & WL_OPT_PTRCHASE))
				bad = c == O_SWEEP ? "--sweep" : "--no-hugepage";
			else if (c == O_SWEEP)
				o->sweep = 1;
			else
				o->hugepage = 0;
			break;
		case O_BURSTS:
			if (!(extra & WL_OPT_BURSTS) || parse_int(optarg, 1, 1 << 20, &v))
				bad = "--bursts";
			else
				o->bursts = (uint64_t)v;
			break;
		case O_SLEEPUS:
			/* at most 1 s: a longer sleep is no longer a burst pattern */
			if (!(extra & WL_OPT_BURSTS) || parse_int(optarg, 0, 1000000, &v))
				bad = "--sleep-us";
			else
				o->sleep_us = (uint64_t)v;
			break;
		case O_AWAY:
			if (!(extra & WL_OPT_START_AWAY))
				bad = "--start-away";
			else
				o->start_away = 1;
			break;
		case O_PASSES:
			if (!(extra & WL_OPT_PASSES) || parse_int(optarg, 1, 1 << 20, &v))
				bad = "--passes";
			else
				o->passes = (uint64_t)v;
			break;
		case O_HELP:
			usage(stdout, name, about, extra);
			*exit_code = WL_EX_OK;
			return 1;
		default:
			fprintf(stderr, "%s: unknown or incomplete option '%s'\n", name,
				argv[optind - 1]);
			usage(stderr, name, about, extra);
			return 1;
		}
		if (bad) {
			if (optarg)
				fprintf(stderr, "%s: bad value for %s: '%s'\n", name, bad, optarg);
			else
				fprintf(stderr, "%s: %s is not an option of this program\n", name,
					bad);
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", name, argv[optind]);
		return 1;
	}
	*exit_code = WL_EX_OK;
	return 0;
}

double wl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int wl_current_cpu_node(int *cpu, int *node)
{
	unsigned c = 0, n = 0;

	/* raw syscall: glibc's getcpu() wrapper is recent (2.29) and the
	 * PARSEC image's userspace may be older */
	if (syscall(SYS_getcpu, &c, &n, NULL))
		return -errno;
	if (cpu)
		*cpu = (int)c;
	if (node)
		*node = (int)n;
	return 0;
}

pid_t wl_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

int wl_count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

void wl_burst(uint64_t lo, uint64_t hi, uint64_t b, uint64_t nb, uint64_t *blo,
	      uint64_t *bhi)
{
	*blo = lo + (hi - lo) * b / nb;
	*bhi = lo + (hi - lo) * (b + 1) / nb;
}

void wl_burst_sleep(const struct wl_opts *o)
{
	struct timespec ts = { .tv_sec = (time_t)(o->sleep_us / 1000000),
			       .tv_nsec = (long)(o->sleep_us % 1000000) * 1000 };

	if (!o->sleep_us)
		return;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

long wl_voluntary_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return -1;
	return ru.ru_nvcsw;
}

void *wl_map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void wl_unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

int wl_page_nodes(const void *addr, size_t len, long *hist, long *absent,
		  long *errors)
{
	enum { BATCH = 4096 };
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	uintptr_t end = (uintptr_t)addr + len;
	void *pages[BATCH];
	int status[BATCH];

	*absent = *errors = 0;
	while (start < end) {
		unsigned long n = 0, i;

		while (n < BATCH && start < end) {
			pages[n++] = (void *)start;
			start += (uintptr_t)pg;
		}
		/* nodes == NULL: move nothing, report each page's node in status */
		if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) < 0)
			return -errno;
		for (i = 0; i < n; i++) {
			if (status[i] >= 0 && status[i] < WL_MAX_NODES)
				hist[status[i]]++;
			else if (status[i] == -ENOENT)
				(*absent)++;
			else
				(*errors)++;
		}
	}
	return 0;
}

int wl_sysfs_list(const char *path, unsigned char *bits, int max)
{
	char buf[4096], *p;
	FILE *f = fopen(path, "r");
	int n = 0;

	memset(bits, 0, (size_t)max);
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;	/* empty list (e.g. a memory-only node's cpulist) */
	}
	fclose(f);
	p = buf;
	while (*p && *p != '\n') {
		long a = strtol(p, &p, 10), b = a;

		if (*p == '-')
			b = strtol(p + 1, &p, 10);
		for (; a <= b && a < max; a++, n++)
			bits[a] = 1;
		if (*p == ',')
			p++;
		else
			break;
	}
	return n;
}

int wl_node_cpus(int node, cpu_set_t *set)
{
	unsigned char bits[CPU_SETSIZE];
	char path[128];
	int i, n;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	n = wl_sysfs_list(path, bits, CPU_SETSIZE);
	if (n <= 0)
		return -1;
	CPU_ZERO(set);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (bits[i])
			CPU_SET(i, set);
	return 0;
}

void wl_thread_start(struct wl_thread_rec *r)
{
	r->tid = wl_gettid();
	r->cpu_start = r->node_start = -1;
	r->cpu_end = r->node_end = -1;
	r->first_touch_node = r->node_away = -1;
	r->nr_migrations = r->failed_affine = r->failed_running = -1;
	r->failed_hot = r->forced = -1;
	r->run_ns = r->run_delay_ns = r->timeslices = -1;
	wl_current_cpu_node(&r->cpu_start, &r->node_start);
}

/* "name   :   value" lines of /proc/thread-self/sched; -1 when absent */
static void wl_sched_counters(struct wl_thread_rec *r)
{
	static const struct {
		const char *name;
		size_t off;
	} keys[] = {
		{ "se.nr_migrations", offsetof(struct wl_thread_rec, nr_migrations) },
		{ "nr_failed_migrations_affine", offsetof(struct wl_thread_rec, failed_affine) },
		{ "nr_failed_migrations_running", offsetof(struct wl_thread_rec, failed_running) },
		{ "nr_failed_migrations_hot", offsetof(struct wl_thread_rec, failed_hot) },
		{ "nr_forced_migrations", offsetof(struct wl_thread_rec, forced) },
	};
	char line[256], name[128];
	long val;
	size_t k;
	FILE *f;

	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		*(long *)((char *)r + keys[k].off) = -1;
	f = fopen("/proc/thread-self/sched", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%127s : %ld", name, &val) != 2)
			continue;
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (!strcmp(name, keys[k].name))
				*(long *)((char *)r + keys[k].off) = val;
	}
	fclose(f);
}

/* "run_ns run_delay_ns timeslices" of /proc/thread-self/schedstat (fs/proc/
 * base.c, proc_pid_schedstat); all -1 unless the three numbers were read */
static void wl_schedstat(struct wl_thread_rec *r)
{
	long long a, b, c;
	FILE *f;

	r->run_ns = r->run_delay_ns = r->timeslices = -1;
	f = fopen("/proc/thread-self/schedstat", "r");
	if (!f)
		return;
	if (fscanf(f, "%lld %lld %lld", &a, &b, &c) == 3 && a >= 0 && b >= 0 && c >= 0) {
		r->run_ns = a;
		r->run_delay_ns = b;
		r->timeslices = c;
	}
	fclose(f);
}

void wl_thread_end(struct wl_thread_rec *r)
{
	wl_current_cpu_node(&r->cpu_end, &r->node_end);
	wl_sched_counters(r);
	wl_schedstat(r);
}

int wl_threads_start(struct wl_threads *th, int n, void *(*fn)(void *),
		     void *args, size_t arg_size, const char *who)
{
	int t;

	th->n = 0;
	if (n < 0 || n > WL_MAX_THREADS)
		return WL_EX_RUNTIME;
	for (t = 0; t < n; t++) {
		void *arg = (char *)args + (size_t)t * arg_size;

		if (pthread_create(&th->tid[t], NULL, fn, arg)) {
			if (who) {
				char msg[128];
				int e = errno;	/* what perror reported before this helper */

				snprintf(msg, sizeof(msg), "%s: pthread_create", who);
				errno = e;
				perror(msg);
			}
			return WL_EX_RUNTIME;
		}
		th->n = t + 1;
	}
	return 0;
}

int wl_threads_join(struct wl_threads *th, const struct wl_thread_rec *rec)
{
	int t, started = 0;

	for (t = 0; t < th->n; t++) {
		pthread_join(th->tid[t], NULL);
		if (rec)
			started += rec[t].tid > 0;
	}
	return started;
}

/* ---- JSON ---------------------------------------------------------------- */

static void jput(struct wl_json *j, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return;
	if (j->len + (size_t)n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 1024;
		char *nb;

		while (j->len + (size_t)n + 1 > cap)
			cap *= 2;
		nb = realloc(j->buf, cap);
		if (!nb)
			abort();	/* a report we cannot build is a bug, not data */
		j->buf = nb;
		j->cap = cap;
	}
	vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
	j->len += (size_t)n;
}

void wl_json_raw(struct wl_json *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jput(j, fmt, ap);
	va_end(ap);
}

void wl_json_begin(struct wl_json *j)
{
	memset(j, 0, sizeof(*j));
	wl_json_raw(j, "{");
}

void wl_json_key(struct wl_json *j, const char *k)
{
	/* keys are our own identifiers: no escaping needed */
	wl_json_raw(j, "%s\"%s\":", j->need_comma ? "," : "", k);
	j->need_comma = 1;
}

void wl_json_str(struct wl_json *j, const char *k, const char *v)
{
	const char *p;

	wl_json_key(j, k);
	wl_json_raw(j, "\"");
	for (p = v; *p; p++) {
		unsigned char ch = (unsigned char)*p;

		if (ch == '"' || ch == '\\')
			wl_json_raw(j, "\\%c", ch);
		else if (ch < 0x20)
			wl_json_raw(j, "\\u%04x", ch);
		else
			wl_json_raw(j, "%c", ch);
	}
	wl_json_raw(j, "\"");
}

void wl_json_u64(struct wl_json *j, const char *k, uint64_t v)
{
	wl_json_key(j, k);
	wl_json_raw(j, "%llu", (unsigned long long)v);
}

void wl_json_i64(struct wl_json *j, const char *k, int64_t v)
{
	wl_json_key(j, k);
	wl_json_raw(j, "%lld", (long long)v);
}

void wl_json_dbl(struct wl_json *j, const char *k, double v)
{
	wl_json_key(j, k);
	if (v != v)
		wl_json_raw(j, "null");	/* JSON has no NaN */
	else
		wl_json_raw(j, "%.9g", v);
}

void wl_json_bool(struct wl_json *j, const char *k, int v)
{
	wl_json_key(j, k);
	wl_json_raw(j, v ? "true" : "false");
}

/* 64-bit checksums as hex strings: JSON readers that use doubles would
 * silently round integers above 2^53. */
void wl_json_hex(struct wl_json *j, const char *k, uint64_t v)
{
	wl_json_key(j, k);
	wl_json_raw(j, "\"0x%016llx\"", (unsigned long long)v);
}

void wl_json_threads(struct wl_json *j, const struct wl_thread_rec *r, int n)
{
	int i;

	wl_json_key(j, "thread_records");
	wl_json_raw(j, "[");
	for (i = 0; i < n; i++)
		wl_json_raw(j, "%s{\"tid\":%d,\"cpu_start\":%d,\"node_start\":%d,"
			    "\"cpu_end\":%d,\"node_end\":%d,\"first_touch_node\":%d,"
			    "\"node_away\":%d,\"nr_migrations\":%ld,\"failed_affine\":%ld,"
			    "\"failed_running\":%ld,\"failed_hot\":%ld,\"forced\":%ld,"
			    "\"run_ns\":%lld,\"run_delay_ns\":%lld,\"timeslices\":%lld}",
			    i ? "," : "", (int)r[i].tid, r[i].cpu_start, r[i].node_start,
			    r[i].cpu_end, r[i].node_end, r[i].first_touch_node,
			    r[i].node_away, r[i].nr_migrations, r[i].failed_affine, r[i].failed_running,
			    r[i].failed_hot, r[i].forced, r[i].run_ns, r[i].run_delay_ns,
			    r[i].timeslices);
	wl_json_raw(j, "]");
}

void wl_json_placement(struct wl_json *j, const char *k, const void *addr,
		       size_t len, int expected_node)
{
	long *hist = calloc(WL_MAX_NODES, sizeof(long));
	long absent = 0, errors = 0, present = 0, pages;
	long pg = sysconf(_SC_PAGESIZE);
	int rc, i, first = 1;

	wl_json_key(j, k);
	if (!hist)
		abort();
	rc = wl_page_nodes(addr, len, hist, &absent, &errors);
	pages = (long)((((uintptr_t)addr + len + (uintptr_t)pg - 1) / (uintptr_t)pg) -
		       ((uintptr_t)addr / (uintptr_t)pg));
	if (rc) {
		wl_json_raw(j, "{\"pages\":%ld,\"error\":\"%s\"}", pages, strerror(-rc));
		free(hist);
		return;
	}
	wl_json_raw(j, "{\"pages\":%ld,", pages);
	wl_json_raw(j, "\"nodes\":{");
	for (i = 0; i < WL_MAX_NODES; i++) {
		if (!hist[i])
			continue;
		present += hist[i];
		wl_json_raw(j, "%s\"%d\":%ld", first ? "" : ",", i, hist[i]);
		first = 0;
	}
	wl_json_raw(j, "},\"present\":%ld,\"absent\":%ld,\"errors\":%ld", present,
		    absent, errors);
	if (expected_node >= 0 && expected_node < WL_MAX_NODES)
		wl_json_raw(j, ",\"expected_node\":%d,\"on_expected_node\":%ld",
			    expected_node, hist[expected_node]);
	wl_json_raw(j, "}");
	free(hist);
}

void wl_json_obj_begin(struct wl_json *j, const char *k)
{
	wl_json_key(j, k);
	wl_json_raw(j, "{");
	j->need_comma = 0;
}

void wl_json_obj_end(struct wl_json *j)
{
	wl_json_raw(j, "}");
	j->need_comma = 1;
}

void wl_json_end_print(struct wl_json *j)
{
	wl_json_raw(j, "}");
	/* one write of the whole line: when many programs share a console,
	 * lines are not interleaved mid-object */
	fprintf(stdout, "%s\n", j->buf);
	fflush(stdout);
	free(j->buf);
	j->buf = NULL;
}

void wl_json_common(struct wl_json *j, const char *name, const struct wl_opts *o,
		    int tasks_seen, int threads_started, double init_s,
		    double compute_s, double elapsed_s)
{
	int cpu = -1, node = -1;

	wl_current_cpu_node(&cpu, &node);
	wl_json_str(j, "workload", name);
	wl_json_u64(j, "schema", 1);
	wl_json_i64(j, "pid", (int64_t)getpid());
	wl_json_i64(j, "threads", o->threads);
	wl_json_i64(j, "threads_started", threads_started);
	wl_json_i64(j, "tasks_seen", tasks_seen);
	wl_json_u64(j, "size_bytes", o->size);
	wl_json_u64(j, "iters", o->iters);
	wl_json_u64(j, "seed", o->seed);
	wl_json_dbl(j, "init_s", init_s);
	wl_json_dbl(j, "compute_s", compute_s);
	wl_json_dbl(j, "elapsed_s", elapsed_s);
	wl_json_i64(j, "main_node_end", node);
}

uint64_t wl_affine_pow(uint64_t k, uint64_t *add_k)
{
	/* Compose x -> a x + b with itself k times by squaring:
	 * (a1,b1) then (a2,b2) = (a2 a1, a2 b1 + b2). */
	uint64_t ra = 1, rb = 0;	/* result: identity */
	uint64_t a = WL_MUL, b = WL_ADD;	/* current power-of-two step */

	while (k) {
		if (k & 1) {
			rb = a * rb + b;
			ra = a * ra;
		}
		b = a * b + b;
		a = a * a;
		k >>= 1;
	}
	*add_k = rb;
	return ra;
}
