/* view_sections.js -- the seed's five sections, one view each, under their own field names:
 * GPU Compute (#/gpu-compute), GPU memory operations (#/gpu-memory), Communication
 * (#/communication), CUDA Runtime (#/cuda-runtime) and Python functions (#/python). Each is
 * its section as tables, with a short "how to read this", the entry ?key= names
 * highlighted; workers link to the Workers view.
 * Report keys: "GPU Compute" (utilization, workers with abnormal GPU utilization,
 * major_kernel_executions, workers with potential GPU issues, detailed report),
 * "GPU memory operations" and "CUDA Runtime" (per entry: ratios, abnormal_workers),
 * "Communication" (per link pattern and NCCL kernel: example_of_normal_worker,
 * abnormal_workers), "Python functions" (per call stack: share per worker).
 * Cost: one pass over the section to build rows; the tables draw only the rows in view.
 * communicationRows is also what app.js's navigation counts with.
 *
 * Design: PD.views.sections(ctx) is called once, by app.js, with its context: the report and
 * its index, and the pieces every view shares (app.js, "The views' context"); it returns
 * the renderers app.js's routes call. Nothing is drawn until a route opens the view.
 * Report strings reach the page as text only (PD.el, dom.js).
 */
'use strict';
var PD = (window.PD = window.PD || {});
PD.views = PD.views || {};

PD.views.sections = function (ctx) {
  var el = PD.el, fmt = PD.fmt;
  var culpritNames = ctx.culpritNames, mounted = ctx.mounted;
  var section = ctx.section, entries = ctx.entries, heading = ctx.heading, table = ctx.table, statCards = ctx.statCards,
      workerCell = ctx.workerCell, rankText = ctx.rankText, kernelCell = ctx.kernelCell, ratioBar = ctx.ratioBar,
      matchKey = ctx.matchKey;

  /* GPU Compute ------------------------------------------------------------------------ */
  function renderGpuCompute(node, params) {
    var s = section('GPU Compute'), key = matchKey(params);
    heading(node, 'GPU Compute', 'How busy each GPU was with compute kernels, which kernels cost the most, and which workers ran the same kernels slower than the others.', [
      ['min/median/max GPU utilization (in [0,1])', 'across workers, the share of the profiled window with a compute kernel running: 0.28 means the GPU computed 28% of the time.'],
      ['workers with abnormal GPU utilization', 'workers whose utilization is far from the others, with their utilization. Empty means every worker is normal.'],
      ['major_kernel_executions', 'the kernels that cost the most. The key is the kernel name followed by its grid and block (name320_1_1|512_1_1); each has the median cost of one execution and its bottleneck ratio, the share of end-to-end time it takes.'],
      ['workers with potential GPU issues', 'workers whose kernels run slower than the same kernels elsewhere. Empty means all are normal.'],
      ['detailed report', 'present when the list above is not empty: which worker ran which kernel slower, and by how much.']
    ]);
    var util = s['min/median/max GPU utilization (in [0,1])'] || [];
    node.appendChild(statCards([['min GPU utilization', fmt.pct(util[0])], ['median GPU utilization', fmt.pct(util[1])], ['max GPU utilization', fmt.pct(util[2])]]));

    var abnormal = entries(s['workers with abnormal GPU utilization']);
    node.appendChild(el('h2', null, 'workers with abnormal GPU utilization'));
    node.appendChild(abnormal.length ? table({
      rows: abnormal, visibleRows: 8, sort: { column: 2, descending: false },
      columns: [{ label: 'worker', value: function (e) { return e[0]; }, render: function (e) { return workerCell(e[0]); } },
                { label: 'rank', value: function (e) { return rankText(e[0]); }, numeric: true, width: '70px' },
                { label: 'GPU utilization', value: function (e) { return e[1]; }, text: function (e) { return fmt.pct(e[1]); }, numeric: true }]
    }) : el('p', { className: 'muted' }, 'None: every worker\'s GPU utilization is close to the others.'));

    var kernels = entries(s.major_kernel_executions);
    var maxRatio = PD.maxOf(kernels.map(function (e) { return e[1]['bottleneck ratio (in [0,1])'] || 0; }), 0);
    node.appendChild(el('h2', null, 'major_kernel_executions'));
    node.appendChild(table({
      rows: kernels, sort: { column: 3, descending: true }, filter: 'Filter kernels',
      highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'kernel', value: function (e) { return PD.splitKernelKey(e[0]).name; }, title: function (e) { return e[0]; },
                  render: function (e) { return el('span', { title: e[0], className: 'mono' }, PD.shortKernel(PD.splitKernelKey(e[0]).name)); } },
                { label: 'grid|block', value: function (e) { return PD.splitKernelKey(e[0]).launch; }, width: '150px' },
                { label: 'median cost per execution (ms)', value: function (e) { return e[1]['median cost per execution (ms)']; }, text: function (e) { return fmt.num(e[1]['median cost per execution (ms)']); }, numeric: true, width: '200px' },
                { label: 'bottleneck ratio (in [0,1])', value: function (e) { return e[1]['bottleneck ratio (in [0,1])']; }, render: function (e) { return ratioBar(e[1]['bottleneck ratio (in [0,1])'], maxRatio); }, numeric: true, width: '190px' }]
    }));

    var issues = s['workers with potential GPU issues'] || [];
    node.appendChild(el('h2', null, 'workers with potential GPU issues'));
    node.appendChild(issues.length ? el('ul', { className: 'plain', id: 'gpu-issue-workers' }, issues.map(function (n) { return el('li', null, workerCell(n), ' (rank ' + rankText(n) + ')'); }))
                                   : el('p', { className: 'muted' }, 'None: every worker runs its kernels as fast as the others.'));
    var detailed = [];
    entries(s['detailed report']).forEach(function (w) {
      entries(w[1]).forEach(function (k) { detailed.push({ worker: w[0], kernel: k[0], v: k[1] }); });
    });
    if (detailed.length) {
      node.appendChild(el('h2', null, 'detailed report'));
      node.appendChild(table({
        rows: detailed, sort: { column: 5, descending: true }, filter: 'Filter by worker or kernel',
        highlight: key !== null ? function (r) { return r.kernel === key; } : null,
        columns: [{ label: 'worker', value: function (r) { return r.worker; }, render: function (r) { return workerCell(r.worker); }, width: '200px' },
                  { label: 'rank', value: function (r) { return rankText(r.worker); }, numeric: true, width: '60px' },
                  { label: 'kernel', value: function (r) { return r.kernel; }, render: function (r) { return kernelCell(r.kernel); }, title: function (r) { return r.kernel; } },
                  { label: 'median cost per execution (ms)', value: function (r) { return r.v['median cost per execution (ms)']; }, text: function (r) { return fmt.num(r.v['median cost per execution (ms)']); }, numeric: true, width: '140px' },
                  { label: 'median of other workers (ms)', value: function (r) { return r.v['median of other workers (ms)']; }, text: function (r) { return fmt.num(r.v['median of other workers (ms)']); }, numeric: true, width: '140px' },
                  { label: 'slowdown', value: function (r) { return r.v.slowdown; }, text: function (r) { return fmt.times(r.v.slowdown); }, numeric: true, width: '90px' }]
      }));
    }
  }

  /* GPU memory operations --------------------------------------------------------------- */
  function abnormalMapRows(s) {
    var rows = [];
    entries(s).forEach(function (e) { entries(e[1].abnormal_workers).forEach(function (w) { rows.push({ key: e[0], worker: w[0], ratio: w[1] }); }); });
    return rows;
  }

  function abnormalWorkersTable(rows, keyLabel, key, valueLabel) {
    return rows.length ? table({
      rows: rows, sort: { column: 3, descending: true }, filter: 'Filter by worker',
      highlight: key !== null ? function (r) { return r.key === key; } : null,
      rowClass: function (r) { return culpritNames.has(r.worker) ? 'culprit' : ''; },
      columns: [{ label: keyLabel, value: function (r) { return r.key; }, render: function (r) { return el('span', { className: 'mono', title: r.key }, r.key); } },
                { label: 'worker', value: function (r) { return r.worker; }, render: function (r) { return workerCell(r.worker); } },
                { label: 'rank', value: function (r) { return rankText(r.worker); }, numeric: true, width: '70px' },
                { label: valueLabel, value: function (r) { return r.ratio; }, text: function (r) { return fmt.pct(r.ratio); }, numeric: true, width: '170px' }]
    }) : el('p', { className: 'muted' }, 'None: no worker is above 1%.');
  }

  function renderGpuMemory(node, params) {
    var s = section('GPU memory operations'), key = matchKey(params);
    heading(node, 'GPU memory operations', 'One entry per kind of memory operation (Memcpy HtoD, DtoH, DtoD, Memset, …).', [
      ['avg bottleneck ratio (in [0,1])', 'on average over workers, the share of end-to-end time spent in this operation and not hidden under GPU compute: 0.0105 means 1.05%.'],
      ['abnormal_workers', 'the workers whose bottleneck ratio for this operation is above 0.01 (1%), the threshold for memory operations, with their ratio.']
    ]);
    var kinds = entries(s);
    node.appendChild(table({
      rows: kinds, sort: { column: 1, descending: true },
      highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'operation', value: function (e) { return e[0]; } },
                { label: 'avg bottleneck ratio (in [0,1])', value: function (e) { return e[1]['avg bottleneck ratio (in [0,1])']; }, text: function (e) { return fmt.pct(e[1]['avg bottleneck ratio (in [0,1])']); }, numeric: true, width: '220px' },
                { label: 'abnormal_workers', value: function (e) { return entries(e[1].abnormal_workers).length; }, numeric: true, width: '150px' }]
    }));
    node.appendChild(el('h2', null, 'abnormal_workers'));
    node.appendChild(abnormalWorkersTable(abnormalMapRows(s), 'operation', key, 'bottleneck ratio'));
  }

  /* Communication ----------------------------------------------------------------------- */
  function communicationRows() {
    var rows = [];
    entries(section('Communication')).forEach(function (g) {
      entries(g[1]).forEach(function (k) {
        var normal = k[1].example_of_normal_worker || {};
        rows.push({ group: g[0], kernel: k[0], normal: normal, features: normal.features || {}, abnormal: Array.isArray(k[1].abnormal_workers) ? k[1].abnormal_workers : [] });
      });
    });
    return rows;
  }

  function renderCommunication(node, params) {
    var key = matchKey(params), rows = communicationRows();
    var matches = function (r) { return key !== null && (r.group === key || r.kernel === key || r.group + '|' + r.kernel === key); };
    heading(node, 'Communication', 'Collectives grouped by link and pattern ("nvlink ring", "pcie sendrecv", …), then by NCCL kernel. In a collective the worker that arrives last shows the shortest kernel, because the others wait for it inside theirs: long communication on most workers usually means one slow worker elsewhere, not a slow network.', [
      ['example_of_normal_worker', 'a typical worker for this kernel and its features; "different from other workers" counts the workers whose features differ from it.'],
      ['bottleneck ratio (in [0,1])', 'share of end-to-end time in this collective that does not overlap computation.'],
      ['avg throughput (%)', 'bus bandwidth as a percentage of the link\'s peak; throughput std (%) is its spread across calls. Kernels without message sizes report 0.'],
      ['abnormal_workers', 'workers whose features are unlike the others, with their features.']
    ]);
    var f = function (o, k) { return (o || {})[k]; };
    node.appendChild(table({
      rows: rows, sort: { column: 4, descending: true },
      highlight: key !== null ? matches : null,
      columns: [{ label: 'link pattern', value: function (r) { return r.group; }, width: '150px' },
                { label: 'NCCL kernel', value: function (r) { return r.kernel; }, render: function (r) { return el('span', { className: 'mono', title: r.kernel }, PD.shortKernel(r.kernel, 48)); } },
                { label: 'example_of_normal_worker', value: function (r) { return r.normal.worker; }, render: function (r) { return r.normal.worker ? workerCell(r.normal.worker) : ''; }, width: '190px' },
                { label: 'different from other workers', value: function (r) { return r.normal['different from other workers']; }, numeric: true, width: '110px' },
                { label: 'bottleneck ratio (in [0,1])', value: function (r) { return f(r.features, 'bottleneck ratio (in [0,1])'); }, text: function (r) { return fmt.pct(f(r.features, 'bottleneck ratio (in [0,1])')); }, numeric: true, width: '130px' },
                { label: 'avg throughput (%)', value: function (r) { return f(r.features, 'avg throughput (%)'); }, text: function (r) { return fmt.percent(f(r.features, 'avg throughput (%)')); }, numeric: true, width: '110px' },
                { label: 'throughput std (%)', value: function (r) { return f(r.features, 'throughput std (%)'); }, text: function (r) { return fmt.percent(f(r.features, 'throughput std (%)')); }, numeric: true, width: '110px' },
                { label: 'abnormal_workers', value: function (r) { return r.abnormal.length; }, numeric: true, width: '110px' }]
    }));
    var abnormal = [];
    rows.forEach(function (r) { r.abnormal.forEach(function (a) { abnormal.push({ row: r, worker: a.worker, features: a.features || {} }); }); });
    node.appendChild(el('h2', null, 'abnormal_workers'));
    node.appendChild(abnormal.length ? table({
      rows: abnormal, sort: { column: 4, descending: false }, filter: 'Filter by worker',
      highlight: key !== null ? function (a) { return matches(a.row); } : null,
      rowClass: function (a) { return culpritNames.has(a.worker) ? 'culprit' : ''; },
      columns: [{ label: 'link pattern', value: function (a) { return a.row.group; }, width: '140px' },
                { label: 'NCCL kernel', value: function (a) { return a.row.kernel; }, render: function (a) { return el('span', { className: 'mono', title: a.row.kernel }, PD.shortKernel(a.row.kernel, 40)); } },
                { label: 'worker', value: function (a) { return a.worker; }, render: function (a) { return workerCell(a.worker); }, width: '190px' },
                { label: 'rank', value: function (a) { return rankText(a.worker); }, numeric: true, width: '60px' },
                { label: 'bottleneck ratio (in [0,1])', value: function (a) { return a.features['bottleneck ratio (in [0,1])']; }, text: function (a) { return fmt.pct(a.features['bottleneck ratio (in [0,1])']); }, numeric: true, width: '130px' },
                { label: 'normal worker\'s ratio', value: function (a) { return f(a.row.features, 'bottleneck ratio (in [0,1])'); }, text: function (a) { return fmt.pct(f(a.row.features, 'bottleneck ratio (in [0,1])')); }, numeric: true, width: '120px' },
                { label: 'avg throughput (%)', value: function (a) { return a.features['avg throughput (%)']; }, text: function (a) { return fmt.percent(a.features['avg throughput (%)']); }, numeric: true, width: '110px' },
                { label: 'throughput std (%)', value: function (a) { return a.features['throughput std (%)']; }, text: function (a) { return fmt.percent(a.features['throughput std (%)']); }, numeric: true, width: '110px' }]
    }) : el('p', { className: 'muted' }, 'None: every worker communicates like the others.'));
  }

  /* CUDA Runtime ------------------------------------------------------------------------- */
  function renderCudaRuntime(node, params) {
    var s = section('CUDA Runtime'), key = matchKey(params);
    heading(node, 'CUDA Runtime', 'One entry per CUDA runtime API the workers call (cudaLaunchKernel, cudaMemcpyAsync, …): the CPU-side cost of driving the GPU.', [
      ['avg bottleneck ratio (in [0,1])', 'on average, the share of end-to-end time in this call that does not overlap computation: time the GPU waited for the CPU to launch work.'],
      ['avg execution time / monitoring duration (in [0,1])', 'the share of the profiled window spent in this call, overlap included.'],
      ['abnormal_workers', 'workers whose bottleneck ratio is above 0.01 (1%), the threshold for runtime calls, with their ratio.']
    ]);
    node.appendChild(table({
      rows: entries(s), sort: { column: 1, descending: true },
      highlight: key !== null ? function (e) { return e[0] === key; } : null,
      columns: [{ label: 'API', value: function (e) { return e[0]; } },
                { label: 'avg bottleneck ratio (in [0,1])', value: function (e) { return e[1]['avg bottleneck ratio (in [0,1])']; }, text: function (e) { return fmt.pct(e[1]['avg bottleneck ratio (in [0,1])']); }, numeric: true, width: '210px' },
                { label: 'avg execution time / monitoring duration (in [0,1])', value: function (e) { return e[1]['avg execution time / monitoring duration (in [0,1])']; }, text: function (e) { return fmt.pct(e[1]['avg execution time / monitoring duration (in [0,1])']); }, numeric: true, width: '300px' },
                { label: 'abnormal_workers', value: function (e) { return entries(e[1].abnormal_workers).length; }, numeric: true, width: '130px' }]
    }));
    node.appendChild(el('h2', null, 'abnormal_workers'));
    node.appendChild(abnormalWorkersTable(abnormalMapRows(s), 'API', key, 'bottleneck ratio'));
  }

  /* Python functions --------------------------------------------------------------------- */
  function renderPython(node, params) {
    var s = section('Python functions'), key = matchKey(params);
    heading(node, 'Python functions', 'Python functions that take more than 1% of end-to-end time on some worker, not counting time that overlaps GPU compute, communication or other operations. Each is keyed by its full call stack, frames joined with "|", outermost first; the table shows the innermost frame, hover for the whole stack, click for the workers.', [
      ['value', 'for every worker over 1%, the share of end-to-end time this stack takes on it.']
    ]);
    var rows = entries(s).map(function (e) {
      var byWorker = entries(e[1]), shares = byWorker.map(function (w) { return w[1]; }), top = null;
      byWorker.forEach(function (w) { if (!top || w[1] > top[1]) top = w; }); /* the first of the largest */
      return { stack: e[0], workers: e[1], count: shares.length, max: PD.maxOf(shares, 0), median: PD.median(shares), top: top ? top[0] : '' };
    });
    var detail = el('div', { id: 'python-detail' });
    var showStack = function (r) {
      t.highlight(function (x) { return x === r; });
      detail.replaceChildren(el('div', { className: 'panel' },
        el('h2', null, 'Call stack'),
        el('ol', { className: 'stackframes' }, PD.stackFrames(r.stack).map(function (frame) { return el('li', null, frame); })),
        el('h3', null, 'Workers over 1%'),
        table({ rows: entries(r.workers), sort: { column: 2, descending: true }, visibleRows: 10,
                rowClass: function (e) { return culpritNames.has(e[0]) ? 'culprit' : ''; },
                columns: [{ label: 'worker', value: function (e) { return e[0]; }, render: function (e) { return workerCell(e[0]); } },
                          { label: 'rank', value: function (e) { return rankText(e[0]); }, numeric: true, width: '70px' },
                          { label: 'share of end-to-end time', value: function (e) { return e[1]; }, text: function (e) { return fmt.pct(e[1]); }, numeric: true }] })));
    };
    var t = new PD.Table({
      rows: rows, sort: { column: 3, descending: true }, filter: 'Filter by any frame', visibleRows: 14,
      onRowClick: showStack,
      columns: [{ label: 'call stack (innermost frame)', value: function (r) { return r.stack; }, render: function (r) { return el('span', { className: 'mono', title: PD.stackFrames(r.stack).join('\n') }, PD.shortStack(r.stack)); } },
                { label: 'frames', value: function (r) { return PD.stackFrames(r.stack).length; }, numeric: true, width: '70px' },
                { label: 'workers over 1%', value: function (r) { return r.count; }, numeric: true, width: '120px' },
                { label: 'max share', value: function (r) { return r.max; }, text: function (r) { return fmt.pct(r.max); }, numeric: true, width: '100px' },
                { label: 'median share', value: function (r) { return r.median; }, text: function (r) { return fmt.pct(r.median); }, numeric: true, width: '110px' },
                { label: 'top worker', value: function (r) { return r.top; }, width: '190px' }]
    });
    node.appendChild(t.node);
    node.appendChild(detail);
    var wanted = key !== null ? rows.find(function (r) { return r.stack === key; }) : null;
    if (wanted) mounted.push({ mount: function () { showStack(wanted); } });
  }

  return { gpuCompute: renderGpuCompute, gpuMemory: renderGpuMemory, communication: renderCommunication,
           cudaRuntime: renderCudaRuntime, python: renderPython, communicationRows: communicationRows };
};
