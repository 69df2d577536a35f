// SPDX-License-Identifier: GPL-2.0
/*
 * Page-fault throughput of one multithreaded process, after will-it-scale's
 * page_fault1 (threads mode): every thread, pinned to a CPU of its own,
 * maps an anonymous region, writes one byte per page (one fault each) and
 * unmaps it, over and over.  All threads share one mm, so a per-mm counter
 * that every fault and every unmap updates (kMLB's numa_rss, one atomic per
 * page) is a single contended cache line, which is what this measures.
 *
 *   fault_bench <threads> <seconds> <rep>     (seconds may be fractional)
 *
 * prints "FAULTBENCH threads=<n> rep=<r> pages=<faulted pages>
 * ns=<elapsed ns>" for the run: the host turns it into pages per second.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define REGION (8UL << 20) /* per thread: the QEMU guest has 256 MiB */
#define MAX_THREADS 64

static atomic_int go, stop;
static long page;

struct worker {
	pthread_t tid;
	int cpu;
	unsigned long pages;
} __attribute__((aligned(64)));

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	while (!go)
		;
	while (!stop) {
		char *p = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		for (unsigned long off = 0; off < REGION && !stop; off += page) {
			p[off] = 1;
			w->pages++;
		}
		munmap(p, REGION);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker w[MAX_THREADS];
	unsigned long pages = 0;
	int n, rep, ncpu;
	double seconds, t0, t1;
	struct timespec window;

	if (argc != 4) {
		fprintf(stderr, "usage: fault_bench <threads> <seconds> <rep>\n");
		return 2;
	}
	n = atoi(argv[1]);
	/* fractional: a gem5 ROI lasts milliseconds of simulated time */
	seconds = strtod(argv[2], NULL);
	rep = atoi(argv[3]);
	if (n < 1 || n > MAX_THREADS || !(seconds > 0 && seconds <= 3600)) {
		fprintf(stderr, "fault_bench: threads 1..%d, seconds in (0, 3600]\n",
			MAX_THREADS);
		return 2;
	}
	window.tv_sec = (time_t)seconds;
	window.tv_nsec = (long)((seconds - window.tv_sec) * 1e9);
	page = sysconf(_SC_PAGESIZE);
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	for (int i = 0; i < n; i++) {
		w[i].cpu = i % ncpu;
		if (pthread_create(&w[i].tid, NULL, work, &w[i])) {
			perror("pthread_create");
			return 1;
		}
	}
	t0 = now_ns();
	go = 1;
	while (nanosleep(&window, &window))
		;
	stop = 1;
	t1 = now_ns();
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].tid, NULL);
		pages += w[i].pages;
	}
	printf("FAULTBENCH threads=%d rep=%d pages=%lu ns=%.0f\n", n, rep, pages, t1 - t0);
	return 0;
}
