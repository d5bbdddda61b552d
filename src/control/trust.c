/* trust.c -- peer identities and the notices a round carries (trust.h). */
#define _GNU_SOURCE
#include "control/trust.h"
#include "control/net.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pt_coordinator_socket_for(uint16_t port, char *dst, size_t cap)
{
    snprintf(dst, cap, "@perftracker-coord-%lu-%u", (unsigned long)geteuid(), (unsigned)port);
}

void pt_peer_identify(int fd, pt_peer_identity *id)
{
    uid_t uid;
    pid_t pid;
    memset(id, 0, sizeof *id);
    id->uid = id->pid = -1;
    if (pt_net_peer_cred(fd, &uid, &pid) == 0) {
        id->unix_socket = true;
        id->uid = (int64_t)uid;
        id->pid = (int64_t)pid;
        if (pid > 0)
            snprintf(id->seen_from, sizeof id->seen_from, "pid %ld (uid %lu) on this machine", (long)pid,
                     (unsigned long)uid);
        else
            snprintf(id->seen_from, sizeof id->seen_from, "a process of uid %lu on this machine, outside "
                     "this pid namespace", (unsigned long)uid);
        return;
    }
    pt_net_peer_name(fd, id->seen_from, sizeof id->seen_from);
}

void pt_notices_add(pt_notices *n, const char *kind, const char *fmt, ...)
{
    n->generation++;
    size_t i = 0;
    while (i < n->used && strcmp(n->entry[i].kind, kind) != 0)
        i++;
    if (i < n->used) {
        n->entry[i].count++;
        return;
    }
    if (n->used == PT_NOTICE_KINDS) {
        n->dropped++;
        return;
    }
    char line[PT_CTL_MAX_TEXT / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char *first = strdup(line);
    if (!first) {
        n->dropped++;
        return;
    }
    snprintf(n->entry[i].kind, sizeof n->entry[i].kind, "%s", kind);
    n->entry[i].first = first;
    n->entry[i].count = 1;
    n->used++;
}

size_t pt_notices_lines(const pt_notices *n)
{
    return n->used + (n->dropped ? 1 : 0);
}

void pt_notices_line(const pt_notices *n, size_t i, char *dst, size_t cap)
{
    if (i >= n->used) {
        snprintf(dst, cap, "%llu more refused connections of other kinds (see rank 0's log)",
                 (unsigned long long)n->dropped);
        return;
    }
    if (n->entry[i].count > 1)
        snprintf(dst, cap, "%s (%llu times in all)", n->entry[i].first, (unsigned long long)n->entry[i].count);
    else
        snprintf(dst, cap, "%s", n->entry[i].first);
}

void pt_notices_free(pt_notices *n)
{
    for (size_t i = 0; i < n->used; i++)
        free(n->entry[i].first);
    memset(n, 0, sizeof *n);
}
