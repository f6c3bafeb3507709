/* SPDX-License-Identifier: MIT */
/* sym/spec.h - where a spec's OBJECT ends: one rule for the symbol layer and the command, which does not link the library. */
#ifndef PK_SYM_SPEC_H
#define PK_SYM_SPEC_H

#include <string.h>

/*
 * pk_spec_obj_colon() - the ':' after OBJECT in @s, or NULL: the first ':'
 * that is not part of a "::" (C++ names hold any number of those, OBJECT
 * none) nor of a C++ ABI tag's "[abi:" ("label[abi:cxx11]").
 */
static inline const char *pk_spec_obj_colon(const char *s)
{
	for (const char *p = s; (p = strchr(p, ':')); p++) {
		if (p[1] == ':') {
			p++;
			continue;
		}
		if (p - s >= 4 && !strncmp(p - 4, "[abi", 4))
			continue;
		return p;
	}
	return NULL;
}

#endif /* PK_SYM_SPEC_H */
