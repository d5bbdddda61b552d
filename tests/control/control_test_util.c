/* control_test_util.c -- see control_test_util.h. */
#define _GNU_SOURCE
#include "control_test_util.h"

#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

pt_key ctl_test_agent_key(const char *secret, const char *restore)
{
    setenv("PERFTRACKER_SECRET", secret, 1);
    pt_key key;
    pt_error err;
    if (pt_auth_agent_key(&key, &err) != 1)
        memset(&key, 0, sizeof key);
    setenv("PERFTRACKER_SECRET", restore, 1);
    return key;
}

int ctl_test_next_msg(pt_conn *c, pt_ctl_msg *m)
{
    pt_error err;
    for (int i = 0; i < 500; i++) {
        int got = pt_conn_next(c, m, &err);
        if (got != 0)
            return got;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        poll(&pfd, 1, 10);
        if (pt_conn_read(c, &err) < 0)
            return -1; /* closed: what the coordinator does to a peer it drops */
    }
    return 0;
}

int ctl_test_send_now(pt_conn *c, const pt_ctl_msg *m)
{
    pt_error err;
    return pt_conn_send(c, m, &err) == 0 && pt_conn_flush(c, &err) == 0 ? 0 : -1;
}

int ctl_test_connect_as_nobody(const char *name)
{
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 2;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name + 1);
    memcpy(sa.sun_path + 1, name + 1, n);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0)
        return 3;
    char byte;
    return read(fd, &byte, 1) == 0 ? 0 : 1; /* closed with no challenge sent */
}

bool ctl_test_warning_contains(const pt_json *report, const char *a, const char *b)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    for (size_t i = 0; warnings && i < warnings->count; i++)
        if (strstr(warnings->items[i]->string, a) && (!b || strstr(warnings->items[i]->string, b)))
            return true;
    return false;
}

int ctl_test_remove_tree(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}
