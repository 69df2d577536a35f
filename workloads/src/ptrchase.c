// SPDX-License-Identifier: BSD-3-Clause
/*
 * ptrchase - dependent-load latency benchmark for NUMA-factor calibration.
 *
 * Builds a chain of 64-byte lines linked in one random cycle (Sattolo's
 * algorithm) over a region much larger than the caches, so every load
 * misses and depends on the previous one; the time per load is the memory
 * latency seen from the CPU node to the memory node. --cpu-node pins the
 * threads to that node's CPUs (sched_setaffinity), --mem-node binds the
 * region to that node (mbind MPOL_BIND, raw syscall: no libnuma).
 * --sweep measures every (cpu node, mem node) pair and prints the matrix
 * and the NUMA factor = mean remote latency / mean local latency; --pairs
 * does the same for the listed pairs only. Pairs are measured one after
 * another in this one process, so no other program of the mix starts or
 * ends inside a timed window (two concurrent ptrchase programs do: the
 * first one's exit and its parent's wake-up land in the other's window).
 * Each timed window also records the context switches it saw (getrusage
 * RUSAGE_THREAD): a non-zero count means the figure includes someone else.
 *
 * The random order defeats prefetchers; THP (madvise) keeps TLB misses
 * out of the figure as far as the kernel allows (--no-hugepage to see
 * them). With --threads > 1 each thread chases its own chain at the same
 * time (loaded latency).
 *
 * Verification: the index permutation is checked to be a single cycle of
 * all lines, and each thread's final position after the timed loads must
 * equal the position predicted from the permutation.
 *
 * --size: bytes of each thread's chain; --iters: timed loads per thread.
 */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MPOL_BIND
#define MPOL_BIND 2
#endif
#ifndef MPOL_MF_STRICT
#define MPOL_MF_STRICT (1 << 0)
#define MPOL_MF_MOVE (1 << 1)
#endif

#define HUGE_ALIGN (2UL << 20)

struct line {
	struct line *next;
	uint64_t pad[7];	/* one cache line per element */
};

struct chase {
	/* inputs */
	uint64_t n_lines, loads, seed;
	int cpu_node, mem_node, hugepage, id;
	pthread_barrier_t *ready, *go;	/* all started; main has counted */
	/* outputs */
	struct line *lines;
	void *map_base;		/* lines is map_base rounded up to 2 MiB */
	size_t map_len;
	double ns_per_load;
	long ctx_switches;	/* voluntary + involuntary, in the timed window */
	int verified, err, placement_node_pages_ok;
	struct wl_thread_rec rec;
	const char *errmsg;
};

/* ---- placement ------------------------------------------------------------- */

static int bind_region(void *p, size_t len, int node)
{
	unsigned long mask[WL_MAX_NODES / (8 * sizeof(unsigned long))];

	memset(mask, 0, sizeof(mask));
	mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
	/* maxnode counts bits and the kernel drops the last one, hence +1 */
	if (syscall(SYS_mbind, p, len, MPOL_BIND, mask, (unsigned long)WL_MAX_NODES + 1,
		    MPOL_MF_STRICT | MPOL_MF_MOVE))
		return -errno;
	return 0;
}

/* ---- the benchmark ------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	return wl_mix(*s);
}

static struct line *walk(struct line *p, uint64_t n)
{
	/* unrolled so loop overhead hides under the load latency */
	while (n >= 8) {
		p = p->next; p = p->next; p = p->next; p = p->next;
		p = p->next; p = p->next; p = p->next; p = p->next;
		n -= 8;
	}
	while (n--)
		p = p->next;
	return p;
}

static void *chase_thread(void *arg)
{
	struct chase *c = arg;
	uint64_t n = c->n_lines, i, steps, pos, rs = c->seed * 0x10001ULL + (uint64_t)c->id;
	uint32_t *perm = NULL;
	size_t bytes = n * sizeof(struct line);
	struct line *end;
	uint64_t warm;
	double t0, t1;
	struct rusage ru0, ru1;

	wl_thread_start(&c->rec);
	if (c->cpu_node >= 0) {
		cpu_set_t set;

		if (wl_node_cpus(c->cpu_node, &set) ||
		    sched_setaffinity(0, sizeof(set), &set)) {
			c->err = WL_EX_RUNTIME;
			c->errmsg = "cannot run on the CPUs of --cpu-node";
			goto out;
		}
		sched_yield();	/* let the scheduler move us now */
		wl_current_cpu_node(&c->rec.cpu_start, &c->rec.node_start);
	}

	/* Over-map and align to 2 MiB so the whole chain can be backed by
	 * transparent huge pages; an unaligned start would leave 4 KiB pages
	 * (and their TLB misses) at both ends. */
	c->map_len = bytes + HUGE_ALIGN;
	c->map_base = wl_map(c->map_len);
	if (!c->map_base) {
		c->err = WL_EX_RUNTIME;
		c->errmsg = "mmap failed";
		goto out;
	}
	c->lines = (struct line *)(((uintptr_t)c->map_base + HUGE_ALIGN - 1) &
				   ~(uintptr_t)(HUGE_ALIGN - 1));
	if (c->hugepage)
		(void)madvise(c->lines, bytes, MADV_HUGEPAGE);
	if (c->mem_node >= 0 && bind_region(c->lines, bytes, c->mem_node)) {
		c->err = WL_EX_RUNTIME;
		c->errmsg = "mbind to --mem-node failed";
		goto out;
	}

	/* Sattolo: a uniformly random permutation with a single cycle. */
	perm = malloc(n * sizeof(*perm));
	if (!perm) {
		c->err = WL_EX_RUNTIME;
		c->errmsg = "malloc failed";
		goto out;
	}
	for (i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (i = n - 1; i > 0; i--) {
		uint64_t j = rng_next(&rs) % i;
		uint32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	/* check: one cycle through all n lines */
	for (pos = 0, steps = 0; steps == 0 || pos != 0; steps++) {
		pos = perm[pos];
		if (steps > n)
			break;
	}
	c->verified = steps == n;
	for (i = 0; i < n; i++) {
		c->lines[i].next = &c->lines[perm[i]];
		c->lines[i].pad[0] = i;
	}
	c->rec.first_touch_node = c->rec.node_start;

	warm = n < 100000 ? n : 100000;
	pthread_barrier_wait(c->ready);	/* every chaser is alive ... */
	pthread_barrier_wait(c->go);	/* ... until main has counted them */
	end = walk(&c->lines[0], warm);
	getrusage(RUSAGE_THREAD, &ru0);
	t0 = wl_now();
	end = walk(end, c->loads);
	t1 = wl_now();
	getrusage(RUSAGE_THREAD, &ru1);
	c->ns_per_load = (t1 - t0) * 1e9 / (double)c->loads;
	c->ctx_switches = (ru1.ru_nvcsw - ru0.ru_nvcsw) + (ru1.ru_nivcsw - ru0.ru_nivcsw);

	/* the timed loop must have taken exactly warm + loads steps */
	steps = (warm + c->loads) % n;
	for (pos = 0; steps; steps--)
		pos = perm[pos];
	c->verified = c->verified && end == &c->lines[pos];
	wl_thread_end(&c->rec);
	free(perm);
	return NULL;
out:
	/* keep the barrier counts right even when this thread failed */
	pthread_barrier_wait(c->ready);
	pthread_barrier_wait(c->go);
	free(perm);
	return NULL;
}

/* Run one (cpu node, mem node) measurement with o->threads chasers. */
static int measure(const struct wl_opts *o, int cpu_node, int mem_node,
		   struct chase *cs, int *tasks)
{
	pthread_barrier_t ready, go;
	struct wl_threads th;
	int t;

	pthread_barrier_init(&ready, NULL, (unsigned)o->threads + 1);
	pthread_barrier_init(&go, NULL, (unsigned)o->threads + 1);
	for (t = 0; t < o->threads; t++) {
		memset(&cs[t], 0, sizeof(cs[t]));
		cs[t].n_lines = o->size / sizeof(struct line);
		cs[t].loads = o->iters;
		cs[t].seed = o->seed;
		cs[t].cpu_node = cpu_node;
		cs[t].mem_node = mem_node;
		cs[t].hugepage = o->hugepage;
		cs[t].id = t;
		cs[t].ready = &ready;
		cs[t].go = &go;
	}
	if (wl_threads_start(&th, o->threads, chase_thread, cs, sizeof(*cs), NULL))
		return WL_EX_RUNTIME;
	pthread_barrier_wait(&ready);
	/* counted while no chaser can have finished (a short chase used to exit
	 * before the count: tasks_seen 2 of 3, 3 of 6 unit runs under load) */
	if (tasks)
		*tasks = wl_count_tasks();
	pthread_barrier_wait(&go);
	wl_threads_join(&th, NULL);
	pthread_barrier_destroy(&ready);
	pthread_barrier_destroy(&go);
	for (t = 0; t < o->threads; t++)
		if (cs[t].err) {
			fprintf(stderr, "ptrchase: cpu node %d, mem node %d (-1 = unbound): %s\n",
				cpu_node, mem_node, cs[t].errmsg);
			return cs[t].err;
		}
	return WL_EX_OK;
}

static double mean_ns(const struct chase *cs, int n)
{
	double s = 0;
	int t;

	for (t = 0; t < n; t++)
		s += cs[t].ns_per_load;
	return s / n;
}

static long ctx_switches(const struct chase *cs, int n)
{
	long s = 0;
	int t;

	for (t = 0; t < n; t++)
		s += cs[t].ctx_switches;
	return s;
}

static void release(struct chase *cs, int n)
{
	int t;

	for (t = 0; t < n; t++) {
		wl_unmap(cs[t].map_base, cs[t].map_len);
		cs[t].map_base = NULL;
		cs[t].lines = NULL;
	}
}

static int run_single(const struct wl_opts *o, struct chase *cs, double t0)
{
	struct wl_json j;
	int rc, t, tasks = -1, ok = 1, started = 0;
	uint64_t bytes = (o->size / sizeof(struct line)) * sizeof(struct line);
	double t1;

	rc = measure(o, o->cpu_node, o->mem_node, cs, &tasks);
	if (rc)
		return rc;
	t1 = wl_now();
	wl_json_begin(&j);
	for (t = 0; t < o->threads; t++) {
		ok = ok && cs[t].verified;
		started += cs[t].rec.tid > 0;
	}
	wl_json_common(&j, "ptrchase", o, tasks, started, 0.0, t1 - t0, t1 - t0);
	wl_json_str(&j, "mode", "single");
	wl_json_i64(&j, "cpu_node", o->cpu_node);
	wl_json_i64(&j, "mem_node", o->mem_node);
	wl_json_u64(&j, "chain_lines", o->size / sizeof(struct line));
	wl_json_u64(&j, "loads_per_thread", o->iters);
	wl_json_dbl(&j, "ns_per_load", mean_ns(cs, o->threads));
	wl_json_key(&j, "ns_per_load_per_thread");
	wl_json_raw(&j, "[");
	for (t = 0; t < o->threads; t++)
		wl_json_raw(&j, "%s%.4f", t ? "," : "", cs[t].ns_per_load);
	wl_json_raw(&j, "]");
	wl_json_i64(&j, "ctx_switches_timed", ctx_switches(cs, o->threads));
	wl_json_bool(&j, "hugepage", o->hugepage);
	wl_json_bool(&j, "verified", ok);
	{
		struct wl_thread_rec rec[WL_MAX_THREADS];

		for (t = 0; t < o->threads; t++)
			rec[t] = cs[t].rec;
		wl_json_threads(&j, rec, o->threads);
	}
	if (o->placement) {
		char name[32];

		wl_json_obj_begin(&j, "placement_end");
		for (t = 0; t < o->threads; t++) {
			snprintf(name, sizeof(name), "chain%d", t);
			wl_json_placement(&j, name, cs[t].lines, bytes,
					  o->mem_node >= 0 ? o->mem_node
							   : cs[t].rec.first_touch_node);
		}
		wl_json_obj_end(&j);
	}
	wl_json_end_print(&j);
	release(cs, o->threads);
	return ok ? WL_EX_OK : WL_EX_VERIFY;
}

/* The nodes with CPUs and the nodes with memory, in id order. */
static int online_nodes(int *cpun, int *ncpu, int *memn, int *nmem)
{
	unsigned char online[WL_MAX_NODES], mem[WL_MAX_NODES];
	int i;

	if (wl_sysfs_list("/sys/devices/system/node/online", online, WL_MAX_NODES) <= 0) {
		fprintf(stderr, "ptrchase: no NUMA nodes in /sys/devices/system/node\n");
		return WL_EX_RUNTIME;
	}
	if (wl_sysfs_list("/sys/devices/system/node/has_memory", mem, WL_MAX_NODES) <= 0)
		memcpy(mem, online, sizeof(mem));
	*ncpu = *nmem = 0;
	for (i = 0; i < WL_MAX_NODES; i++) {
		cpu_set_t set;

		if (online[i] && wl_node_cpus(i, &set) == 0)
			cpun[(*ncpu)++] = i;
		if (online[i] && mem[i])
			memn[(*nmem)++] = i;
	}
	return WL_EX_OK;
}

static int in_list(const int *v, int n, int x)
{
	int i;

	for (i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

static void json_int_list(struct wl_json *j, const char *key, const int *v, int n)
{
	int i;

	wl_json_key(j, key);
	wl_json_raw(j, "[");
	for (i = 0; i < n; i++)
		wl_json_raw(j, "%s%d", i ? "," : "", v[i]);
	wl_json_raw(j, "]");
}

/*
 * --sweep (every cpu node x every memory node, printed as a matrix too) or
 * --pairs (the listed pairs): one pair after another, nothing concurrent.
 */
static int run_pairs(const struct wl_opts *o, struct chase *cs, double t0)
{
	static int cpun[WL_MAX_NODES], memn[WL_MAX_NODES];
	int ncpu, nmem, npairs, i, k, p, t, rc, ok = 1, tasks = -1;
	int nlocal = 0, nremote = 0;
	uint64_t bytes = (o->size / sizeof(struct line)) * sizeof(struct line);
	double *lat, local = 0, remote = 0;
	int *pc, *pm;
	long *onnode, *ctx;
	struct wl_json j;

	rc = online_nodes(cpun, &ncpu, memn, &nmem);
	if (rc)
		return rc;
	npairs = o->sweep ? ncpu * nmem : o->npairs;
	pc = calloc((size_t)npairs, sizeof(*pc));
	pm = calloc((size_t)npairs, sizeof(*pm));
	lat = calloc((size_t)npairs, sizeof(*lat));
	onnode = calloc((size_t)npairs, sizeof(*onnode));
	ctx = calloc((size_t)npairs, sizeof(*ctx));
	if (!pc || !pm || !lat || !onnode || !ctx) {
		rc = WL_EX_RUNTIME;
		goto out;
	}
	for (p = 0; p < npairs; p++) {
		pc[p] = o->sweep ? cpun[p / nmem] : o->pair_cpu[p];
		pm[p] = o->sweep ? memn[p % nmem] : o->pair_mem[p];
		if (!in_list(cpun, ncpu, pc[p]) || !in_list(memn, nmem, pm[p])) {
			fprintf(stderr, "ptrchase: --pairs %d:%d: node %d has no %s\n", pc[p],
				pm[p], in_list(cpun, ncpu, pc[p]) ? pm[p] : pc[p],
				in_list(cpun, ncpu, pc[p]) ? "memory" : "CPUs");
			rc = WL_EX_USAGE;
			goto out;
		}
	}

	for (p = 0; p < npairs; p++) {
		long hist[WL_MAX_NODES] = { 0 }, absent, errs;

		rc = measure(o, pc[p], pm[p], cs, &tasks);
		if (rc)
			goto out;
		lat[p] = mean_ns(cs, o->threads);
		ctx[p] = ctx_switches(cs, o->threads);
		for (t = 0; t < o->threads; t++) {
			ok = ok && cs[t].verified;
			if (wl_page_nodes(cs[t].lines, bytes, hist, &absent, &errs) == 0)
				onnode[p] += hist[pm[p]];
		}
		release(cs, o->threads);
		if (pc[p] == pm[p]) {
			local += lat[p];
			nlocal++;
		} else {
			remote += lat[p];
			nremote++;
		}
	}

	/* human-readable figures on stderr, machine-readable line on stdout */
	if (o->sweep) {
		fprintf(stderr, "ptrchase: ns per load, rows = cpu node, columns = memory node\n");
		fprintf(stderr, "%8s", "cpu\\mem");
		for (k = 0; k < nmem; k++)
			fprintf(stderr, " %9d", memn[k]);
		fprintf(stderr, "\n");
		for (i = 0; i < ncpu; i++) {
			fprintf(stderr, "%8d", cpun[i]);
			for (k = 0; k < nmem; k++)
				fprintf(stderr, " %9.2f", lat[i * nmem + k]);
			fprintf(stderr, "\n");
		}
	} else {
		for (p = 0; p < npairs; p++)
			fprintf(stderr, "ptrchase: cpu node %d, memory node %d: %.2f ns per load\n",
				pc[p], pm[p], lat[p]);
	}
	if (nlocal && nremote)
		fprintf(stderr, "ptrchase: NUMA factor (mean remote / mean local) = %.3f\n",
			(remote / nremote) / (local / nlocal));
	else
		fprintf(stderr, "ptrchase: NUMA factor undefined (no %s pairs)\n",
			nremote ? "local" : "remote");

	wl_json_begin(&j);
	wl_json_common(&j, "ptrchase", o, tasks, o->threads, 0.0, wl_now() - t0,
		       wl_now() - t0);
	wl_json_str(&j, "mode", o->sweep ? "sweep" : "pairs");
	wl_json_u64(&j, "chain_lines", o->size / sizeof(struct line));
	wl_json_u64(&j, "loads_per_thread", o->iters);
	wl_json_bool(&j, "hugepage", o->hugepage);
	json_int_list(&j, "cpu_nodes", cpun, ncpu);
	json_int_list(&j, "mem_nodes", memn, nmem);
	/* [cpu node, mem node, ns per load, pages on the mem node, context switches] */
	wl_json_key(&j, "pairs");
	wl_json_raw(&j, "[");
	for (p = 0; p < npairs; p++)
		wl_json_raw(&j, "%s[%d,%d,%.4f,%ld,%ld]", p ? "," : "", pc[p], pm[p], lat[p],
			    onnode[p], ctx[p]);
	wl_json_raw(&j, "]");
	if (o->sweep) {
		wl_json_key(&j, "matrix_ns");
		wl_json_raw(&j, "[");
		for (i = 0; i < ncpu; i++) {
			wl_json_raw(&j, "%s[", i ? "," : "");
			for (k = 0; k < nmem; k++)
				wl_json_raw(&j, "%s%.4f", k ? "," : "", lat[i * nmem + k]);
			wl_json_raw(&j, "]");
		}
		wl_json_raw(&j, "]");
		/* pages found on the requested memory node, per pair: the binding check */
		wl_json_key(&j, "pages_on_mem_node");
		wl_json_raw(&j, "[");
		for (i = 0; i < ncpu; i++) {
			wl_json_raw(&j, "%s[", i ? "," : "");
			for (k = 0; k < nmem; k++)
				wl_json_raw(&j, "%s%ld", k ? "," : "", onnode[i * nmem + k]);
			wl_json_raw(&j, "]");
		}
		wl_json_raw(&j, "]");
	}
	wl_json_i64(&j, "pages_per_pair",
		    (int64_t)(o->threads * ((bytes + (uint64_t)sysconf(_SC_PAGESIZE) - 1) /
					    (uint64_t)sysconf(_SC_PAGESIZE))));
	wl_json_dbl(&j, "local_ns", nlocal ? local / nlocal : NAN);
	wl_json_dbl(&j, "remote_ns", nremote ? remote / nremote : NAN);
	wl_json_dbl(&j, "numa_factor",
		    nlocal && nremote ? (remote / nremote) / (local / nlocal) : NAN);
	wl_json_bool(&j, "verified", ok);
	wl_json_end_print(&j);
	rc = ok ? WL_EX_OK : WL_EX_VERIFY;
out:
	free(pc);
	free(pm);
	free(lat);
	free(onnode);
	free(ctx);
	return rc;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 64 << 20, .threads = 1, .iters = 1000000, .seed = 1,
			     .placement = 1, .cpu_node = -1, .mem_node = -1, .hugepage = 1 };
	struct chase *cs;
	int rc;

	if (wl_parse(argc, argv, "ptrchase",
		     "Pointer-chasing load latency, bindable to a (cpu node, memory node) "
		     "pair.\n--size is each thread's chain; --iters the timed loads per "
		     "thread.",
		     WL_OPT_PTRCHASE, &o, &rc))
		return rc;
	if (o.size / sizeof(struct line) < 2 || o.size / sizeof(struct line) > UINT32_MAX) {
		fprintf(stderr, "ptrchase: --size must hold 2 .. 2^32-1 lines of 64 bytes\n");
		return WL_EX_USAGE;
	}
	if ((o.sweep || o.npairs) && (o.cpu_node >= 0 || o.mem_node >= 0)) {
		fprintf(stderr, "ptrchase: --%s chooses the nodes itself\n",
			o.sweep ? "sweep" : "pairs");
		return WL_EX_USAGE;
	}
	if (o.sweep && o.npairs) {
		fprintf(stderr, "ptrchase: --sweep and --pairs exclude each other\n");
		return WL_EX_USAGE;
	}
	cs = calloc((size_t)o.threads, sizeof(*cs));
	if (!cs)
		return WL_EX_RUNTIME;
	if (o.sweep || o.npairs)
		return run_pairs(&o, cs, wl_now());
	return run_single(&o, cs, wl_now());
}
