"""summary.json's numbers from an Export (and optionally a run report): compute_summary()."""

from collections import OrderedDict, defaultdict

from .checks import capture_checks
from .cost import DEFAULT_MAX_SLOWDOWN, capture_cost
from .epochs import BoundaryIndex, boundary_ranges, epoch_boundary, launched_in_boundary, table_name
from .idle_gaps import host_stalls, idle_gaps
from .intervals import SpanIndex, group_stats, ms, union_length
from .kernels import is_layout_conversion, kernel_family_table, kernel_labels
from .phases import gpu_time_by_phase, input_pipeline_tids, step_phases
from .records import (
    BATCH_WAIT,
    DATA_LOAD,
    GPU_STAGE_RANGES,
    GRAPH_LAUNCH,
    GRAPH_REPLAY,
    H2D_SUBMIT,
    INPUT_PIPELINE_RANGES,
    LOADER_DOMAIN,
    STALL_DOMAIN,
    STEP,
    WINDOW,
    Window,
)
from .report import check_untraced, report_metrics


# summary.md calls the GPU starved by the input pipeline from this share of the capture window spent
# idle waiting on it (input_starved): a throughput loss the input's own settings can win back.
STARVED_IDLE_PCT = 5.0

# CUDA runtime calls that block the calling host thread until device work completes. nsys names them
# with a version suffix (cudaDeviceSynchronize_v3020), stripped before comparing.
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")


def find_window(ranges):
    """The capture window of default-domain ranges: the single `capture_window` range; the span of
    several; without one, the span of the torch_step ranges (capture_boundary then fails). Its
    boundary holds the epoch boundary's eval and checkpoint ranges in it
    (epochs.boundary_ranges())."""
    windows = [r for r in ranges if r.name == WINDOW]
    all_steps = sorted((r for r in ranges if r.name == STEP), key=lambda r: r.start)
    if len(windows) == 1:
        lo, hi, source = windows[0].start, windows[0].end, "nvtx capture_window"
    elif windows:
        lo, hi = min(w.start for w in windows), max(w.end for w in windows)
        source = "span of %d capture_window ranges" % len(windows)
    elif all_steps:
        lo, hi, source = (
            all_steps[0].start,
            max(r.end for r in all_steps),
            "span of torch_step ranges",
        )
    else:
        lo = hi = None
        source = None
    window = Window(lo, hi, source, windows, all_steps, [], [])
    for r in all_steps:
        (window.steps if window.holds(r) else window.outside).append(r)
    return window._replace(boundary=tuple(boundary_ranges(ranges, window)))


def compute_summary(
    ex, report=None, expected_steps=None, top_n=12, untraced=None, max_slowdown=DEFAULT_MAX_SLOWDOWN
):
    """Everything summary.json holds, from an Export (and optionally a run report, and the reports
    of untraced runs of the same command: untraced, [(path, report)]). Times in ms.

    Definitions:
      window           the single default-domain `capture_window` range; without one, the span of
                       the torch_step ranges (capture_boundary then false).
      steps            torch_step ranges lying wholly inside the window (only these: the epoch
                       boundary's eval and checkpoint ranges are no steps).
      h2d_copies       host-to-device memcpy records whose device start lies in [window start, end),
                       but those the main thread enqueued inside an eval or checkpoint range (the
                       evaluation's input: epoch_boundary's h2d_copies).
      synthetic        true when the run report's config says --synthetic (no per-step copies).
      decode           "gpu" when the run decoded on the GPU (the run report's config.decode, else
                       the GPU decode stage's ranges in the loader's domain: GPU_STAGE_RANGES), else
                       "cpu".
      h2d_copies_main_thread, h2d_copies_gpu_stage
                       of h2d_copies, those launched from the thread of the torch_step ranges and
                       from the thread of the GPU decode stage's ranges (null when no such thread).
      no_activity_pct  share of the window covered by no kernel, memcpy, memset or graph execution
                       recorded whole (graph_executions) (intervals clipped to the window, overlaps
                       counted once).
      idle_gaps        those uncovered intervals, by cause (host: the device had nothing queued;
                       device: the next operation was already queued), size and host range:
                       idle_gaps().
      input_starved    whether the input pipeline starved the GPU: idle_ms and idle_pct, the host
                       gaps of idle_gaps that began in an input pipeline range
                       (INPUT_PIPELINE_RANGES: the device had run out of work while the host waited
                       on the loader or submitted the copies), by_range, and starved: idle_pct >=
                       threshold_pct (STARVED_IDLE_PCT). Null without device data.
      gpu_time_by_phase_ms
                       device time (kernels, copies, memsets, graphs recorded whole, each clipped to
                       the window, summed) by the main thread's step-level phase (a default-domain
                       range directly inside a captured torch_step: data_load with its batch_wait,
                       h2d_submit and normalize, forward, zero_grad, backward, optimizer_step,
                       loss_item; graph_replay with --cuda-graph) in which the activity's runtime
                       call started, on any thread; then "(outside phases)", "(input pipeline)"
                       (launched by the loader's or GPU decode stage's threads) and
                       "(unattributed)": phases.gpu_time_by_phase().
      gpu_time_by_phase_per_step_ms
                       phase -> [ms per captured step] (null where the step has no such range).
      gpu_time_by_phase_main_thread_ms
                       phase -> the part launched from the main thread itself (what a projection of
                       the main thread's ranges onto the device, as nsys's nvtx_gpu_proj_sum, can
                       see).
      gpu_activities_by_phase, gpu_time_total_ms
                       activities per bucket; the sum of all buckets (>= device_busy_ms: streams
                       overlap).
      host_stalls      host-caused gaps >= 1 ms in the step's device work, each with its start and
                       length, the host's quiet interval, its usual length there, the stall (their
                       difference), the captured step and the phase (eval or checkpoint where one of
                       those ranges holds most of it): idle_gaps.host_stalls().
      epoch_boundary   only when the window holds an eval or checkpoint range (train_resnet50
                       --epochs with the capture across an epoch's end): each one's start, duration,
                       GPU busy %, eval's eval_step ranges and eval_reduce, against the median
                       torch_step, with the run report's host timing of them:
                       epochs.epoch_boundary(). Device work launched in them counts under
                       gpu_time_by_phase_ms's "eval" and "checkpoint", and host gaps begun in them
                       under idle_gaps' host_by_range "eval" and "checkpoint".
      batch_wait_ms, h2d_submit_ms, data_load_ms, step_ms
                       per step, the summed duration of those ranges nested in it (same thread);
                       null for a step without such a range.
      phase_totals_ms  per default-domain range name, the total duration of its ranges in the
                       window; a training name nested in an eval (checkpoint) range counts as
                       eval/NAME (checkpoint/NAME; eval/forward, eval/batch_wait:
                       epochs.table_name()), not under the training phase's.
      sync_calls_in_steps
                       SYNC_CALLS calls starting inside a torch_step's time span, on any thread,
                       except calls enclosed by a range of the loader's domain (LOADER_DOMAIN) on
                       their thread: the data_pipeline fences block only the loader; and calls
                       inside an `inject_stall` range (STALL_DOMAIN), the drain a known-answer stall
                       makes on purpose. Ranges of other named domains (the ddp ranges on the main
                       thread, NCCL's) excuse nothing.
      cuda_graph       true when the run replayed a CUDA graph each step (the run report's
                       config.cuda_graph, else a cudaGraphLaunch inside a graph_replay range of a
                       step).
      graph_launches_per_step
                       per captured step, the cudaGraphLaunch calls inside its graph_replay range on
                       its thread (null without a runtime table).
      graph_kernels    kernels of the window launched by a cudaGraphLaunch: the graphs' nodes, which
                       nsys records one by one only with --cuda-graph-trace=node.
      graph_executions graph executions of the window (device start inside it) that nsys recorded
                       whole, without their nodes (CUPTI_ACTIVITY_KIND_GRAPH_TRACE: a capture
                       without --cuda-graph-trace=node); each counts as device activity from its
                       first node's start to its last node's end. Null without device data.
      kernels_outside_graphs_in_steps
                       kernels launched inside a torch_step's time span by another call than
                       cudaGraphLaunch, from any thread but the input pipeline's (eager work beside
                       the graph).
      layout_conversion_kernels
                       kernels matching is_layout_conversion() launched (runtime call start; the
                       kernel's own start when uncorrelated) inside a torch_step's time span.
      capture_cost     what the capture itself cost: traced vs untraced throughput, host time per
                       phase, runtime calls per thread and step, the profiler's own overhead, how
                       much of the idle time the tracer explains (cost.capture_cost()); its check
                       capture_cost only when untraced reports are given, failing when
                       traced / untraced images/s < 1 - max_slowdown.
      checks, check_details
                       checks.capture_checks().
    """
    s = OrderedDict()
    s["export"] = ex.path
    s["nsys_version"] = ex.nsys_version
    s["device_data"] = ex.device_data
    window = find_window(ex.ranges)
    s["capture_window_source"] = window.source
    s["capture_window_count"] = len(window.ranges)
    s["capture_window_ms"] = ms(window.hi - window.lo) if window.lo is not None else None
    s["steps"] = len(window.steps)
    s["torch_step_ranges"] = len(window.all_steps)
    s["steps_outside_window"] = len(window.outside)
    s["unterminated_ranges"] = ex.unterminated
    _add_step_timing(s, ex, window.steps)
    _add_phases(s, ex, window)
    step_index = SpanIndex(window.steps)
    _add_device_activity(s, ex, window, step_index)
    _add_input_starvation(s)
    _add_gpu_phases(s, ex, window)
    eb = epoch_boundary(ex, window, report)
    if eb is not None:
        s["epoch_boundary"] = eb
    _add_decode_mode(s, ex, window, report)
    _add_graph_mode(s, ex, window, step_index, report)
    _add_sync_calls(s, ex, step_index)
    _add_tables(s, ex, top_n)
    _add_expected_steps(s, report_metrics(report), expected_steps)
    check_untraced(report, list(untraced or ()))
    s["capture_cost"] = capture_cost(ex, s, window, report, list(untraced or ()), max_slowdown)
    checks, details = capture_checks(s, window, ex.device_data, report)
    s["checks"] = checks
    s["check_details"] = details
    s["all_checks_pass"] = all(v is True for v in checks.values())
    return s


def _add_step_timing(s, ex, steps):
    """Per-step host timing from the default-domain ranges nested in each step."""
    by_name = defaultdict(list)
    for r in ex.ranges:
        by_name[r.name].append(r)

    def nested_ns(name):
        out = []
        for st in steps:
            inner = [r.duration for r in by_name.get(name, ()) if st.contains(r)]
            out.append(sum(inner) if inner else None)
        return out

    def total(values):
        present = [v for v in values if v is not None]
        return ms(sum(present)) if present else None

    waits_ns, subs_ns = nested_ns(BATCH_WAIT), nested_ns(H2D_SUBMIT)
    s["step_ms"] = [ms(st.duration) for st in steps]
    s["data_load_ms"] = [ms(v) for v in nested_ns(DATA_LOAD)]
    s["batch_wait_ms"] = [ms(v) for v in waits_ns]
    s["h2d_submit_ms"] = [ms(v) for v in subs_ns]
    s["batch_wait_total_ms"] = total(waits_ns)
    longest = (
        max((v, -i) for i, v in enumerate(waits_ns) if v is not None)
        if total(waits_ns) is not None
        else None
    )
    s["batch_wait_max_ms"] = ms(longest[0]) if longest else None
    s["batch_wait_max_step"] = -longest[1] if longest else None
    s["h2d_submit_total_ms"] = total(subs_ns)


def _add_phases(s, ex, window):
    """Totals per default-domain range name inside the window (a training name nested in the epoch
    boundary's eval as eval/NAME, in checkpoint as checkpoint/NAME), and per range of the other
    domains.
    """
    index = BoundaryIndex(window.boundary)
    phases = group_stats((table_name(r, index), r.duration) for r in ex.ranges if window.holds(r))
    s["phase_totals_ms"] = OrderedDict((k, ms(v.total_ns)) for k, v in phases.items())
    s["phase_counts"] = OrderedDict((k, v.count) for k, v in phases.items())
    s["phases"] = [
        OrderedDict(
            name=k,
            count=v.count,
            total_ms=ms(v.total_ns),
            avg_ms=ms(v.total_ns / v.count),
            min_ms=ms(v.min_ns),
            max_ms=ms(v.max_ns),
        )
        for k, v in phases.items()
    ]
    other = group_stats(((r.domain, r.name), r.duration) for r in ex.other_ranges)
    s["other_domain_ranges"] = [
        OrderedDict(domain=domain, name=name, count=v.count, total_ms=ms(v.total_ns))
        for (domain, name), v in other.items()
    ]


def _add_device_activity(s, ex, window, step_index):
    """Device busy time and idle gaps in the window, copies, launches, the drain, layout
    conversions."""
    if not ex.device_data:
        for key in (
            "device_busy_ms",
            "no_activity_pct",
            "idle_gaps",
            "h2d_copies",
            "kernel_launches",
            "last_device_end_after_last_step_ms",
            "layout_conversion_kernels",
        ):
            s[key] = None
        s["layout_conversion_names"] = {}
        return
    lo, hi, steps = window.lo, window.hi, window.steps
    device = ex.device_intervals()
    if lo is not None and hi > lo:
        busy = union_length(device, lo, hi)
        s["device_busy_ms"] = ms(busy)
        s["no_activity_pct"] = round(100.0 * (hi - lo - busy) / (hi - lo), 6)
        s["idle_gaps"] = idle_gaps(ex, lo, hi, ex.ranges, boundary=window.boundary)
    else:
        s["device_busy_ms"] = s["no_activity_pct"] = s["idle_gaps"] = None
    s["h2d_copies"] = len(_window_htod(ex, window))
    s["kernel_launches"] = len(ex.kernels)
    last_dev = max((e for _, e in device), default=None)
    s["last_device_end_after_last_step_ms"] = (
        ms(last_dev - steps[-1].end) if steps and last_dev is not None else None
    )
    layout_names: OrderedDict[str, int] = OrderedDict()
    layout_in_steps = 0
    for k in ex.kernels:
        if is_layout_conversion(k.name):
            layout_names[k.name] = layout_names.get(k.name, 0) + 1
            if step_index.index_of(k.launch_ns if k.launch_ns is not None else k.start) is not None:
                layout_in_steps += 1
    s["layout_conversion_kernels"] = layout_in_steps
    s["layout_conversion_names"] = layout_names


def _add_input_starvation(s):
    """input_starved, from idle_gaps' host gaps by the range they began in."""
    gaps, window_ms = s["idle_gaps"], s["capture_window_ms"]
    if gaps is None or not window_ms:
        s["input_starved"] = None
        return
    by_range = OrderedDict(
        (k, d["total_ms"]) for k, d in gaps["host_by_range"].items() if k in INPUT_PIPELINE_RANGES
    )
    idle_ms = float(sum(by_range.values()))
    idle_pct = 100.0 * idle_ms / window_ms
    s["input_starved"] = OrderedDict(
        starved=idle_pct >= STARVED_IDLE_PCT,
        idle_ms=round(idle_ms, 6),
        idle_pct=round(idle_pct, 6),
        threshold_pct=STARVED_IDLE_PCT,
        by_range=by_range,
    )


def _add_gpu_phases(s, ex, window):
    """Device time per step-level phase of the main thread (gpu_time_by_phase_*), and the host
    stalls."""
    keys = (
        "gpu_time_by_phase_ms",
        "gpu_time_by_phase_per_step_ms",
        "gpu_time_by_phase_main_thread_ms",
        "gpu_activities_by_phase",
        "gpu_time_total_ms",
        "host_stalls",
    )
    lo, hi = window.lo, window.hi
    if not ex.device_data or lo is None or hi <= lo:
        for key in keys:
            s[key] = None
        return
    phases = step_phases(ex.ranges, window.steps)
    main_tids = {r.tid for r in window.steps}
    pipeline = input_pipeline_tids(ex, main_tids)
    g = gpu_time_by_phase(ex, lo, hi, phases, window.steps, main_tids, pipeline, window.boundary)
    s["gpu_time_by_phase_ms"] = g["by_phase_ms"]
    s["gpu_time_by_phase_per_step_ms"] = g["per_step_ms"]
    s["gpu_time_by_phase_main_thread_ms"] = g["main_thread_ms"]
    s["gpu_activities_by_phase"] = g["counts"]
    s["gpu_time_total_ms"] = g["total_ms"]
    s["host_stalls"] = host_stalls(
        ex,
        lo,
        hi,
        ex.ranges,
        phases,
        window.steps,
        main_tids | g["launch_tids"],
        pipeline,
        boundary=window.boundary,
    )


# LOADER_DOMAIN (records.py): the C++ loader's ranges sit on worker threads, where a wait on the
# device (the slot's reuse fence) delays only the loader. GPU_STAGE_RANGES: the GPU decode stage's.


def _add_decode_mode(s, ex, window, report):
    """Where the run decoded, and whose thread launched the window's host-to-device copies."""
    config = (report or {}).get("config") if isinstance(report, dict) else None
    stage = [r for r in ex.other_ranges if r.domain == LOADER_DOMAIN and r.name in GPU_STAGE_RANGES]
    # train_resnet50 --synthetic: batches made once on the device, nothing copied per step.
    s["synthetic"] = bool(isinstance(config, dict) and config.get("synthetic") is True)
    if isinstance(config, dict) and config.get("decode") in ("cpu", "gpu"):
        s["decode"] = config["decode"]
    else:
        s["decode"] = "gpu" if stage else "cpu"
    main_tids = {r.tid for r in window.steps if r.tid is not None}
    stage_tids = {r.tid for r in stage if r.tid is not None}
    if not ex.device_data:
        s["h2d_copies_main_thread"] = s["h2d_copies_gpu_stage"] = None
        return
    copies = _window_htod(ex, window)
    s["h2d_copies_main_thread"] = (
        sum(1 for c in copies if c.launch_tid in main_tids) if main_tids else None
    )
    s["h2d_copies_gpu_stage"] = (
        sum(1 for c in copies if c.launch_tid in stage_tids) if stage_tids else None
    )


def _window_htod(ex, window):
    """The host-to-device copies of the window (device start inside it), but those the main thread
    enqueued inside an epoch-boundary range (epochs.launched_in_boundary()): the training steps'
    copies.
    """
    lo, hi = window.lo, window.hi
    index = BoundaryIndex(window.boundary)
    main_tids = {r.tid for r in window.steps}
    return [
        c
        for c in ex.memcpys
        if c.is_htod
        and (lo is None or lo <= c.start < hi)
        and not launched_in_boundary(c, index, main_tids)
    ]


def _add_graph_mode(s, ex, window, step_index, report):
    """--cuda-graph: whether the run replayed a graph, and how the steps' device work was
    launched."""
    config = (report or {}).get("config") if isinstance(report, dict) else None
    main_tids = {r.tid for r in window.steps}
    by_tid = defaultdict(list)  # thread -> its graph_replay ranges, which do not overlap
    for r in ex.ranges:
        if r.name == GRAPH_REPLAY and r.tid in main_tids:
            by_tid[r.tid].append(r)
    replays = {tid: SpanIndex(rs) for tid, rs in by_tid.items()}
    per_step = None
    if ex.api_calls is not None:
        per_step = [0] * len(window.steps)
        for call in ex.api_calls:
            if call.name != GRAPH_LAUNCH or call.tid not in replays:
                continue
            i = step_index.index_of(call.start)
            if i is not None and replays[call.tid].find(call.start) is not None:
                per_step[i] += 1
    if isinstance(config, dict) and isinstance(config.get("cuda_graph"), bool):
        s["cuda_graph"] = config["cuda_graph"]
    else:
        s["cuda_graph"] = bool(per_step and any(per_step))
    s["graph_launches_per_step"] = per_step
    lo, hi = window.lo, window.hi
    s["graph_executions"] = (
        sum(1 for g in ex.graphs if lo is None or lo <= g.start < hi) if ex.device_data else None
    )
    if not ex.device_data or ex.api_calls is None:
        s["graph_kernels"] = s["kernels_outside_graphs_in_steps"] = None
        return
    s["graph_kernels"] = sum(
        1 for k in ex.kernels if k.launch_api == GRAPH_LAUNCH and (lo is None or lo <= k.start < hi)
    )
    pipeline = input_pipeline_tids(ex, main_tids)
    s["kernels_outside_graphs_in_steps"] = sum(
        1
        for k in ex.kernels
        if k.launch_ns is not None
        and k.launch_api != GRAPH_LAUNCH
        and k.launch_tid not in pipeline
        and step_index.index_of(k.launch_ns) is not None
    )


def _add_sync_calls(s, ex, step_index):
    """SYNC_CALLS inside steps, except those inside a loader-domain range on their thread, or inside
    an injected stall's range (STALL_DOMAIN: the drain before the sleep, on purpose)."""
    if ex.api_calls is None:
        s["sync_calls_in_steps"] = None
        s["sync_calls_in_steps_by_name"] = {}
        s["sync_calls_in_loader_ranges"] = None
        return
    fences = defaultdict(list)
    for r in ex.other_ranges:
        if r.domain in (LOADER_DOMAIN, STALL_DOMAIN):
            fences[r.tid].append((r.start, r.end))
    counted: OrderedDict[str, int] = OrderedDict()
    excused = 0
    for call in ex.api_calls:
        if call.name not in SYNC_CALLS or step_index.index_of(call.start) is None:
            continue
        if any(a <= call.start and call.end <= b for a, b in fences.get(call.tid, ())):
            excused += 1
            continue
        counted[call.name] = counted.get(call.name, 0) + 1
    s["sync_calls_in_steps"] = sum(counted.values())
    s["sync_calls_in_steps_by_name"] = counted
    s["sync_calls_in_loader_ranges"] = excused


def _add_tables(s, ex, top_n):
    """The largest kernel groups, memory operations and runtime calls of the whole export, like nsys
    stats."""
    if ex.device_data:
        kern = group_stats((k.name, k.end - k.start) for k in ex.kernels)
        total_kernel = sum(v.total_ns for v in kern.values()) or 1
        labels = kernel_labels(list(kern)[:top_n])
        s["top_kernels"] = [
            OrderedDict(
                rank=i + 1,
                label=labels[i],
                name=k,
                launches=v.count,
                total_ms=ms(v.total_ns),
                avg_us=round(v.total_ns / v.count / 1e3, 3),
                pct=round(100.0 * v.total_ns / total_kernel, 2),
            )
            for i, (k, v) in enumerate(list(kern.items())[:top_n])
        ]
        mem = group_stats(
            [(op.operation, op.end - op.start, op.nbytes) for op in ex.memcpys + ex.memsets]
        )
        s["kernel_families"] = kernel_family_table(
            ((k.name, k.end - k.start) for k in ex.kernels), steps=s.get("steps") or None
        )
        s["memory_operations"] = [
            OrderedDict(
                operation=k,
                count=v.count,
                total_ms=ms(v.total_ns),
                avg_us=round(v.total_ns / v.count / 1e3, 3),
                max_us=round(v.max_ns / 1e3, 3),
                bytes=v.nbytes,
            )
            for k, v in mem.items()
        ]
    else:
        s["top_kernels"] = s["memory_operations"] = s["kernel_families"] = None
    if ex.api_calls is not None:
        api = group_stats((a.name, a.end - a.start) for a in ex.api_calls)
        s["api_calls"] = [
            OrderedDict(
                name=k,
                calls=v.count,
                total_ms=ms(v.total_ns),
                avg_us=round(v.total_ns / v.count / 1e3, 3),
                max_ms=ms(v.max_ns),
            )
            for k, v in api.items()
        ]
    else:
        s["api_calls"] = None


def _add_expected_steps(s, metrics, expected_steps):
    """The run report's numbers, and the step count the capture must hold and where it came from."""
    if metrics is not None:
        s["images_per_s"] = metrics["images_per_s"]
        s["report"] = metrics
    if expected_steps is not None:
        exp, exp_src = int(expected_steps), "--expected-steps"
    elif metrics is not None and metrics["steps"] is not None:
        exp = int(metrics["steps"])
        exp_src = (
            "run report capture.steps"
            if metrics["format"] == "train_resnet50"
            else "run report steps"
        )
    else:
        exp, exp_src = None, "none given: passes when steps >= 1"
    s["expected_steps"] = exp
    s["expected_steps_source"] = exp_src
