// SPDX-License-Identifier: BSD-3-Clause
/*
 * master_clients - master/clients workload (streamcluster-like, Hong & Yoo
 * [HongYoo]: see README.md, References).
 *
 * The main thread is the master: it allocates and initialises the master
 * array (first touch on its node) and, between rounds, updates it. The
 * --threads client threads each own a small private buffer but spend most
 * of their memory traffic reading the master's array; so clients run best
 * on the master's node, and the master's placement is what matters.
 *
 * Round k: every client c reads the whole master array (sum S_k), stores
 * s_c = (c+1) S_k and adds s_c to each word of its private buffer;
 * barrier; the master adds r = sum_c s_c to each master word; barrier.
 * Hence S_{k+1} = S_k (1 + n T(T+1)/2) mod 2^64: checked in closed form.
 *
 * --size: bytes of the master array; --private-size: bytes per client.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

struct shared {
	uint64_t *m;
	uint64_t n, pn;
	uint64_t **priv;
	uint64_t *s;		/* per client contribution of this round */
	int threads;
	uint64_t iters, seed;
	pthread_barrier_t start, placed, go, round;
	struct wl_thread_rec *rec;
	int failed;
};

struct warg {
	struct shared *s;
	int id;
};

static uint64_t priv_init(uint64_t seed, int c, uint64_t i)
{
	return wl_mix(((uint64_t)(c + 1) << 50) ^ i ^ (seed << 40));
}

static void *client(void *p)
{
	struct warg *w = p;
	struct shared *s = w->s;
	uint64_t *mine, k, i;

	wl_thread_start(&s->rec[w->id]);
	mine = wl_map(s->pn * sizeof(uint64_t));
	if (!mine) {
		s->failed = 1;
	} else {
		wl_current_cpu_node(NULL, &s->rec[w->id].first_touch_node);
		for (i = 0; i < s->pn; i++)
			mine[i] = priv_init(s->seed, w->id, i);
	}
	s->priv[w->id] = mine;
	pthread_barrier_wait(&s->start);
	pthread_barrier_wait(&s->placed);
	pthread_barrier_wait(&s->go);
	if (s->failed)
		return NULL;

	for (k = 0; k < s->iters; k++) {
		uint64_t sum = 0, contrib;

		for (i = 0; i < s->n; i++)
			sum += s->m[i];
		contrib = (uint64_t)(w->id + 1) * sum;
		s->s[w->id] = contrib;
		for (i = 0; i < s->pn; i++)
			mine[i] += contrib;
		pthread_barrier_wait(&s->round);	/* master reduces and updates */
		pthread_barrier_wait(&s->round);
	}
	wl_thread_end(&s->rec[w->id]);
	return NULL;
}

static void placement(struct wl_json *j, const char *key, const struct shared *s,
		      int master_node)
{
	char name[32];
	int t;

	wl_json_obj_begin(j, key);
	wl_json_placement(j, "master", s->m, s->n * sizeof(uint64_t), master_node);
	for (t = 0; t < s->threads; t++) {
		snprintf(name, sizeof(name), "private%d", t);
		wl_json_placement(j, name, s->priv[t], s->pn * sizeof(uint64_t),
				  s->rec[t].first_touch_node);
	}
	wl_json_obj_end(j);
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = 4 << 20, .threads = 2, .iters = 10, .seed = 1,
			     .placement = 1, .private_size = 64 << 10 };
	struct shared s;
	struct warg *args;
	struct wl_threads th;
	struct wl_json j;
	uint64_t i, k, sk, final = 0, exp_final, priv_sum = 0, exp_priv = 0, sum_s = 0;
	uint64_t tri;
	double t0, t1, tq, t2;
	int rc, t, tasks, started = 0, ok, master_node = -1;

	if (wl_parse(argc, argv, "master_clients",
		     "Master/clients: the main thread owns and updates the master array,\n"
		     "client threads mostly read it.\n--size is the master array; "
		     "--private-size each client's buffer.",
		     WL_OPT_PRIVATE, &o, &rc))
		return rc;

	memset(&s, 0, sizeof(s));
	s.n = o.size / sizeof(uint64_t);
	s.pn = o.private_size / sizeof(uint64_t);
	if (!s.n) {
		fprintf(stderr, "master_clients: --size too small\n");
		return WL_EX_USAGE;
	}
	s.threads = o.threads;
	s.iters = o.iters;
	s.seed = o.seed;
	s.priv = calloc((size_t)o.threads, sizeof(*s.priv));
	s.s = calloc((size_t)o.threads, sizeof(uint64_t));
	s.rec = calloc((size_t)o.threads, sizeof(*s.rec));
	args = calloc((size_t)o.threads, sizeof(*args));
	if (!s.priv || !s.s || !s.rec || !args)
		return WL_EX_RUNTIME;

	t0 = wl_now();
	s.m = wl_map(s.n * sizeof(uint64_t));
	if (!s.m) {
		perror("master_clients: mmap");
		return WL_EX_RUNTIME;
	}
	wl_current_cpu_node(NULL, &master_node);
	for (i = 0; i < s.n; i++)
		s.m[i] = wl_mix(i ^ (o.seed << 40));

	pthread_barrier_init(&s.start, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.placed, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.go, NULL, (unsigned)o.threads + 1);
	pthread_barrier_init(&s.round, NULL, (unsigned)o.threads + 1);
	for (t = 0; t < o.threads; t++) {
		args[t].s = &s;
		args[t].id = t;
	}
	if (wl_threads_start(&th, o.threads, client, args, sizeof(*args), "master_clients"))
		return WL_EX_RUNTIME;
	pthread_barrier_wait(&s.start);
	t1 = wl_now();
	tasks = wl_count_tasks();
	if (s.failed) {
		fprintf(stderr, "master_clients: a client could not map its buffer\n");
		return WL_EX_RUNTIME;
	}
	wl_json_begin(&j);
	if (o.placement)
		placement(&j, "placement_init", &s, master_node);
	pthread_barrier_wait(&s.placed);
	tq = wl_now();
	pthread_barrier_wait(&s.go);

	for (k = 0; k < o.iters; k++) {
		uint64_t r = 0;

		pthread_barrier_wait(&s.round);	/* clients have read and published */
		for (t = 0; t < o.threads; t++)
			r += s.s[t];
		for (i = 0; i < s.n; i++)
			s.m[i] += r;
		pthread_barrier_wait(&s.round);
	}
	started = wl_threads_join(&th, s.rec);
	t2 = wl_now();

	/* verification */
	tri = (uint64_t)o.threads * (uint64_t)(o.threads + 1) / 2;
	sk = 0;
	for (i = 0; i < s.n; i++) {
		sk += wl_mix(i ^ (o.seed << 40));
		final += s.m[i];
	}
	for (k = 0; k < o.iters; k++) {
		sum_s += sk;
		sk = sk * (1 + s.n * tri);
	}
	exp_final = sk;
	for (t = 0; t < o.threads; t++)
		for (i = 0; i < s.pn; i++) {
			priv_sum += s.priv[t][i];
			exp_priv += priv_init(o.seed, t, i);
		}
	exp_priv += s.pn * tri * sum_s;
	ok = final == exp_final && priv_sum == exp_priv;

	wl_json_common(&j, "master_clients", &o, tasks, started, t1 - t0, t2 - tq,
		       (t1 - t0) + (t2 - tq));
	wl_json_u64(&j, "private_size_bytes", o.private_size);
	wl_json_hex(&j, "checksum", final);
	wl_json_hex(&j, "expected", exp_final);
	wl_json_hex(&j, "private_checksum", priv_sum);
	wl_json_hex(&j, "private_expected", exp_priv);
	wl_json_bool(&j, "verified", ok);
	wl_json_i64(&j, "master_node", master_node);
	wl_json_threads(&j, s.rec, o.threads);
	if (o.placement)
		placement(&j, "placement_end", &s, master_node);
	wl_json_end_print(&j);
	return ok ? WL_EX_OK : WL_EX_VERIFY;
}
