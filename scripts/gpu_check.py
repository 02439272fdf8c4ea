#!/usr/bin/env python3
"""The checks of scripts/gpu-check.sh that need no Rust: NVML and CUDA
through ctypes, nvidia-smi sampling, and the comparisons.

  gpu_check.py selftest                     the comparison logic on made-up data (no GPU)
  gpu_check.py nvml-energy                  {uuid: mJ} of every GPU, from libnvidia-ml
  gpu_check.py cuda-devices                 the UUIDs CUDA enumerates (libcuda), as JSON
  gpu_check.py smi-sample OUT SECONDS       nvidia-smi samples with timestamps, JSON lines
  gpu_check.py compare-metrics EXPORT SMI BEFORE AFTER
                                            every exported hw.* point against nvidia-smi;
                                            hw.energy against NVML reads before and after
  gpu_check.py compare-devices LENS_BIN     about 20 CUDA_VISIBLE_DEVICES settings: what
                                            CUDA enumerates against lens's host.gpu.count
                                            and hw.id set (LENS_BIN: the gpu_check test binary)

Exit status 0: every check passed; 1: a check failed; 2: could not run.
"""

import ctypes
import json
import os
import subprocess
import sys
import time

SMI_FIELDS = [
    "uuid",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
]
MIB = 1 << 20


def fail(msg, code=2):
    print(f"gpu-check: {msg}", file=sys.stderr)
    sys.exit(code)


# ------------------------------------------------------------- NVML, CUDA


def nvml_energy():
    """{uuid: total energy in mJ} from libnvidia-ml, None where unsupported."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        fail(f"libnvidia-ml.so.1 does not load ({e})")
    if nvml.nvmlInit_v2() != 0:
        fail("nvmlInit failed")
    count = ctypes.c_uint()
    nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
    out = {}
    for i in range(count.value):
        h = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0:
            continue
        buf = ctypes.create_string_buffer(96)
        if nvml.nvmlDeviceGetUUID(h, buf, 96) != 0:
            continue
        e = ctypes.c_ulonglong()
        rc = nvml.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(e))
        out[buf.value.decode()] = e.value if rc == 0 else None
    nvml.nvmlShutdown()
    return out


def format_uuid(raw16):
    """16 bytes of a CUuuid as nvidia-smi prints a GPU UUID."""
    h = bytes(raw16).hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


CUDA_ERROR_NO_DEVICE = 100


def cuda_devices():
    """The UUIDs CUDA enumerates under this process's environment."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        fail(f"libcuda.so.1 does not load ({e})")
    rc = cuda.cuInit(0)
    if rc == CUDA_ERROR_NO_DEVICE:
        return []
    if rc != 0:
        fail(f"cuInit failed with CUresult {rc}")
    n = ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
        fail("cuDeviceGetCount failed")
    get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
    out = []
    for i in range(n.value):
        d = ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(d), i)
        u = (ctypes.c_ubyte * 16)()
        get_uuid(u, d)
        out.append(format_uuid(u))
    return out


# -------------------------------------------------------------- nvidia-smi


def parse_smi(text, t):
    """nvidia-smi CSV (noheader, nounits) rows as {uuid: {field: float}}."""
    rows = {}
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS):
            continue
        row = {"t": t}
        for k, v in zip(SMI_FIELDS[1:], cells[1:]):
            try:
                row[k] = float(v)
            except ValueError:
                row[k] = None  # [N/A], [Not Supported]
        rows[cells[0]] = row
    return rows


def smi_sample(out, seconds):
    end = time.time() + seconds
    with open(out, "w") as f:
        while time.time() < end:
            t0 = time.time()
            r = subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            )
            t1 = time.time()
            if r.returncode == 0:
                for uuid, row in parse_smi(r.stdout, (t0 + t1) / 2).items():
                    f.write(json.dumps({"uuid": uuid, **row}) + "\n")
                f.flush()
            time.sleep(max(0.0, 0.25 - (t1 - t0)))


# --------------------------------------------------------- OTLP JSON lines


def otlp_points(text):
    """Every hw.* point: dicts of name, kind, uuid, value, t, start."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            v = json.loads(line)
        except ValueError:
            continue
        for rm in v.get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    name = m.get("name", "")
                    if not name.startswith("hw."):
                        continue
                    for kind in ("gauge", "sum"):
                        for p in m.get(kind, {}).get("dataPoints", []):
                            attrs = {
                                a["key"]: next(iter(a["value"].values()), None)
                                for a in p.get("attributes", [])
                            }
                            value = p.get("asDouble", p.get("asInt"))
                            out.append(
                                {
                                    "name": name,
                                    "kind": kind,
                                    "uuid": attrs.get("hw.id"),
                                    "value": float(value),
                                    "t": int(p.get("timeUnixNano", 0)) / 1e9,
                                    "start": int(p.get("startTimeUnixNano", 0)),
                                }
                            )
    return out


# The sampling thread reads every device each second; a point is compared
# with the nvidia-smi samples from 2.5 s before its export to 0.5 s after.
WINDOW = (2.5, 0.5)


def smi_value(name, row):
    """The nvidia-smi counterpart of metric `name` in lens's unit, or None."""
    def f(k):
        return row.get(k)

    if name == "hw.gpu.utilization":
        return None if f("utilization.gpu") is None else f("utilization.gpu") / 100
    if name == "hw.gpu.memory.usage":
        return None if f("memory.used") is None else f("memory.used") * MIB
    if name == "hw.gpu.memory.limit":
        return None if f("memory.total") is None else f("memory.total") * MIB
    if name == "hw.gpu.memory.utilization":
        if f("memory.used") is None or not f("memory.total"):
            return None
        return f("memory.used") / f("memory.total")
    if name == "hw.power":
        return f("power.draw")
    if name == "hw.temperature":
        return f("temperature.gpu")
    return None


def tolerance(name, ref):
    """How far lens may be from nvidia-smi (sampled at other instants;
    memory: NVML's v1 `used` counts reserved memory nvidia-smi leaves out)."""
    return {
        "hw.gpu.utilization": 0.15,
        "hw.gpu.memory.usage": max(1024 * MIB, 0.02 * abs(ref)),
        "hw.gpu.memory.limit": max(64 * MIB, 0.01 * abs(ref)),
        "hw.gpu.memory.utilization": 0.02,
        "hw.power": max(25.0, 0.15 * abs(ref)),
        "hw.temperature": 3.0,
    }[name]


def compare_metrics(points, smi, before, after):
    """Lines of the report and the number of failed checks."""
    lines, failed = [], 0
    uuids = sorted({p["uuid"] for p in points if p["uuid"]})
    if not uuids:
        return ["FAIL no hw.* point was exported"], 1
    for p in points:
        if p["name"] == "hw.energy":
            continue
        near = [
            smi_value(p["name"], s)
            for s in smi
            if s["uuid"] == p["uuid"] and p["t"] - WINDOW[0] <= s["t"] <= p["t"] + WINDOW[1]
        ]
        near = [v for v in near if v is not None]
        if not near:
            lines.append(f"SKIP {p['name']} {p['uuid']}: no nvidia-smi value near t={p['t']:.1f}")
            continue
        lo, hi = min(near), max(near)
        tol = tolerance(p["name"], hi)
        ok = lo - tol <= p["value"] <= hi + tol
        failed += not ok
        lines.append(
            f"{'ok  ' if ok else 'FAIL'} {p['name']} {p['uuid']}: lens {p['value']:g}, "
            f"nvidia-smi {lo:g}..{hi:g} (tolerance {tol:g})"
        )
    for uuid in uuids:
        energy = [p for p in points if p["name"] == "hw.energy" and p["uuid"] == uuid]
        b, a = before.get(uuid), after.get(uuid)
        if not energy:
            lines.append(f"note hw.energy {uuid}: not reported (NVML before: {b})")
            if b is not None:
                failed += 1
                lines[-1] = "FAIL" + lines[-1][4:] + ", but NVML reads it"
            continue
        cumulative = len({p["start"] for p in energy}) == 1
        lens_j = energy[-1]["value"] if cumulative else sum(p["value"] for p in energy)
        if b is None or a is None:
            lines.append(f"FAIL hw.energy {uuid}: lens {lens_j:g} J, NVML before/after unreadable")
            failed += 1
            continue
        spent = (a - b) / 1000
        # lens counts from its registration to its last sample: part of
        # what NVML saw between before and after, never more, and never
        # the GPU's lifetime energy (b / 1000 J)
        ok = 0 <= lens_j <= spent + 1 and (spent < 5 or lens_j >= 0.1 * spent)
        failed += not ok
        lines.append(
            f"{'ok  ' if ok else 'FAIL'} hw.energy {uuid}: lens {lens_j:g} J "
            f"({'cumulative' if cumulative else 'delta'}), NVML {spent:g} J between before and after "
            f"(lifetime {b / 1000:g} J)"
        )
    return lines, failed


# ------------------------------------------------- CUDA_VISIBLE_DEVICES


def settings(uuids):
    """About 20 CUDA_VISIBLE_DEVICES values (None: unset) for these GPUs."""
    n = len(uuids)
    u0 = uuids[0]
    hex0 = u0[4:12]
    s = [
        None, "", "0", str(n), "7", "-1", "0,0", "xyz", f"0,{n + 5}", "GPU-",
        u0, u0[:12], hex0, "GPU-" + hex0.upper(), "gpu-" + hex0, f"{u0},0", f"0,{u0}",
        f"{u0},{u0}", "MIG-" + hex0, "NoDevFiles", " 0", "+0", "00", "0,",
    ]
    if n >= 2:
        s += ["1,0", "0,1,0", f"0,{n + 5},1", f"{uuids[1]},{u0[:12]}", "1"]
    out = []
    for v in s:
        if v not in out:
            out.append(v)
    return out


def env_with(cvd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEMO_LENS_", "OTEL_"))}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env


def judge(cvd, cuda, lens, mig=False):
    """One setting's verdict: (ok, line). `lens`: the LENS-GPUS object.
    `mig`: a GPU is in MIG mode, where CUDA names MIG instances and lens
    their parent GPUs, so only the counts can be compared."""
    want = len(cuda)
    got = lens.get("count")
    ids = sorted(lens.get("metric_ids") or [])
    same_ids = ids == sorted(cuda) and (lens.get("visible") or []) == cuda
    ok = got == want and len(ids) == want and (mig or same_ids)
    shown = "unset" if cvd is None else repr(cvd)
    return ok, (
        f"{'ok  ' if ok else 'FAIL'} CUDA_VISIBLE_DEVICES={shown}: CUDA {want} {cuda}, "
        f"lens host.gpu.count={got} hw.id={ids} visible={lens.get('visible')}"
    )


def compare_devices(lens_bin):
    me = os.path.abspath(__file__)
    base = json.loads(
        subprocess.run([sys.executable, me, "cuda-devices"], env=env_with(None), capture_output=True, text=True, check=True).stdout
    )
    if not base:
        fail("CUDA enumerates no GPU with CUDA_VISIBLE_DEVICES unset")
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    mig = "MIG " in listing
    if mig:
        print("note: a GPU is in MIG mode: CUDA lists MIG instances, lens their parent GPUs; counts compared")
    failed = 0
    for cvd in settings(base):
        env = env_with(cvd)
        r = subprocess.run([sys.executable, me, "cuda-devices"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL CUDA_VISIBLE_DEVICES={cvd!r}: CUDA enumeration failed: {r.stderr.strip()}")
            failed += 1
            continue
        cuda = json.loads(r.stdout)
        env["OTEL_METRIC_EXPORT_INTERVAL"] = "300"
        r = subprocess.run(
            [lens_bin, "gpu_visible_devices", "--exact", "--ignored", "--nocapture", "--test-threads=1"],
            env=env, capture_output=True, text=True,
        )
        line = next((l.split("LENS-GPUS ", 1)[1] for l in r.stdout.splitlines() if "LENS-GPUS " in l), None)
        if line is None:
            print(f"FAIL CUDA_VISIBLE_DEVICES={cvd!r}: lens printed no LENS-GPUS line\n{r.stdout}{r.stderr}")
            failed += 1
            continue
        ok, text = judge(cvd, cuda, json.loads(line), mig)
        failed += not ok
        print(text)
    return failed


# --------------------------------------------------------------- selftest


def selftest():
    """The comparisons on made-up data: each must pass or fail as stated."""
    u = [format_uuid(bytes(range(16))), format_uuid(bytes(range(16, 32)))]
    assert u[0] == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", u[0]
    smi = parse_smi(f"{u[0]}, 3, 1000, 81559, 120.5, 40\n{u[1]}, [N/A], 10, 81559, 90, 35\n", 100.0)
    assert smi[u[0]]["memory.used"] == 1000 and smi[u[1]]["utilization.gpu"] is None
    samples = [{"uuid": k, **v} for k, v in smi.items()]

    def export(power, energy, memory=1000 * MIB):
        pts = [
            ("hw.power", "gauge", power),
            ("hw.gpu.utilization", "gauge", 0.03),
            ("hw.gpu.memory.usage", "sum", memory),
            ("hw.temperature", "gauge", 41),
            ("hw.energy", "sum", energy),
        ]
        line = {"resourceMetrics": [{"scopeMetrics": [{"metrics": [
            {"name": n, k: {"dataPoints": [{
                "attributes": [{"key": "hw.id", "value": {"stringValue": u[0]}}],
                "asDouble": v, "timeUnixNano": str(int(101e9)), "startTimeUnixNano": "5",
            }]}} for n, k, v in pts
        ]}]}]}
        return json.dumps(line) + "\n"

    before, after = {u[0]: 9_000_000_000}, {u[0]: 9_000_500_000}  # 500 J spent
    lines, failed = compare_metrics(otlp_points(export(121.0, 420.0)), samples, before, after)
    assert failed == 0, lines
    for bad in (export(400.0, 420.0), export(121.0, 9_000_000.0), export(121.0, 420.0, 50 << 30)):
        _, failed = compare_metrics(otlp_points(bad), samples, before, after)
        assert failed == 1, bad
    assert compare_metrics([], samples, before, after)[1] == 1

    s = settings(u)
    assert None in s and "" in s and "0,0" in s and len(s) >= 20 and len(s) == len(set(s)), s
    assert judge("0", [u[0]], {"count": 1, "metric_ids": [u[0]], "visible": [u[0]]})[0]
    assert not judge("0,0", [], {"count": 2, "metric_ids": [u[0]], "visible": [u[0]]})[0]
    assert not judge("", [], {"count": None, "metric_ids": [], "visible": []})[0]
    mig0 = "MIG-5a6b7c8d-0000-1111-2222-333344445555"
    assert judge(None, [mig0], {"count": 1, "metric_ids": [u[0]], "visible": [u[0]]}, mig=True)[0]
    assert not judge(None, [mig0], {"count": 1, "metric_ids": [u[0]], "visible": [u[0]]})[0]
    assert not judge(None, [mig0], {"count": 2, "metric_ids": [u[0]], "visible": [u[0]]}, mig=True)[0]
    print("gpu_check.py selftest: ok")


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "selftest":
        selftest()
    elif cmd == "nvml-energy":
        print(json.dumps(nvml_energy()))
    elif cmd == "cuda-devices":
        print(json.dumps(cuda_devices()))
    elif cmd == "smi-sample" and len(argv) == 4:
        smi_sample(argv[2], float(argv[3]))
    elif cmd == "compare-metrics" and len(argv) == 6:
        with open(argv[2]) as f:
            points = otlp_points(f.read())
        with open(argv[3]) as f:
            smi = [json.loads(l) for l in f if l.strip()]
        with open(argv[4]) as f:
            before = json.load(f)
        with open(argv[5]) as f:
            after = json.load(f)
        lines, failed = compare_metrics(points, smi, before, after)
        print("\n".join(lines))
        sys.exit(1 if failed else 0)
    elif cmd == "compare-devices" and len(argv) == 3:
        sys.exit(1 if compare_devices(argv[2]) else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
