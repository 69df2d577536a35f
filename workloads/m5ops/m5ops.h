/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * m5ops.h - numa-lb-study's own interface to the gem5 x86 pseudo-instructions.
 *
 * Encoding (x86-64, gem5 "instruction" transport): the two opcode bytes
 * 0x0F 0x04 (an opcode real x86 CPUs leave undefined, so it raises #UD)
 * followed by a 16-bit little-endian immediate naming the function.
 * Arguments travel in rdi, rsi, rdx, rcx, r8, r9 (SysV order); gem5 writes
 * the result to rax.
 *
 * A second transport ("address", for gem5's KVM CPU, where the host CPU
 * executes 0F 04 itself and faults) loads 8 bytes from the physical page
 * window base + (func << 8), mapped through /dev/mem; the same registers
 * carry the arguments. It is selected with m5_use_addr().
 *
 * The function numbers below were read from gem5 v24.0.0.1's
 * include/gem5/asm/generic/m5ops.h and the argument lists from
 * src/sim/pseudo_inst.cc; this table and all code here are our own.
 */
#ifndef NLS_M5OPS_H
#define NLS_M5OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gem5 pseudo-instruction function numbers (the 16-bit immediate). */
enum m5_func {
	M5_FUNC_EXIT            = 0x21, /* (delay_ns) */
	M5_FUNC_SUM             = 0x23, /* (a..f) -> a+b+c+d+e+f; side-effect free */
	M5_FUNC_RESET_STATS     = 0x40, /* (delay_ns, period_ns) */
	M5_FUNC_DUMP_STATS      = 0x41, /* (delay_ns, period_ns) */
	M5_FUNC_DUMP_RESET_STATS = 0x42, /* (delay_ns, period_ns) */
	M5_FUNC_CHECKPOINT      = 0x43, /* (delay_ns, period_ns) */
	M5_FUNC_WRITE_FILE      = 0x4f, /* (vaddr, len, offset, filename vaddr) -> len */
	M5_FUNC_READ_FILE       = 0x50, /* (vaddr, len, offset) -> bytes read */
	M5_FUNC_WORK_BEGIN      = 0x5a, /* (workid, threadid) */
	M5_FUNC_WORK_END        = 0x5b, /* (workid, threadid) */
};

/* Default physical base of the address transport (gem5's X86Board m5ops_base). */
#define M5_ADDR_DEFAULT_BASE 0xFFFF0000UL

/*
 * Operations. Outside gem5 each of these raises SIGILL (instruction
 * transport): call m5_probe() first unless you know where you run.
 * Buffers passed to read/write_file must be resident (gem5 copies through
 * the guest page tables and cannot take a page fault): these wrappers touch
 * and mlock them for you.
 */
void     m5_exit(uint64_t delay_ns);
void     m5_reset_stats(uint64_t delay_ns, uint64_t period_ns);
void     m5_dump_stats(uint64_t delay_ns, uint64_t period_ns);
void     m5_dump_reset_stats(uint64_t delay_ns, uint64_t period_ns);
void     m5_checkpoint(uint64_t delay_ns, uint64_t period_ns);
uint64_t m5_read_file(void *buf, uint64_t len, uint64_t offset);
uint64_t m5_write_file(const void *buf, uint64_t len, uint64_t offset,
		       const char *host_filename);
void     m5_work_begin(uint64_t workid, uint64_t threadid);
void     m5_work_end(uint64_t workid, uint64_t threadid);
uint64_t m5_sum(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
		uint64_t f);

/*
 * Raw instruction-transport entry points, one per function, each a plain
 * 0F 04 imm16 with no probing: the unit test disassembles these.
 */
uint64_t m5i_exit(uint64_t delay_ns);
uint64_t m5i_reset_stats(uint64_t delay_ns, uint64_t period_ns);
uint64_t m5i_dump_stats(uint64_t delay_ns, uint64_t period_ns);
uint64_t m5i_dump_reset_stats(uint64_t delay_ns, uint64_t period_ns);
uint64_t m5i_checkpoint(uint64_t delay_ns, uint64_t period_ns);
uint64_t m5i_read_file(uint64_t vaddr, uint64_t len, uint64_t offset);
uint64_t m5i_write_file(uint64_t vaddr, uint64_t len, uint64_t offset,
			uint64_t filename_vaddr);
uint64_t m5i_work_begin(uint64_t workid, uint64_t threadid);
uint64_t m5i_work_end(uint64_t workid, uint64_t threadid);
uint64_t m5i_sum(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
		 uint64_t f);

/*
 * Switch every later call to the address transport: maps 64 KiB of
 * /dev/mem at phys_base (0 means M5_ADDR_DEFAULT_BASE). Returns 0 or -errno.
 */
int m5_use_addr(unsigned long phys_base);

/* Result of m5_probe(). */
enum m5_probe_result {
	M5_NOT_GEM5 = 0,	/* the op faulted (SIGILL/SIGSEGV/SIGBUS) */
	M5_GEM5 = 1,		/* gem5 answered the SUM op correctly */
	M5_WRONG_ANSWER = 2,	/* no fault, but the answer was wrong */
};

/*
 * Execute the side-effect-free SUM op under a temporary SIGILL/SIGSEGV/
 * SIGBUS handler (sigsetjmp/siglongjmp) and report whether gem5 answered.
 * Restores the previous handlers. Not thread-safe: call it before starting
 * threads. 'why' (may be NULL) receives a static human-readable reason.
 */
enum m5_probe_result m5_probe(const char **why);

#ifdef __cplusplus
}
#endif
#endif /* NLS_M5OPS_H */
