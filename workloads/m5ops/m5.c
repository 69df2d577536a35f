// SPDX-License-Identifier: BSD-3-Clause
/*
 * m5 - command-line front end to numa-lb-study's m5ops library.
 *
 * Every operation first probes (m5_probe) whether gem5 is there, so that
 * running the tool on QEMU or a real machine prints a clear error and exits
 * non-zero instead of dying of SIGILL: the guest init relies on that to
 * pick its fallback channel, and a crashing PID-1 helper must never take
 * the guest down.
 */
#define _GNU_SOURCE
#include "m5ops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit codes, documented in workloads/README.md. */
enum {
	EX_OK = 0,
	EX_NOT_GEM5 = 1,	/* probe said: not under gem5 */
	EX_USAGE = 2,
	EX_IO = 3,		/* local file or stdout error */
	EX_ADDR = 4,		/* --addr requested but /dev/mem mapping failed */
};

#define CHUNK (256u * 1024u)	/* readfile/writefile transfer unit */

static const char *prog = "m5";

static void usage(FILE *f)
{
	fprintf(f,
"usage: %s [--addr[=PHYS_BASE]] COMMAND [ARGS]\n"
"\n"
"commands (delays and periods in ns, default 0):\n"
"  probe | --probe                 say whether we run under gem5 (exit 0 yes, 1 no)\n"
"  exit [DELAY]                    end the simulation\n"
"  resetstats [DELAY [PERIOD]]     reset gem5 statistics\n"
"  dumpstats [DELAY [PERIOD]]      dump gem5 statistics\n"
"  dumpresetstats [DELAY [PERIOD]] dump then reset statistics\n"
"  checkpoint [DELAY [PERIOD]]     take a checkpoint\n"
"  workbegin [WORKID [THREADID]]   mark the start of a work item (ROI)\n"
"  workend [WORKID [THREADID]]     mark the end of a work item\n"
"  readfile [OFFSET]               copy the host's readfile to stdout\n"
"  writefile FILE [HOSTNAME]       copy FILE into gem5's output directory\n"
"                                  (as HOSTNAME, default: FILE's basename)\n"
"  sum A B C D E F                 gem5 adds six numbers (interface check)\n"
"\n"
"  --addr uses the /dev/mem address transport (gem5 KVM CPU), default\n"
"  base 0x%lx. Exit codes: 0 ok, 1 not under gem5, 2 usage, 3 I/O, 4 --addr.\n",
		prog, M5_ADDR_DEFAULT_BASE);
}

/* Strict unsigned parse (decimal, 0x hex, 0 octal): reject junk and
 * negatives so a typo in a job script fails loudly rather than passing 0. */
static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* Parse up to 'max' optional numeric args into vals (pre-zeroed). */
static int parse_args(int argc, char **argv, uint64_t *vals, int max,
		      const char *cmd)
{
	int i;

	if (argc > max) {
		fprintf(stderr, "%s %s: too many arguments (at most %d)\n", prog, cmd, max);
		return -1;
	}
	for (i = 0; i < argc; i++) {
		if (parse_u64(argv[i], &vals[i])) {
			fprintf(stderr, "%s %s: not a non-negative integer: '%s'\n",
				prog, cmd, argv[i]);
			return -1;
		}
	}
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int do_readfile(uint64_t offset)
{
	char *buf = malloc(CHUNK);
	uint64_t n;

	if (!buf) {
		perror("m5 readfile: malloc");
		return EX_IO;
	}
	/* gem5 returns 0 at end of file (or when no readfile is configured). */
	while ((n = m5_read_file(buf, CHUNK, offset)) > 0) {
		if (write_all(STDOUT_FILENO, buf, (size_t)n)) {
			perror("m5 readfile: write");
			free(buf);
			return EX_IO;
		}
		offset += n;
	}
	free(buf);
	return EX_OK;
}

static int do_writefile(const char *path, const char *hostname)
{
	char *buf;
	uint64_t offset = 0;
	int fd;
	ssize_t r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s writefile: %s: %s\n", prog, path, strerror(errno));
		return EX_IO;
	}
	buf = malloc(CHUNK);
	if (!buf) {
		close(fd);
		return EX_IO;
	}
	for (;;) {
		r = read(fd, buf, CHUNK);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s writefile: read %s: %s\n", prog, path,
				strerror(errno));
			break;
		}
		/* offset 0 makes gem5 create/truncate the file, later offsets
		 * append in place; an empty file still needs the first call. */
		if (r == 0 && offset > 0)
			break;
		if (m5_write_file(buf, (uint64_t)r, offset, hostname) != (uint64_t)r) {
			fprintf(stderr, "%s writefile: gem5 wrote less than asked\n", prog);
			r = -1;
			break;
		}
		offset += (uint64_t)r;
		if (r == 0)
			break;
	}
	free(buf);
	close(fd);
	return r < 0 ? EX_IO : EX_OK;
}

int main(int argc, char **argv)
{
	unsigned long addr_base = 0;
	int use_addr = 0;
	uint64_t v[6] = { 0 };
	const char *cmd, *why = "";
	enum m5_probe_result pr;
	int ac;
	char **av;

	(void)prog;
	argv++, argc--;
	while (argc > 0 && strncmp(argv[0], "--addr", 6) == 0) {
		uint64_t b = 0;

		if (argv[0][6] == '=') {
			if (parse_u64(argv[0] + 7, &b)) {
				fprintf(stderr, "%s: bad --addr base '%s'\n", prog, argv[0] + 7);
				return EX_USAGE;
			}
		} else if (argv[0][6] != '\0') {
			break;
		}
		use_addr = 1;
		addr_base = (unsigned long)b;
		argv++, argc--;
	}
	if (argc < 1) {
		usage(stderr);
		return EX_USAGE;
	}
	cmd = argv[0];
	ac = argc - 1;
	av = argv + 1;

	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return EX_OK;
	}

	/* Validate arguments before touching gem5, so usage errors are the
	 * same everywhere and never execute an op. */
	if (!strcmp(cmd, "probe") || !strcmp(cmd, "--probe")) {
		if (parse_args(ac, av, v, 0, cmd))
			return EX_USAGE;
	} else if (!strcmp(cmd, "exit")) {
		if (parse_args(ac, av, v, 1, cmd))
			return EX_USAGE;
	} else if (!strcmp(cmd, "resetstats") || !strcmp(cmd, "dumpstats") ||
		   !strcmp(cmd, "dumpresetstats") || !strcmp(cmd, "checkpoint") ||
		   !strcmp(cmd, "workbegin") || !strcmp(cmd, "workend")) {
		if (parse_args(ac, av, v, 2, cmd))
			return EX_USAGE;
	} else if (!strcmp(cmd, "readfile")) {
		if (parse_args(ac, av, v, 1, cmd))
			return EX_USAGE;
	} else if (!strcmp(cmd, "writefile")) {
		if (ac < 1 || ac > 2) {
			fprintf(stderr, "%s writefile: need FILE [HOSTNAME]\n", prog);
			return EX_USAGE;
		}
	} else if (!strcmp(cmd, "sum")) {
		if (ac != 6) {
			fprintf(stderr, "%s sum: need exactly 6 numbers\n", prog);
			return EX_USAGE;
		}
		if (parse_args(ac, av, v, 6, cmd))
			return EX_USAGE;
	} else {
		fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
		usage(stderr);
		return EX_USAGE;
	}

	if (use_addr) {
		int err = m5_use_addr(addr_base);

		if (err) {
			fprintf(stderr, "%s: cannot map /dev/mem for --addr: %s\n", prog,
				strerror(-err));
			return EX_ADDR;
		}
	}

	pr = m5_probe(&why);
	if (!strcmp(cmd, "probe") || !strcmp(cmd, "--probe")) {
		printf("%s: %s\n", pr == M5_GEM5 ? "gem5" : "not-gem5", why);
		return pr == M5_GEM5 ? EX_OK : EX_NOT_GEM5;
	}
	if (pr != M5_GEM5) {
		fprintf(stderr, "%s %s: %s; nothing done\n",
			prog, cmd, why);
		return EX_NOT_GEM5;
	}

	if (!strcmp(cmd, "exit"))
		m5_exit(v[0]);
	else if (!strcmp(cmd, "resetstats"))
		m5_reset_stats(v[0], v[1]);
	else if (!strcmp(cmd, "dumpstats"))
		m5_dump_stats(v[0], v[1]);
	else if (!strcmp(cmd, "dumpresetstats"))
		m5_dump_reset_stats(v[0], v[1]);
	else if (!strcmp(cmd, "checkpoint"))
		m5_checkpoint(v[0], v[1]);
	else if (!strcmp(cmd, "workbegin"))
		m5_work_begin(v[0], v[1]);
	else if (!strcmp(cmd, "workend"))
		m5_work_end(v[0], v[1]);
	else if (!strcmp(cmd, "readfile"))
		return do_readfile(v[0]);
	else if (!strcmp(cmd, "writefile")) {
		const char *host = ac == 2 ? av[1] : strrchr(av[0], '/');

		host = host ? (ac == 2 ? host : host + 1) : av[0];
		return do_writefile(av[0], host);
	} else if (!strcmp(cmd, "sum"))
		printf("%" PRIu64 "\n", m5_sum(v[0], v[1], v[2], v[3], v[4], v[5]));
	return EX_OK;
}
