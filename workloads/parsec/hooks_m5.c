// SPDX-License-Identifier: BSD-3-Clause
/*
 * hooks_m5.c - numa-lb-study's shim over PARSEC's hooks library.
 *
 * PARSEC's own hooks.c (pkgs/libs/hooks, from the tree given to
 * workloads/parsec/build_parsec.py) is compiled with its four entry points
 * renamed to __nls_orig_<name> (-D on the command line, its source is not
 * touched); this file provides the real entry points.  Each one calls
 * PARSEC's (the "[HOOKS] ..." lines, the ROI timing the mix runner reads)
 * and brackets the ROI with gem5 work items of PARSEC's own id,
 * NLS_PARSEC_WORK_ID (workloads/parsec_catalog.py PARSEC_WORK_ID, passed
 * as -D by the build), never the mix runner's ROI id.
 *
 * Outside gem5 the m5 calls are no-ops: the first hook decides once, before
 * the program starts its threads, by
 *   NUMA_LB_PARSEC_M5=off      never issue m5 ops
 *   NUMA_LB_PARSEC_M5=inst     0f 04 instruction transport, no probe
 *   NUMA_LB_PARSEC_M5=addr     /dev/mem address transport (gem5 KVM CPU), no probe
 *   unset or auto              the guest init's rule: "numa_lb.m5=addr" on the
 *                              kernel command line selects the address
 *                              transport, then m5_probe() (the side-effect-free
 *                              SUM op under a SIGILL handler) must answer.
 * so on QEMU or a real machine the program never dies of SIGILL.
 *
 * PARSEC's hooks print the ROI time ("[HOOKS] Total time spent in ROI") in
 * __parsec_bench_end, which the SPLASH-2x programs never call: for those the
 * shim prints the same line at exit from its own clock, marked as such.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks.h"
#include "m5ops.h"

#ifndef NLS_PARSEC_WORK_ID
#error "NLS_PARSEC_WORK_ID must be defined (workloads/parsec_catalog.py PARSEC_WORK_ID)"
#endif

void __nls_orig___parsec_bench_begin(enum __parsec_benchmark);
void __nls_orig___parsec_bench_end(void);
void __nls_orig___parsec_roi_begin(void);
void __nls_orig___parsec_roi_end(void);
/* hooks.h declares these without a parameter list: give them prototypes. */
void __parsec_bench_end(void);
void __parsec_roi_begin(void);
void __parsec_roi_end(void);

enum { M5_UNDECIDED = -1, M5_OFF = 0, M5_ON = 1 };
static int m5_state = M5_UNDECIDED;
static const char *m5_why = "";
static double roi_t0, roi_t1;
static int roi_done, bench_ended;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void roi_time_at_exit(void)
{
	if (roi_done && !bench_ended) {
		printf("[HOOKS] Total time spent in ROI: %.3fs (numa-lb shim: the program "
		       "does not call __parsec_bench_end)\n", roi_t1 - roi_t0);
		fflush(stdout);
	}
}

static int cmdline_wants_addr(void)
{
	char buf[4096];
	ssize_t n;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strstr(buf, "numa_lb.m5=addr") != NULL;
}

static void m5_decide(void)
{
	const char *mode = getenv("NUMA_LB_PARSEC_M5");
	int addr;

	if (m5_state != M5_UNDECIDED)
		return;
	if (mode && !strcmp(mode, "off")) {
		m5_state = M5_OFF;
		m5_why = "NUMA_LB_PARSEC_M5=off";
		return;
	}
	if (mode && !strcmp(mode, "inst")) {
		m5_state = M5_ON;
		m5_why = "NUMA_LB_PARSEC_M5=inst";
		return;
	}
	addr = (mode && !strcmp(mode, "addr")) ||
	       ((!mode || !*mode || !strcmp(mode, "auto")) && cmdline_wants_addr());
	if (addr && m5_use_addr(0) != 0) {
		m5_state = M5_OFF;
		m5_why = "the m5 address transport could not map /dev/mem";
		return;
	}
	if (mode && !strcmp(mode, "addr")) {
		m5_state = M5_ON;
		m5_why = "NUMA_LB_PARSEC_M5=addr";
		return;
	}
	m5_state = m5_probe(&m5_why) == M5_GEM5 ? M5_ON : M5_OFF;
}

void __parsec_bench_begin(enum __parsec_benchmark bench)
{
	__nls_orig___parsec_bench_begin(bench);
	atexit(roi_time_at_exit);
	m5_decide();
	printf("[HOOKS] numa-lb m5 work items (id %d): %s (%s)\n", NLS_PARSEC_WORK_ID,
	       m5_state == M5_ON ? "on" : "off", m5_why);
	fflush(stdout);
}

void __parsec_bench_end(void)
{
	bench_ended = 1;
	__nls_orig___parsec_bench_end();
}

void __parsec_roi_begin(void)
{
	__nls_orig___parsec_roi_begin();
	m5_decide();
	if (m5_state == M5_ON)
		m5_work_begin(NLS_PARSEC_WORK_ID, (uint64_t)getpid());
	roi_t0 = now_s();
}

void __parsec_roi_end(void)
{
	roi_t1 = now_s();
	roi_done = 1;
	if (m5_state == M5_ON)
		m5_work_end(NLS_PARSEC_WORK_ID, (uint64_t)getpid());
	__nls_orig___parsec_roi_end();
}
