/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.h - shared helpers for numa-lb-study's synthetic workloads:
 * argument parsing, timing, starting/joining and bookkeeping of threads,
 * page-placement queries (move_pages with NULL nodes) and the one-line JSON
 * report.
 *
 * No libnuma: the guest image and the PARSEC overlay must not depend on
 * it, and the few NUMA syscalls we need are stable kernel ABI.
 */
#ifndef NLS_WL_COMMON_H
#define NLS_WL_COMMON_H

#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define WL_MAX_NODES 1024	/* histogram width; > any node id we will see */
#define WL_MAX_THREADS 1024
#define WL_MAX_PAIRS 64	/* ptrchase --pairs */

/* Exit codes shared by every workload (documented in workloads/README.md). */
enum { WL_EX_OK = 0, WL_EX_VERIFY = 1, WL_EX_USAGE = 2, WL_EX_RUNTIME = 3 };

struct wl_opts {
	uint64_t size;		/* bytes; meaning per workload (see --help) */
	int threads;		/* worker threads (the main thread is extra) */
	uint64_t iters;
	uint64_t seed;
	int placement;		/* 1: query and report page nodes */
	/* workload-specific, parsed here so every program shares one parser */
	uint64_t share_pct;	/* perthread: % of a neighbour's data read */
	uint64_t private_size;	/* master_clients: per-client private bytes */
	uint64_t verify_stride;	/* compute_small: verify every Nth element */
	int cpu_node, mem_node;	/* ptrchase: -1 = not bound */
	int sweep;		/* ptrchase: all (cpu, mem) node pairs */
	int npairs;		/* ptrchase --pairs: these pairs, one after another */
	int pair_cpu[WL_MAX_PAIRS], pair_mem[WL_MAX_PAIRS];
	int hugepage;		/* ptrchase: madvise(MADV_HUGEPAGE) */
	uint64_t bursts;	/* leader_ft/perthread_ft: pieces per phase */
	uint64_t sleep_us;	/* ... and the sleep after each piece */
	int start_away;		/* leader_ft: workers start on other nodes */
	uint64_t passes;	/* leader_ft/perthread_ft: passes per phase */
};

/* Which workload-specific options a program accepts. */
enum {
	WL_OPT_SHARE = 1 << 0,
	WL_OPT_PRIVATE = 1 << 1,
	WL_OPT_VERIFY_STRIDE = 1 << 2,
	WL_OPT_PTRCHASE = 1 << 3,
	WL_OPT_BURSTS = 1 << 4,
	WL_OPT_START_AWAY = 1 << 5,
	WL_OPT_PASSES = 1 << 6,
};

/* Parse argv into o (defaults must be preset); prints usage and returns
 * non-zero on error or --help (*exit_code says which). */
int wl_parse(int argc, char **argv, const char *name, const char *about,
	     unsigned extra, struct wl_opts *o, int *exit_code);
int wl_parse_size(const char *s, uint64_t *out);

double wl_now(void);			/* CLOCK_MONOTONIC seconds */
int wl_current_cpu_node(int *cpu, int *node);	/* getcpu(2) */
int wl_count_tasks(void);		/* entries in /proc/self/task */
/* A kernel cpulist/nodelist file ("0-3,8,10-11") as a bitmap of max entries;
 * returns the number of entries set, 0 for an empty list, -1 if unreadable. */
int wl_sysfs_list(const char *path, unsigned char *bits, int max);
/* The CPUs of NUMA node @node (sysfs); -1 if it has none or is unknown. */
int wl_node_cpus(int node, cpu_set_t *set);
pid_t wl_gettid(void);

/* Blocking threads (--bursts/--sleep-us): a worker splits each phase's pass
 * into o->bursts pieces and sleeps o->sleep_us after each one, so it blocks,
 * its CPU may go idle, and the scheduler places it again at every wakeup:
 * load that changes all the time, which is what inter-node balancing acts on.
 * wl_burst() gives piece b of [lo, hi); wl_burst_sleep() sleeps (no-op at 0). */
void wl_burst(uint64_t lo, uint64_t hi, uint64_t b, uint64_t nb, uint64_t *blo,
	      uint64_t *bhi);
void wl_burst_sleep(const struct wl_opts *o);
/* Voluntary context switches of the whole process so far (getrusage). */
long wl_voluntary_switches(void);

/* Anonymous private mapping, not touched (first touch decides placement). */
void *wl_map(size_t bytes);
void wl_unmap(void *p, size_t bytes);

/* Node histogram of the pages of [addr, addr+len): hist[node]++ for each
 * present page, *absent for pages not faulted in, *errors for others.
 * Returns 0 or -errno (e.g. -ENOSYS on a kernel without NUMA). */
int wl_page_nodes(const void *addr, size_t len, long *hist, long *absent,
		  long *errors);

/* Per-thread record filled by the workers, reported in the JSON line. */
struct wl_thread_rec {
	pid_t tid;
	int cpu_start, node_start;
	int cpu_end, node_end;
	int first_touch_node;	/* node the thread ran on while touching its data */
	int node_away;		/* --start-away: node it was moved to; -1 otherwise */
	/* The kernel's own balancing counters for this thread at its end
	 * (/proc/thread-self/sched, CONFIG_SCHED_DEBUG): migrations, and the
	 * candidates can_migrate_task() refused by reason, which 6.1 prints
	 * only while kernel.sched_schedstats=1. -1 when not printed. */
	long nr_migrations;
	long failed_affine, failed_running, failed_hot, forced;
	/* /proc/thread-self/schedstat at its end (CONFIG_SCHED_INFO): ns on a
	 * CPU, ns waiting on a run queue, timeslices; -1 when absent. */
	long long run_ns, run_delay_ns, timeslices;
};

void wl_thread_start(struct wl_thread_rec *r);	/* call first in a worker */
void wl_thread_end(struct wl_thread_rec *r);	/* call last in a worker */

/* A workload's worker threads, started together and joined together. Start
 * and join are two calls because every workload synchronises with its
 * workers in between (barriers, the task count, the master's rounds). The
 * ids live here: --threads is at most WL_MAX_THREADS, so nothing to free. */
struct wl_threads {
	pthread_t tid[WL_MAX_THREADS];
	int n;			/* threads created */
};

/* Create n threads; thread t runs fn((char *)args + t * arg_size). Returns 0,
 * or WL_EX_RUNTIME if n is out of range or a pthread_create fails (then
 * perror("<who>: pthread_create"), silent when who is NULL). Threads already
 * created are left running: they wait on the caller's barriers. */
int wl_threads_start(struct wl_threads *th, int n, void *(*fn)(void *),
		     void *args, size_t arg_size, const char *who);
/* Join every created thread; returns how many of rec[0..n) have a tid (the
 * worker got to wl_thread_start), 0 when rec is NULL. */
int wl_threads_join(struct wl_threads *th, const struct wl_thread_rec *rec);

/* Minimal JSON line writer (one object, printed on stdout at the end). */
struct wl_json {
	char *buf;
	size_t len, cap;
	int need_comma;
};
void wl_json_begin(struct wl_json *j);
void wl_json_key(struct wl_json *j, const char *k);	/* then a value */
void wl_json_raw(struct wl_json *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void wl_json_str(struct wl_json *j, const char *k, const char *v);
void wl_json_u64(struct wl_json *j, const char *k, uint64_t v);
void wl_json_i64(struct wl_json *j, const char *k, int64_t v);
void wl_json_dbl(struct wl_json *j, const char *k, double v);
void wl_json_bool(struct wl_json *j, const char *k, int v);
void wl_json_hex(struct wl_json *j, const char *k, uint64_t v);
void wl_json_threads(struct wl_json *j, const struct wl_thread_rec *r, int n);
/* {"pages":..,"present":..,"absent":..,"nodes":{"0":..},"expected_node":..,
 *  "on_expected_node":..} for one region; expected_node < 0 omits the last two. */
void wl_json_placement(struct wl_json *j, const char *k, const void *addr,
		       size_t len, int expected_node);
void wl_json_obj_begin(struct wl_json *j, const char *k);	/* "k":{ */
void wl_json_obj_end(struct wl_json *j);			/* } */
void wl_json_end_print(struct wl_json *j);	/* closes, prints, frees */

/* The fields every workload reports, in one call. */
void wl_json_common(struct wl_json *j, const char *name, const struct wl_opts *o,
		    int tasks_seen, int threads_started, double init_s,
		    double compute_s, double elapsed_s);

/* Deterministic element initialiser (splitmix64 of index and seed). */
static inline uint64_t wl_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Affine update applied to data elements each iteration (mod 2^64), and
 * its k-fold composition, so results can be verified in closed form. */
#define WL_MUL 6364136223846793005ULL
#define WL_ADD 1442695040888963407ULL
/* After k updates x -> WL_MUL^k x + add_k; returns WL_MUL^k, sets *add_k. */
uint64_t wl_affine_pow(uint64_t k, uint64_t *add_k);

#endif /* NLS_WL_COMMON_H */
