// SPDX-License-Identifier: BSD-3-Clause
/*
 * leader_ft - leader first-touch workload.
 *
 * The main thread (the thread-group leader) allocates and initialises the
 * whole shared array, so under first-touch every page lands on the leader's
 * node; then --threads workers read and write it. This is the allocation
 * class of 22 of the 30 PARSEC 3.0 programs in Chiang & Su [Chiang21] Table 2
 * (canneal, streamcluster, blackscholes, most of SPLASH-2x): keeping the
 * workers near the leader is what the MB+/Excl "leader" rules bet on.
 *
 * Each iteration has a read phase (every worker sums its own chunk and its
 * successor's chunk, so half the reads cross chunk owners) and a write
 * phase (each worker applies x -> WL_MUL x + WL_ADD to its own chunk),
 * separated by barriers so the result is deterministic and checkable in
 * closed form: the final array sum and the sum of all reads.
 *
 * --size: bytes of the shared array (total, independent of --threads).
 *
 * --start-away: each worker first moves itself to the CPUs of a node other
 * than the leader's (round robin over the nodes after it), waits there for
 * the start, and then gets its original affinity back, so the compute phase
 * begins with every worker away from the data and free to move. Linux 6.1
 * places a new thread on its parent's node while that node has room (the
 * allowed NUMA imbalance of fork placement), so without it the workers start
 * beside the data and a policy that keeps them there has nothing to bring
 * back (findings/2026-11-26-finding-b192).
 */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct shared {
	uint64_t *a;
	uint64_t n;
	int threads;
	uint64_t iters;
	const struct wl_opts *o;	/* --bursts, --sleep-us */
	pthread_barrier_t start, go, phase;
	struct wl_thread_rec *rec;
	uint64_t *read_sums;	/* per worker */
	int away[WL_MAX_NODES];	/* --start-away: the other nodes with CPUs */
	int naway;		/* 0: workers start where fork placed them */
	int away_errno;		/* a worker could not move or get its CPUs back */
};

struct warg {
	struct shared *s;
	int id;
};

static void chunk(uint64_t n, int t, int nt, uint64_t *lo, uint64_t *hi)
{
	*lo = n * (uint64_t)t / (uint64_t)nt;
	*hi = n * (uint64_t)(t + 1) / (uint64_t)nt;
}

/* The other nodes with CPUs, starting after the leader's: -1 if none. */
static int away_nodes(struct shared *s, int leader_node)
{
	static unsigned char online[WL_MAX_NODES];
	cpu_set_t set;
	int i, n;

	if (wl_sysfs_list("/sys/devices/system/node/online", online, WL_MAX_NODES) <= 0)
		return -1;
	s->naway = 0;
	for (i = 1; i <= WL_MAX_NODES; i++) {
		n = (leader_node + i) % WL_MAX_NODES;
		if (online[n] && n != leader_node && wl_node_cpus(n, &set) == 0)
			s->away[s->naway++] = n;
	}
	return s->naway ? 0 : -1;
}

/* --start-away: to node away[id % naway] until the start; *saved gets the
 * affinity to restore. */
static void move_away(struct shared *s, int id, cpu_set_t *saved)
{
	struct wl_thread_rec *r = &s->rec[id];
	cpu_set_t set;

	errno = 0;
	if (sched_getaffinity(0, sizeof(*saved), saved) ||
	    wl_node_cpus(s->away[id % s->naway], &set) ||
	    sched_setaffinity(0, sizeof(set), &set)) {
		__atomic_store_n(&s->away_errno, errno ? errno : ENOENT, __ATOMIC_RELAXED);
		return;
	}
	wl_current_cpu_node(NULL, &r->node_away);
}

static void *worker(void *p)
{
	struct warg *w = p;
	struct shared *s = w->s;
	uint64_t lo, hi, nlo, nhi, k, i, b, q, blo, bhi, nb = s->o->bursts, rsum = 0;
	uint64_t np = s->o->passes;
	cpu_set_t saved;

	wl_thread_start(&s->rec[w->id]);
	if (s->naway)
		move_away(s, w->id, &saved);
	chunk(s->n, w->id, s->threads, &lo, &hi);
	chunk(s->n, (w->id + 1) % s->threads, s->threads, &nlo, &nhi);
	pthread_barrier_wait(&s->start);	/* main counts tasks now */
	pthread_barrier_wait(&s->go);
	/* released after 'go', not before: the wake-up from the barrier could
	 * otherwise bring it back beside its waker, the leader */
	if (s->naway && s->rec[w->id].node_away >= 0 &&
	    sched_setaffinity(0, sizeof(saved), &saved))
		__atomic_store_n(&s->away_errno, errno, __ATOMIC_RELAXED);

	for (k = 0; k < s->iters; k++) {
		/* piece b of the own chunk, then piece b of the successor's;
		 * --passes times over both before the barrier */
		for (q = 0; q < np; q++) {
			for (b = 0; b < nb; b++) {
				wl_burst(lo, hi, b, nb, &blo, &bhi);
				for (i = blo; i < bhi; i++)
					rsum += s->a[i];
				wl_burst(nlo, nhi, b, nb, &blo, &bhi);
				for (i = blo; i < bhi; i++)
					rsum += s->a[i];
				wl_burst_sleep(s->o);
			}
		}
		pthread_barrier_wait(&s->phase);
		for (q = 0; q < np; q++) {
			for (b = 0; b < nb; b++) {
				wl_burst(lo, hi, b, nb, &blo, &bhi);
				for (i = blo; i < bhi; i++)
					s->a[i] = s->a[i] * WL_MUL + WL_ADD;
				wl_burst_sleep(s->o);
			}
		}
		pthread_barrier_wait(&s->phase);
	}
	s->read_sums[w->id] = rsum;
	wl_thread_end(&s->rec[w->id]);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 8 << 20, .threads = 2, .iters = 10, .seed = 1,
			     .placement = 1, .bursts = 1, .passes = 1 };
	struct shared s;
	struct warg *args;
	struct wl_threads th;
	struct wl_json j;
	uint64_t i, k, sum0 = 0, final = 0, reads = 0, exp_final, exp_reads = 0;
	double t0, t1, tq, t2;
	int rc, t, tasks, started = 0, leader_node = -1;

	if (wl_parse(argc, argv, "leader_ft",
		     "Leader first-touch: main thread initialises all shared data, "
		     "workers read/write it.\n--size is the shared array (total).",
		     WL_OPT_BURSTS | WL_OPT_START_AWAY | WL_OPT_PASSES, &o, &rc))
		return rc;

	memset(&s, 0, sizeof(s));
	s.n = o.size / sizeof(uint64_t);
	if (s.n < (uint64_t)o.threads) {
		fprintf(stderr, "leader_ft: --size too small for %d threads\n", o.threads);
		return WL_EX_USAGE;
	}
	s.threads = o.threads;
	s.iters = o.iters;
	s.o = &o;
	s.rec = calloc((size_t)o.threads, sizeof(*s.rec));
	s.read_sums = calloc((size_t)o.threads, sizeof(uint64_t));
	args = calloc((size_t)o.threads, sizeof(*args));
	if (!s.rec || !s.read_sums || !args)
		return WL_EX_RUNTIME;

	t0 = wl_now();
	/* first touch by the leader: this is the point of the workload */
	s.a = wl_map(s.n * sizeof(uint64_t));
	if (!s.a) {
		perror("leader_ft: mmap");
		return WL_EX_RUNTIME;
	}
	wl_current_cpu_node(NULL, &leader_node);
	for (i = 0; i < s.n; i++)
		s.a[i] = wl_mix(i ^ (o.seed << 40));
	t1 = wl_now();

	/* Placement right after first touch (what the workload claims), and
	 * again at the end (what balancing/migration made of it). The queries
	 * are not part of the timed phases. */
	wl_json_begin(&j);
	if (o.placement) {
		wl_json_obj_begin(&j, "placement_init");
		wl_json_placement(&j, "shared", s.a, s.n * sizeof(uint64_t), leader_node);
		wl_json_obj_end(&j);
	}
	tq = wl_now();

	if (o.start_away && away_nodes(&s, leader_node)) {
		fprintf(stderr, "leader_ft: --start-away needs a node with CPUs other than "
			"the leader's (node %d)\n", leader_node);
		return WL_EX_RUNTIME;
	}
	pthread_barrier_init(&s.start, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.go, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.phase, NULL, (unsigned)o.threads);
	for (t = 0; t < o.threads; t++) {
		args[t].s = &s;
		args[t].id = t;
	}
	if (wl_threads_start(&th, o.threads, worker, args, sizeof(*args), "leader_ft"))
		return WL_EX_RUNTIME;
	pthread_barrier_wait(&s.start);
	/* every worker is alive and blocked on 'go': count the thread group */
	tasks = wl_count_tasks();
	pthread_barrier_wait(&s.go);
	started = wl_threads_join(&th, s.rec);
	t2 = wl_now();
	if (s.away_errno) {	/* set by a worker: its errno, not ours */
		fprintf(stderr, "leader_ft: --start-away: moving a worker: %s\n",
			strerror(s.away_errno));
		return WL_EX_RUNTIME;
	}

	/* closed-form check: S_k = M^k S_0 + n add_k after k updates; iteration
	 * k reads the state after k * passes updates, every chunk twice a pass
	 * (by its owner and its predecessor), passes times. */
	for (i = 0; i < s.n; i++) {
		sum0 += wl_mix(i ^ (o.seed << 40));
		final += s.a[i];
	}
	for (t = 0; t < o.threads; t++)
		reads += s.read_sums[t];
	for (k = 0; k < o.iters; k++) {
		uint64_t add, mul = wl_affine_pow(k * o.passes, &add);

		exp_reads += 2 * o.passes * (mul * sum0 + s.n * add);
	}
	{
		uint64_t add, mul = wl_affine_pow(o.iters * o.passes, &add);

		exp_final = mul * sum0 + s.n * add;
	}

	wl_json_common(&j, "leader_ft", &o, tasks, started, t1 - t0, t2 - tq,
		       (t1 - t0) + (t2 - tq));
	wl_json_hex(&j, "checksum", final);
	wl_json_hex(&j, "expected", exp_final);
	wl_json_hex(&j, "read_checksum", reads);
	wl_json_hex(&j, "read_expected", exp_reads);
	wl_json_bool(&j, "verified", final == exp_final && reads == exp_reads);
	wl_json_i64(&j, "leader_node", leader_node);
	wl_json_u64(&j, "bursts", o.bursts);
	wl_json_u64(&j, "passes", o.passes);
	wl_json_u64(&j, "sleep_us", o.sleep_us);
	wl_json_bool(&j, "start_away", o.start_away);
	wl_json_i64(&j, "voluntary_switches", wl_voluntary_switches());
	wl_json_threads(&j, s.rec, o.threads);
	if (o.placement) {
		wl_json_obj_begin(&j, "placement_end");
		wl_json_placement(&j, "shared", s.a, s.n * sizeof(uint64_t), leader_node);
		wl_json_obj_end(&j);
	}
	wl_json_end_print(&j);
	return final == exp_final && reads == exp_reads ? WL_EX_OK : WL_EX_VERIFY;
}
