/* demangle.c -- C++ kernel names through the C++ runtime's demangler (see demangle.h).
 *
 * __cxa_demangle is the demangler the Itanium C++ ABI defines (section 3.4) with C
 * linkage; libstdc++ provides it, and it is the one Kineto calls (through
 * abi::__cxa_demangle), so the text is identical to the character. We declare it here
 * rather than compile C++ for one prototype; the library links libstdc++. */
#include "summarize/demangle.h"

#include <stdlib.h>
#include <string.h>

char *__cxa_demangle(const char *mangled_name, char *output_buffer, size_t *length, int *status);

bool pt_is_mangled(const char *name, size_t n)
{
    return n > 2 && name[0] == '_' && name[1] == 'Z';
}

char *pt_demangle(const char *name, size_t n)
{
    if (!pt_is_mangled(name, n))
        return NULL;
    char *copy = pt_xstrndup(name, n); /* the demangler wants a C string */
    int status = -1;
    char *out = __cxa_demangle(copy, NULL, NULL, &status);
    free(copy);
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

void pt_demangler_init(pt_demangler *d)
{
    memset(d, 0, sizeof *d);
    pt_strtab_init(&d->mangled);
}

void pt_demangler_free(pt_demangler *d)
{
    pt_strtab_free(&d->mangled);
    free(d->shown);
    memset(d, 0, sizeof *d);
}

uint32_t pt_demangler_intern(pt_demangler *d, pt_strtab *names, const char *name, size_t n)
{
    if (!pt_is_mangled(name, n))
        return pt_strtab_intern(names, name, n);
    size_t before = d->mangled.count;
    uint32_t id = pt_strtab_intern(&d->mangled, name, n);
    if (d->mangled.count == before)
        return d->shown[id];
    PT_GROW(d->shown, d->shown_cap, d->mangled.count);
    char *demangled = pt_demangle(name, n);
    d->shown[id] = demangled ? pt_strtab_intern(names, demangled, strlen(demangled)) : pt_strtab_intern(names, name, n);
    free(demangled);
    return d->shown[id];
}
