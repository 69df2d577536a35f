// SPDX-License-Identifier: BSD-3-Clause
/*
 * nlbctr_decode - feeds daemons/nlbctr.c's nlb_perf_decode() one group-read
 * buffer, as read(2) on a perf event group leader returns it, and prints what
 * it decoded (tests/unit/test_nlbctr_read.py builds and runs this; no PMU is
 * needed).
 *
 *   nlbctr_decode HEXBYTES ID0 ID1 ID2 ID3 ID4
 *
 * HEXBYTES: the buffer; IDi: the kernel id of event i (0: not opened).
 * Prints "rc R", "times ENABLED RUNNING", then "ev I STATE VALUE" per event.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEV 5

int nlb_event_count(void);
int nlb_perf_decode(const void *buf, uint64_t len, const uint64_t *ids, uint64_t *values,
		    int *state, uint64_t *times);

int main(int argc, char **argv)
{
	unsigned char buf[4096];
	uint64_t ids[NEV], values[NEV], times[2];
	int state[NEV], i, rc;
	size_t n, len;

	if (argc != 2 + NEV || nlb_event_count() != NEV) {
		fprintf(stderr, "usage: %s HEXBYTES ID0 .. ID%d\n", argv[0], NEV - 1);
		return 2;
	}
	n = strlen(argv[1]);
	if (n % 2 || n / 2 > sizeof(buf)) {
		fprintf(stderr, "bad hex\n");
		return 2;
	}
	len = n / 2;
	for (i = 0; (size_t)i < len; i++) {
		char b[3] = { argv[1][2 * i], argv[1][2 * i + 1], 0 };

		buf[i] = (unsigned char)strtoul(b, NULL, 16);
	}
	for (i = 0; i < NEV; i++)
		ids[i] = strtoull(argv[2 + i], NULL, 10);
	rc = nlb_perf_decode(buf, len, ids, values, state, times);
	printf("rc %d\ntimes %llu %llu\n", rc, (unsigned long long)times[0],
	       (unsigned long long)times[1]);
	for (i = 0; i < NEV; i++)
		printf("ev %d %d %llu\n", i, state[i], (unsigned long long)values[i]);
	return 0;
}
