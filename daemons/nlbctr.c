// SPDX-License-Identifier: BSD-3-Clause
/*
 * nlbctr.c - the native half of the daemons' counter library (counters.py
 * loads it as libnlbctr.so with ctypes). Two sources of per-core counters:
 *
 * - gem5: the counter bridge. nlb_gem5_sample() asks the simulator for a
 *   sample with an m5 work-begin op of work id NLB_SAMPLE_WORK_ID (the run
 *   script's exit-event handler reads gem5's live statistics and writes them
 *   to the file gem5 serves to m5 readfile, then resumes), and reads that
 *   file back with m5 readfile. gem5 v24 opens the readfile file anew on
 *   every call (src/sim/pseudo_inst.cc readfile), so each read sees the
 *   reply to the request just made.
 * - real hardware: perf_event_open per CPU (pid -1), one event per fd:
 *   instructions, cycles (unhalted), LLC misses, and the generic NODE
 *   cache events (node-loads, node-load-misses) where the PMU has them.
 *
 * No libnuma, no libpfm: stable kernel ABI and our own m5ops only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "m5ops.h"

/* The m5 work id of a counter-bridge request (configs/numa_lb/counter_bridge.py;
 * 1 is the mix runner's ROI, 2 PARSEC's hooks). */
#define NLB_SAMPLE_WORK_ID 3

/* Events of nlb_perf_open, in the order of the fds it fills. */
enum nlb_perf_event {
	NLB_EV_INSTRUCTIONS = 0,
	NLB_EV_CYCLES,
	NLB_EV_LLC_MISSES,
	NLB_EV_NODE_LOADS,
	NLB_EV_NODE_LOAD_MISSES,
	NLB_EV_COUNT,
};

int nlb_event_count(void);
int nlb_sample_work_id(void);
int nlb_m5_probe(char *why, uint64_t whylen);
int nlb_m5_use_addr(unsigned long base);
int64_t nlb_gem5_sample(uint64_t seq, char *buf, uint64_t len);
int64_t nlb_read_reply(char *buf, uint64_t len);
int nlb_perf_open(int cpu, int *fds);
int nlb_perf_read(int fd, uint64_t *value);
void nlb_perf_close(int *fds);

int nlb_event_count(void) { return NLB_EV_COUNT; }
int nlb_sample_work_id(void) { return NLB_SAMPLE_WORK_ID; }

/* 1 under gem5, 0 not (why says which), 2 a wrong answer. */
int nlb_m5_probe(char *why, uint64_t whylen)
{
	const char *reason = "";
	enum m5_probe_result r = m5_probe(&reason);

	if (why && whylen) {
		strncpy(why, reason, whylen - 1);
		why[whylen - 1] = '\0';
	}
	return (int)r;
}

int nlb_m5_use_addr(unsigned long base) { return m5_use_addr(base); }

/*
 * Ask gem5 for a sample and read the reply into buf (at most len bytes).
 * Returns the reply's length (NUL-terminated in buf), or -EMSGSIZE when it
 * did not fit in len - 1 bytes.
 */
int64_t nlb_gem5_sample(uint64_t seq, char *buf, uint64_t len)
{
	if (!buf || len < 2)
		return -EINVAL;
	/* threadid = our request number: gem5 shows it in its debug output
	 * only; the handler gets the work id, so the reply numbers itself */
	m5_work_begin(NLB_SAMPLE_WORK_ID, seq);
	return nlb_read_reply(buf, len);
}

/* Read the reply now in the served file (no new request): after -EMSGSIZE,
 * with a bigger buffer. */
int64_t nlb_read_reply(char *buf, uint64_t len)
{
	uint64_t got = 0, n;

	if (!buf || len < 2)
		return -EINVAL;
	while (got < len - 1) {	/* one byte kept for the NUL */
		n = m5_read_file(buf + got, len - 1 - got, got);
		if (!n)
			break;
		got += n;
	}
	if (got == len - 1)
		return -EMSGSIZE;	/* it may go on: ask with a bigger buffer */
	buf[got] = '\0';
	return (int64_t)got;
}

static int perf_open(uint32_t type, uint64_t config, int cpu)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = type;
	a.config = config;
	a.disabled = 0;
	a.exclude_kernel = 0;	/* per-CPU counts: everything that ran there */
	a.exclude_hv = 1;
	/* pid -1, cpu N: every task on that CPU (needs CAP_PERFMON or
	 * perf_event_paranoid <= 0) */
	return (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

#define NODE_EVENT(result)                                                   \
	(PERF_COUNT_HW_CACHE_NODE | (PERF_COUNT_HW_CACHE_OP_READ << 8) |     \
	 ((uint64_t)(result) << 16))

/*
 * Open the events of one CPU into fds[NLB_EV_COUNT]. Instructions and
 * cycles are required: returns -errno of the first that fails (ENOENT or
 * EOPNOTSUPP: no PMU; EACCES/EPERM: not allowed). The LLC and NODE events
 * are optional: fd -1 when the PMU lacks them. Returns 0 on success.
 */
int nlb_perf_open(int cpu, int *fds)
{
	int i, err;

	for (i = 0; i < NLB_EV_COUNT; i++)
		fds[i] = -1;
	fds[NLB_EV_INSTRUCTIONS] = perf_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, cpu);
	if (fds[NLB_EV_INSTRUCTIONS] < 0)
		return -errno;
	fds[NLB_EV_CYCLES] = perf_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, cpu);
	if (fds[NLB_EV_CYCLES] < 0) {
		err = -errno;
		nlb_perf_close(fds);
		return err;
	}
	fds[NLB_EV_LLC_MISSES] = perf_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, cpu);
	fds[NLB_EV_NODE_LOADS] =
		perf_open(PERF_TYPE_HW_CACHE, NODE_EVENT(PERF_COUNT_HW_CACHE_RESULT_ACCESS), cpu);
	fds[NLB_EV_NODE_LOAD_MISSES] =
		perf_open(PERF_TYPE_HW_CACHE, NODE_EVENT(PERF_COUNT_HW_CACHE_RESULT_MISS), cpu);
	return 0;
}

/* The running count of one event; -errno on failure. */
int nlb_perf_read(int fd, uint64_t *value)
{
	ssize_t n = read(fd, value, sizeof(*value));

	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(*value) ? 0 : -EIO;
}

void nlb_perf_close(int *fds)
{
	int i;

	for (i = 0; i < NLB_EV_COUNT; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}
