/* terminal.c -- what the CLI prints comes partly from its inputs (function and file
 * names, a summary's warnings), and inputs can be hostile: a kernel named
 * "\x1b]0;...\x07" would otherwise drive the analyst's terminal (set its title, rewrite
 * the screen, on some terminals worse). Every line the CLI prints goes through
 * pt_cli_print, which replaces C0 and C1 control characters (except newline and tab)
 * with '?'. report.json and the page escape their own way (util/json.c). */
#include "cli/cli.h"
#include "util/buf.h"

#include <stdarg.h>
#include <string.h>

void pt_cli_print(FILE *out, const char *fmt, ...)
{
    pt_buf b = PT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    char small[1024];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    } else if ((size_t)n < sizeof small) {
        pt_buf_append(&b, small, (size_t)n);
    } else {
        pt_buf_reserve(&b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b.data, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b.len = (size_t)n;
    }
    unsigned char *p = (unsigned char *)b.data;
    for (size_t i = 0; i < b.len; i++) {
        if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7f)
            p[i] = '?';
        else if (p[i] == 0xc2 && i + 1 < b.len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
            p[i] = '?', p[i + 1] = '?'; /* U+0080..U+009F: C1 controls (CSI is U+009B) */
    }
    fwrite(b.data, 1, b.len, out);
    pt_buf_free(&b);
}

void pt_cli_print_lines(FILE *out, const char *prefix, const char *text)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        int n = end ? (int)(end - line) : (int)strlen(line);
        pt_cli_print(out, "%s%.*s\n", prefix, n, line);
        line += n + (end ? 1 : 0);
    }
}
