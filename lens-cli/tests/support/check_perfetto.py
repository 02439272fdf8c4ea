"""Decodes a `lens perfetto` trace with the perfetto package's own schema
and checks it against expectations given on the command line.

usage: check_perfetto.py TRACE EXPECTED_SPANS EXPECTED_RANKS
Prints a JSON summary; exits non-zero with a message on any mismatch.
"""
import json
import sys

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:  # the Rust test turns this into a clear failure
    print(f"MISSING_PERFETTO: {e}", file=sys.stderr)
    sys.exit(3)

path, want_spans, want_ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
trace = pb.Trace()
with open(path, "rb") as f:
    trace.ParseFromString(f.read())

procs, threads, counters = {}, {}, set()
names, keys = {}, {}
begins = ends = annotated = counter_events = 0
flow_src, flow_dst = set(), set()
seq_ids = set()
first = trace.packet[0]
assert first.first_packet_on_sequence, "first packet must set first_packet_on_sequence"
assert first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED, "first packet must clear incremental state"
open_begin = None  # (track, ts) of the BEGIN just written: its END follows it
intervals = {}
for p in trace.packet:
    seq_ids.add(p.trusted_packet_sequence_id)
    if p.HasField("interned_data"):
        for n in p.interned_data.event_names:
            names[n.iid] = n.name
        for n in p.interned_data.debug_annotation_names:
            keys[n.iid] = n.name
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        if d.HasField("process"):
            procs[d.uuid] = d.process.process_name
        elif d.HasField("thread"):
            threads[d.uuid] = d.thread.pid
        elif d.HasField("counter"):
            counters.add(d.uuid)
    if p.HasField("track_event"):
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            open_begin = (e.track_uuid, p.timestamp)
            begins += 1
            assert e.track_uuid in threads, "slice on an undeclared track"
            assert e.name_iid in names or e.name, "slice without a name"
            if e.name_iid:
                assert p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
            ann = [keys.get(a.name_iid, a.name) for a in e.debug_annotations]
            if any(k for k in ann if k != "span_id"):
                annotated += 1
            flow_dst.update(e.terminating_flow_ids)
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            assert e.track_uuid in threads, "flow source on an undeclared track"
            flow_src.update(e.flow_ids)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_begin and open_begin[0] == e.track_uuid, "END without its BEGIN"
            intervals.setdefault(e.track_uuid, []).append((open_begin[1], p.timestamp))
            open_begin = None
            ends += 1
        elif e.type == pb.TrackEvent.TYPE_COUNTER:
            assert e.track_uuid in counters
            counter_events += 1

# every two slices of a track are disjoint or nested
bad_nesting = 0
for ivs in intervals.values():
    ivs.sort(key=lambda x: (x[0], -x[1]))
    stack = []
    for s0, e0 in ivs:
        while stack and stack[-1] <= s0:
            stack.pop()
        if stack and e0 > stack[-1]:
            bad_nesting += 1
        stack.append(e0)
flows = len(flow_src & flow_dst)
dangling = len(flow_dst - flow_src)
summary = {
    "processes": sorted(procs.values()),
    "threads": len(threads),
    "slices": begins,
    "ends": ends,
    "annotated": annotated,
    "bad_nesting": bad_nesting,
    "flows": flows,
    "dangling_flows": dangling,
    "counters": len(counters),
    "counter_events": counter_events,
    "sequences": sorted(seq_ids),
}
print(json.dumps(summary))
problems = []
if begins != want_spans or ends != want_spans:
    problems.append(f"slices {begins}/{ends} != spans {want_spans}")
if len(procs) != want_ranks:
    problems.append(f"{len(procs)} process tracks != {want_ranks} ranks")
if not all(n.startswith("rank ") and " @ " in n for n in procs.values()):
    problems.append(f"process names not 'rank N @ host': {sorted(procs.values())}")
if annotated == 0:
    problems.append("no debug annotations")
if want_ranks > 1 and flows == 0:
    problems.append("no flows")
if bad_nesting:
    problems.append(f"{bad_nesting} slices overlap a sibling on their track")
if dangling:
    problems.append(f"{dangling} flows end without a start")
if problems:
    print("; ".join(problems), file=sys.stderr)
    sys.exit(1)
