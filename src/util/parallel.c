/* parallel.c -- pt_parallel_for (parallel.h): helpers started per call (a reduce runs a
 * few such loops, each of seconds; a pool would outlive its use), each taking runs of
 * indices off one atomic counter until none is left. */
#include "util/parallel.h"
#include "util/common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct loop {
    size_t n, run;
    atomic_size_t next;
    void (*body)(void *ctx, size_t i);
    void *ctx;
} loop;

static void *take_runs(void *arg)
{
    loop *l = arg;
    for (size_t first; (first = atomic_fetch_add(&l->next, l->run)) < l->n;)
        for (size_t i = first; i < first + l->run && i < l->n; i++)
            l->body(l->ctx, i);
    return NULL;
}

void pt_parallel_for(size_t n, int threads, size_t run, void (*body)(void *ctx, size_t i), void *ctx)
{
    loop l = {n, run ? run : 1, 0, body, ctx};
    size_t wanted = threads > 1 ? (size_t)threads : 1;
    if (wanted > (n + l.run - 1) / l.run)
        wanted = (n + l.run - 1) / l.run;
    pthread_t *helpers = pt_xcalloc(wanted ? wanted : 1, sizeof *helpers);
    size_t started = 0;
    while (started + 1 < wanted && pthread_create(&helpers[started], NULL, take_runs, &l) == 0)
        started++;
    take_runs(&l);
    for (size_t i = 0; i < started; i++)
        pthread_join(helpers[i], NULL);
    free(helpers);
}
