// SPDX-License-Identifier: BSD-3-Clause
/*
 * perthread_ft - per-thread first-touch workload with some sharing.
 *
 * Each worker allocates and initialises its own block, so under
 * first-touch a block lands on the node its worker ran on at that moment
 * (the "by individual threads" class of Chiang & Su [Chiang21] Table 2: fmm,
 * water_nsquared, fluidanimate, facesim, ...). Memory grows with the
 * thread count, as it does for those programs.
 *
 * Each iteration: read phase (own block, plus the first --share-pct % of
 * the next worker's block: the sharing), barrier, write phase (affine
 * update of the own block), barrier. Checked in closed form.
 *
 * --size: bytes of each worker's block (per thread).
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

struct shared {
	uint64_t **blk;
	uint64_t n;		/* elements per block */
	uint64_t share_n;	/* elements of the neighbour's block read */
	int threads;
	uint64_t iters, seed;
	const struct wl_opts *o;	/* --bursts, --sleep-us */
	pthread_barrier_t start, go, phase, placed;
	struct wl_thread_rec *rec;
	uint64_t *read_sums;
	int failed;
};

struct warg {
	struct shared *s;
	int id;
};

static uint64_t init_val(const struct shared *s, int t, uint64_t i)
{
	return wl_mix(((uint64_t)t << 48) ^ i ^ (s->seed << 40));
}

static void *worker(void *p)
{
	struct warg *w = p;
	struct shared *s = w->s;
	uint64_t *mine, *next, k, i, b, q, blo, bhi, nb = s->o->bursts, rsum = 0;
	uint64_t np = s->o->passes;

	wl_thread_start(&s->rec[w->id]);
	/* allocate and first-touch our own block on whatever node we run on */
	mine = wl_map(s->n * sizeof(uint64_t));
	if (!mine) {
		s->failed = 1;
	} else {
		wl_current_cpu_node(NULL, &s->rec[w->id].first_touch_node);
		for (i = 0; i < s->n; i++)
			mine[i] = init_val(s, w->id, i);
	}
	s->blk[w->id] = mine;
	pthread_barrier_wait(&s->start);	/* main counts tasks now */
	pthread_barrier_wait(&s->placed);	/* main queries placement now */
	pthread_barrier_wait(&s->go);
	if (s->failed)
		return NULL;
	next = s->blk[(w->id + 1) % s->threads];

	for (k = 0; k < s->iters; k++) {
		/* piece b of the own block, then piece b of the shared part;
		 * --passes times over both before the barrier */
		for (q = 0; q < np; q++) {
			for (b = 0; b < nb; b++) {
				wl_burst(0, s->n, b, nb, &blo, &bhi);
				for (i = blo; i < bhi; i++)
					rsum += mine[i];
				wl_burst(0, s->share_n, b, nb, &blo, &bhi);
				for (i = blo; i < bhi; i++)
					rsum += next[i];
				wl_burst_sleep(s->o);
			}
		}
		pthread_barrier_wait(&s->phase);
		for (q = 0; q < np; q++) {
			for (b = 0; b < nb; b++) {
				wl_burst(0, s->n, b, nb, &blo, &bhi);
				for (i = blo; i < bhi; i++)
					mine[i] = mine[i] * WL_MUL + WL_ADD;
				wl_burst_sleep(s->o);
			}
		}
		pthread_barrier_wait(&s->phase);
	}
	s->read_sums[w->id] = rsum;
	wl_thread_end(&s->rec[w->id]);
	return NULL;
}

static void placement(struct wl_json *j, const char *key, const struct shared *s)
{
	char name[32];
	int t;

	wl_json_obj_begin(j, key);
	for (t = 0; t < s->threads; t++) {
		snprintf(name, sizeof(name), "block%d", t);
		wl_json_placement(j, name, s->blk[t], s->n * sizeof(uint64_t),
				  s->rec[t].first_touch_node);
	}
	wl_json_obj_end(j);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 2 << 20, .threads = 2, .iters = 10, .seed = 1,
			     .placement = 1, .share_pct = 12, .bursts = 1, .passes = 1 };
	struct shared s;
	struct warg *args;
	struct wl_threads th;
	struct wl_json j;
	uint64_t i, k, final = 0, reads = 0, exp_final = 0, exp_reads = 0;
	uint64_t *sum0, *part0;
	double t0, tq0, tq1, t2;
	int rc, t, tasks, started = 0, ok;

	if (wl_parse(argc, argv, "perthread_ft",
		     "Per-thread first-touch: each worker allocates and initialises its own "
		     "block,\nthen also reads part of its neighbour's.\n--size is each "
		     "worker's block (per thread).",
		     WL_OPT_SHARE | WL_OPT_BURSTS | WL_OPT_PASSES, &o, &rc))
		return rc;

	memset(&s, 0, sizeof(s));
	s.n = o.size / sizeof(uint64_t);
	if (!s.n) {
		fprintf(stderr, "perthread_ft: --size too small\n");
		return WL_EX_USAGE;
	}
	s.share_n = s.n * o.share_pct / 100;
	s.threads = o.threads;
	s.iters = o.iters;
	s.seed = o.seed;
	s.o = &o;
	s.blk = calloc((size_t)o.threads, sizeof(*s.blk));
	s.rec = calloc((size_t)o.threads, sizeof(*s.rec));
	s.read_sums = calloc((size_t)o.threads, sizeof(uint64_t));
	args = calloc((size_t)o.threads, sizeof(*args));
	sum0 = calloc((size_t)o.threads, sizeof(uint64_t));
	part0 = calloc((size_t)o.threads, sizeof(uint64_t));
	if (!s.blk || !s.rec || !s.read_sums || !args || !sum0 || !part0)
		return WL_EX_RUNTIME;

	pthread_barrier_init(&s.start, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.placed, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.go, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.phase, NULL, (unsigned)o.threads);

	wl_json_begin(&j);
	t0 = wl_now();
	for (t = 0; t < o.threads; t++) {
		args[t].s = &s;
		args[t].id = t;
	}
	if (wl_threads_start(&th, o.threads, worker, args, sizeof(*args), "perthread_ft"))
		return WL_EX_RUNTIME;
	pthread_barrier_wait(&s.start);
	tq0 = wl_now();		/* init (allocation + first touch) done */
	tasks = wl_count_tasks();
	if (s.failed) {
		fprintf(stderr, "perthread_ft: a worker could not map its block\n");
		return WL_EX_RUNTIME;
	}
	if (o.placement)
		placement(&j, "placement_init", &s);
	pthread_barrier_wait(&s.placed);
	tq1 = wl_now();
	pthread_barrier_wait(&s.go);
	started = wl_threads_join(&th, s.rec);
	t2 = wl_now();

	for (t = 0; t < o.threads; t++) {
		for (i = 0; i < s.n; i++) {
			uint64_t v = init_val(&s, t, i);

			sum0[t] += v;
			if (i < s.share_n)
				part0[t] += v;
			final += s.blk[t][i];
		}
		reads += s.read_sums[t];
	}
	/* iteration k reads the state after k * passes updates, passes times */
	for (k = 0; k <= o.iters; k++) {
		uint64_t add, mul = wl_affine_pow(k * o.passes, &add);

		for (t = 0; t < o.threads; t++) {
			int nx = (t + 1) % o.threads;

			if (k == o.iters)
				exp_final += mul * sum0[t] + s.n * add;
			else
				exp_reads += o.passes * (mul * sum0[t] + s.n * add +
							 mul * part0[nx] + s.share_n * add);
		}
	}
	ok = final == exp_final && reads == exp_reads;

	wl_json_common(&j, "perthread_ft", &o, tasks, started, tq0 - t0, t2 - tq1,
		       (tq0 - t0) + (t2 - tq1));
	wl_json_u64(&j, "share_pct", o.share_pct);
	wl_json_u64(&j, "bursts", o.bursts);
	wl_json_u64(&j, "passes", o.passes);
	wl_json_u64(&j, "sleep_us", o.sleep_us);
	wl_json_i64(&j, "voluntary_switches", wl_voluntary_switches());
	wl_json_hex(&j, "checksum", final);
	wl_json_hex(&j, "expected", exp_final);
	wl_json_hex(&j, "read_checksum", reads);
	wl_json_hex(&j, "read_expected", exp_reads);
	wl_json_bool(&j, "verified", ok);
	wl_json_threads(&j, s.rec, o.threads);
	if (o.placement)
		placement(&j, "placement_end", &s);
	wl_json_end_print(&j);
	return ok ? WL_EX_OK : WL_EX_VERIFY;
}
