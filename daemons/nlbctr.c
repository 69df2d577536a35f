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
 * - real hardware: perf_event_open per CPU (pid -1), the events of one CPU
 *   opened as one group (leader: instructions; members: cycles (unhalted),
 *   LLC misses, and the generic NODE cache events node-loads /
 *   node-load-misses where the PMU has them), read in one read(2) with
 *   PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID: the
 *   kernel schedules a group onto the PMU as a unit, so its events count over
 *   the same instructions (IPC from one group, not from counters that were
 *   multiplexed apart), and a group that shared the PMU (running < enabled)
 *   is scaled by enabled / running. nlb_perf_decode() turns that read
 *   buffer into per-event values and states; it does no I/O, so a unit test
 *   feeds it byte layouts (tests/unit/test_nlbctr_read.py).
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
int nlb_perf_open(int cpu, int *fds, int *errs);
int nlb_perf_decode(const void *buf, uint64_t len, const uint64_t *ids, uint64_t *values,
		    int *state, uint64_t *times);
int nlb_perf_read_group(int leader, const uint64_t *ids, uint64_t *values, int *state,
			uint64_t *times);
int nlb_perf_id(int fd, uint64_t *id);
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

/* What nlb_perf_decode says of each event (counters.py PERF_STATES). */
enum nlb_perf_state {
	NLB_ST_COUNTED = 0,	/* counted all the time the group was enabled */
	NLB_ST_SCALED = 1,	/* multiplexed: value scaled by enabled / running */
	NLB_ST_NOT_COUNTED = 2,	/* the group never ran on the PMU: no value */
	NLB_ST_ABSENT = 3,	/* not opened (the CPU lacks it) or not in the read */
};

/* The group's read format: u64 nr, time_enabled, time_running, then nr
 * {u64 value, u64 id} (include/uapi/linux/perf_event.h, "read_format"). */
#define NLB_READ_FORMAT                                                         \
	(PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |                   \
	 PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID)
#define NLB_READ_HEADER 3	/* nr, time_enabled, time_running */

static int perf_open(uint32_t type, uint64_t config, int cpu, int group)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = type;
	a.config = config;
	a.read_format = NLB_READ_FORMAT;
	a.disabled = group < 0;	/* the leader starts once its members are in */
	a.exclude_kernel = 0;	/* per-CPU counts: everything that ran there */
	a.exclude_hv = 1;
	/* pid -1, cpu N: every task on that CPU (needs CAP_PERFMON or
	 * perf_event_paranoid <= 0) */
	return (int)syscall(SYS_perf_event_open, &a, -1, cpu, group, PERF_FLAG_FD_CLOEXEC);
}

#define NODE_EVENT(result)                                                   \
	(PERF_COUNT_HW_CACHE_NODE | (PERF_COUNT_HW_CACHE_OP_READ << 8) |     \
	 ((uint64_t)(result) << 16))

/*
 * Open the events of one CPU as one group into fds[NLB_EV_COUNT] (fds[0],
 * instructions, is the leader). errs[i] is 0 for an event that opened, else
 * the errno of its perf_event_open: ENOENT or EOPNOTSUPP (the CPU or its
 * PMU lacks the event), EINVAL or ENOSPC (it does not fit in the group
 * beside the others), EACCES/EPERM (not allowed). Instructions and cycles
 * are required: returns -errno of the first of them that fails. The LLC
 * and NODE events are optional: fd -1 and errs[i] says why. 0 on success,
 * the group enabled.
 */
int nlb_perf_open(int cpu, int *fds, int *errs)
{
	static const struct {
		uint32_t type;
		uint64_t config;
	} ev[NLB_EV_COUNT] = {
		[NLB_EV_INSTRUCTIONS] = { PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
		[NLB_EV_CYCLES] = { PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
		[NLB_EV_LLC_MISSES] = { PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
		[NLB_EV_NODE_LOADS] = { PERF_TYPE_HW_CACHE,
					NODE_EVENT(PERF_COUNT_HW_CACHE_RESULT_ACCESS) },
		[NLB_EV_NODE_LOAD_MISSES] = { PERF_TYPE_HW_CACHE,
					      NODE_EVENT(PERF_COUNT_HW_CACHE_RESULT_MISS) },
	};
	int i, err;

	for (i = 0; i < NLB_EV_COUNT; i++) {
		fds[i] = -1;
		errs[i] = 0;
	}
	for (i = 0; i < NLB_EV_COUNT; i++) {
		fds[i] = perf_open(ev[i].type, ev[i].config, cpu,
				   i == NLB_EV_INSTRUCTIONS ? -1 : fds[NLB_EV_INSTRUCTIONS]);
		if (fds[i] >= 0)
			continue;
		errs[i] = errno;
		if (i == NLB_EV_INSTRUCTIONS || i == NLB_EV_CYCLES) {
			err = -errs[i];
			nlb_perf_close(fds);
			return err;
		}
	}
	if (ioctl(fds[NLB_EV_INSTRUCTIONS], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) < 0) {
		err = -errno;
		nlb_perf_close(fds);
		return err;
	}
	return 0;
}

/* The kernel's id of an open event (what the group read carries beside
 * its value); -errno on failure. */
int nlb_perf_id(int fd, uint64_t *id)
{
	if (ioctl(fd, PERF_EVENT_IOC_ID, id) < 0)
		return -errno;
	return 0;
}

static uint64_t scale(uint64_t v, uint64_t enabled, uint64_t running)
{
#ifdef __SIZEOF_INT128__
	unsigned __int128 x = (unsigned __int128)v * enabled / running;

	return x > UINT64_MAX ? UINT64_MAX : (uint64_t)x;
#else
	return (uint64_t)((long double)v * enabled / running);
#endif
}

/*
 * Decode one group read (NLB_READ_FORMAT) of len bytes at buf. ids[i] is the
 * kernel id of event i (0: not open). Fills values[i] and state[i]
 * (enum nlb_perf_state) for every event, and times[0..1] with the group's
 * time enabled and running (ns). A group that ran all the time it was
 * enabled is COUNTED; one that ran part of it (multiplexed with other
 * groups) is SCALED by enabled / running; one that never ran (running 0)
 * is NOT_COUNTED with value 0 (nothing is divided by zero). An event not
 * open, or absent from the read, is ABSENT. Returns 0, or -EIO when the
 * buffer is shorter than its header says or holds an id twice.
 */
int nlb_perf_decode(const void *buf, uint64_t len, const uint64_t *ids, uint64_t *values,
		    int *state, uint64_t *times)
{
	const unsigned char *p = buf;
	uint64_t hdr[NLB_READ_HEADER], nr, k, pair[2];
	int i, seen[NLB_EV_COUNT] = { 0 };

	for (i = 0; i < NLB_EV_COUNT; i++) {
		values[i] = 0;
		state[i] = NLB_ST_ABSENT;
	}
	times[0] = times[1] = 0;
	if (!buf || len < sizeof(hdr))
		return -EIO;
	memcpy(hdr, p, sizeof(hdr));
	nr = hdr[0];
	if (nr > (len - sizeof(hdr)) / sizeof(pair))
		return -EIO;
	times[0] = hdr[1];
	times[1] = hdr[2];
	for (k = 0; k < nr; k++) {
		memcpy(pair, p + sizeof(hdr) + k * sizeof(pair), sizeof(pair));
		for (i = 0; i < NLB_EV_COUNT; i++) {
			if (!ids[i] || ids[i] != pair[1])
				continue;
			if (seen[i]++)
				return -EIO;
			if (hdr[2] == 0) {
				state[i] = NLB_ST_NOT_COUNTED;
			} else if (hdr[2] < hdr[1]) {
				values[i] = scale(pair[0], hdr[1], hdr[2]);
				state[i] = NLB_ST_SCALED;
			} else {
				values[i] = pair[0];
				state[i] = NLB_ST_COUNTED;
			}
		}
	}
	return 0;
}

/* Read the group of leader and decode it (nlb_perf_decode); -errno. */
int nlb_perf_read_group(int leader, const uint64_t *ids, uint64_t *values, int *state,
			uint64_t *times)
{
	uint64_t buf[NLB_READ_HEADER + 2 * NLB_EV_COUNT];
	ssize_t n = read(leader, buf, sizeof(buf));

	if (n < 0)
		return -errno;
	return nlb_perf_decode(buf, (uint64_t)n, ids, values, state, times);
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
