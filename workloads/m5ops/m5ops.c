// SPDX-License-Identifier: BSD-3-Clause
/*
 * m5ops.c - gem5 x86 pseudo-instructions for numa-lb-study (see m5ops.h).
 */
#define _GNU_SOURCE
#include "m5ops.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * One raw instruction-transport function per op. The immediate has to be
 * an assembler constant, hence one function each. All six argument
 * registers are bound even for ops that read fewer: gem5 only reads what
 * the op's signature asks for, and binding them keeps the macro simple.
 * rax is an output for every op because gem5 writes it unconditionally.
 * The "memory" clobber stops the compiler from caching memory across an op
 * that reads (writefile) or writes (readfile) guest memory behind its back.
 */
#define M5I_DEFINE(name, func)                                              \
	__attribute__((noinline)) uint64_t m5i_##name##_6(                  \
		uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,         \
		uint64_t a4, uint64_t a5)                                    \
	{                                                                    \
		register uint64_t r8 __asm__("r8") = a4;                     \
		register uint64_t r9 __asm__("r9") = a5;                     \
		uint64_t ret;                                                \
		__asm__ __volatile__(".byte 0x0f, 0x04\n\t.word %c[fn]"      \
				     : "=a"(ret)                             \
				     : [fn] "i"(func), "D"(a0), "S"(a1),     \
				       "d"(a2), "c"(a3), "r"(r8), "r"(r9)    \
				     : "memory");                            \
		return ret;                                                  \
	}

/* Prototypes keep -Wmissing-prototypes quiet for the generated functions. */
#define M5I_PROTO(name)                                                     \
	uint64_t m5i_##name##_6(uint64_t, uint64_t, uint64_t, uint64_t,     \
				uint64_t, uint64_t);
M5I_PROTO(exit)
M5I_PROTO(reset_stats)
M5I_PROTO(dump_stats)
M5I_PROTO(dump_reset_stats)
M5I_PROTO(checkpoint)
M5I_PROTO(read_file)
M5I_PROTO(write_file)
M5I_PROTO(work_begin)
M5I_PROTO(work_end)
M5I_PROTO(sum)

M5I_DEFINE(exit, M5_FUNC_EXIT)
M5I_DEFINE(reset_stats, M5_FUNC_RESET_STATS)
M5I_DEFINE(dump_stats, M5_FUNC_DUMP_STATS)
M5I_DEFINE(dump_reset_stats, M5_FUNC_DUMP_RESET_STATS)
M5I_DEFINE(checkpoint, M5_FUNC_CHECKPOINT)
M5I_DEFINE(read_file, M5_FUNC_READ_FILE)
M5I_DEFINE(write_file, M5_FUNC_WRITE_FILE)
M5I_DEFINE(work_begin, M5_FUNC_WORK_BEGIN)
M5I_DEFINE(work_end, M5_FUNC_WORK_END)
M5I_DEFINE(sum, M5_FUNC_SUM)

/* Public raw entry points with the op's real arity. */
uint64_t m5i_exit(uint64_t d) { return m5i_exit_6(d, 0, 0, 0, 0, 0); }
uint64_t m5i_reset_stats(uint64_t d, uint64_t p) { return m5i_reset_stats_6(d, p, 0, 0, 0, 0); }
uint64_t m5i_dump_stats(uint64_t d, uint64_t p) { return m5i_dump_stats_6(d, p, 0, 0, 0, 0); }
uint64_t m5i_dump_reset_stats(uint64_t d, uint64_t p)
{
	return m5i_dump_reset_stats_6(d, p, 0, 0, 0, 0);
}
uint64_t m5i_checkpoint(uint64_t d, uint64_t p) { return m5i_checkpoint_6(d, p, 0, 0, 0, 0); }
uint64_t m5i_read_file(uint64_t va, uint64_t len, uint64_t off)
{
	return m5i_read_file_6(va, len, off, 0, 0, 0);
}
uint64_t m5i_write_file(uint64_t va, uint64_t len, uint64_t off, uint64_t fn)
{
	return m5i_write_file_6(va, len, off, fn, 0, 0);
}
uint64_t m5i_work_begin(uint64_t w, uint64_t t) { return m5i_work_begin_6(w, t, 0, 0, 0, 0); }
uint64_t m5i_work_end(uint64_t w, uint64_t t) { return m5i_work_end_6(w, t, 0, 0, 0, 0); }
uint64_t m5i_sum(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
	return m5i_sum_6(a, b, c, d, e, f);
}

/* ---- address transport ---------------------------------------------- */

#define M5_ADDR_WINDOW 0x10000UL

static volatile uint8_t *m5_window;	/* NULL: instruction transport */

int m5_use_addr(unsigned long phys_base)
{
	int fd;
	void *p;

	if (!phys_base)
		phys_base = M5_ADDR_DEFAULT_BASE;
	/* O_SYNC makes the kernel map the window uncached, so every load
	 * really leaves the CPU and reaches gem5's handler. */
	fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	p = mmap(NULL, M5_ADDR_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)phys_base);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	m5_window = p;
	return 0;
}

/*
 * gem5 decodes the function from bits 15..8 of the offset into the window
 * and takes the arguments from the registers at the time of the access, so
 * the load must be the instruction that has them bound.
 */
static uint64_t m5a_call(unsigned func, uint64_t a0, uint64_t a1, uint64_t a2,
			 uint64_t a3, uint64_t a4, uint64_t a5)
{
	volatile const uint64_t *slot =
		(volatile const uint64_t *)(m5_window + ((uintptr_t)func << 8));
	register uint64_t r8 __asm__("r8") = a4;
	register uint64_t r9 __asm__("r9") = a5;
	uint64_t ret;

	__asm__ __volatile__("movq (%[slot]), %%rax"
			     : "=a"(ret)
			     : [slot] "r"(slot), "D"(a0), "S"(a1), "d"(a2),
			       "c"(a3), "r"(r8), "r"(r9)
			     : "memory");
	return ret;
}

/* ---- public API -------------------------------------------------------- */

#define DISPATCH(name, func, a0, a1, a2, a3, a4, a5)                        \
	(m5_window ? m5a_call(func, a0, a1, a2, a3, a4, a5)                  \
		   : m5i_##name##_6(a0, a1, a2, a3, a4, a5))

void m5_exit(uint64_t d) { (void)DISPATCH(exit, M5_FUNC_EXIT, d, 0, 0, 0, 0, 0); }
void m5_reset_stats(uint64_t d, uint64_t p)
{
	(void)DISPATCH(reset_stats, M5_FUNC_RESET_STATS, d, p, 0, 0, 0, 0);
}
void m5_dump_stats(uint64_t d, uint64_t p)
{
	(void)DISPATCH(dump_stats, M5_FUNC_DUMP_STATS, d, p, 0, 0, 0, 0);
}
void m5_dump_reset_stats(uint64_t d, uint64_t p)
{
	(void)DISPATCH(dump_reset_stats, M5_FUNC_DUMP_RESET_STATS, d, p, 0, 0, 0, 0);
}
void m5_checkpoint(uint64_t d, uint64_t p)
{
	(void)DISPATCH(checkpoint, M5_FUNC_CHECKPOINT, d, p, 0, 0, 0, 0);
}
void m5_work_begin(uint64_t w, uint64_t t)
{
	(void)DISPATCH(work_begin, M5_FUNC_WORK_BEGIN, w, t, 0, 0, 0, 0);
}
void m5_work_end(uint64_t w, uint64_t t)
{
	(void)DISPATCH(work_end, M5_FUNC_WORK_END, w, t, 0, 0, 0, 0);
}
uint64_t m5_sum(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
	return DISPATCH(sum, M5_FUNC_SUM, a, b, c, d, e, f);
}

/*
 * gem5 copies readfile/writefile data through the guest page tables and
 * panics (ending the whole simulation) if a page is not present. Write to
 * every page first so it is present and writable (no CoW zero page), and
 * mlock it so it stays. mlock may fail under RLIMIT_MEMLOCK; the guest has
 * no swap, so touching alone suffices there and the failure is ignored.
 * M5OPS_NO_MLOCK=1 skips mlock/munlock: gem5's syscall-emulation mode has
 * no mlock and would stop the simulation (used by the gem5-tier test).
 */
static int use_mlock(void)
{
	static int v = -1;

	if (v < 0) {
		const char *e = getenv("M5OPS_NO_MLOCK");

		v = !(e && *e && strcmp(e, "0") != 0);
	}
	return v;
}

static void make_resident(volatile uint8_t *p, uint64_t len, int writable)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t i;

	if (!len)
		return;
	for (i = 0; i < len; i += (uint64_t)pg) {
		if (writable)
			p[i] = p[i];
		else
			(void)p[i];
	}
	if (writable)
		p[len - 1] = p[len - 1];
	else
		(void)p[len - 1];
	if (use_mlock())
		(void)mlock((const void *)p, len);
}

static void unlock(const void *p, uint64_t len)
{
	if (len && use_mlock())
		(void)munlock(p, len);
}

uint64_t m5_read_file(void *buf, uint64_t len, uint64_t offset)
{
	uint64_t n;

	make_resident(buf, len, 1);
	n = DISPATCH(read_file, M5_FUNC_READ_FILE, (uint64_t)(uintptr_t)buf, len,
		     offset, 0, 0, 0);
	unlock(buf, len);
	return n;
}

uint64_t m5_write_file(const void *buf, uint64_t len, uint64_t offset,
		       const char *host_filename)
{
	size_t fl = strlen(host_filename) + 1;
	uint64_t n;

	make_resident((volatile uint8_t *)(uintptr_t)buf, len, 0);
	make_resident((volatile uint8_t *)(uintptr_t)host_filename, fl, 0);
	n = DISPATCH(write_file, M5_FUNC_WRITE_FILE, (uint64_t)(uintptr_t)buf, len,
		     offset, (uint64_t)(uintptr_t)host_filename, 0, 0);
	unlock(buf, len);
	unlock(host_filename, fl);
	return n;
}

/* ---- probe ------------------------------------------------------------- */

static sigjmp_buf probe_env;
static volatile sig_atomic_t probe_sig;

static void probe_handler(int sig)
{
	probe_sig = sig;
	siglongjmp(probe_env, 1);
}

enum m5_probe_result m5_probe(const char **why)
{
	static const int sigs[] = { SIGILL, SIGSEGV, SIGBUS };
	struct sigaction sa, old[3];
	enum m5_probe_result res;
	const char *reason;
	/* Arbitrary operands whose sum no stray register value is likely to
	 * equal, so "no fault and right answer" means gem5 computed it. */
	const uint64_t a = 0x1234567, b = 0x89abcde, c = 0x5a5a5a5a,
		       d = 0x77, e = 0x31337, f = 0x600d;
	const uint64_t want = a + b + c + d + e + f;
	volatile uint64_t got = 0;
	unsigned i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = probe_handler;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);

	probe_sig = 0;
	/* savemask=1: siglongjmp out of the handler restores the signal mask,
	 * otherwise SIGILL would stay blocked and a later real fault would
	 * kill the process instead of reaching the restored handler. */
	if (sigsetjmp(probe_env, 1) == 0) {
		got = m5_sum(a, b, c, d, e, f);
		if (got == want) {
			res = M5_GEM5;
			reason = m5_window ? "gem5 answered the m5 SUM op (address transport)"
					   : "gem5 answered the m5 SUM op (0f 04 instruction)";
		} else {
			res = M5_WRONG_ANSWER;
			reason = "the m5 SUM op ran without fault but returned a wrong "
				 "value: not gem5 (or an incompatible gem5)";
		}
	} else {
		res = M5_NOT_GEM5;
		if (probe_sig == SIGILL)
			reason = "the 0f 04 pseudo-instruction raised SIGILL (invalid "
				 "opcode): not running under gem5 (or under gem5's KVM "
				 "CPU, which needs --addr)";
		else
			reason = "the m5 address window faulted: not running under gem5";
	}

	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	if (why)
		*why = reason;
	return res;
}
