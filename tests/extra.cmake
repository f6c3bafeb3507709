# SPDX-License-Identifier: MIT
# extra.cmake - per-test wiring beyond tests/CMakeLists.txt's defaults: one section per layer (bottom-up), then the project checks and the command.

# pk_test_variant(NAME SUFFIX VAR=VALUE): run test NAME again as NAME_SUFFIX
# with VAR=VALUE in its environment, same labels and timeout; nothing if
# NAME is not a test.
function(pk_test_variant name suffix setting)
  if(NOT TEST ${name})
    return()
  endif()
  get_test_property(${name} LABELS labels)
  get_test_property(${name} TIMEOUT timeout)
  add_test(NAME ${name}_${suffix} COMMAND ${name})
  set_tests_properties(${name}_${suffix} PROPERTIES SKIP_RETURN_CODE 77
    LABELS "${labels}" TIMEOUT ${timeout}
    ENVIRONMENT "${PK_TEST_ENV};${setting}")
endfunction()

# ---- arch: the x86-64 relocator's golden files ----
# test_arch_reloc calls the hidden relocator: compile it into the test.
if(TARGET test_arch_reloc)
  target_sources(test_arch_reloc PRIVATE ${PROJECT_SOURCE_DIR}/src/arch/x86_64/reloc.c
                                         ${PROJECT_SOURCE_DIR}/src/arch/x86_64/encode.c)
  target_link_libraries(test_arch_reloc PRIVATE Zydis::Zydis)
endif()
# test_arch_access calls the hidden decoder: compile it into the test.
if(TARGET test_arch_access)
  target_sources(test_arch_access PRIVATE ${PROJECT_SOURCE_DIR}/src/arch/x86_64/decode.c)
  target_link_libraries(test_arch_access PRIVATE Zydis::Zydis)
endif()
# ---- end arch ----

# ---- sig: the program's signal calls interposed (src/sig/interpose.c) ----
# These probe their own functions (sig_common.h): exported, for the symbol
# table probes read sizes from.
foreach(name test_sig_blocked test_sig_handler test_sig_mask test_sig_longjmp
             test_sig_rawblock test_sig_spawn test_sig_wait test_sig_fork test_sig_reentry
             test_sig_signal
             stress_sig_xz)
  if(TARGET ${name})
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endforeach()
# Real programs that block every signal, under the command's agent.
if(PK_SANITIZE)
  set(PK_SIG_CLI_SANITIZED 1)
else()
  set(PK_SIG_CLI_SANITIZED 0)
endif()
add_test(NAME sig_cli
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/sig-cli.sh $<TARGET_FILE:probekit_cli>
          ${PK_SIG_CLI_SANITIZED})
set_tests_properties(sig_cli PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end sig ----
# ---- sig9: signal gaps of issue 9 item 1 (early ownership, handler masks,
# more entry points, spurious EINTR, all-blocking helper threads) ----
foreach(name test_sig_early test_sig_hmask test_sig_entries test_sig_eintr
             test_sig_helper test_sig_exiting test_sig_waitsig)
  if(TARGET ${name})
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endforeach()
if(TARGET test_sig_early)
  set_tests_properties(test_sig_early PROPERTIES ENVIRONMENT
    "${PK_TEST_ENV};PROBEKIT_WATCH=page")
endif()
# The same, for a program with no probekit of its own, under the command's
# agent (the sig layer's interposers linked into it). Fortified, so that siglongjmp
# is __longjmp_chk. Not in sanitizer builds (see sig-cli.sh).
add_executable(sig_agent_target sig_agent_target.c)
target_compile_options(sig_agent_target PRIVATE -O2 -U_FORTIFY_SOURCE
  -D_FORTIFY_SOURCE=2)
if(NOT PK_SANITIZE)
  add_test(NAME sig_agent
    COMMAND $<TARGET_FILE:probekit_cli> count -p libc.so.6:getppid --
            $<TARGET_FILE:sig_agent_target>)
  set_tests_properties(sig_agent PROPERTIES LABELS quick TIMEOUT 60
    ENVIRONMENT "${PK_TEST_ENV}")
endif()
# ---- end sig9 ----

# ---- text: the slower cross-core sync methods; maps read whole ----
foreach(name test_text_basic stress_text)
  foreach(method expedited mprotect)
    pk_test_variant(${name} sync_${method} PROBEKIT_SYNC=${method})
  endforeach()
endforeach()
# Kernels before 6.11 have no PROCMAP_QUERY: the text layer reads maps whole.
foreach(name test_text_basic test_text_errors)
  pk_test_variant(${name} maps_read PROBEKIT_TEST_MAPS_READ=1)
endforeach()
# ---- end text ----

# ---- key: fallback-mode runs and dlopen wiring ----
# Every test whose name matches one of PK_NOPATCH_TEST_PATTERNS runs twice:
# as NAME (branch sites patched when the system allows it) and as
# NAME_nopatch with PROBEKIT_NOPATCH=1 (sites stay load-and-branch), with the
# same labels, timeout and environment otherwise.
list(APPEND PK_NOPATCH_TEST_PATTERNS "^test_key_" "^test_debug_check$" "^stress_key")
# test_key_fail injects commit failures: without commits it has nothing to test.
list(APPEND PK_NOPATCH_TEST_EXCLUDE "test_key_fail")
foreach(src ${PK_TESTS} ${PK_STRESS})
  get_filename_component(name ${src} NAME_WE)
  foreach(pattern ${PK_NOPATCH_TEST_PATTERNS})
    if(name MATCHES "${pattern}" AND NOT TEST ${name}_nopatch
       AND NOT name IN_LIST PK_NOPATCH_TEST_EXCLUDE)
      pk_test_variant(${name} nopatch PROBEKIT_NOPATCH=1)
    endif()
  endforeach()
endforeach()
# These export the key libkeylib.so's sites use (-rdynamic).
foreach(name test_key_dlopen test_key_fail stress_key)
  if(TARGET ${name} AND TARGET keylib)
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
    add_dependencies(${name} keylib)
  endif()
endforeach()
# ---- end key ----

# ---- fault: watchpoint mechanisms, the readers' fallbacks, rt_sigreturn ----
# test_fault_watch runs on hardware breakpoints where perf allows them; the
# _page run forces the page-protection mechanism (PROBEKIT_WATCH=page).
foreach(name test_fault_watch test_fault_fail)
  pk_test_variant(${name} page PROBEKIT_WATCH=page)
endforeach()
# Page watches look their pages up in the mappings: with maps read whole too.
pk_test_variant(test_fault_fail maps_read PROBEKIT_TEST_MAPS_READ=1)
# The readers' fallbacks: no membarrier (full fences); more threads than slots.
pk_test_variant(stress_fault_grace fence PROBEKIT_FAULT_FENCE=1)
pk_test_variant(stress_fault_grace slots PROBEKIT_FAULT_SLOTS=2)
# Handled faults resumed by the kernel's rt_sigreturn too.
pk_test_variant(test_fault_resume sigreturn PROBEKIT_FAULT_SIGRETURN=1)
# ---- end fault ----

# ---- probe: probe targets, zlib, return probes with replaced return addresses ----
# Tests that call libprobetarget.so directly.
foreach(name test_probe_basic test_probe_fail test_probe_int3 test_probe_fork
             stress_probe stress_probe_int3)
  if(TARGET ${name} AND TARGET probetarget)
    target_link_libraries(${name} PRIVATE probetarget)
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endforeach()
# test_probe_zlib reads the copy's .dynsym with libelf.
# It may use kernel uprobes (PK_TEST_UPROBES=1): it holds the "tracefs"
# lock that tests/tracefs.h describes. bench_smoke runs --quick, which
# never touches uprobe events, so it does not.
if(TARGET test_probe_zlib)
  target_link_libraries(test_probe_zlib PRIVATE PkgConfig::LIBELF)
  set_tests_properties(test_probe_zlib PROPERTIES RESOURCE_LOCK tracefs)
endif()
# Return probes normally call the probed function from their trampoline
# (divert); PROBEKIT_RETPROBE_HIJACK=1 makes them replace the return address
# instead, the fallback they use when a divert cannot be had. Same tests.
foreach(name test_probe_ret test_probe_ret_cxx stress_probe_ret)
  pk_test_variant(${name} hijack PROBEKIT_RETPROBE_HIJACK=1)
endforeach()
# Trampoline chunks are placed in a gap between mappings: with maps read
# whole (kernels before 6.11), where [vsyscall] is listed too.
pk_test_variant(test_probe_basic maps_read PROBEKIT_TEST_MAPS_READ=1)
# ---- end probe ----

# ---- probe/xjump: branches from other functions into displaced bytes (issue 9, item 3) ----
# glibc's memcpy@GLIBC_2.2.5+3 destination, through the command (needs the
# agent, so not under sanitizers; skipped where ls's memcpy is not that one).
add_test(NAME cli_xjump
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-xjump.sh $<TARGET_FILE:probekit_cli>
          $<IF:$<BOOL:${PK_SANITIZE}>,1,0>)
set_tests_properties(cli_xjump PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# test_probe_xjump loads copies of libxjumpa.so and libxjumpb.so.
if(TARGET test_probe_xjump AND TARGET xjumpa AND TARGET xjumpb)
  add_dependencies(test_probe_xjump xjumpa xjumpb)
  # Without a build id: only the file's identity tells the two apart.
  target_link_options(xjumpa PRIVATE -Wl,--build-id=none)
  target_link_options(xjumpb PRIVATE -Wl,--build-id=none)
endif()
# The mapped file's device and inode from /proc/self/maps read whole too.
pk_test_variant(test_probe_xjump maps_read PROBEKIT_TEST_MAPS_READ=1)
# test_arch_branch checks the branch index's decoding against a full Zydis
# decoding (decode.c's hidden pk_arch_branch_targets(), compiled in).
if(TARGET test_arch_branch)
  target_sources(test_arch_branch PRIVATE ${PROJECT_SOURCE_DIR}/src/arch/x86_64/decode.c)
  target_link_libraries(test_arch_branch PRIVATE Zydis::Zydis PkgConfig::LIBELF)
endif()
# ---- end probe/xjump ----

# ---- project: ABI, header, install and bench-smoke checks (scripts/, tests/*.sh) ----
# check-noprobe.sh: the trap and fault paths call nothing a probe can be on.
add_test(NAME noprobe_check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check-noprobe.sh $<TARGET_FILE:probekit>)
# secure.sh: set-user-ID programs ignore PROBEKIT_*; no test hooks installed.
add_test(NAME secure
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/secure.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(secure PROPERTIES SKIP_RETURN_CODE 77 LABELS quick TIMEOUT 60)
# check-abi.sh: exported symbols == src/probekit.map == PK_API declarations.
add_test(NAME abi_check
  COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-abi.sh $<TARGET_FILE:probekit>)
# probekit.h alone, as ISO C11 and C++17, pedantic; misuse must not compile.
if(TARGET test_header_c11)
  set_target_properties(test_header_c11 PROPERTIES C_EXTENSIONS OFF)
  target_compile_options(test_header_c11 PRIVATE -pedantic-errors)
endif()
if(TARGET test_header_cxx)
  set_target_properties(test_header_cxx PROPERTIES CXX_EXTENSIONS OFF)
  target_compile_options(test_header_cxx PRIVATE -pedantic-errors)
endif()
# Each part of the header (include/probekit/*.h) alone, C11 and C++17.
add_test(NAME header_parts
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check-headers.sh
          ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER} ${PROJECT_SOURCE_DIR}/include)
add_test(NAME header_misuse
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/compile-fail.sh
          ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER} ${PROJECT_SOURCE_DIR}/include)
# cmake --install into a temporary prefix; C and C++ consumers via pkg-config.
# A consumer of a sanitized library must be sanitized too (ASan comes first).
set(PK_CONSUMER_FLAGS "")
if(PK_SANITIZE)
  set(PK_CONSUMER_FLAGS "-fsanitize=address,undefined")
endif()
add_test(NAME install_consumer
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install-consumer.sh ${PROJECT_SOURCE_DIR}
          ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER}
          "${PK_CONSUMER_FLAGS}")
# Every man page in the tree, aliases included, renders with man -l.
add_test(NAME man_pages
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check-man.sh ${PROJECT_SOURCE_DIR}/man)
set_tests_properties(man_pages PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(abi_check noprobe_check header_parts header_misuse install_consumer man_pages PROPERTIES
  LABELS quick TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# scripts/bench-summary on figures the test writes (no benchmark runs).
add_test(NAME bench_summary
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench-summary.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_summary PROPERTIES LABELS quick TIMEOUT 60)
# scripts/bench --quick once; checks the JSON lines and tests/bench_required.txt.
if(PK_BUILD_BENCH)
  add_test(NAME bench_smoke
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench-smoke.sh ${PROJECT_SOURCE_DIR}
            ${PROJECT_BINARY_DIR})
  set_tests_properties(bench_smoke PROPERTIES
    LABELS bench-smoke TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
endif()
# ---- end project ----

# ---- cli: the probekit command end to end ----
add_executable(cli_target cli_target.c)
# A sanitizer build's scripts preload the ASan runtime into COMMAND (see
# cli_common.sh): they get its path, 0 otherwise.
set(PK_CLI_SANITIZED 0)
if(PK_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE PK_CLI_SANITIZED OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${PK_CLI_SANITIZED}")
    set(PK_CLI_SANITIZED 1)
  endif()
endif()
# cli.sh: counts, fork/exec, statuses, JSON, failure paths, a hostile counts
# directory; cli_signals.sh: signals sent to probekit, a closed report pipe,
# SIGKILL; cli_room.sh: TMPDIR on a full tmpfs it mounts (77 where it cannot).
foreach(script cli cli_signals cli_room)
  add_test(NAME ${script}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/${script}.sh $<TARGET_FILE:probekit_cli>
            $<TARGET_FILE:cli_target> ${PK_CLI_SANITIZED})
  set_tests_properties(${script} PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
    TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
endforeach()
# ---- cli10: no probe limit, processes not counted (issue 10) ----
# cli_many.sh: 2000 specs (-p and -P) on libclimany.so's 2000 functions,
# generated here by cli_many.cmake, each counted exactly.
set(PK_CLI_MANY_N 2000)
set(PK_CLI_MANY_DIR ${CMAKE_CURRENT_BINARY_DIR}/climany)
add_custom_command(
  OUTPUT ${PK_CLI_MANY_DIR}/climany.c ${PK_CLI_MANY_DIR}/cli_many_main.c
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PK_CLI_MANY_DIR}
  COMMAND ${CMAKE_COMMAND} -DN=${PK_CLI_MANY_N} -DOUT=${PK_CLI_MANY_DIR}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cli_many.cmake
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cli_many.cmake
  COMMENT "Generating libclimany.so's ${PK_CLI_MANY_N} functions")
add_library(climany SHARED ${PK_CLI_MANY_DIR}/climany.c)
# Every function its own, whatever the build type (the agent probes them).
target_compile_options(climany PRIVATE -O2)
add_executable(cli_many ${PK_CLI_MANY_DIR}/cli_many_main.c)
target_link_libraries(cli_many PRIVATE climany)
# cli_uncounted.sh: a static copy of cli_target (where libc.a exists).
include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_LINK_OPTIONS -static)
check_c_source_compiles("int main(void) { return 0; }" PK_CLI_HAVE_STATIC)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(PK_CLI_HAVE_STATIC)
  add_executable(cli_target_static cli_target.c)
  target_link_options(cli_target_static PRIVATE -static)
  # Static: no ASan runtime to link whatever the build.
  target_compile_options(cli_target_static PRIVATE -fno-sanitize=all)
  target_link_options(cli_target_static PRIVATE -fno-sanitize=all)
  set(PK_CLI_STATIC $<TARGET_FILE:cli_target_static>)
else()
  set(PK_CLI_STATIC none)
endif()
add_test(NAME cli_many
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_many.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:cli_target> ${PK_CLI_SANITIZED} $<TARGET_FILE:cli_many>
          ${PK_CLI_MANY_N})
add_test(NAME cli_uncounted
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_uncounted.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:cli_target> ${PK_CLI_SANITIZED} ${PK_CLI_STATIC})
set_tests_properties(cli_many cli_uncounted PROPERTIES SKIP_RETURN_CODE 77
  LABELS quick TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end cli10 ----
# ---- glob10: globs and IFUNCs expanded by the agent (issue 10) ----
# cli_glob.sh: 'libglobtarget.so:glob*' over glob_main's calls (known per
# function), libc's str* under ls, strlen's IFUNC implementation, a glob
# matching nothing.
# libglobtarget.so: not tests/targets/lib*.c, which link libprobekit.
add_library(globtarget SHARED targets/glob_target.c)
set_target_properties(globtarget PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# Every function its own, whatever the build type (the agent probes them).
target_compile_options(globtarget PRIVATE -O2)
add_executable(glob_main ${CMAKE_CURRENT_SOURCE_DIR}/targets/glob_main.c)
target_link_libraries(glob_main PRIVATE globtarget)
add_test(NAME cli_glob
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_glob.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:cli_target> ${PK_CLI_SANITIZED} $<TARGET_FILE:glob_main>)
set_tests_properties(cli_glob PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end glob10 ----
# ---- clifix: processes told apart exactly (review of cli10, items 1 4 5 7 12) ----
# cli_procs.sh: ulimit -f below a record, short-lived orphans, environments
# that only contain probekit's, an exec()ed image without a record, long
# C++ names, 820 children at once.
add_test(NAME cli_procs
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_procs.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:cli_target> ${PK_CLI_SANITIZED})
set_tests_properties(cli_procs PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end clifix ----
# ---- stat11: probekit stat, perf-stat counters (issue 11, Counters) ----
# cli-stat.sh: counters against cli_stat_target's own getrusage() and
# /proc figures, threads and processes summed, statuses, usage failures,
# counters forced to fail (PROBEKIT_STAT_FAIL), scaling (PROBEKIT_STAT_HALVE).
add_executable(cli_stat_target cli_stat_target.c)
target_link_libraries(cli_stat_target PRIVATE pthread)
add_test(NAME cli_stat
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-stat.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:cli_stat_target> ${PK_CLI_SANITIZED})
set_tests_properties(cli_stat PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end stat11 ----
# ---- end cli ----

# ---- noprobe: what probekit's own signal path calls (issue 9, item 2) ----
# test_noprobe_all probes every function check-noprobe.sh --list derives
# from the library (and the fixed list of tests/noprobe_drivers.h), some of
# which are Zydis's: it calls them. Again with the page watch mechanism, so
# the watch's fault and step code (mprotect, mmap, Zydis) runs under probes.
if(TARGET test_noprobe_all)
  target_link_libraries(test_noprobe_all PRIVATE Zydis::Zydis)
  pk_test_variant(test_noprobe_all page PROBEKIT_WATCH=page)
endif()
# One reader slot: a thread's first trap takes pk_slot_claim()'s second
# pass (pk_tid_gone(): getpid, tgkill) in the trap handler.
pk_test_variant(test_noprobe_repro slots1 PROBEKIT_FAULT_SLOTS=1)
# ---- end noprobe ----

# ---- probes: unloads (test_probe_unload dlopens libunloadtarget.so) ----
if(TARGET test_probe_unload AND TARGET unloadtarget)
  add_dependencies(test_probe_unload unloadtarget)
  # Retiring looks the sites up in the mappings: with maps read whole too.
  pk_test_variant(test_probe_unload maps_read PROBEKIT_TEST_MAPS_READ=1)
endif()
# Its other object, loaded where libunloadtarget.so was: both at -O2 and
# not instrumented in every build type, so that ut_fn is at the same
# offset in both and starts with other bytes (at -O0 both start with
# push %rbp; mov %rsp,%rbp; ASan moves ut_fn).
if(TARGET unloadtarget AND TARGET unloadtargetb)
  target_compile_options(unloadtarget PRIVATE -O2 -fno-sanitize=all)
  target_compile_options(unloadtargetb PRIVATE -O2 -fno-sanitize=all)
  add_dependencies(test_probe_unload unloadtargetb)
endif()
# ---- end probes: unloads ----

# ---- probe, vector registers (issue 9, item 6) ----
# test_probe_vector's targets (AVX arguments and return values, assembly
# that keeps vector registers live) are built with -mavx2 in their own file;
# the test checks the CPU before calling any of them.
if(TARGET test_probe_vector)
  target_sources(test_probe_vector PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/vector_targets.c)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/vector_targets.c
    PROPERTIES COMPILE_OPTIONS "-mavx2")
  set_target_properties(test_probe_vector PROPERTIES ENABLE_EXPORTS ON)
  pk_test_variant(test_probe_vector hijack PROBEKIT_RETPROBE_HIJACK=1)
endif()
# test_arch_tramp builds chunk heads in every vector save mode (forced by
# a hook compiled only into it, PK_TEST_TRAMP) and calls the stubs and a
# return trampoline instance directly: tramp.c and what it calls, compiled in.
if(TARGET test_arch_tramp)
  target_sources(test_arch_tramp PRIVATE ${PROJECT_SOURCE_DIR}/src/arch/x86_64/tramp.c
                                         ${PROJECT_SOURCE_DIR}/src/arch/x86_64/reloc.c
                                         ${PROJECT_SOURCE_DIR}/src/arch/x86_64/encode.c
                                         ${PROJECT_SOURCE_DIR}/src/arch/x86_64/decode.c)
  target_compile_definitions(test_arch_tramp PRIVATE PK_TEST_TRAMP)
  target_link_libraries(test_arch_tramp PRIVATE Zydis::Zydis)
endif()
# ---- end probe, vector registers ----

# ---- probe, red zone (issue 12) ----
# test_probe_redzone's targets are assembly in the executable itself, found
# by their dynamic symbols.
if(TARGET test_probe_redzone)
  set_target_properties(test_probe_redzone PROPERTIES ENABLE_EXPORTS ON)
endif()
# test_probe_rseq's functions are assembly in the executable too.
if(TARGET test_probe_rseq)
  set_target_properties(test_probe_rseq PROPERTIES ENABLE_EXPORTS ON)
endif()
# ---- end probe, red zone ----
# ---- sym: symbol specs (issue 10, Resolution): versions, IFUNCs, globs, C++ names, files, offsets ----
# libsymtarget.so has a second source file with a static of the same name.
if(TARGET symtarget)
  target_sources(symtarget PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/targets/symtarget_b.c)
endif()
# A C++ library (it links libstdc++, whose __cxa_demangle the lookups find).
add_library(symcxx SHARED ${CMAKE_CURRENT_SOURCE_DIR}/targets/libsymcxx.cc)
set_target_properties(symcxx PROPERTIES PREFIX "lib"
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
if(TARGET test_sym_spec)
  target_link_libraries(test_sym_spec PRIVATE symtarget symcxx)
  # libunloadtarget.so is read as a file that is not loaded.
  add_dependencies(test_sym_spec unloadtarget)
endif()
# test_sym_debug strips a copy of libsymdbg.so and gives it a debug file.
if(TARGET test_sym_debug)
  add_dependencies(test_sym_debug symdbg symtarget)
  set_target_properties(symdbg PROPERTIES LINK_OPTIONS -Wl,--build-id)
endif()
# probekit list on a stripped program (and its unstripped twin for nm).
add_executable(symstrip ${CMAKE_CURRENT_SOURCE_DIR}/targets/symstrip.c)
# Never instrumented: nm's view of it must be a plain program's.
target_compile_options(symstrip PRIVATE -O2 -fno-sanitize=all)
target_link_options(symstrip PRIVATE -fno-sanitize=all)
add_custom_command(TARGET symstrip POST_BUILD
  COMMAND ${CMAKE_STRIP} -o $<TARGET_FILE:symstrip>.stripped $<TARGET_FILE:symstrip>
  VERBATIM)
add_test(NAME cli_list
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-list.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:symstrip> $<TARGET_FILE:symstrip>.stripped
          $<TARGET_FILE:symtarget> $<TARGET_FILE:symcxx>
          $<TARGET_FILE:symlist_fail>)
set_tests_properties(cli_list PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# ---- sym, review fixes (symfix) ----
# test_sym_names: libsymtarget.so (an IFUNC and its resolver), libsymcxx.so
# (C++ names) and through it libstdc++ (std::ostream, std::locale).
if(TARGET test_sym_names)
  target_link_libraries(test_sym_names PRIVATE symtarget symcxx)
endif()
# cli-list.sh's LD_PRELOAD shim: fork() or fdopen() fails, pipes left
# open are counted at exit. Never instrumented (it is preloaded first).
add_library(symlist_fail SHARED ${CMAKE_CURRENT_SOURCE_DIR}/targets/symlist_fail.c)
target_compile_options(symlist_fail PRIVATE -fno-sanitize=all)
target_link_options(symlist_fail PRIVATE -fno-sanitize=all)
target_link_libraries(symlist_fail PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(symlist_fail PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# test_sym_replaced: libsymrepl.so in two builds (sr_f elsewhere in B),
# the one loaded replaced by the other on disk; again without map_files.
foreach(v a b)
  add_library(symrepl_${v} SHARED ${CMAKE_CURRENT_SOURCE_DIR}/targets/libsymrepl.c)
  set_target_properties(symrepl_${v} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  target_link_options(symrepl_${v} PRIVATE -Wl,--build-id)
endforeach()
target_compile_definitions(symrepl_b PRIVATE SYMREPL_B)
if(TARGET test_sym_replaced)
  add_dependencies(test_sym_replaced symrepl_a symrepl_b)
  target_compile_definitions(test_sym_replaced PRIVATE
    SYMREPL_A="$<TARGET_FILE:symrepl_a>" SYMREPL_B="$<TARGET_FILE:symrepl_b>")
  pk_test_variant(test_sym_replaced no_map_files PROBEKIT_TEST_NO_MAP_FILES=1)
endif()
# ---- end sym, review fixes ----
# ---- end sym ----
# ---- probe/place: jump probes where int3 was used (issue 12) ----
# tests/targets/place_cases.c as real compilers build it: gcc and clang,
# -O2/-O3, PIC (libplace_VARIANT.so, dlopened) and non-PIC (objects linked
# into test_place_nopie, built -no-pie), with and without
# -fcf-protection. Built without the project's flags (no sanitizer, no
# -O0): the shapes are the compilers' own.
find_program(PK_CLANG clang)
set(PK_PC_SRC ${CMAKE_CURRENT_SOURCE_DIR}/targets/place_cases.c)
set(PK_PC_LIBS)
foreach(v gcc_O2_pic gcc_O3_pic_cet clang_O2_pic clang_O3_pic_cet)
  string(REGEX MATCH "^[a-z]+" cc ${v})
  string(REGEX MATCH "O[0-9]" opt ${v})
  set(flags -${opt} -fPIC -shared)
  if(v MATCHES "_cet$")
    list(APPEND flags -fcf-protection=full)
  endif()
  if(cc STREQUAL "clang")
    if(NOT PK_CLANG)
      continue()
    endif()
    set(cc ${PK_CLANG})
  else()
    set(cc ${CMAKE_C_COMPILER})
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/libplace_${v}.so)
  add_custom_command(OUTPUT ${out}
    COMMAND ${cc} ${flags} -DPC_PREFIX=pc_ -o ${out} ${PK_PC_SRC}
    DEPENDS ${PK_PC_SRC} VERBATIM)
  list(APPEND PK_PC_LIBS ${out})
endforeach()
set(PK_PC_OBJS ${CMAKE_CURRENT_BINARY_DIR}/place_gcc_O2_nopie.o)
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/place_gcc_O2_nopie.o
  COMMAND ${CMAKE_C_COMPILER} -O2 -fno-pie -DPC_PREFIX=pcg_ -c
          -o ${CMAKE_CURRENT_BINARY_DIR}/place_gcc_O2_nopie.o ${PK_PC_SRC}
  DEPENDS ${PK_PC_SRC} VERBATIM)
if(PK_CLANG)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/place_clang_O2_nopie_cet.o
    COMMAND ${PK_CLANG} -O2 -fno-pie -fcf-protection=full -DPC_PREFIX=pcc_ -c
            -o ${CMAKE_CURRENT_BINARY_DIR}/place_clang_O2_nopie_cet.o ${PK_PC_SRC}
    DEPENDS ${PK_PC_SRC} VERBATIM)
  list(APPEND PK_PC_OBJS ${CMAKE_CURRENT_BINARY_DIR}/place_clang_O2_nopie_cet.o)
endif()
add_custom_target(place_cases DEPENDS ${PK_PC_LIBS} ${PK_PC_OBJS})
foreach(name test_place_cases stress_place)
  if(TARGET ${name})
    add_dependencies(${name} place_cases)
  endif()
endforeach()
if(TARGET test_place_cases)
  # The non-PIC variants: the same test, linked with them, not a PIE.
  add_executable(test_place_nopie test_place_cases.c ${PK_PC_OBJS})
  set_source_files_properties(${PK_PC_OBJS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_include_directories(test_place_nopie PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(test_place_nopie PRIVATE probekit_test pthread ${CMAKE_DL_LIBS})
  target_compile_definitions(test_place_nopie PRIVATE _GNU_SOURCE PC_NOPIE)
  target_compile_options(test_place_nopie PRIVATE -fno-pie)
  target_link_options(test_place_nopie PRIVATE -no-pie -rdynamic)
  add_dependencies(test_place_nopie place_cases)
  add_test(NAME test_place_nopie COMMAND test_place_nopie)
  set_tests_properties(test_place_nopie PROPERTIES SKIP_RETURN_CODE 77
    LABELS quick TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
endif()
# The same test with its relative relocations packed (SHT_RELR, as
# glibc 2.36's libc.so.6 has them): pl_dptr's pointer is found there too.
if(TARGET test_place_cases)
  include(CheckLinkerFlag)
  check_linker_flag(C "-Wl,-z,pack-relative-relocs" PK_HAVE_RELR)
  if(PK_HAVE_RELR)
    add_executable(test_place_relr test_place_cases.c)
    target_include_directories(test_place_relr PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(test_place_relr PRIVATE probekit_test pthread ${CMAKE_DL_LIBS})
    target_compile_definitions(test_place_relr PRIVATE _GNU_SOURCE)
    target_link_options(test_place_relr PRIVATE -Wl,-z,pack-relative-relocs)
    add_dependencies(test_place_relr place_cases)
    add_test(NAME test_place_relr COMMAND test_place_relr)
    set_tests_properties(test_place_relr PROPERTIES SKIP_RETURN_CODE 77
      LABELS quick TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
  endif()
endif()
# ---- end probe/place ----
# ---- agent: stays out of the measurement, libraries loaded later (issue 10) ----
# Helper programs of agent.sh, not linked with libprobekit (the link map
# check), nor instrumented (a sanitizer runtime is a link map entry and a
# malloc of its own): agent_phdr prints its objects and calls f() of the
# libraries it is given; agent_mcount is an LD_PRELOAD counter of malloc,
# free, calloc and realloc; agent_threads allocates in 4 threads.
add_executable(agent_phdr agent_phdr.c)
target_link_libraries(agent_phdr PRIVATE ${CMAKE_DL_LIBS})
add_executable(agent_threads agent_threads.c)
target_link_libraries(agent_threads PRIVATE pthread)
add_library(agent_mcount SHARED agent_mcount.c)
# liblatetarget.so: dlopen()ed by agent_phdr and python3 (libraries loaded
# later); not tests/targets/lib*.c, which link libprobekit.
add_library(latetarget SHARED targets/late_target.c)
set_target_properties(latetarget PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
target_compile_options(latetarget PRIVATE -O2)
foreach(t agent_phdr agent_threads agent_mcount latetarget)
  target_compile_options(${t} PRIVATE -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
endforeach()
add_test(NAME agent
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_phdr> $<TARGET_FILE:agent_mcount>
          $<TARGET_FILE:agent_threads> $<TARGET_FILE:latetarget>
          ${PK_CLI_SANITIZED})
set_tests_properties(agent PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# agent_rcu: the agent's urcu-bp replacement alone (agent/rcu.c), with
# the urcu-bp headers, and no liburcu-bp to mix it with.
add_executable(agent_rcu agent_rcu.c ${PROJECT_SOURCE_DIR}/agent/rcu.c)
target_include_directories(agent_rcu PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/agent ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(agent_rcu PRIVATE _GNU_SOURCE)
target_link_libraries(agent_rcu PRIVATE pthread)
if(PK_SANITIZE)
  set_source_files_properties(agent_rcu.c ${PROJECT_SOURCE_DIR}/agent/rcu.c
    TARGET_DIRECTORY agent_rcu PROPERTIES COMPILE_OPTIONS -fno-sanitize=alignment)
endif()
add_test(NAME agent_rcu COMMAND agent_rcu)
set_tests_properties(agent_rcu PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end agent ----
# ---- agentfix: review findings on the agent (issue 10) ----
# agent_review.sh: IFUNC specs not cached across processes; the signal
# interposers' own libc calls and the agent's own object never counted.
add_executable(agent_sigloop agent_sigloop.c)
target_link_libraries(agent_sigloop PRIVATE pthread)
target_compile_options(agent_sigloop PRIVATE -fno-sanitize=all)
target_link_options(agent_sigloop PRIVATE -fno-sanitize=all)
add_test(NAME agent_review
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent_review.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_sigloop> ${PK_CLI_SANITIZED})
set_tests_properties(agent_review PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# agent_rcu_exit: a thread leaving agent/rcu.c's registry forgets its
# reader before a signal can run on it again (linked with rcu.c alone).
add_executable(agent_rcu_exit agent_rcu_exit.c ${PROJECT_SOURCE_DIR}/agent/rcu.c)
target_include_directories(agent_rcu_exit PRIVATE ${PROJECT_SOURCE_DIR}/agent
  ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(agent_rcu_exit PRIVATE pthread)
if(PK_SANITIZE)
  set_source_files_properties(agent_rcu_exit.c ${PROJECT_SOURCE_DIR}/agent/rcu.c
    TARGET_DIRECTORY agent_rcu_exit PROPERTIES COMPILE_OPTIONS -fno-sanitize=alignment)
endif()
add_test(NAME agent_rcu_exit COMMAND agent_rcu_exit)
set_tests_properties(agent_rcu_exit PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 60 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end agentfix ----
# ---- tramp12: entry and return hit cost ----
# test_tramp_modes builds chunk heads in every vector save mode and with
# sahf or popf (hooks compiled only into it, PK_TEST_TRAMP) and calls the
# post and full stubs directly: tramp.c and what it calls, compiled in.
if(TARGET test_tramp_modes)
  target_sources(test_tramp_modes PRIVATE ${PROJECT_SOURCE_DIR}/src/arch/x86_64/tramp.c
                                          ${PROJECT_SOURCE_DIR}/src/arch/x86_64/reloc.c
                                          ${PROJECT_SOURCE_DIR}/src/arch/x86_64/encode.c
                                          ${PROJECT_SOURCE_DIR}/src/arch/x86_64/decode.c)
  target_compile_definitions(test_tramp_modes PRIVATE PK_TEST_TRAMP)
  target_link_libraries(test_tramp_modes PRIVATE Zydis::Zydis)
endif()
# ---- end tramp12 ----

# ---- prof11: the profiler's parts, prof/ (issue 11) ----
# The prof tests call prof/'s static library (hidden symbols, no libprobekit API).
foreach(name test_prof_hist test_prof_tsc test_prof_openmetrics test_prof_trace)
  if(TARGET ${name})
    target_link_libraries(${name} PRIVATE probekit_prof m)
  endif()
endforeach()
# ---- end prof11 ----

# ---- probe/placefix: entries no branch names (review of issue 12) ----
# test_place_reach probes every instruction boundary of place_cases.c's
# computed gotos through memory, of a g++ -O2 catch (its landing pad,
# tests/targets/place_eh.cc, built by the compiler alone like the place
# cases) and of a .cold-shaped function another's jump table enters.
if(TARGET test_place_reach)
  set(PK_PEH ${CMAKE_CURRENT_BINARY_DIR}/libplace_eh.so)
  add_custom_command(OUTPUT ${PK_PEH}
    COMMAND ${CMAKE_CXX_COMPILER} -O2 -fPIC -shared -o ${PK_PEH}
            ${CMAKE_CURRENT_SOURCE_DIR}/targets/place_eh.cc
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/targets/place_eh.cc VERBATIM)
  add_custom_target(place_eh DEPENDS ${PK_PEH})
  add_dependencies(test_place_reach place_cases place_eh)
  target_link_options(test_place_reach PRIVATE -rdynamic)
endif()
# ---- end probe/placefix ----

# ---- secure: PROBEKIT_* read through pk_getenv() only (issue 9, item 7) ----
add_test(NAME check_getenv
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check-getenv.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(check_getenv PROPERTIES LABELS quick TIMEOUT 30)
# ---- end secure, getenv ----
# ---- start10: globs over libraries loaded later, the run's cache checked (issue 10) ----
# agent_late_glob.sh: 'libz.so.1:*' over a libz dlopen()ed (and closed and
# opened again) by agent_late_z, python3's sqlite3 under
# 'libsqlite3.so.0:sqlite3_*', "not loaded" for processes that never load
# the object, and a library replaced on disk between two processes of a
# run (liblate_v1.so, then liblate_v2.so: f() moved) never probed at the
# other's cached offset. Not instrumented (agent.sh says why).
add_executable(agent_late_z agent_late_z.c)
target_link_libraries(agent_late_z PRIVATE ${CMAKE_DL_LIBS})
add_library(late_v1 SHARED agent_late_v.c)
add_library(late_v2 SHARED agent_late_v.c)
target_compile_definitions(late_v2 PRIVATE LATE_V2)
foreach(t agent_late_z late_v1 late_v2)
  target_compile_options(${t} PRIVATE -O2 -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
endforeach()
set_target_properties(late_v1 late_v2 PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME agent_late_glob
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent_late_glob.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_late_z> $<TARGET_FILE:agent_phdr>
          $<TARGET_FILE:late_v1> $<TARGET_FILE:late_v2> ${PK_CLI_SANITIZED})
set_tests_properties(agent_late_glob PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# agent_dladdr: the agent's dladdr1() (agent/dladdr.c, --wrap as in the
# agent) against glibc's, for every libc function and IFUNC targets.
add_executable(agent_dladdr agent_dladdr.c ${PROJECT_SOURCE_DIR}/agent/dladdr.c)
target_include_directories(agent_dladdr PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/agent ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(agent_dladdr PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(agent_dladdr PRIVATE PK_NO_MODULE_CONSTRUCTOR)
target_link_options(agent_dladdr PRIVATE -Wl,--wrap=dladdr,--wrap=dladdr1)
add_test(NAME agent_dladdr COMMAND agent_dladdr)
set_tests_properties(agent_dladdr PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 60 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end start10 ----

# ---- time11: probekit time, per-function latency (issue 11) ----
# cli-time.sh: durations of functions that spin a known time against what
# they measured themselves; calls equal count's, summed over threads and a
# fork()ed child; recursion and longjmp; --json, OpenMetrics (parsed by
# python3-prometheus-client) and usage errors.
add_executable(time_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/time_target.c)
# Every function its own, whatever the build type (the agent probes them).
target_compile_options(time_target PRIVATE -O2)
target_link_libraries(time_target PRIVATE pthread)
add_executable(time_cxx ${CMAKE_CURRENT_SOURCE_DIR}/targets/time_cxx.cc)
target_compile_options(time_cxx PRIVATE -O2)
add_test(NAME cli_time
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-time.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:time_target> ${PK_CLI_SANITIZED} $<TARGET_FILE:time_cxx>
          $<TARGET_FILE:agent_phdr> $<TARGET_FILE:latetarget>)
set_tests_properties(cli_time PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end time11 ----

# ---- novec12: PK_PROBE_F_GPR_ONLY (issue 12, entry and return hit cost) ----
# test_probe_gpr and stress_probe_gpr probe test_probe_vector's targets
# (vector_targets.c, -mavx2); the tests check the CPU first.
foreach(name test_probe_gpr stress_probe_gpr)
  if(TARGET ${name})
    target_sources(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/vector_targets.c)
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endforeach()
if(TARGET test_probe_gpr)
  pk_test_variant(test_probe_gpr hijack PROBEKIT_RETPROBE_HIJACK=1)
endif()
if(TARGET test_probe_gpr_join)
  set_target_properties(test_probe_gpr_join PROPERTIES ENABLE_EXPORTS ON)
endif()
# ---- end novec12 ----
# ---- trace11: probekit trace, per-call traces (issue 11) ----
# cli-trace.sh: known calls (arguments, returns, nesting, threads, a fork()ed
# child) checked event by event in the JSON (python3) and the protobuf
# (protoc --decode), drops, --min-duration, --depth, --pid/--tid, --args,
# _exit, SIGKILL and exec, usage errors.
add_executable(trace_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/trace_target.c)
# Every function its own, whatever the build type (the agent probes them).
target_compile_options(trace_target PRIVATE -O2)
target_link_libraries(trace_target PRIVATE pthread)
add_test(NAME cli_trace
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-trace.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:trace_target> ${PK_CLI_SANITIZED} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_trace PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end trace11 ----
# ---- agentfix7: the run's cache by object name, late globs' slots (review of issue 10) ----
# agent_late_names.sh: a spec's OBJECT matched by name in every process of
# a run (the cache keyed by names too), same-named functions of two
# libraries loaded in one dlopen() (libdupa.so needs libdupb.so), and
# globs over more functions than the reserved slots, long names.
add_executable(agent_dlcall agent_dlcall.c)
target_link_libraries(agent_dlcall PRIVATE ${CMAKE_DL_LIBS})
target_compile_options(agent_dlcall PRIVATE -O2 -fno-sanitize=all)
target_link_options(agent_dlcall PRIVATE -fno-sanitize=all)
add_library(late_dupb SHARED agent_late_dup.c)
target_compile_definitions(late_dupb PRIVATE DUP_B)
add_library(late_dupa SHARED agent_late_dup.c)
target_link_libraries(late_dupa PRIVATE late_dupb)
foreach(t late_dupa late_dupb)
  target_compile_options(${t} PRIVATE -O2 -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
endforeach()
set_target_properties(late_dupa PROPERTIES OUTPUT_NAME dupa
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_target_properties(late_dupb PROPERTIES OUTPUT_NAME dupb
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME agent_late_names
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent_late_names.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_dlcall> $<TARGET_FILE:late_dupa>
          $<TARGET_FILE:late_dupb> ${PK_CLI_SANITIZED})
set_tests_properties(agent_late_names PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end agentfix7 ----

# ---- progress11: the terminal: progress line, colour (issue 11) ----
# cli-tty.sh: under a pty (python3's pty module) a libc glob's arming shows
# a progress line on stderr, erased before the report; piped, --quiet or
# TERM=dumb nothing of it (the same bytes); colour on a terminal only, none
# with NO_COLOR, --color=always piped, never in --json, OpenMetrics, -o FILE.
add_test(NAME cli_tty
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-tty.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:cli_target> ${PK_CLI_SANITIZED} $<TARGET_FILE:trace_target>)
set_tests_properties(cli_tty PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end progress11 ----
# ---- timefix: probekit time's review findings (issue 11) ----
# cli-time-fix.sh: -I on a hot loop (no wrap, never above the totals);
# calls too deep or on too many threads for the return probes said and
# --strict 125; _Fork(); 64 threads exact; -d under a long -I; a glob's
# unarmable function said.
add_executable(time_fix ${CMAKE_CURRENT_SOURCE_DIR}/targets/time_fix.c)
target_compile_options(time_fix PRIVATE -O2)
target_link_libraries(time_fix PRIVATE pthread)
# time_cxx.cc with its own unwinder (libgcc and libstdc++ linked in), and
# a stripped copy of it (no .symtab: its __register_frame cannot be found).
add_executable(time_cxx_static ${CMAKE_CURRENT_SOURCE_DIR}/targets/time_cxx.cc)
target_compile_options(time_cxx_static PRIVATE -O2)
target_link_options(time_cxx_static PRIVATE -static-libgcc -static-libstdc++)
add_custom_command(TARGET time_cxx_static POST_BUILD
  COMMAND ${CMAKE_OBJCOPY} --strip-all $<TARGET_FILE:time_cxx_static>
          $<TARGET_FILE:time_cxx_static>.stripped)
add_test(NAME cli_time_fix
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-time-fix.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:time_fix> ${PK_CLI_SANITIZED}
          $<TARGET_FILE:time_cxx_static> $<TARGET_FILE:time_cxx_static>.stripped)
set_tests_properties(cli_time_fix PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end timefix ----
# ---- names10b: late duplicates, MiniDebugInfo, dlmopen namespaces, list's kinds (issue 10) ----
# agent_late_dupz.sh: two specs matching one function of a library loaded
# later count it once, under the first (start-up's rule): the report over
# a dlopen()ed libz equals the one over a linked libz (agent_late_zl).
add_executable(agent_late_zl agent_late_z.c)
target_compile_definitions(agent_late_zl PRIVATE LATE_LINKED)
target_link_libraries(agent_late_zl PRIVATE z)
target_compile_options(agent_late_zl PRIVATE -O2 -fno-sanitize=all)
target_link_options(agent_late_zl PRIVATE -fno-sanitize=all)
add_test(NAME agent_late_dupz
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent_late_dupz.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_late_z> $<TARGET_FILE:agent_late_zl> ${PK_CLI_SANITIZED})
set_tests_properties(agent_late_dupz PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# sym_minidebug.sh: a stripped program with MiniDebugInfo (.gnu_debugdata,
# gdb's recipe, built by the script with the compiler): its static
# function listed and counted by name; truncated, corrupt, not-xz and
# another build's sections refused with a line saying why, the other
# sources still read.
add_test(NAME sym_minidebug
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/sym_minidebug.sh $<TARGET_FILE:probekit_cli>
          ${CMAKE_C_COMPILER} ${CMAKE_CURRENT_SOURCE_DIR}/targets/minidebug_target.c
          ${PK_CLI_SANITIZED})
set_tests_properties(sym_minidebug PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# agent_late_ns.sh: libz loaded by dlmopen(LM_ID_NEWLM): every spec that
# would match it says it is in namespace 1 and not probed.
add_executable(agent_late_ns agent_late_ns.c)
target_link_libraries(agent_late_ns PRIVATE ${CMAKE_DL_LIBS})
target_compile_options(agent_late_ns PRIVATE -O2 -fno-sanitize=all)
target_link_options(agent_late_ns PRIVATE -fno-sanitize=all)
add_test(NAME agent_late_ns
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent_late_ns.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_late_ns> ${PK_CLI_SANITIZED})
set_tests_properties(agent_late_ns PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
# cli_list_kinds.sh: list's kinds for COMMAND's libraries asked in its own
# process before any constructor (agent/list.c, libprobekit-listaudit.so):
# list_ctor (liblistctor.so's constructor leaves a file) and xmllint's
# libxml2, compared with what count arms.
add_library(listctor SHARED list_ctor_lib.c)
set_target_properties(listctor PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_executable(list_ctor list_ctor.c)
target_link_libraries(list_ctor PRIVATE listctor)
foreach(t listctor list_ctor)
  target_compile_options(${t} PRIVATE -O2 -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
endforeach()
add_test(NAME cli_list_kinds
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_list_kinds.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:list_ctor> ${PK_CLI_SANITIZED})
set_tests_properties(cli_list_kinds PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end names10b ----

# ---- arm12: arming cost (issue 12) ----
# test_arch_decode_fast compares decode.c's fast path with its Zydis path
# (both hidden: decode.c compiled in).
if(TARGET test_arch_decode_fast)
  target_sources(test_arch_decode_fast PRIVATE ${PROJECT_SOURCE_DIR}/src/arch/x86_64/decode.c)
  target_link_libraries(test_arch_decode_fast PRIVATE Zydis::Zydis)
endif()
# test_place_batch loads libarmcachea.so, probes it, unloads it and loads
# libarmcacheb.so where it was (their layouts are assembly: the same at
# every optimisation level and under sanitizers).
if(TARGET test_place_batch AND TARGET armcachea AND TARGET armcacheb)
  add_dependencies(test_place_batch armcachea armcacheb)
  target_compile_options(armcachea PRIVATE -fno-sanitize=all)
  target_compile_options(armcacheb PRIVATE -fno-sanitize=all)
endif()
# test_xref_bias0: a non-PIE program and a library linked at a fixed
# address share load bias 0 (review of arm12); both without sanitizers'
# instrumentation of their assembly, the library's address fixed.
if(TARGET test_xref_bias0)
  target_compile_options(xreffix PRIVATE -fno-sanitize=all)
  target_link_options(xreffix PRIVATE -fno-sanitize=all -Wl,-Ttext-segment=0x50000000)
  target_link_libraries(test_xref_bias0 PRIVATE xreffix)
  # Linked non-PIE (load bias 0), its code still PIE: the library's
  # functions by their GOT entries, not by canonical PLT stubs.
  target_compile_options(test_xref_bias0 PRIVATE -fpie)
  target_link_options(test_xref_bias0 PRIVATE -no-pie)
endif()
# ---- end arm12 ----
# ---- statp11: probekit stat -p, faults and switches per function (issue 11, Counters) ----
# cli-stat-p.sh: stat_p_target's functions write a known number of fresh
# pages or sleep, and count themselves with getrusage(RUSAGE_THREAD) around
# each call; threads, fork, exec, nesting, recursion, longjmp, fork() in a
# call, C++ exceptions (time_cxx), _exit, SIGKILL, failure paths (a static
# COMMAND: cli10's cli_target_static).
add_executable(stat_p_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/stat_p_target.c)
# Every function its own; no sanitizer, so that its faults are its pages'.
target_compile_options(stat_p_target PRIVATE -O2 -fno-sanitize=all)
target_link_options(stat_p_target PRIVATE -fno-sanitize=all)
target_link_libraries(stat_p_target PRIVATE pthread)
add_test(NAME cli_stat_p
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli-stat-p.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:stat_p_target> ${PK_CLI_SANITIZED} $<TARGET_FILE:time_cxx>
          ${PK_CLI_STATIC})
set_tests_properties(cli_stat_p PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 300 ENVIRONMENT "${PK_TEST_ENV}")
# ---- end statp11 ----

# --- start10b: test_sig_strip_load's helper, initialised before libprobekit
# (linked after it: the dynamic linker initialises later NEEDED entries
# first); it must not use probekit itself.
add_library(sig_strip_helper SHARED sig_strip_helper.c)
set_target_properties(sig_strip_helper PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
if(TARGET test_sig_strip_load)
  target_link_libraries(test_sig_strip_load PRIVATE sig_strip_helper)
  target_link_options(test_sig_strip_load PRIVATE -Wl,--no-as-needed)
endif()

# --- start10b: agent_early.sh, threads made before the agent's constructor
# (by a linked library's constructor, by a preloaded one's) while it arms.
# Not linked with libprobekit, nor instrumented (as agent.sh's helpers).
add_library(agentearly SHARED agent_early_lib.c)
set_target_properties(agentearly PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
target_link_libraries(agentearly PRIVATE pthread)
add_executable(agent_early agent_early.c)
target_link_libraries(agent_early PRIVATE ${CMAKE_DL_LIBS})
add_executable(agent_early_linked agent_early.c)
target_link_libraries(agent_early_linked PRIVATE agentearly ${CMAKE_DL_LIBS})
target_link_options(agent_early_linked PRIVATE -Wl,--no-as-needed)
foreach(t agentearly agent_early agent_early_linked)
  target_compile_options(${t} PRIVATE -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
endforeach()
add_test(NAME agent_early
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/agent_early.sh $<TARGET_FILE:probekit_cli>
          $<TARGET_FILE:agent_early> $<TARGET_FILE:agent_early_linked>
          $<TARGET_FILE:agentearly> ${PK_CLI_SANITIZED})
set_tests_properties(agent_early PROPERTIES SKIP_RETURN_CODE 77 LABELS quick
  TIMEOUT 120 ENVIRONMENT "${PK_TEST_ENV}")
