// SPDX-License-Identifier: GPL-2.0
/*
 * Multithreaded load for the kernel's QEMU test: the leader allocates and
 * first-touches the shared data (like 22 of the 29 PARSEC programs), then
 * workers stream over it until the deadline.  Meanwhile the leader checks
 * the kMLB invariant: the per-node counts of /proc/self/numa_rss add up to
 * the resident pages of /proc/self/statm (within the stock RSS's own
 * per-thread batching) and are never negative.  After unmapping the data
 * the counts must drop by what was unmapped.
 *
 *   numa_lb_stress <threads> <MiB> <seconds> <tag>
 *   numa_lb_stress unpriv-write <sysctl file>
 *
 * The second form drops to uid/gid 65534 and tries to open the file for
 * writing; it prints the errno name (EACCES expected) or "opened".
 *
 * Output lines start with "STRESS <tag>" so the host can parse them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 64
/* TASK_RSS_EVENTS_THRESH (64) per thread and per counter type (3). */
#define RSS_SLACK_PER_THREAD (64 * 3)

static volatile unsigned char *data;
static size_t data_len;
static double deadline;
static const char *tag;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Per-node pages; returns the number of nodes, -1 if the file is absent. */
static int read_numa_rss(long *pages, long *sum, int *negative)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/numa_rss", "r");
	int n = 0, node;
	long val;
	char *p;

	*sum = 0;
	*negative = 0;
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	for (p = strtok(buf, " \n"); p; p = strtok(NULL, " \n")) {
		if (sscanf(p, "N%d=%ld", &node, &val) != 2 || node >= MAX_NODES)
			return -1;
		pages[node] = val;
		*sum += val;
		if (val < 0)
			*negative = 1;
		n++;
	}
	return n;
}

static long read_rss_pages(void)
{
	long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	if (f)
		fclose(f);
	return resident;
}

static void *worker(void *arg)
{
	unsigned long seed = (unsigned long)arg * 2654435761UL + 1;
	unsigned long sum = 0;
	size_t i;

	while (now() < deadline) {
		for (i = 0; i < 4096; i++) {
			size_t off;

			seed = seed * 6364136223846793005UL + 1442695040888963407UL;
			off = (seed >> 17) % data_len;
			sum += data[off];
			data[off] = (unsigned char)sum;
		}
	}
	return (void *)sum;
}

static int check(const char *when, int nthreads)
{
	long pages[MAX_NODES], sum, rss, slack = (long)RSS_SLACK_PER_THREAD * (nthreads + 1);
	int negative, nodes = read_numa_rss(pages, &sum, &negative);

	rss = read_rss_pages();
	if (nodes < 0) {
		printf("STRESS %s check=%s numa_rss=absent\n", tag, when);
		return 1;
	}
	printf("STRESS %s check=%s nodes=%d numa_rss_sum=%ld rss=%ld ok=%d\n",
	       tag, when, nodes, sum, rss,
	       !negative && labs(sum - rss) <= slack);
	return !negative && labs(sum - rss) <= slack ? 0 : 1;
}

static int unpriv_write(const char *path)
{
	int fd;

	if (setgid(65534) || setuid(65534)) {
		printf("setuid-failed\n");
		return 1;
	}
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		printf("opened\n");
		close(fd);
		return 1;
	}
	printf("%s\n", errno == EACCES ? "EACCES" : strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	int nthreads, seconds, i, bad = 0;
	long before, after, pages[MAX_NODES];
	pthread_t *tids;
	size_t mib;
	int negative;

	if (argc == 3 && !strcmp(argv[1], "unpriv-write"))
		return unpriv_write(argv[2]);
	if (argc != 5) {
		fprintf(stderr, "usage: %s threads MiB seconds tag\n", argv[0]);
		return 2;
	}
	nthreads = atoi(argv[1]);
	mib = strtoul(argv[2], NULL, 10);
	seconds = atoi(argv[3]);
	tag = argv[4];
	if (nthreads < 0 || nthreads > 256 || !mib || seconds <= 0) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}

	data_len = mib << 20;
	data = mmap(NULL, data_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (data == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset((void *)data, 1, data_len);	/* leader first-touch */
	bad |= check("touched", 0);

	deadline = now() + seconds;
	tids = calloc(nthreads, sizeof(*tids));
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&tids[i], NULL, worker, (void *)(long)i)) {
			fprintf(stderr, "pthread_create: %s\n", strerror(errno));
			return 1;
		}
	while (now() < deadline) {
		bad |= check("running", nthreads);
		usleep(200000);
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	bad |= check("joined", nthreads);

	read_numa_rss(pages, &before, &negative);
	munmap((void *)data, data_len);
	read_numa_rss(pages, &after, &negative);
	/* Every page of the mapping was resident and is now gone. */
	i = before - after == (long)(data_len / sysconf(_SC_PAGESIZE));
	printf("STRESS %s check=munmap dropped=%ld expected=%ld ok=%d\n", tag,
	       before - after, (long)(data_len / sysconf(_SC_PAGESIZE)), i);
	bad |= !i;
	printf("STRESS %s done bad=%d\n", tag, bad);
	return bad;
}
