//! Which GPUs this process sees: one rule, used by the `host.gpu.count`
//! resource attribute and by the GPU metrics, so the two always agree.
//!
//! `CUDA_VISIBLE_DEVICES`, when set, lists devices by NVML index (NVML's
//! PCI-bus order, i.e. CUDA's with `CUDA_DEVICE_ORDER=PCI_BUS_ID`) or by
//! `GPU-…` UUID (whole or a unique prefix, any case, `GPU-` optional). As
//! CUDA reads it, the list ends at the first entry that names no device: an
//! empty entry, a negative one (`-1`), `NoDevFiles`, an index past the last
//! device or an unknown or ambiguous UUID. `MIG-…` entries are skipped (a
//! MIG instance is not reported on its own). Unset: every device NVML sees.
//! Without NVML (no driver or library) the indices and UUIDs cannot be
//! checked, and the entries up to the first malformed one are counted.

use nvml_wrapper::Nvml;
use std::sync::OnceLock;

/// The variable that selects the visible devices.
pub(crate) const VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

/// The process's NVML handle: loaded on first use, kept for the life of the
/// process (metric callbacks hold `Device<'static>` handles that borrow it).
static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();

/// NVML, loaded once at run time; the error says why it did not load.
pub(crate) fn nvml() -> Result<&'static Nvml, &'static str> {
    NVML.get_or_init(|| Nvml::init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(String::as_str)
}

/// One well-formed entry of the list.
enum Entry<'a> {
    Index(u32),
    Uuid(&'a str),
}

/// The well-formed entries of `raw`, up to the first malformed one, without
/// `MIG-…` entries.
fn entries(raw: &str) -> impl Iterator<Item = Entry<'_>> {
    raw.split(',')
        .map(str::trim)
        .filter(|e| strip_prefix_ci(e, "MIG-").is_none())
        .map_while(|e| {
            if let Ok(i) = e.parse::<u32>() {
                Some(Entry::Index(i))
            } else if e.is_empty() || e.starts_with('-') || e.eq_ignore_ascii_case("NoDevFiles") {
                None
            } else {
                Some(Entry::Uuid(e))
            }
        })
}

/// NVML indices named by `raw` (the value of [`VISIBLE_DEVICES`]; `None`:
/// unset, every device), given `count` devices and each one's UUID.
pub(crate) fn select_devices(
    raw: Option<&str>,
    count: u32,
    uuid: impl Fn(u32) -> Option<String>,
) -> Vec<u32> {
    let Some(raw) = raw else {
        return (0..count).collect();
    };
    let mut uuids: Option<Vec<Option<String>>> = None;
    let mut out: Vec<u32> = Vec::new();
    for entry in entries(raw) {
        let found = match entry {
            Entry::Index(i) => (i < count).then_some(i),
            Entry::Uuid(want) => {
                let uuids = uuids.get_or_insert_with(|| (0..count).map(&uuid).collect());
                let want = bare_uuid(want);
                let mut hits = uuids.iter().enumerate().filter(|(_, u)| {
                    u.as_deref()
                        .is_some_and(|u| bare_uuid(u).starts_with(&want))
                });
                match (hits.next(), hits.next()) {
                    (Some((i, _)), None) => u32::try_from(i).ok(),
                    _ => None,
                }
            }
        };
        match found {
            Some(i) if !out.contains(&i) => out.push(i),
            Some(_) => {}
            None => break,
        }
    }
    out
}

/// How many devices `raw` names when they cannot be checked against NVML.
pub(crate) fn listed_count(raw: &str) -> usize {
    entries(raw).count()
}

/// The number of visible GPUs: [`select_devices`] over NVML's devices when
/// `use_nvml` and NVML loads; else the [`listed_count`] of `raw` when set;
/// else unknown.
pub(crate) fn visible_count(raw: Option<&str>, use_nvml: bool) -> Option<usize> {
    if use_nvml {
        if let Ok(nvml) = nvml() {
            let count = nvml.device_count().unwrap_or(0);
            let uuid = |i| nvml.device_by_index(i).ok()?.uuid().ok();
            return Some(select_devices(raw, count, uuid).len());
        }
    }
    raw.map(listed_count)
}

/// A UUID without `GPU-`, lowercase.
fn bare_uuid(s: &str) -> String {
    let s = s.trim();
    strip_prefix_ci(s, "GPU-").unwrap_or(s).to_ascii_lowercase()
}

/// `s` without `prefix` (ASCII, any case), if it starts with it.
fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_count_agrees_with_selection_when_every_entry_names_a_device() {
        let uuids = ["GPU-aaaa-1", "GPU-bbbb-2", "GPU-cccc-3", "GPU-dddd-4"];
        let uuid = |i: u32| uuids.get(i as usize).map(|s| (*s).to_owned());
        for raw in [
            "",
            "-1",
            "NoDevFiles",
            "0",
            "0,1,2,3",
            "GPU-aaaa,GPU-bbbb",
            "0,1,-1,2",
            "MIG-x,2",
            "3, 1",
        ] {
            assert_eq!(
                listed_count(raw),
                select_devices(Some(raw), 4, uuid).len(),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn cuda_visible_devices_selects_nvml_indices() {
        let uuids = [
            "GPU-0a1b2c3d-0000-1111-2222-333344445555",
            "GPU-9f8e7d6c-0000-1111-2222-333344445555",
            "GPU-0a1bffff-0000-1111-2222-333344445555",
        ];
        let uuid = |i: u32| uuids.get(i as usize).map(|s| (*s).to_owned());
        let sel = |raw: Option<&str>| select_devices(raw, 3, uuid);
        assert_eq!(sel(None), [0, 1, 2]);
        assert_eq!(sel(Some("")), Vec::<u32>::new());
        assert_eq!(sel(Some("-1")), Vec::<u32>::new());
        assert_eq!(sel(Some("NoDevFiles")), Vec::<u32>::new());
        assert_eq!(sel(Some("2,0")), [2, 0]);
        assert_eq!(sel(Some(" 1 , 1 ")), [1]);
        // the list ends at the first entry naming no device
        assert_eq!(sel(Some("0,7,1")), [0]);
        assert_eq!(sel(Some("1,-1,0")), [1]);
        // UUIDs, whole or a unique prefix, with or without GPU-, any case
        assert_eq!(sel(Some(uuids[1])), [1]);
        assert_eq!(sel(Some("GPU-9F8E")), [1]);
        assert_eq!(sel(Some("0a1bf")), [2]);
        // ambiguous prefix: no device, list ends
        assert_eq!(sel(Some("1,GPU-0a1b,0")), [1]);
        // MIG instances are skipped, not the end of the list
        assert_eq!(sel(Some("MIG-4b6a2c1e-1111-2222-3333-444455556666,2")), [2]);
        // a machine with no GPU
        assert_eq!(select_devices(None, 0, |_| None), Vec::<u32>::new());
        assert_eq!(select_devices(Some("0"), 0, |_| None), Vec::<u32>::new());
    }
}
