//! Which GPUs this process sees: one discovery, done once on the NVML
//! sampling thread ([`crate::host::gpu_worker`]), used by the
//! `host.gpu.count` resource attribute, by the `hw.*` GPU metrics and by
//! their `hw.id`s, so they always agree.
//!
//! NVML is reached through the small [`GpuLib`] trait: the real
//! implementation (`host/nvml.rs`, the only code that touches
//! `nvml-wrapper`) and the tests' fake device table.
//!
//! `CUDA_VISIBLE_DEVICES` is read as CUDA reads it:
//!
//! - unset: every *accessible* GPU (one NVML can open: a cgroup or container
//!   may hide some of those NVML counts);
//! - an empty value: no GPU;
//! - the first entry fixes the kind of list: indices (`0`, `3`), `GPU-`
//!   UUIDs or `MIG-` UUIDs; an entry of another kind is invalid;
//! - an invalid entry ends the list (an index past the last accessible
//!   device, `-1`, `xyz`, an unknown or ambiguous UUID prefix, a bare hex
//!   prefix without `GPU-`/`MIG-`, `GPU-` alone);
//! - a device named twice empties the whole set (`0,0`: no GPU);
//! - indices count accessible devices, in NVML's (PCI bus) order, which is
//!   CUDA's with `CUDA_DEVICE_ORDER=PCI_BUS_ID` and on machines of identical
//!   GPUs;
//! - UUIDs match whole or by a unique prefix (any case).
//!
//! MIG: lens reports the **parent GPU** of a MIG instance (its `GPU-` UUID
//! as `hw.id`, whole-GPU memory, power, energy and temperature), since NVML
//! reads power, energy, temperature and utilization only for the whole GPU.
//! `MIG-<uuid>` and the older `MIG-GPU-<uuid>/<gi>/<ci>` entries select the
//! instance's GPU; as CUDA enumerates only one MIG instance per process, a
//! list of `MIG-` entries counts one device (its first). A GPU in MIG mode
//! selected by index or with the variable unset counts once.
//!
//! Without NVML (GPU metrics off, or no driver) `host.gpu.count` is
//! [`listed_count`]: the same rules over the list alone, every well-formed
//! entry trusted to name a device.

/// The variable that selects the visible devices.
pub(crate) const VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

/// Why an NVML query gave no value (made by the NVML implementation,
/// which only a `gpu` build has, and the tests' fake).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "gpu", test)), allow(dead_code))]
pub(crate) enum GpuError {
    /// The device does not support the query: skipped, never warned about.
    NotSupported,
    /// The query failed (the driver's message): warned about once.
    Failed(String),
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuError::NotSupported => f.write_str("not supported"),
            GpuError::Failed(why) => f.write_str(why),
        }
    }
}

/// NVML as lens uses it. Only the sampling thread calls it; `index` is
/// NVML's device index. Readings are in NVML's units.
pub(crate) trait GpuLib: Send {
    /// How many GPUs NVML counts, accessible or not.
    fn device_count(&mut self) -> Result<u32, GpuError>;
    /// GPU `index`'s `GPU-…` UUID; an error when this process cannot open
    /// the device (hidden by a cgroup or container).
    fn uuid(&mut self, index: u32) -> Result<String, GpuError>;
    /// The product name, e.g. `NVIDIA H200`.
    fn name(&mut self, index: u32) -> Result<String, GpuError>;
    /// The `MIG-…` UUIDs of GPU `index`'s MIG instances (none when MIG
    /// mode is off).
    fn mig_uuids(&mut self, index: u32) -> Result<Vec<String>, GpuError>;
    /// The driver version.
    fn driver_version(&mut self) -> Result<String, GpuError>;
    /// GPU utilization, percent.
    fn utilization_percent(&mut self, index: u32) -> Result<u32, GpuError>;
    /// (used, total) memory, bytes.
    fn memory_bytes(&mut self, index: u32) -> Result<(u64, u64), GpuError>;
    /// Power draw, milliwatts.
    fn power_mw(&mut self, index: u32) -> Result<u32, GpuError>;
    /// Energy since the driver was loaded, millijoules.
    fn energy_mj(&mut self, index: u32) -> Result<u64, GpuError>;
    /// GPU die temperature, degrees Celsius.
    fn temperature_c(&mut self, index: u32) -> Result<u32, GpuError>;
}

/// A GPU this process sees, as [`visible_gpus`](crate::visible_gpus) lists
/// it and as its `hw.*` points name it.
///
/// ```
/// for gpu in lens::gpu::visible_gpus() {
///     println!("{} {} {:?}", gpu.name, gpu.id, gpu.model);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuDevice {
    /// NVML index (as `nvidia-smi` numbers devices).
    pub index: u32,
    /// `hw.id`: the GPU UUID (`GPU-…`; for a MIG instance, its parent's).
    pub id: String,
    /// `hw.name`: `gpu<index>`.
    pub name: String,
    /// `hw.model`: NVML's product name, e.g. `NVIDIA H200`.
    pub model: Option<String>,
    /// `hw.driver_version`: the NVIDIA driver version.
    pub driver_version: Option<String>,
}

/// An accessible GPU, as selection sees it.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// `GPU-…`
    pub uuid: String,
    /// `MIG-…` of its instances
    pub migs: Vec<String>,
}

/// The kind of list the first entry fixes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Index,
    Gpu,
    Mig,
}

fn kind(entry: &str) -> Option<Kind> {
    if entry.parse::<u32>().is_ok() {
        Some(Kind::Index)
    } else if strip_prefix_ci(entry, "GPU-").is_some() {
        Some(Kind::Gpu)
    } else if strip_prefix_ci(entry, "MIG-").is_some() {
        Some(Kind::Mig)
    } else {
        None
    }
}

/// CUDA's reading of `raw` (`None`: unset, every device). `resolve(kind,
/// entry)` names the device of one entry: `(identity, position)`, or
/// `None` for an invalid entry. Returns the positions, in list order,
/// each once.
fn select_with(
    raw: Option<&str>,
    all: usize,
    mut resolve: impl FnMut(Kind, &str) -> Option<(String, usize)>,
) -> Vec<usize> {
    let Some(raw) = raw else {
        return (0..all).collect();
    };
    let mut first: Option<Kind> = None;
    let mut seen: Vec<String> = Vec::new();
    let mut out: Vec<usize> = Vec::new();
    for entry in raw.split(',').map(str::trim) {
        let Some(k) = kind(entry) else { break };
        if *first.get_or_insert(k) != k {
            break;
        }
        let Some((identity, pos)) = resolve(k, entry) else {
            break;
        };
        if seen.contains(&identity) {
            return Vec::new();
        }
        seen.push(identity);
        if !out.contains(&pos) {
            out.push(pos);
        }
    }
    if first == Some(Kind::Mig) {
        out.truncate(1);
    }
    out
}

/// Positions in `devices` (the accessible GPUs, NVML order) that `raw`
/// selects.
pub(crate) fn select(raw: Option<&str>, devices: &[Candidate]) -> Vec<usize> {
    select_with(raw, devices.len(), |k, entry| match k {
        Kind::Index => {
            let i = entry.parse::<usize>().ok()?;
            (i < devices.len()).then(|| (format!("#{i}"), i))
        }
        Kind::Gpu => {
            let uuids = devices
                .iter()
                .enumerate()
                .map(|(p, d)| (p, d.uuid.as_str()));
            let (pos, _) = unique_match(uuids, entry)?;
            Some((format!("#{pos}"), pos))
        }
        Kind::Mig => {
            let rest = strip_prefix_ci(entry, "MIG-")?;
            if let Some(legacy) = strip_prefix_ci(rest, "GPU-").filter(|r| r.contains('/')) {
                // MIG-GPU-<uuid>/<gi>/<ci>: the whole GPU UUID
                let (uuid, ids) = legacy.split_once('/')?;
                let (gi, ci) = ids.split_once('/')?;
                gi.parse::<u32>().ok()?;
                ci.parse::<u32>().ok()?;
                let pos = devices
                    .iter()
                    .position(|d| !d.migs.is_empty() && bare(&d.uuid).eq_ignore_ascii_case(uuid))?;
                return Some((entry.to_ascii_lowercase(), pos));
            }
            let migs = devices
                .iter()
                .enumerate()
                .flat_map(|(p, d)| d.migs.iter().map(move |m| (p, m.as_str())));
            let (pos, uuid) = unique_match(migs, entry)?;
            Some((uuid.to_ascii_lowercase(), pos))
        }
    })
}

/// How many devices `raw` names when they cannot be checked against NVML:
/// the same rules, every well-formed entry trusted to name a device.
pub(crate) fn listed_count(raw: &str) -> usize {
    let mut n = 0;
    select_with(Some(raw), 0, |k, entry| {
        let prefix_ok = match k {
            Kind::Index => true,
            Kind::Gpu | Kind::Mig => entry.len() > 4,
        };
        n += 1;
        prefix_ok.then(|| (entry.to_ascii_lowercase(), n))
    })
    .len()
}

/// The one item whose UUID `entry` names (`GPU-…` or `MIG-…`, whole or a
/// unique prefix, any case); `None` when none or several do.
fn unique_match<'a, T>(
    items: impl Iterator<Item = (T, &'a str)>,
    entry: &str,
) -> Option<(T, &'a str)> {
    let want = bare(entry).to_ascii_lowercase();
    if want.is_empty() {
        return None;
    }
    let mut hits = items.filter(|(_, u)| bare(u).to_ascii_lowercase().starts_with(&want));
    match (hits.next(), hits.next()) {
        (Some(hit), None) => Some(hit),
        _ => None,
    }
}

/// A UUID without its `GPU-`/`MIG-` prefix.
fn bare(s: &str) -> &str {
    strip_prefix_ci(s, "GPU-")
        .or_else(|| strip_prefix_ci(s, "MIG-"))
        .unwrap_or(s)
}

/// `s` without `prefix` (ASCII, any case), if it starts with it.
fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The GPUs `raw` (the value of [`VISIBLE_DEVICES`], `None`: unset)
/// selects among those `lib` can open. Called on the sampling thread only.
pub(crate) fn discover(
    lib: &mut dyn GpuLib,
    raw: Option<&str>,
) -> Result<Vec<GpuDevice>, GpuError> {
    let count = lib.device_count()?;
    let mut indices = Vec::new();
    let mut candidates = Vec::new();
    for index in 0..count {
        // a device this process cannot open is not accessible: CUDA does
        // not count it either
        let Ok(uuid) = lib.uuid(index) else { continue };
        let migs = lib.mig_uuids(index).unwrap_or_default();
        indices.push(index);
        candidates.push(Candidate { uuid, migs });
    }
    let picked = select(raw, &candidates);
    let driver_version = match picked.is_empty() {
        true => None,
        false => lib.driver_version().ok(),
    };
    Ok(picked
        .into_iter()
        .filter_map(|p| {
            let index = *indices.get(p)?;
            let name = format!("gpu{index}");
            Some(GpuDevice {
                index,
                id: candidates.get(p)?.uuid.clone(),
                name,
                model: lib.name(index).ok(),
                driver_version: driver_version.clone(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(uuids: &[&str]) -> Vec<Candidate> {
        uuids
            .iter()
            .map(|u| Candidate {
                uuid: (*u).to_owned(),
                migs: Vec::new(),
            })
            .collect()
    }

    const A: &str = "GPU-0a1b2c3d-0000-1111-2222-333344445555";
    const B: &str = "GPU-9f8e7d6c-0000-1111-2222-333344445555";
    const C: &str = "GPU-0a1bffff-0000-1111-2222-333344445555";

    #[test]
    fn indices_in_list_order_each_once() {
        let d = gpus(&[A, B, C]);
        let sel = |raw| select(raw, &d);
        assert_eq!(sel(None), [0, 1, 2]);
        assert_eq!(sel(Some("2,0")), [2, 0]);
        assert_eq!(sel(Some(" 1 , 0 ")), [1, 0]);
        assert_eq!(sel(Some("+1")), [1], "a sign is part of an integer");
    }

    #[test]
    fn empty_value_is_no_gpu_not_unset() {
        assert_eq!(select(Some(""), &gpus(&[A, B])), Vec::<usize>::new());
        assert_eq!(listed_count(""), 0);
    }

    #[test]
    fn invalid_entry_ends_the_list() {
        let d = gpus(&[A, B, C]);
        let sel = |raw| select(Some(raw), &d);
        assert_eq!(sel("0,7,1"), [0], "an index past the end");
        assert_eq!(sel("1,-1,0"), [1]);
        assert_eq!(sel("xyz"), Vec::<usize>::new());
        assert_eq!(sel("NoDevFiles"), Vec::<usize>::new());
        assert_eq!(sel("1,,0"), [1], "an empty entry");
        assert_eq!(sel("2,xyz,0"), [2]);
    }

    #[test]
    fn a_repeated_device_empties_the_set() {
        let d = gpus(&[A, B, C]);
        let sel = |raw| select(Some(raw), &d);
        assert_eq!(sel("0,0"), Vec::<usize>::new());
        assert_eq!(sel("1,2,1"), Vec::<usize>::new());
        // the same GPU by two prefixes of its UUID
        assert_eq!(sel("GPU-9f8e,GPU-9f8e7d6c"), Vec::<usize>::new());
        // a repeat after the end of the list is not read
        assert_eq!(sel("0,7,0"), [0]);
        assert_eq!(listed_count("0,0"), 0);
        assert_eq!(listed_count("0,1,0"), 0);
    }

    #[test]
    fn the_first_entry_fixes_the_kind() {
        let d = gpus(&[A, B, C]);
        let sel = |raw: &str| select(Some(raw), &d);
        assert_eq!(sel(&format!("0,{B}")), [0]);
        assert_eq!(sel(&format!("{B},0")), [1]);
        assert_eq!(sel(&format!("{B},MIG-abc")), [1]);
        assert_eq!(listed_count("0,GPU-abc,1"), 1);
    }

    #[test]
    fn uuids_need_their_prefix_and_name_one_device() {
        let d = gpus(&[A, B, C]);
        let sel = |raw| select(Some(raw), &d);
        assert_eq!(sel(B), [1]);
        assert_eq!(sel("GPU-9F8E"), [1], "any case");
        assert_eq!(sel("GPU-0a1bf"), [2]);
        assert_eq!(sel("GPU-0a1b"), Vec::<usize>::new(), "ambiguous");
        assert_eq!(sel("9f8e7d6c"), Vec::<usize>::new(), "bare hex");
        assert_eq!(sel("0a1bf"), Vec::<usize>::new(), "bare hex");
        assert_eq!(
            sel("GPU-9f8e7d6c-0000-1111-2222-3333444455550"),
            Vec::<usize>::new()
        );
        // `GPU-` alone names no device, even on a one-GPU host
        assert_eq!(select(Some("GPU-"), &gpus(&[A])), Vec::<usize>::new());
        assert_eq!(listed_count("GPU-"), 0);
    }

    #[test]
    fn indices_count_accessible_devices() {
        // positions are in the accessible list: `discover` leaves hidden
        // devices out before selecting
        let d = gpus(&[B, C]);
        assert_eq!(select(Some("1"), &d), [1]);
        assert_eq!(select(Some("2"), &d), Vec::<usize>::new());
    }

    #[test]
    fn mig_entries_select_the_parent_gpu_once() {
        let mut d = gpus(&[A, B, C]);
        d[1].migs = vec![
            "MIG-11111111-aaaa-bbbb-cccc-000000000001".into(),
            "MIG-11111111-aaaa-bbbb-cccc-000000000002".into(),
        ];
        d[2].migs = vec!["MIG-22222222-aaaa-bbbb-cccc-000000000001".into()];
        let sel = |raw: &str| select(Some(raw), &d);
        assert_eq!(sel("MIG-11111111-aaaa-bbbb-cccc-000000000002"), [1]);
        assert_eq!(sel("MIG-2222"), [2], "a unique prefix");
        assert_eq!(sel("MIG-1111"), Vec::<usize>::new(), "ambiguous");
        // CUDA enumerates one MIG instance: the first
        assert_eq!(
            sel("MIG-2222,MIG-11111111-aaaa-bbbb-cccc-000000000001"),
            [2]
        );
        assert_eq!(sel("MIG-2222,MIG-2222"), Vec::<usize>::new(), "repeated");
        assert_eq!(sel("MIG-2222,0"), [2], "kinds do not mix");
        assert_eq!(sel("0,MIG-2222"), [0]);
        // the older MIG-GPU-<uuid>/<gi>/<ci> form
        assert_eq!(sel(&format!("MIG-{B}/1/0")), [1]);
        assert_eq!(
            sel(&format!("MIG-{A}/1/0")),
            Vec::<usize>::new(),
            "A is not in MIG mode"
        );
        assert_eq!(sel(&format!("MIG-{B}/x/0")), Vec::<usize>::new());
        assert_eq!(listed_count("MIG-a,MIG-b"), 1);
    }

    #[test]
    fn listed_count_agrees_with_selection_when_every_entry_names_a_device() {
        let d = gpus(&[A, B, C]);
        for raw in [
            "",
            "-1",
            "0",
            "0,1,2",
            "2,0",
            "0,1,-1,2",
            "0,0",
            "xyz",
            "0,GPU-9f8e",
            "GPU-9f8e,GPU-0a1bf",
        ] {
            assert_eq!(listed_count(raw), select(Some(raw), &d).len(), "{raw:?}");
        }
    }
}
