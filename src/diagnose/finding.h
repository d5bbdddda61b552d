/* finding.h -- one finding of the diagnosis and the list they are collected in, shared by
 * the passes that produce them (peers.c: workers against their peers; findings.c: hangs,
 * hardware evidence, problems every worker shares, and one finding per cause: the
 * findings of one cause merged, each a part of it) and by the output. */
#ifndef PT_DIAGNOSE_FINDING_H
#define PT_DIAGNOSE_FINDING_H

#include "diagnose/analysis.h"

/* What a peer finding rests on; it decides the sentence. */
typedef enum pt_evidence {
    PT_EVIDENCE_NONE = 0,
    PT_EVIDENCE_ONLY_HERE,  /* a function the other workers do not run (or barely) */
    PT_EVIDENCE_MORE_CALLS, /* the same function, called more often than on the others */
    PT_EVIDENCE_SLOWER,     /* the same calls, taking longer */
    PT_EVIDENCE_CLASS,      /* a whole class above its peers, spread over many functions */
    PT_EVIDENCE_UNIFORM     /* every kernel slower by a similar factor: the GPU */
} pt_evidence;

/* What fixing a finding removes, for the step model (whatif.h): the named workers' time
 * above the other workers' (a function's exposed time, some classes', or all their
 * work), or every worker's time above what it is expected to take. */
typedef enum pt_fix_kind {
    PT_FIX_NONE = 0,  /* not modelled: its impact is given (a hang's, a hardware finding's) */
    PT_FIX_ROW,       /* the function `row` */
    PT_FIX_CLASSES,   /* the classes in `classes` */
    PT_FIX_WORK,      /* all work (a straggler no function explains) */
    PT_FIX_COMMON     /* every worker: `row` (or `classes`) above `expected` of each step */
} pt_fix_kind;

typedef struct finding finding;
struct finding {
    const char *category;
    char *function;
    size_t *workers;          /* worker indices */
    size_t worker_count, worker_cap;
    bool all_workers;
    double impact;            /* the share of the step the model saves when it is fixed */
    pt_fix_kind fix;
    const pt_fn_row *row;
    unsigned classes;         /* PT_CLASS_BIT(c) of each class */
    double expected;          /* PT_FIX_COMMON: the share of a step that work may take */
    double excess_ms;         /* per step: what fixing it removes from the worker that has
                                 the most of it (over the other workers, or over expected) */
    double alone;             /* several named workers: the saving of fixing the worst alone */
    size_t worst;             /* ... which is this worker (index) */
    size_t explains;          /* hardware: 1 + the index of the finding it explains */
    size_t steps_slow;        /* steps in which the worst worker's excess reached the floor ... */
    size_t steps_total;       /* ... of these (0: steps could not be compared) */
    bool graded;              /* several workers run the same code for longer than the fastest */
    size_t pacer;             /* ... this one the longest (named first) ... */
    bool sets_pace;           /* ... and it is the one the others wait for in every segment */
    char *summary;
    const char *section;      /* evidence */
    const char *metric;
    double median;
    double *values;           /* per named worker */
    pt_class cls;             /* peer findings: the class compared */
    pt_evidence evidence;     /* peer findings: of the worker with the largest excess */
    double calls, peer_calls; /* that worker's calls per step, and the typical worker's */
    pt_json *hang;            /* hang findings: evidence.hang (each rank's side), owned */
    const int32_t *ranks;     /* a finding about ranks that were not analysed (the job's
                                 missing ranks): they, not workers, are the ranks it names */
    size_t rank_count;
    finding *parts;           /* one cause found as several findings (pt_merge_causes): the
                                 findings merged into this one, each costed alone; owned */
    size_t part_count;
    bool covers_parts;        /* its own removal (a class, rolled up) holds its parts'; else
                                 it removes what its parts remove, together */
    size_t microbatches;      /* a pipeline stage's extra work (pipeline.c): moved to the
                                 other stages, M microbatches per step; 0 when not */
    double adds;              /* what fixing it adds to fixing the findings reported above it
                                 (their adds sum to the joint saving; below impact only where
                                 findings of different causes remove the same step time) */
};

typedef struct finding_list {
    finding *items;
    size_t count, cap;
} finding_list;

finding *pt_finding_add(finding_list *list, const char *category, const char *function, const char *section);
void pt_finding_name_worker(finding *f, size_t w, double value);
bool pt_finding_names(const finding *f, size_t w);
finding *pt_finding_find(finding_list *list, const char *category, const char *function);
/* Forgets the finding added last (one that turned out not to be worth reporting). */
void pt_finding_drop_last(finding_list *list);
/* Forgets the findings drop marks (and the hardware findings explaining them, which it
 * marks too); the others keep their order. */
void pt_finding_list_drop(finding_list *list, bool *drop);
/* True when a finding about some workers (not all) names worker w. */
bool pt_findings_name_worker(const finding_list *list, size_t w);
void pt_finding_list_free(finding_list *list);


/* A finding whose fix saves less than this share of the step, alone and within the joint
 * saving of all of them, saves nothing: it is not reported (pt_finding_saves_nothing_kept
 * says which are kept anyway). The terminal prints it as "0.0%". */
#define PT_SAVES_NOTHING 0.0005
/* Work only the named workers do on the GPU (kernels or copies the others do not run, or
 * run more often) is kept at any saving when their GPU may be shared with other ranks:
 * it then slows the others' kernels too, which the step model does not count (whatif.h;
 * h200 kineto_gpuheavy_r0: 4 ranks on one H200, the culprit's extra matmuls save nothing
 * in the model, 2.8 ms a step in the job). */
bool pt_finding_saves_nothing_kept(const pt_analysis *a, const finding *f);
/* So is any work only the named workers do when the model saw no worker of the job wait
 * (no sync point, exposed communication nor idle time on any: a CPU job's collectives on
 * gloo's threads, which the collector does not see): the others' wait for that work is
 * their work in the model, which then cannot say what removing it saves. */
bool pt_job_waits_unseen(const pt_analysis *a);
/* Worker w's host has more workers than GPUs, or its host or GPU count is not known. */
bool pt_worker_may_share_gpu(const pt_analysis *a, size_t w);

/* The smallest difference worth a finding: 3% of the step, and never under 0.05 ms. */
double pt_floor_ms(const pt_analysis *a);
/* Fraction of the median step that excess_ms is, in [0, 1]. */
double pt_impact_of(const pt_analysis *a, double excess_ms);

/* A worker's metric whose name ends with suffix ("host.cpu_util"), or NULL. */
const pt_metric_summary *pt_worker_metric(const pt_worker_summary *s, const char *suffix);
/* Worker w shares its host with another worker of the job (or its host is unknown):
 * host metrics and the host's CPU are then the same for both. */
bool pt_worker_shares_host(const pt_analysis *a, size_t w);
/* Worker w's host CPU was busy nearly all the window (host.cpu_util averaging
 * PT_HOST_SATURATED_PCT or more) and it shares that host with other workers: their
 * CPU-side work competes for one CPU, so what one of them loses another gains. */
#define PT_HOST_SATURATED_PCT 95.0
bool pt_worker_cpu_contended(const pt_analysis *a, size_t w);

/* Sentence pieces: "Rank 3" / "Ranks 1, 2 and 5"; "12.5 ms"; the short function name. */
void pt_ranks_phrase(const pt_analysis *a, const finding *f, pt_buf *out);
/* "rank 3" / "ranks 2, 3 and 9" / "ranks 2-127" of listed ranks in increasing order, of
 * total in all ("and 5 more" beyond the first runs). */
void pt_put_rank_list(pt_buf *out, const int32_t *ranks, size_t listed, int64_t total);
void pt_put_ms(pt_buf *out, double ms);
/* "310 MB", "1234 MB": megabytes (10^6 bytes), three digits below a thousand. */
void pt_put_mb(pt_buf *out, double mb);
/* "; fixing it saves 38 ms per step (41% of the step)", with what fixing the worst of
 * several workers alone saves, and why a saving is smaller than the excess. */
void pt_put_saving(const pt_analysis *a, const finding *f, double step_ms, pt_buf *out);
/* "37%", "4.3%", "0.35%": small shares keep their digits (a 0.35% link use is not 0%). */
#define PT_PERCENT_LEN 16
const char *pt_percent(char out[PT_PERCENT_LEN], double percent);

/* Hangs (hangs.c): which rank is missing from which collective, and what does not match;
 * marks the workers each finding names in status (2). */
void pt_hang_findings(const pt_analysis *a, finding_list *list, int *status);

/* The passes of peers.c: functions and classes against the other workers, uniformly slow
 * hosts, and stragglers (workers the others wait for). Their sentences are written once
 * the step model has costed them (pt_describe_peer_finding). */
struct pt_whatif;
void pt_peer_findings(const pt_analysis *a, const struct pt_whatif *m, finding_list *list, bool explain_stragglers);
void pt_describe_peer_finding(const pt_analysis *a, finding *f, double step_ms);

/* One finding per cause (findings.c): findings from `first` on that remove the same time
 * -- one worker's kernels (or copies), a Python frame and the frames it calls, device
 * memory freed and allocated again, a rolled-up slow-GPU or slow-host finding and the
 * functions it covers -- become one, costed as one removal, its members its parts.
 * Hardware findings explaining a member explain the merged finding. */
void pt_merge_causes(const pt_analysis *a, const struct pt_whatif *m, finding_list *list, size_t first);
/* A pipeline stage's extra GPU work (pipeline.c): in a job whose workers make
 * point-to-point transfers, a finding from `first` on about kernels some workers call
 * more often and others less often is a stage holding more of the model: costed as work
 * moved to the other stages over the job's microbatches and described so. */
void pt_pipeline_stages(const pt_analysis *a, const struct pt_whatif *m, finding_list *list, size_t first);
/* A merged finding's sentence names this many parts, then counts the rest. */
#define PT_PARTS_SAID 4
/* Python stack `frame` is a proper ancestor of stack `stack` (a prefix ending at '|'). */
bool pt_stack_is_ancestor(const char *frame, const char *stack);



#endif
