// SPDX-License-Identifier: BSD-3-Clause
/*
 * compute_small - compute-bound workload with a small working set
 * (blackscholes / swaptions-like).
 *
 * The main thread allocates and initialises a small array of European
 * options (both programs are in the "leader" class of Chiang & Su [Chiang21]
 * Table 2), then each worker prices its slice --iters times with the
 * Black-Scholes formula (exp, log, sqrt, erfc), nudging the spot price
 * each iteration so nothing can be hoisted out of the loop. Memory traffic
 * is negligible next to the arithmetic: placement matters little, which
 * makes it the control case for the memory-aware policies.
 *
 * Verification recomputes every --verify-stride-th option serially with
 * the same (non-inlined) pricing function and requires bitwise equality.
 *
 * --size: bytes of the option array (total; 48 bytes per option).
 */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct option {
	double spot, strike, rate, vol, time;
	int call;
	int pad;
};

struct shared {
	struct option *opt;
	double *acc;		/* per option: sum over iterations of the price */
	uint64_t n, iters;
	int threads;
	pthread_barrier_t start, go;
	struct wl_thread_rec *rec;
};

struct warg {
	struct shared *s;
	int id;
};

/* noinline: workers and the verifier must run the very same machine code,
 * or FMA contraction choices could differ between inlined copies. */
__attribute__((noinline)) static double price(const struct option *o, uint64_t k)
{
	double s = o->spot * (1.0 + 1e-6 * (double)k);
	double sq = o->vol * sqrt(o->time);
	double d1 = (log(s / o->strike) + (o->rate + 0.5 * o->vol * o->vol) * o->time) / sq;
	double d2 = d1 - sq;
	double disc = o->strike * exp(-o->rate * o->time);

	if (o->call)
		return s * 0.5 * erfc(-d1 / M_SQRT2) - disc * 0.5 * erfc(-d2 / M_SQRT2);
	return disc * 0.5 * erfc(d2 / M_SQRT2) - s * 0.5 * erfc(d1 / M_SQRT2);
}

static double unit(uint64_t x)
{
	return (double)(wl_mix(x) >> 11) * (1.0 / 9007199254740992.0);
}

static void *worker(void *p)
{
	struct warg *w = p;
	struct shared *s = w->s;
	uint64_t lo = s->n * (uint64_t)w->id / (uint64_t)s->threads;
	uint64_t hi = s->n * (uint64_t)(w->id + 1) / (uint64_t)s->threads;
	uint64_t k, i;

	wl_thread_start(&s->rec[w->id]);
	pthread_barrier_wait(&s->start);
	pthread_barrier_wait(&s->go);
	for (k = 0; k < s->iters; k++)
		for (i = lo; i < hi; i++)
			s->acc[i] += price(&s->opt[i], k);
	wl_thread_end(&s->rec[w->id]);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 48 << 10, .threads = 2, .iters = 100, .seed = 1,
			     .placement = 1, .verify_stride = 16 };
	struct shared s;
	struct warg *args;
	struct wl_threads th;
	struct wl_json j;
	uint64_t i, k, checked = 0, mismatches = 0;
	double t0, t1, tq, t2, total = 0;
	int rc, t, tasks, started = 0, leader_node = -1, ok;

	if (wl_parse(argc, argv, "compute_small",
		     "Compute-bound, small working set (Black-Scholes pricing).\n"
		     "--size is the option array (total, 48 bytes per option).",
		     WL_OPT_VERIFY_STRIDE, &o, &rc))
		return rc;

	memset(&s, 0, sizeof(s));
	s.n = o.size / sizeof(struct option);
	if (s.n < (uint64_t)o.threads) {
		fprintf(stderr, "compute_small: --size too small for %d threads\n", o.threads);
		return WL_EX_USAGE;
	}
	s.iters = o.iters;
	s.threads = o.threads;
	s.rec = calloc((size_t)o.threads, sizeof(*s.rec));
	args = calloc((size_t)o.threads, sizeof(*args));
	if (!s.rec || !args)
		return WL_EX_RUNTIME;

	t0 = wl_now();
	s.opt = wl_map(s.n * sizeof(struct option));
	s.acc = wl_map(s.n * sizeof(double));
	if (!s.opt || !s.acc) {
		perror("compute_small: mmap");
		return WL_EX_RUNTIME;
	}
	wl_current_cpu_node(NULL, &leader_node);
	for (i = 0; i < s.n; i++) {
		uint64_t b = (i ^ (o.seed << 40)) * 8;

		s.opt[i].spot = 50.0 + 100.0 * unit(b);
		s.opt[i].strike = 50.0 + 100.0 * unit(b + 1);
		s.opt[i].rate = 0.01 + 0.09 * unit(b + 2);
		s.opt[i].vol = 0.05 + 0.6 * unit(b + 3);
		s.opt[i].time = 0.1 + 2.0 * unit(b + 4);
		s.opt[i].call = (int)(wl_mix(b + 5) & 1);
		s.acc[i] = 0.0;
	}
	t1 = wl_now();
	wl_json_begin(&j);
	if (o.placement) {
		wl_json_obj_begin(&j, "placement_init");
		wl_json_placement(&j, "options", s.opt, s.n * sizeof(struct option),
				  leader_node);
		wl_json_obj_end(&j);
	}
	tq = wl_now();

	pthread_barrier_init(&s.start, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.go, NULL, (unsigned)o.threads + 1);
	for (t = 0; t < o.threads; t++) {
		args[t].s = &s;
		args[t].id = t;
	}
	if (wl_threads_start(&th, o.threads, worker, args, sizeof(*args), "compute_small"))
		return WL_EX_RUNTIME;
	pthread_barrier_wait(&s.start);
	tasks = wl_count_tasks();
	pthread_barrier_wait(&s.go);
	started = wl_threads_join(&th, s.rec);
	t2 = wl_now();

	for (i = 0; i < s.n; i++) {
		total += s.acc[i];
		if (i % o.verify_stride == 0) {
			double ref = 0.0;

			for (k = 0; k < o.iters; k++)
				ref += price(&s.opt[i], k);
			checked++;
			mismatches += memcmp(&ref, &s.acc[i], sizeof(ref)) != 0;
		}
	}
	ok = mismatches == 0 && isfinite(total);

	wl_json_common(&j, "compute_small", &o, tasks, started, t1 - t0, t2 - tq,
		       (t1 - t0) + (t2 - tq));
	wl_json_u64(&j, "options", s.n);
	wl_json_dbl(&j, "price_sum", total);
	wl_json_u64(&j, "verified_options", checked);
	wl_json_u64(&j, "mismatches", mismatches);
	wl_json_bool(&j, "verified", ok);
	wl_json_i64(&j, "leader_node", leader_node);
	wl_json_threads(&j, s.rec, o.threads);
	if (o.placement) {
		wl_json_obj_begin(&j, "placement_end");
		wl_json_placement(&j, "options", s.opt, s.n * sizeof(struct option),
				  leader_node);
		wl_json_obj_end(&j);
	}
	wl_json_end_print(&j);
	return ok ? WL_EX_OK : WL_EX_VERIFY;
}
