// SPDX-License-Identifier: MIT
/* agent_dladdr.c - the agent's dladdr1() (agent/dladdr.c, linked here with --wrap) gives glibc's answer: for the start, an inner byte and the end of every libc function, and for IFUNC implementations no dynamic symbol starts at. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

int __real_dladdr1(const void *addr, Dl_info *info, void **extra, int flags);
int __wrap_dladdr1(const void *addr, Dl_info *info, void **extra, int flags);
size_t pka_dynsym_count(const ElfW(Dyn) *dyn, uintptr_t bias);

static int checked, differ;

/* Both answers for @p, compared; the first few differences printed. */
static void same(const char *what, uintptr_t p)
{
	Dl_info a = { 0 }, b = { 0 };
	const ElfW(Sym) *sa = NULL, *sb = NULL;
	int ra = __real_dladdr1((void *)p, &a, (void **)&sa, RTLD_DL_SYMENT);
	int rb = __wrap_dladdr1((void *)p, &b, (void **)&sb, RTLD_DL_SYMENT);
	int ok = ra == rb && (!ra || (a.dli_fbase == b.dli_fbase &&
		  a.dli_saddr == b.dli_saddr &&
		  !a.dli_sname == !b.dli_sname && !sa == !sb &&
		  (!sa || (sa->st_value == sb->st_value &&
			   sa->st_size == sb->st_size))));

	checked++;
	if (ok)
		return;
	if (differ++ < 10)
		fprintf(stderr, "differ at %s (%#lx): glibc %d %s %p, agent %d %s %p\n",
			what, (unsigned long)p, ra, a.dli_sname ? a.dli_sname : "-",
			a.dli_saddr, rb, b.dli_sname ? b.dli_sname : "-", b.dli_saddr);
}

static int each_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *tab = NULL;
	size_t n;

	(void)size;
	(void)arg;
	if (!strstr(info->dlpi_name, "/libc.so.6"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr +
						  info->dlpi_phdr[i].p_vaddr);
	for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_SYMTAB)
			tab = (const ElfW(Sym) *)d->d_un.d_ptr;
	if (!dyn || !tab)
		return 1;
	n = pka_dynsym_count(dyn, info->dlpi_addr);
	for (size_t i = 1; i < n; i++) {
		uintptr_t a = info->dlpi_addr + tab[i].st_value;

		if (tab[i].st_shndx == SHN_UNDEF ||
		    ELF64_ST_TYPE(tab[i].st_info) != STT_FUNC)
			continue;
		same("start", a);
		if (tab[i].st_size > 1)
			same("inside", a + tab[i].st_size / 2);
		same("end", a + tab[i].st_size);
	}
	return 1;
}

int main(void)
{
	static const char *const ifuncs[] = {
		"strlen", "memcpy", "memset", "strchr", "strchrnul", "strnlen",
		"memmove", "strcmp", "memchr", "stpcpy",
	};
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	ASSERT_TRUE(libc != NULL, "libc.so.6 loaded");
	/* dlsym() of an IFUNC: the implementation chosen, no symbol of its own. */
	for (size_t i = 0; i < sizeof(ifuncs) / sizeof(ifuncs[0]); i++) {
		uintptr_t p = (uintptr_t)dlsym(libc, ifuncs[i]);

		if (p) {
			same(ifuncs[i], p);
			same(ifuncs[i], p + 3);
		}
	}
	dl_iterate_phdr(each_libc, NULL);
	printf("%d addresses, %d answers differ\n", checked, differ);
	ASSERT_TRUE(checked > 1000, "every libc function asked about");
	ASSERT_EQ(differ, 0, "answers that differ from glibc's");
	dlclose(libc);
	return 0;
}
