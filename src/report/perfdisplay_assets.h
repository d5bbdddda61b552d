/* perfdisplay_assets.h -- the page's files, compiled into the binary.
 *
 * The table is generated at build time by web/embed.c from web/ (and from the chart
 * library npm fetched into the build tree), so the binary needs no install path. */
#ifndef PT_REPORT_PERFDISPLAY_ASSETS_H
#define PT_REPORT_PERFDISPLAY_ASSETS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pt_perfdisplay_asset {
    const char *path;          /* inside the PerfDisplay folder, e.g. "assets/app.js" */
    const unsigned char *data;
    size_t size;
    bool executable;           /* app.py */
} pt_perfdisplay_asset;

extern const pt_perfdisplay_asset pt_perfdisplay_assets[];
extern const size_t pt_perfdisplay_asset_count;
/* Optional files this build lacks (the chart library without npm), NULL-terminated: the
 * writer removes them from an older PerfDisplay so the page does not use a stale copy. */
extern const char *const pt_perfdisplay_absent_assets[];

#endif
