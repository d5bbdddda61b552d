/* demangle.h -- kernel names as PyTorch's profiler shows them.
 *
 * CUPTI hands the collector a kernel's linkage name ("_ZN7cutlass7Kernel2I43cutlass_80_
 * simt_sgemm_128x128_8x4_nt_align1EEvNT_6ParamsE"); Kineto demangles it with the C++
 * runtime before writing its JSON ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_
 * 8x4_nt_align1>(cutlass_80_simt_sgemm_128x128_8x4_nt_align1::Params)"). The summarizer
 * demangles native names the same way, with the same demangler (the Itanium C++ ABI's
 * __cxa_demangle from libstdc++), so both paths give the same kernel names and keys.
 *
 * Cost: one demangling per distinct name (a cache keyed by the mangled text), never per
 * event; names that are not mangled ("sm80_xmma_gemm_...", already-demangled Kineto
 * names) pass through at the cost of a two-byte compare. */
#ifndef PT_SUMMARIZE_DEMANGLE_H
#define PT_SUMMARIZE_DEMANGLE_H

#include "util/strtab.h"

#include <stdbool.h>

typedef struct pt_demangler {
    pt_strtab mangled; /* mangled names seen so far */
    uint32_t *shown;   /* mangled id -> id in the caller's name table */
    size_t shown_cap;
} pt_demangler;

void pt_demangler_init(pt_demangler *d);
void pt_demangler_free(pt_demangler *d);

/* The id in names of name as Kineto would show it: demangled when it is a mangled C++
 * name, as it is otherwise (and when the demangler refuses it). */
uint32_t pt_demangler_intern(pt_demangler *d, pt_strtab *names, const char *name, size_t n);

/* Whether name looks like an Itanium C++ mangled name ("_Z..."). */
bool pt_is_mangled(const char *name, size_t n);
/* The demangled name (malloc'd), or NULL when name is not a valid mangled name. */
char *pt_demangle(const char *name, size_t n);

#endif
