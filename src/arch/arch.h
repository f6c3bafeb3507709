/* SPDX-License-Identifier: MIT */
/* arch.h - what an instruction set provides to the layers above it. */
#ifndef PK_ARCH_H
#define PK_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/ucontext.h>

#include "internal.h"

/* What a thread that stops before an instruction must do to run it elsewhere. */
enum pk_insn_kind {
	PK_INSN_PLAIN,	/* position independent: may run out of line */
	PK_INSN_NOP,	/* does nothing */
	PK_INSN_JMP,	/* jmp rel8/rel32: target set */
	PK_INSN_CALL,	/* call rel32: target set */
	PK_INSN_TRAP,	/* int3 */
	PK_INSN_RELATIVE, /* other PC-relative forms (jcc, loop, [rip+x]) */
};

#define PK_INSN_F_INDIRECT_JMP 0x1	/* jmp through a register or memory */
#define PK_INSN_F_CALL 0x2		/* any call: it pushes its own address */
#define PK_INSN_F_BRANCH 0x4		/* may not fall through to the next
					   instruction: jmp, jcc, call, ret,
					   int/int3, ud2, hlt */
#define PK_INSN_F_NOFALL 0x8		/* never falls through to the next:
					   jmp, ret, ud0/ud1/ud2, hlt */

struct pk_insn {
	uint8_t len;
	uint8_t kind;		/* enum pk_insn_kind */
	uint8_t flags;		/* PK_INSN_F_* */
	uint64_t target;	/* PK_INSN_JMP/CALL, and PK_INSN_RELATIVE
				   branches (jcc, loop, xbegin): absolute
				   destination; 0 for other forms */
};

/*
 * pk_arch_decode() - decode the instruction at @code, which runs at @runtime.
 * @avail: bytes readable at @code; an instruction that needs more fails.
 * Return: 0, or -EINVAL (not a valid instruction within @avail bytes).
 */
PK_HIDDEN int pk_arch_decode(const void *code, size_t avail, uint64_t runtime,
			     struct pk_insn *out);

/*
 * pk_arch_decode_zydis() - pk_arch_decode() without its table-driven fast
 * path for the common instructions: the reference the fast path must
 * equal (tests/test_arch_decode_fast.c).
 */
PK_HIDDEN int pk_arch_decode_zydis(const void *code, size_t avail,
				   uint64_t runtime, struct pk_insn *out);

/*
 * pk_arch_decode_fast() - the fast path alone: 1 with *@out as
 * pk_arch_decode_zydis() fills it, or 0 (not an instruction it knows).
 */
PK_HIDDEN int pk_arch_decode_fast(const void *code, size_t avail,
				  uint64_t runtime, struct pk_insn *out);

/*
 * pk_arch_branch_targets() - decode the @len bytes at @code, which run at
 * @runtime, one instruction after another from the first byte, and pass
 * the destination of every PC-relative branch among them (jmp, jcc, call,
 * loop, jrcxz, xbegin: rel8/rel32) to @emit. A byte that does not decode
 * is stepped over (data among the code); an instruction that would cross
 * the end is not decoded. Zydis decodes them in its minimal mode (length
 * and raw immediates only): the branch index decodes the code near each
 * probe with it (probe/xref.c).
 * Return: the number of instructions decoded.
 */
PK_HIDDEN size_t pk_arch_branch_targets(const void *code, size_t len,
					uint64_t runtime,
					void (*emit)(uint64_t target, void *ctx),
					void *ctx);

/*
 * Indirect jmps of a function, classified by what their destinations can be
 * (pk_arch_ijmp_scan(), for placing jump probes: src/probe/place.c):
 *
 *   PK_IJMP_TABLE_REL  a jump table of int32 entries at @table, each added
 *                      to @base (lea T(%rip),%b; movslq (%b,%i,4),%r;
 *                      add %b,%r; jmp *%r: GCC and clang, PIC)
 *   PK_IJMP_TABLE_ABS  a table of 64-bit addresses at @table (jmp
 *                      *T(,%i,8), non-PIC; or through lea T(%rip))
 *   PK_IJMP_POINTER    a code pointer loaded from memory: a tail call
 *                      (jmp *0x80(%rax), mov 8(%rdi),%rax; jmp *%rax);
 *                      @table: the word it reads, where that is known
 *                      (rip-relative, or off a register a lea set)
 *   PK_IJMP_REG        jmp *%reg, the register's value not traced to a
 *                      load or a table on the straight line (a callback
 *                      in a callee-saved register, a pointer loaded in
 *                      another block): as a pointer, if the function
 *                      makes no address of its own code (*@own) and no
 *                      table it loads from holds one inside the bytes
 *   PK_IJMP_UNKNOWN    anything else (arithmetic on the target)
 *
 * And not jmps, the function's table loads, for PK_IJMP_REG to check:
 *
 *   PK_IJMP_LOAD_REL   movslq (%b,%i,4) (or a 32-bit mov of that form):
 *                      int32 entries at @table, base @base (the table's
 *                      own address, as compilers emit them)
 *   PK_IJMP_LOAD_ABS   mov T(,%i,8) / mov (%b,%i,8): 64-bit words at
 *                      @table
 *   PK_IJMP_LOAD_UNKNOWN such a load from a table whose address is not
 *                      known
 *
 * A table's registers are found on the straight line into the jmp (no
 * branch or call between, no branch of the function landing between: a
 * second path could bring other values), or, for the table's base, as the
 * one value every write of that register in the function gives it. @seq:
 * the table's first instruction on that line (the load of the entry); a
 * branch from elsewhere into (@seq, @at] would skip it.
 */
enum pk_ijmp_class {
	PK_IJMP_UNKNOWN,
	PK_IJMP_TABLE_REL,
	PK_IJMP_TABLE_ABS,
	PK_IJMP_POINTER,
	PK_IJMP_REG,
	PK_IJMP_LOAD_REL,
	PK_IJMP_LOAD_ABS,
	PK_IJMP_LOAD_UNKNOWN,
};

struct pk_ijmp {
	uint64_t at;		/* the jmp */
	uint64_t seq;		/* TABLE_*: the entry's load */
	uint64_t table;		/* TABLE_*: the first entry; POINTER: the word
				   a jmp *x(%rip) reads, or 0 */
	uint64_t base;		/* TABLE_REL: what each entry is added to */
	uint8_t cls;		/* enum pk_ijmp_class */
};

/*
 * pk_arch_ijmp_scan() - decode the function at @code (@size bytes, running
 * at @runtime) and classify its indirect jmps and table loads into @out
 * (room for @max, in address order); *@made: an instruction that
 * materializes an address in (@lo, @hi) (a lea of it, an immediate equal
 * to it: a computed goto's label), or 0; *@own: one that materializes an
 * address of the function's own code, or 0.
 * Return: the number of entries (only the first @max filled), or -EINVAL
 * (the function does not decode), -ENOMEM.
 */
PK_HIDDEN int pk_arch_ijmp_scan(const void *code, size_t size, uint64_t runtime,
				uint64_t lo, uint64_t hi, struct pk_ijmp *out,
				size_t max, uint64_t *made, uint64_t *own);

/*
 * How the one data access of a faulting instruction can be moved to another
 * mapping of the same memory, @delta bytes away, without changing what else
 * the instruction does (page watchpoints, src/fault/watch.c):
 *   PK_ACCESS_MOVE_REG  add delta to general register @reg (an index into
 *                       the ucontext's gregs) for the instruction, which
 *                       reads and writes that register nowhere else;
 *   PK_ACCESS_MOVE_RIP  RIP-relative: run the same bytes at @rip + delta.
 */
enum pk_access_move {
	PK_ACCESS_MOVE_REG = 1,
	PK_ACCESS_MOVE_RIP = 2,
};

struct pk_access {
	uint8_t len;		/* instruction length */
	uint8_t how;		/* enum pk_access_move */
	int8_t reg;		/* PK_ACCESS_MOVE_REG: the gregs index */
	uint64_t addr;		/* the effective address */
	uint32_t size;		/* bytes accessed */
};

/*
 * pk_arch_access() - decode the instruction at @code (@avail bytes readable)
 * with registers @gregs (a ucontext's gregs): the range it accesses and how
 * that access can be moved (@out->how 0: it cannot be: the register is
 * used elsewhere in it, RSP, or there is no register to move, as for an
 * absolute address or a scaled index only). Async-signal-safe.
 * Return: 0, or -ENOTSUP: not exactly one memory operand, a branch or
 * stack operation, FS/GS, 32-bit addressing.
 */
PK_HIDDEN int pk_arch_access(const void *code, size_t avail,
			     const long long *gregs, struct pk_access *out);

/*
 * Resuming a signal handler's interrupted context without rt_sigreturn
 * (src/arch/x86_64/resume.c), for a handler installed with SA_NODEFER and an
 * empty sa_mask (then the kernel did not change the signal mask).
 * pk_arch_resume_ok() (the fault block below) says whether a context can be.
 *
 * pk_arch_resume_usable() - whether this process may (no shadow stack).
 * Once, not on a signal path.
 */
PK_HIDDEN int pk_arch_resume_usable(void);

/* pk_arch_resume() - resume @uc (see pk_arch_resume_ok()); never returns. */
PK_HIDDEN __attribute__((noreturn)) void pk_arch_resume(const ucontext_t *uc);

#define PK_ARCH_TRAP_BYTE 0xcc	/* int3 */
#define PK_ARCH_TRAP_LEN 1

/* A branch site: as long as a near jmp, so a NOP of that length fits too. */
#define PK_ARCH_JMP_LEN 5

/*
 * pk_arch_encode_jmp() - a near jmp at @from to @to, PK_ARCH_JMP_LEN bytes
 * Return: 0, or -ERANGE (@to out of a rel32's reach).
 */
PK_HIDDEN int pk_arch_encode_jmp(uint8_t buf[PK_ARCH_JMP_LEN], uint64_t from,
				 uint64_t to);

/* pk_arch_encode_nop() - one NOP instruction of PK_ARCH_JMP_LEN bytes. */
PK_HIDDEN void pk_arch_encode_nop(uint8_t buf[PK_ARCH_JMP_LEN]);

/*
 * pk_arch_encode_abs_jmp() - jmp to @to from anywhere: jmp *0(%rip); .quad @to
 * Return: bytes written to @buf (PK_ARCH_ABS_JMP_LEN).
 */
#define PK_ARCH_ABS_JMP_LEN 14
PK_HIDDEN size_t pk_arch_encode_abs_jmp(uint8_t *buf, uint64_t to);

/*
 * pk_arch_relocate() - copy the whole instructions in @len bytes at @src (which
 * run at @from) into @dst (which will run at @to), keeping their meaning:
 * PC-relative operands and branches are re-targeted, short branches widened.
 * See reloc.c for the table of forms.
 * @cap: room at @dst
 * @map: if not NULL, receives where each instruction starts in both copies
 * Return: bytes written at @dst, or -EINVAL (not whole instructions), -ENOTSUP
 * (an instruction that cannot move), -ERANGE (a target out of rel32 reach
 * from @to), -E2BIG (@cap or PK_RELOC_MAX too small).
 */
#define PK_RELOC_MAX 16		/* instructions in one relocation */
struct pk_reloc_map {
	unsigned int n;
	uint8_t src[PK_RELOC_MAX];	/* offset of instruction i in the source */
	uint8_t dst[PK_RELOC_MAX];	/* and in the copy */
};
PK_HIDDEN int pk_arch_relocate(const void *src, size_t len, uint64_t from,
			       uint8_t *dst, size_t cap, uint64_t to,
			       struct pk_reloc_map *map);

/*
 * pk_arch_relocate_one() - the one instruction at @src (running at @from) as
 * code that runs at @to and behaves the same: pk_arch_relocate() for most;
 * a call (rel32, or indirect through a register or memory not based on rsp)
 * becomes "push the original return address; jmp to the callee", so the
 * callee returns to @from + length and never into the copy.
 * @avail: bytes readable at @src
 * @falls_through: set to 1 if the copy ends by falling through to its next
 *                 byte (the caller appends the way back), 0 if it never does
 *                 (a call: it continues at the callee)
 * Return: bytes written at @dst, or the errors of pk_arch_relocate().
 */
PK_HIDDEN int pk_arch_relocate_one(const void *src, size_t avail, uint64_t from,
				   uint8_t *dst, size_t cap, uint64_t to,
				   int *falls_through);

/*
 * pk_arch_shstk_active() - whether this thread runs with a shadow stack
 * (CET user shadow stacks, Linux 6.6+: arch_prctl ARCH_SHSTK_STATUS): a
 * call moved as push + jmp would then return to an address the shadow
 * stack does not hold.
 */
PK_HIDDEN int pk_arch_shstk_active(void);

/* ---- text layer: a trapped thread's context (src/arch/x86_64/context.h) ----
 *
 * What the trap path (text.c, sig.c, the fault layer's trap chain) does to
 * a thread stopped by a trap instruction, in its signal handler. All are
 * inline (always: they live in their caller's PK_NOPROBE section) and
 * async-signal-safe.
 *
 * pk_arch_trap_hit(si)      - whether this SIGTRAP came from a trap
 *                             instruction (not a kill, a single step, a
 *                             hardware breakpoint).
 * pk_arch_trap_addr(uc)     - the address of the trap instruction it hit.
 * pk_arch_trap_present(p)   - whether the trap instruction is at @p now.
 * pk_arch_set_pc(uc, pc)    - the thread continues at @pc.
 * pk_arch_emulate_call(uc, ret, target)
 *                           - what a call instruction would have done:
 *                             @ret becomes the return address, the thread
 *                             continues at @target.
 */
#if defined(__x86_64__)
#include "arch/x86_64/context.h"
#else
#error "probekit: no src/arch/<isa>/context.h for this instruction set"
#endif

/* ---- the signal path's system calls (x86-64: syscall.h) ----------------
 *
 * For PK_NOPROBE code, which must call no function a probe can be on (not
 * libc's syscall(), getpid(), gettid(), __errno_location()); all inline:
 *
 * pk_sys3(nr, a, b, c)  - raw system call: its result, or -errno; errno is
 *                         not written.
 * pk_errno_ptr()        - the calling thread's &errno, by the thread
 *                         pointer and pk_errno_off (set once by util.c's
 *                         constructor).
 */
#if defined(__x86_64__)
#include "arch/x86_64/syscall.h"
#else
#error "probekit: no src/arch/<isa>/syscall.h for this instruction set"
#endif

/* ---- fault layer: a faulting thread's context (src/arch/x86_64/fault_context.h) ----
 *
 * What the fault layer (src/fault/) reads and edits in the context @uc of
 * a thread stopped by a fault or a single step, besides the trap helpers
 * above (pk_arch_trap_hit/_trap_addr/_set_pc). All are inline (always:
 * they live in their caller's PK_NOPROBE section; the handled fault is the
 * hot path) and async-signal-safe.
 *
 * pk_arch_pc(uc)            - the address of the instruction the thread
 *                             resumes at.
 * pk_arch_fault_access(uc)  - what the access that raised a SIGSEGV or
 *                             SIGBUS did: PK_ACCESS_READ, _WRITE or _EXEC,
 *                             or 0 where @uc does not say (not a page
 *                             fault).
 * pk_arch_set_step(uc, on)  - @on: the thread traps (SIGTRAP, TRAP_TRACE)
 *                             after the one instruction it resumes at; 0:
 *                             it runs on.
 * pk_arch_reg_add(uc, reg, delta)
 *                           - add @delta (modulo 2^64) to the general
 *                             register @reg, as struct pk_access names it.
 * pk_arch_access_at(uc, page_size, out)
 *                           - pk_arch_access() of the instruction the
 *                             thread resumes at, read from no byte past
 *                             the end of its page.
 * pk_arch_resume_ok(uc)     - whether @uc, as the handler leaves it, can
 *                             be resumed by pk_arch_resume() (above): the
 *                             frame holds the extended state in the form
 *                             pk_arch_resume() restores, no single step is
 *                             asked for (that is rt_sigreturn's job), and
 *                             the frame lies just below the interrupted
 *                             stack pointer (not on an alternate stack,
 *                             where the interrupted stack may have no room
 *                             below its red zone and rt_sigreturn re-arms
 *                             an SS_AUTODISARM stack).
 * PK_ARCH_PCREL_REACH       - how far a PC-relative data operand reaches
 *                             either way: a copy of the instruction run up
 *                             to this far from the original still encodes
 *                             an operand that far from the original's.
 */
#if defined(__x86_64__)
#include "arch/x86_64/fault_context.h"
#else
#error "probekit: no src/arch/<isa>/fault_context.h for this instruction set"
#endif

/*
 * pk_arch_copy_unchecked() - copy @len bytes, whatever they are, without a
 * call a sanitizer intercepts: under ASan a page of globals holds redzones
 * that memcpy() would report (src/arch/x86_64/copy.c). Not for overlapping
 * buffers; not on a signal path.
 */
PK_HIDDEN void pk_arch_copy_unchecked(void *dst, const void *src, size_t len);

/* ---- trampolines (probe layer: src/probe/; x86-64: tramp.c) --------- */

/*
 * Trampoline chunks, slots and the return trampoline: their layout (named
 * offsets PK_TRAMP_* and PK_RET_*) and where chunks may go in the address
 * space (PK_ARCH_USER_TOP, PK_ARCH_MMAP_MIN) are the ISA's, in
 * arch/<isa>/tramp.h.
 */
#if defined(__x86_64__)
#include "arch/x86_64/tramp.h"
#else
#error "probekit: no src/arch/<isa>/tramp.h for this instruction set"
#endif

/*
 * What a chunk head's code calls and reads: the two dispatchers
 * (void fn(struct pk_regs *, uintptr_t gpr): @gpr non-zero, the slot's
 * owner, when the stub saved no vector state, tramp.h) and this thread's
 * divert request, three
 * initial-exec thread-local words (the same offset from the thread pointer
 * in every thread, so the code names them by offset).
 */
struct pk_tramp_env {
	uintptr_t dispatch;		/* pre-handlers at a function's entry */
	uintptr_t dispatch_full;	/* flags restored: other pre-handlers,
					   post-handlers */
	const uintptr_t *divert_sp, *divert_to, *divert_cont;
};

/*
 * pk_arch_tramp_head() - a chunk's head: its first PK_TRAMP_HEAD bytes,
 * into @buf (position independent within the chunk).
 * Return: 0, or -E2BIG (the code outgrew its place: a build error).
 */
PK_HIDDEN int pk_arch_tramp_head(uint8_t *buf, const struct pk_tramp_env *env);

/* One probe point's slot, as pk_arch_tramp_slot() builds it. */
struct pk_tramp_slot {
	uintptr_t at;		/* where the slot will be */
	uintptr_t head;		/* its chunk's head */
	const void *owner;	/* the slot's first word */
	uintptr_t addr;		/* the probe point */
	const uint8_t *code;	/* its original bytes, @len of them */
	uint8_t len;		/* displaced bytes; int3: the instruction */
	uint8_t first_len;	/* the probed instruction's length */
	uint8_t int3;		/* int3 probe: one instruction, calls emulated
				   (pk_arch_relocate_one()) */
	uint8_t post;		/* post-handlers after the first instruction */
	uint8_t full;		/* pre-handlers through the full stub */
	uint8_t gpr;		/* through the stubs' general-registers-only
				   twins; @owner's first byte says when
				   (PK_TRAMP_OWNER_GPR) */
};

/*
 * pk_arch_tramp_slot() - @s's code, PK_TRAMP_SLOT_SIZE bytes into @buf
 * @map: receives where each displaced instruction starts in the site and
 *       in the copy (offsets from PK_TRAMP_SLOT_COPY)
 * Return: 0, or pk_arch_relocate()'s errors; -E2BIG (does not fit, or
 * post-handlers after an instruction that does not fall through).
 */
PK_HIDDEN int pk_arch_tramp_slot(uint8_t *buf, const struct pk_tramp_slot *s,
				 struct pk_reloc_map *map);

/*
 * pk_arch_encode_jmp_site() - @len bytes (>= PK_ARCH_JMP_LEN) at @buf,
 * which will be at @from: NOPs, then a jmp to @to that ends at @from + @len
 * (a thread between the NOPs and the jmp runs on into it).
 * Return: 0, or -ERANGE.
 */
PK_HIDDEN int pk_arch_encode_jmp_site(uint8_t *buf, size_t len, uint64_t from,
				      uint64_t to);

/*
 * pk_arch_entry_skip() - bytes at a function's first byte (@code, @avail
 * readable) that must stay first: endbr64 (IBT's landing pad), else 0.
 */
PK_HIDDEN size_t pk_arch_entry_skip(const uint8_t *code, size_t avail);

/*
 * The ISA's tramp.h also gives pk_arch_regs_sp(r), the stack pointer in a
 * struct pk_regs (PK_NOPROBE_INLINE: the return path reads it), and
 * PK_ARCH_USER_FLAGS, the flags a probe handler may change where they are
 * restored.
 */

/*
 * The return trampoline (return probes, src/probe/ret.c).
 *
 * pk_arch_ret_code() - the code region's first @len bytes, into @buf: the
 * word at +0, then @nent entries (PK_RET_ENT_SIZE bytes from PK_RET_ENT0;
 * @len covers them), the rest traps.
 */
PK_HIDDEN void pk_arch_ret_code(uint8_t *buf, size_t len, size_t nent,
			       uintptr_t common);

/*
 * pk_arch_ret_eh() - an .eh_frame (CIE, one FDE, the zero terminator
 * __register_frame() wants) for the region at @code with @nent entries,
 * whose records (@rec_size bytes each, the real return address first)
 * are at @recs: an unwinder meeting landing k goes on to recs[k]'s return
 * address. Into @buf, PK_ARCH_RET_EH_MAX bytes.
 * Return: its length, or 0 (@rec_size not a small multiple of
 * PK_RET_ENT_SIZE).
 */
#define PK_ARCH_RET_EH_MAX 128
PK_HIDDEN size_t pk_arch_ret_eh(uint8_t *buf, uintptr_t code, size_t nent,
				uintptr_t recs, size_t rec_size);

/*
 * pk_arch_vsave_call() - @fn(@arg), with the vector state saved around it
 * as the fast stub saves it: for what a dispatch without the vector save
 * (a dispatcher's gpr non-zero) must call outside probekit (libc, on a thread's
 * first return-probe hit). PK_NOPROBE; any thread, async-signal-safe if
 * @fn is.
 */
PK_HIDDEN void *pk_arch_vsave_call(void *(*fn)(void *), void *arg);

/*
 * PK_ARCH_RET_COMMON(name, dispatch) - defines @name, where every landing
 * jumps (PK_NOPROBE text, with CFI): it builds a struct pk_regs of the
 * general registers after a return (flags undefined), whose
 * pk_private_ret is the stack word the landing was returned through,
 * saves the vector and x87 state (tramp.h, "Vector state"), calls
 * @dispatch(regs, 0) (the probe layer's), restores that state and the
 * caller-saved general registers from regs, and leaves through that word, which
 * @dispatch has set to the real return address: by ret if it left
 * regs->flags non-zero (the return stack buffer holds the landing: a
 * divert), else by jmp. The probe layer instantiates it once, and passes
 * @name's address to pk_arch_ret_code(). The ISA's tramp.h defines it,
 * and PK_ARCH_RET_COMMON_GPR(name, dispatch): the same, but first
 * @dispatch(regs, 1) without any vector or x87 state saved, which returns
 * 0 when done, non-zero (nothing done) to be called again with 0 after
 * the save.
 */

#endif /* PK_ARCH_H */
