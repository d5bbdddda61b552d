/* transfer.h -- how long a collective's own transfer takes, at the bandwidth the links'
 * counters measured (transfer.c). */
#ifndef PT_DIAGNOSE_TRANSFER_H
#define PT_DIAGNOSE_TRANSFER_H

#include "diagnose/analysis.h"

/* The largest call of a collective row (its bytes, the most any worker saw) moved at the
 * bus bandwidth its link reached, in ms; *busbw_gbps and *bytes say which. 0 when the
 * link's counters are in no worker's summary, or the row carries no bytes. */
double pt_measured_transfer_ms(const pt_analysis *a, const pt_fn_row *row, double *busbw_gbps, double *bytes);

#endif
