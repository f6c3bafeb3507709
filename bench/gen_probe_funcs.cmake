# SPDX-License-Identifier: MIT
# gen_probe_funcs.cmake - write OUT: an assembly file with N small functions pf_0..pf_N-1
# (each: store rdi in the red zone, load it back, add i, ret) and pf_table[] of their
# addresses, for bench_probe's arming figures. Run: cmake -DN=10000 -DOUT=f.S -P this.
# Appends in blocks of 500: one growing string is quadratic in CMake.
file(WRITE ${OUT} ".text\n")
set(table ".section .data.rel.ro,\"aw\"\n.globl pf_table\n.p2align 3\npf_table:\n")
math(EXPR last "${N} - 1")
set(text "")
foreach(i RANGE ${last})
  string(APPEND text ".globl pf_${i}\n.type pf_${i},@function\n.p2align 4\npf_${i}:\n"
         "\tmov %rdi,-8(%rsp)\n\tmov -8(%rsp),%rax\n\tadd $${i},%rax\n\tret\n"
         ".size pf_${i},.-pf_${i}\n")
  string(APPEND tab "\t.quad pf_${i}\n")
  math(EXPR m "${i} % 500")
  if(m EQUAL 499 OR i EQUAL last)
    file(APPEND ${OUT} "${text}")
    string(APPEND table "${tab}")
    set(text "")
    set(tab "")
  endif()
endforeach()
file(APPEND ${OUT} "${table}.section .note.GNU-stack,\"\",@progbits\n")
